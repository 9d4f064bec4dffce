/* SPDX-License-Identifier: Apache-2.0 */
#include "user_admit.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <pwd.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "admit.h"
#include "cleanup.h"
#include "conn.h"
#include "events.h"
#include "fracdir.h"
#include "fraction.h"
#include "fsat.h"
#include "gate.h"
#include "journal.h"
#include "ledger_view.h"
#include "nvml.h"
#include "peer.h"
#include "proc.h"
#include "registry.h"
#include "sock.h"
#include "statedir.h"
#include "supervisors.h"
#include "user_policy.h"

#define GROUPS_MAX 64

static char policy_path[GF_PATH_MAX] = GF_USER_POLICY_DEFAULT;

/* What identifies the policy file's version: inode, size and change time
 * (all zero when there is none). */
typedef struct policy_stamp {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime, ctime;
} policy_stamp;

static policy_stamp last_stamp;
static bool stamped;

static policy_stamp stamp_of(const char *path)
{
    policy_stamp s = {0};
    struct stat st;

    if (lstat(path, &st) == 0)
        s = (policy_stamp){st.st_dev, st.st_ino, st.st_size, st.st_mtim, st.st_ctim};
    return s;
}

int gf_user_listen(gf_agent *a, const char *policy, gf_error *err)
{
    if (policy && *policy)
        snprintf(policy_path, sizeof(policy_path), "%s", policy);
    last_stamp = stamp_of(policy_path); /* the start log names what is in force */
    stamped = true;
    /* in the state directory's fd, renamed into place from <state>/agent:
     * nothing a user put at that name is followed; everyone may connect,
     * each request is judged by the caller's credentials */
    return gf_socket_listen_in_mode(a, a->state_dfd, GF_STATE_USERS_SOCK, 0, 0666, err);
}

/* The caller's name and groups: the account of its uid, and the groups the
 * kernel gives the calling process (/proc/<pid>/status), not what it says. */
typedef struct caller {
    char user[GF_USER_POLICY_NAME_MAX];
    char group_names[GROUPS_MAX][GF_USER_POLICY_NAME_MAX];
    const char *groups[GROUPS_MAX];
    size_t n_groups;
} caller;

static void add_group(caller *c, gid_t gid)
{
    struct group gr, *res = NULL;
    char buf[4096];

    if (c->n_groups == GROUPS_MAX || getgrgid_r(gid, &gr, buf, sizeof(buf), &res) != 0 || !res)
        return;
    snprintf(c->group_names[c->n_groups], GF_USER_POLICY_NAME_MAX, "%s", gr.gr_name);
    c->groups[c->n_groups] = c->group_names[c->n_groups];
    c->n_groups++;
}

static void who(const gf_peer *cr, caller *c)
{
    struct passwd pw, *res = NULL;
    char buf[4096], path[64], line[1024];
    FILE *fp;

    memset(c, 0, sizeof(*c));
    if (getpwuid_r(cr->uid, &pw, buf, sizeof(buf), &res) == 0 && res)
        snprintf(c->user, sizeof(c->user), "%s", pw.pw_name);
    else
        snprintf(c->user, sizeof(c->user), "%u", (unsigned)cr->uid);
    add_group(c, cr->gid);
    snprintf(path, sizeof(path), "/proc/%d/status", (int)cr->pid);
    if (!(fp = fopen(path, "re")))
        return;
    while (fgets(line, sizeof(line), fp)) {
        if (strncmp(line, "Groups:", 7) != 0)
            continue;
        char *save = NULL;
        for (char *t = strtok_r(line + 7, " \t\n", &save); t; t = strtok_r(NULL, " \t\n", &save))
            if ((gid_t)strtoul(t, NULL, 10) != cr->gid)
                add_group(c, (gid_t)strtoul(t, NULL, 10));
    }
    fclose(fp);
}

/* Why the policy file at fd cannot be trusted, or 0: only root (or the agent's
 * own user) may have written what bounds every user. */
static int policy_file_trusted(int fd, const char *path, gf_error *err)
{
    struct stat st;

    if (fstat(fd, &st) < 0)
        return gf_error_sys(err, "reading the policy %s", path);
    if (!S_ISREG(st.st_mode))
        return gf_error_set(err, GF_EINVAL,
                            "policy %s is not a regular file (a policy is a file root owns)", path);
    if (st.st_uid != 0 && st.st_uid != geteuid())
        return gf_error_set(err, GF_EINVAL,
                            "policy %s is owned by uid %u: only root's file is trusted", path,
                            (unsigned)st.st_uid);
    if (st.st_mode & S_IWOTH)
        return gf_error_set(err, GF_EINVAL,
                            "policy %s is writable by others (mode %04o): chmod o-w it", path,
                            (unsigned)(st.st_mode & 07777));
    if ((st.st_mode & S_IWGRP) && st.st_gid != 0)
        return gf_error_set(err, GF_EINVAL,
                            "policy %s is writable by group %u (mode %04o): chmod g-w it or "
                            "give it to group root",
                            path, (unsigned)st.st_gid, (unsigned)(st.st_mode & 07777));
    return 0;
}

int gf_user_load_policy(const char *path, gf_user_policy *p, bool *present, gf_error *err)
{
    char text[65536];
    ssize_t n;
    /* never through a link, never blocking on a FIFO put there */
    gf_cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);

    *present = fd >= 0;
    if (fd < 0) {
        if (errno == ENOENT)
            return gf_user_policy_parse("", 0, path, p, err);
        if (errno == ELOOP)
            return gf_error_set(err, GF_EINVAL,
                                "policy %s is a symbolic link: name the file itself", path);
        return gf_error_sys(err, "reading the policy %s", path);
    }
    if (policy_file_trusted(fd, path, err) < 0)
        return -1;
    n = read(fd, text, sizeof(text));
    if (n < 0)
        return gf_error_sys(err, "reading the policy %s", path);
    if (n == (ssize_t)sizeof(text))
        return gf_error_set(err, GF_ERANGE, "policy %s is larger than %zu bytes", path,
                            sizeof(text) - 1);
    return gf_user_policy_parse(text, (size_t)n, path, p, err);
}

/* The policy in force changed since the last run (or the start): said once. */
static void say_policy_changed(gf_agent *a, const gf_user_policy *p, bool present, int rc,
                               const gf_error *err)
{
    if (rc < 0)
        gf_agent_event(a,
                       "policy %s changed and is refused: %s; users' runs are refused until "
                       "it is fixed",
                       policy_path, err->msg);
    else if (!present)
        gf_agent_event(a, "policy %s is gone: defaults in force (at most %d fractions a user)",
                       policy_path, GF_USER_POLICY_MAX_FRACTIONS_DEFAULT);
    else
        gf_agent_event(a, "policy %s changed: %zu section(s) in force", policy_path, p->n);
}

/* Read again at each run: an edit counts at once, and is said in the events
 * once; one broken since the start refuses everyone (with why). */
static int load_policy(gf_agent *a, gf_user_policy *p, gf_error *err)
{
    policy_stamp now = stamp_of(policy_path);
    bool present, changed = stamped && memcmp(&now, &last_stamp, sizeof(now)) != 0;
    int rc = gf_user_load_policy(policy_path, p, &present, err);

    if (changed)
        say_policy_changed(a, p, present, rc, err);
    last_stamp = now;
    stamped = true;
    return rc;
}

static int check_policy(gf_agent *a, const gf_fraction_config *cfg, const gf_peer *cr,
                        gf_error *err)
{
    static gf_user_policy policy; /* large; the agent's one loop is the only caller */
    gf_user_policy_device devs[GF_CONFIG_DEVICES_MAX];
    gf_user_policy_rules rules;
    size_t held = 0;
    caller c;

    if (cr->uid == 0)
        return 0;
    if (load_policy(a, &policy, err) < 0)
        return -1;
    for (size_t i = 0; i < cfg->n_devices; i++) {
        int g = gf_gpu_index(a, cfg->devices[i].uuid);
        devs[i] = (gf_user_policy_device){.request = cfg->devices[i].request,
                                          .limit = cfg->devices[i].limit,
                                          .gpu_total = g >= 0 ? a->gpus[g].dev.total : 0};
    }
    for (int i = 0; i < a->n_fractions; i++)
        if (gf_user_fraction(a, &a->fractions[i]) && a->fractions[i].owner == cr->uid)
            held++;
    who(cr, &c);
    gf_user_policy_rules_for(&policy, c.user, c.groups, c.n_groups, &rules);
    gf_user_policy_ask ask = {.mode = cfg->mode,
                              .compute_percent = cfg->compute_percent,
                              .n_devices = cfg->n_devices,
                              .devices = devs,
                              .fractions_held = held};
    return gf_user_policy_check(&policy, &rules, &ask, err);
}

bool gf_user_fraction(gf_agent *a, const gf_afraction *f)
{
    (void)a;
    /* containers have an identity record; root's own runs a root ledger */
    return !f->pod[0] && f->owner != 0 && !f->sup_admitted && f->ledger_fd >= 0 && !f->has_identity;
}

static int make_user_fraction(gf_agent *a, gf_fraction_config *cfg, const gf_peer *cr,
                              gf_error *err)
{
    char pid[32];
    /* config and supervisor are for the caller's group alone (the shim of
     * its processes reads the config), never other users'; the supervisor
     * file is shown by gpufrac status and locked by the run, never read by
     * the agent */
    gf_fracdir_spec spec = {.cfg = cfg,
                            .config_mode = 0440,
                            .group = cr->gid,
                            .extra = {GF_FRAC_SUPERVISOR, pid, 0440},
                            .ledger_uid = cr->uid,
                            .ledger_gid = cr->gid};

    snprintf(pid, sizeof(pid), "%d\n", (int)cr->pid);
    return gf_fracdir_make(a, &spec, err);
}

/* run for a name in use: the caller's own fraction when the run is asked
 * again after its answer was lost (the agent died inside the request): made
 * for this very process (its supervisor, pid + start time), or left with no
 * supervisor at all by the crash (then the caller becomes it). Any other
 * fraction of that name stays another's. */
static void run_again(gf_agent *a, gf_afraction *f, const gf_peer *cr, gf_msg *out)
{
    char m[GF_NAME_MAX + 64];
    gf_error err;

    if (gf_user_fraction(a, f) && f->owner == cr->uid) {
        if (f->sup_seen && gf_sup_alive(f) && f->supervisor == cr->pid && f->sup_start == cr->start)
            return gf_fracdir_reply(f, out);
        if (!f->sup_seen) {
            if (gf_gate_refuse_attributed(a, cr->pid, f, out))
                return;
            if (gf_sup_attach(a, f, cr->pid, cr->start, false, &err) < 0)
                return gf_reply_error(out, err.msg);
            gf_agent_event(a,
                           "fraction %s of uid %u: its run (pid %d) asked again and is "
                           "attached",
                           f->cfg.name, (unsigned)cr->uid, (int)cr->pid);
            return gf_fracdir_reply(f, out);
        }
    }
    snprintf(m, sizeof(m), "a fraction named \"%s\" is in use; choose another --name", f->cfg.name);
    gf_reply_error(out, m);
}

/* A new fraction for the caller, admitted against the policy and every
 * fraction on its GPUs, with the caller (the very process that connected,
 * peer.h) as its supervisor: its processes are attributed to the fraction,
 * and the fraction is released when it and they are gone. */
static void run_new(gf_agent *a, gf_fraction_config *cfg, const gf_peer *cr, gf_msg *out)
{
    gf_afraction *f;
    gf_error err;

    if (gf_gate_refuse_attributed(a, cr->pid, NULL, out))
        return;
    if (gf_journal_refuses(a, "a run", &err) < 0 || check_policy(a, cfg, cr, &err) < 0 ||
        gf_admit_check_fit(a, cfg, &err) < 0 || make_user_fraction(a, cfg, cr, &err) < 0)
        return gf_reply_error(out, err.msg);
    /* a refusal from here on leaves nothing behind */
    if (!(f = gf_registry_open_new(a, cfg->name, &err))) {
        gf_fracdir_remove(a, cfg->name);
        return gf_reply_error(out, err.msg);
    }
    gf_test_crash_point("run");
    if (gf_sup_attach(a, f, cr->pid, cr->start, false, &err) < 0) {
        gf_release_fraction(a, f);
        return gf_reply_error(out, err.msg);
    }
    gf_agent_event(a, "admitted fraction %s of uid %u (pid %d)", cfg->name, (unsigned)cr->uid,
                   (int)cr->pid);
    gf_fracdir_reply(f, out);
}

void gf_serve_run(gf_agent *a, gf_request *r, const gf_msg *in, gf_msg *out)
{
    gf_fraction_config cfg;
    gf_afraction *f;
    gf_error err;

    if (r->peer->uid == 0)
        return gf_reply_error(out, "root's gpufrac run makes its own fraction");
    if (gf_admit_parse(in, &cfg, &err) < 0)
        return gf_reply_error(out, err.msg);
    if (strncmp(cfg.name, "k8s.", 4) == 0)
        return gf_reply_error(out, "names starting with k8s. are kept for containers");
    if ((f = gf_registry_find_name_fresh(a, cfg.name)))
        return run_again(a, f, r->peer, out);
    run_new(a, &cfg, r->peer, out);
}

/* Moves a user fraction to <state>/ended/<name>.<supervisor> (for `gpufrac
 * status`) and forgets it; what cannot be moved is released. */
/* What `gpufrac status` shows of an ended run, written in place of its
 * ledger (which is dropped): the agent's copy of the last figures. */
static int write_figures(gf_agent *a, const gf_afraction *f, int dfd, gf_error *err)
{
    char text[64 + GF_AGENT_GPUS_MAX * (GF_UUID_MAX + 128)];
    size_t off = (size_t)snprintf(text, sizeof(text), "uid=%u\n", (unsigned)f->owner);

    for (int i = 0; i < f->view.n_entries && off < sizeof(text); i++) {
        const gf_ledger_view_entry *e = &f->view.entries[i];
        if (e->index < 0)
            continue;
        off += (size_t)snprintf(text + off, sizeof(text) - off,
                                "dev=%s used=%llu peak=%llu denied=%llu lent=%llu "
                                "evictions=%llu\n",
                                a->gpus[e->tag].dev.uuid,
                                (unsigned long long)atomic_load(&e->dev.used),
                                (unsigned long long)atomic_load(&e->dev.peak),
                                (unsigned long long)atomic_load(&e->dev.denied),
                                (unsigned long long)atomic_load(&e->dev.lent),
                                (unsigned long long)atomic_load(&e->dev.evictions));
    }
    if (off >= sizeof(text))
        return gf_error_set(err, GF_ENOSPACE, "figures of %s too long", f->cfg.name);
    if (gf_at_write(dfd, GF_FRAC_FIGURES, text, 0444, err) < 0)
        return -1;
    unlinkat(dfd, GF_FRAC_LEDGER, 0);
    return 0;
}

/* Writes the ended record and the figures into f's directory and moves it
 * to <state>/ended/dest; false when any step fails. */
static bool move_to_ended(gf_agent *a, gf_afraction *f, const char *dest, int code)
{
    gf_cleanup_close int dfd = -1, edfd = -1;
    char text[64];
    gf_error err;

    snprintf(text, sizeof(text), "time=%lld\nexit=%d\n", (long long)time(NULL), code);
    if ((mkdirat(a->state_dfd, GF_STATE_ENDED, 0755) < 0 && errno != EEXIST) ||
        (edfd = gf_at_dir(a->state_dfd, GF_STATE_ENDED)) < 0 ||
        (dfd = gf_at_dir(a->frac_dfd, f->cfg.name)) < 0)
        return false;
    unlinkat(dfd, GF_FRAC_AGENT_SOCK, 0);
    gf_fraction_view_read(a, f); /* the last figures */
    if (gf_at_write(dfd, GF_FRAC_ENDED, text, 0444, &err) < 0 || write_figures(a, f, dfd, &err) < 0)
        return false;
    gf_at_rmdir(edfd, dest); /* a record of an earlier run of that pid */
    return renameat(a->frac_dfd, f->cfg.name, edfd, dest) == 0;
}

static void end_fraction(gf_agent *a, gf_afraction *f, int code)
{
    char dest[GF_NAME_MAX + 32], name[GF_NAME_MAX];

    snprintf(name, sizeof(name), "%s", f->cfg.name);
    snprintf(dest, sizeof(dest), "%s.%d", name, (int)f->supervisor);
    if (!move_to_ended(a, f, dest, code)) {
        gf_release_fraction(a, f);
        return;
    }
    gf_journal(a, "unsup %s", name);
    gf_registry_forget(a, f);
    gf_agent_event(a, "fraction %s ended (exit status %d)", name, code);
}

void gf_serve_end(gf_agent *a, gf_request *r, const gf_msg *in, gf_msg *out)
{
    const gf_peer *cr = r->peer;
    const char *name = gf_msg_get(in, "name"), *code = gf_msg_get(in, "exit");
    gf_afraction *f;
    uint64_t start;

    if (!name || !(f = gf_registry_find_name_fresh(a, name)))
        return gf_reply_error(out, "name= names no fraction of this node");
    if (!gf_user_fraction(a, f))
        return gf_reply_error(out, "not a user's fraction (gpufrac run as root ends its own)");
    /* the supervisor the agent attached, the same process (pidfd live,
     * start time unchanged), of the fraction's owner */
    if (cr->uid != 0 && (cr->uid != f->owner || cr->pid != f->supervisor || f->sup_pidfd < 0 ||
                         gf_pidfd_exited(f->sup_pidfd) || !gf_proc_stat(cr->pid, &start, NULL) ||
                         start != f->sup_start))
        return gf_reply_error(out, "only the fraction's supervisor or root may end it");
    end_fraction(a, f, code ? atoi(code) : 0);
    gf_msg_init(out, "ok");
}

static void gc_ended(gf_agent *a)
{
    gf_cleanup_closedir DIR *d = NULL;
    gf_cleanup_close int fd = gf_at_dir(a->state_dfd, GF_STATE_ENDED);
    time_t now = time(NULL);
    struct dirent *de;
    struct stat st;

    if (fd < 0 || !(d = fdopendir(fd)))
        return;
    gf_steal_fd(&fd); /* the DIR's now */
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode) &&
            st.st_uid == 0 && now - st.st_ctime > GF_USER_ENDED_KEEP_S)
            gf_at_rmdir(dirfd(d), de->d_name);
    }
}

void gf_user_end_stale(gf_agent *a, gf_afraction *f)
{
    gf_agent_event(a,
                   "fraction %s: its gpufrac run (pid %d) is gone, and all its processes; "
                   "ending it",
                   f->cfg.name, (int)f->supervisor);
    end_fraction(a, f, -1);
}

void gf_user_reconcile(gf_agent *a)
{
    static time_t last_gc;

    if (time(NULL) - last_gc > 60) {
        last_gc = time(NULL);
        gc_ended(a);
    }
}
