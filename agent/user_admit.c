#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "admit.h"
#include "user_policy.h"
#include "server.h"
#include "user_admit.h"

#define GROUPS_MAX 64

static char policy_path[GF_PATH_MAX] = GF_USER_POLICY_DEFAULT;
static int users_fd = -1;

int gf_user_listen(gf_agent *a, const char *policy, gf_error *err)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    struct epoll_event ev = {.events = EPOLLIN};
    char path[GF_PATH_MAX + 16];

    if (policy && *policy)
        snprintf(policy_path, sizeof(policy_path), "%s", policy);
    if ((size_t)snprintf(path, sizeof(path), "%s/users.sock", a->state_dir) >= sizeof(sa.sun_path))
        return gf_error_set(err, GF_EINVAL, "socket path %s/users.sock is too long",
                            a->state_dir);
    memcpy(sa.sun_path, path, strlen(path) + 1);
    users_fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (users_fd < 0)
        return gf_error_sys(err, "creating socket %s", path);
    unlink(path);
    /* everyone may connect: each request is judged by the caller's credentials */
    if (bind(users_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || chmod(path, 0666) < 0 ||
        listen(users_fd, 128) < 0) {
        gf_error_sys(err, "listening on %s", path);
        close(users_fd);
        users_fd = -1;
        return -1;
    }
    ev.data.fd = users_fd;
    if (epoll_ctl(a->epfd, EPOLL_CTL_ADD, users_fd, &ev) < 0)
        return gf_error_sys(err, "watching %s", path);
    return 0;
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

static void who(const struct ucred *cr, caller *c)
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

/* A missing file is no policy; a broken one refuses everyone (with why). */
static int load_policy(gf_user_policy *p, gf_error *err)
{
    char text[65536];
    ssize_t n;
    int fd = open(policy_path, O_RDONLY | O_CLOEXEC);

    if (fd < 0) {
        if (errno == ENOENT)
            return gf_user_policy_parse("", 0, policy_path, p, err);
        return gf_error_sys(err, "reading the policy %s", policy_path);
    }
    n = read(fd, text, sizeof(text));
    close(fd);
    if (n < 0)
        return gf_error_sys(err, "reading the policy %s", policy_path);
    if (n == (ssize_t)sizeof(text))
        return gf_error_set(err, GF_ERANGE, "policy %s is larger than %zu bytes", policy_path,
                            sizeof(text) - 1);
    return gf_user_policy_parse(text, (size_t)n, policy_path, p, err);
}

static uid_t owner_of(const gf_afraction *f)
{
    struct stat st;
    return f->ledger.fd >= 0 && fstat(f->ledger.fd, &st) == 0 ? st.st_uid : (uid_t)-1;
}

static int check_policy(gf_agent *a, const gf_fraction_config *cfg, const struct ucred *cr,
                        gf_error *err)
{
    static gf_user_policy policy; /* large; the agent's one loop is the only caller */
    gf_user_policy_device devs[GF_CONFIG_DEVICES_MAX];
    gf_user_policy_rules rules;
    size_t held = 0;
    caller c;

    if (cr->uid == 0)
        return 0;
    if (load_policy(&policy, err) < 0)
        return -1;
    for (size_t i = 0; i < cfg->n_devices; i++) {
        int g = gf_gpu_index(a, cfg->devices[i].uuid);
        devs[i] = (gf_user_policy_device){.request = cfg->devices[i].request,
                                     .limit = cfg->devices[i].limit,
                                     .gpu_total = g >= 0 ? a->gpus[g].total : 0};
    }
    for (int i = 0; i < a->n_fractions; i++)
        if (!a->fractions[i].pod[0] && owner_of(&a->fractions[i]) == cr->uid)
            held++;
    who(cr, &c);
    gf_user_policy_rules_for(&policy, c.user, c.groups, c.n_groups, &rules);
    gf_user_policy_ask ask = {.mode = cfg->mode, .compute_percent = cfg->compute_percent,
                         .n_devices = cfg->n_devices, .devices = devs, .fractions_held = held};
    return gf_user_policy_check(&policy, &rules, &ask, err);
}

/* Creates name in dir with text; the fd is root's until given away. */
static int put_file(int dirfd, const char *name, const char *text, mode_t mode, gf_error *err)
{
    size_t len = strlen(text);
    int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);

    if (fd < 0)
        return gf_error_sys(err, "creating %s", name);
    if (write(fd, text, len) != (ssize_t)len || fchmod(fd, mode) < 0) {
        gf_error_sys(err, "writing %s", name);
        close(fd);
        return -1;
    }
    close(fd);
    return 0;
}

static void rm_dir(const char *dir)
{
    static const char *const files[] = {"config", "ledger", "supervisor", "terminated", "ended",
                                        "agent.sock", "ledger.tmp"};
    char path[GF_PATH_MAX + 32];

    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
}

static int make_user_fraction(gf_agent *a, gf_fraction_config *cfg, const struct ucred *cr,
                              gf_error *err)
{
    char dir[GF_PATH_MAX + 96], tmp[GF_PATH_MAX + 96], text[GF_CONFIG_TEXT_MAX], pid[32];
    char ledger[GF_PATH_MAX + 128];
    int dfd = -1;

    snprintf(dir, sizeof(dir), "%s/fractions/%s", a->state_dir, cfg->name);
    snprintf(tmp, sizeof(tmp), "%s/fractions/.new-%s", a->state_dir, cfg->name);
    if ((size_t)snprintf(cfg->ledger, sizeof(cfg->ledger), "%s/ledger", dir) >= sizeof(cfg->ledger) ||
        (size_t)snprintf(cfg->agent, sizeof(cfg->agent), "%s/agent.sock", dir) >= sizeof(cfg->agent))
        return gf_error_set(err, GF_EINVAL, "state directory path too long");
    rm_dir(tmp);
    if (mkdir(tmp, 0755) < 0)
        return gf_error_sys(err, "creating %s", tmp);
    if ((dfd = open(tmp, O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
        gf_error_sys(err, "opening %s", tmp);
        goto fail;
    }
    snprintf(pid, sizeof(pid), "%d\n", (int)cr->pid);
    snprintf(ledger, sizeof(ledger), "%s/ledger", tmp);
    if (gf_config_format(cfg, text, sizeof(text)) < 0) {
        gf_error_set(err, GF_ENOSPACE, "fraction config too long");
        goto fail;
    }
    if (put_file(dfd, "config", text, 0444, err) < 0 ||
        put_file(dfd, "supervisor", pid, 0444, err) < 0 ||
        gf_ledger_create_for(ledger, cfg, 0600, err) < 0)
        goto fail;
    /* the one thing the user's processes write */
    if (fchownat(dfd, "ledger", cr->uid, cr->gid, AT_SYMLINK_NOFOLLOW) < 0) {
        gf_error_sys(err, "giving %s to uid %u", ledger, (unsigned)cr->uid);
        goto fail;
    }
    close(dfd);
    dfd = -1;
    if (rename(tmp, dir) < 0) {
        gf_error_sys(err, "installing %s", dir);
        goto fail;
    }
    return 0;
fail:
    if (dfd >= 0)
        close(dfd);
    rm_dir(tmp);
    return -1;
}

static void do_run(gf_agent *a, const gf_msg *in, gf_msg *out, const struct ucred *cr)
{
    gf_fraction_config cfg;
    gf_afraction *f;
    gf_error err;
    char m[GF_ERROR_MSG_MAX + 64], config[GF_PATH_MAX + 16];

    if (gf_admit_parse(in, &cfg, &err) < 0)
        return gf_reply_error(out, err.msg);
    if (strncmp(cfg.name, "k8s.", 4) == 0)
        return gf_reply_error(out, "names starting with k8s. are kept for containers");
    gf_registry_scan_if_changed(a, &err);
    if ((f = gf_registry_find_name_fresh(a, cfg.name))) {
        snprintf(m, sizeof(m), "a fraction named \"%s\" is in use; choose another --name",
                 cfg.name);
        return gf_reply_error(out, m);
    }
    if (check_policy(a, &cfg, cr, &err) < 0 || gf_admit_check_fit(a, &cfg, &err) < 0 ||
        make_user_fraction(a, &cfg, cr, &err) < 0)
        return gf_reply_error(out, err.msg);
    gf_registry_scan(a, &err);
    if (!(f = gf_registry_find_name_fresh(a, cfg.name)))
        return gf_reply_error(out, "the fraction vanished while it was made");
    gf_agent_event(a, "admitted fraction %s of uid %u (pid %d)", cfg.name, (unsigned)cr->uid,
                   (int)cr->pid);
    snprintf(config, sizeof(config), "%s/config", f->dir);
    gf_msg_init(out, "ok");
    gf_msg_add(out, "config", config);
    gf_msg_add(out, "ledger", f->cfg.ledger);
    gf_msg_add(out, "socket", f->cfg.agent);
}

/* Moves a user fraction to <state>/ended (for `gpufrac status`). */
static void end_fraction(gf_agent *a, gf_afraction *f, int code)
{
    char ended[GF_PATH_MAX + 16], dest[GF_PATH_MAX + 128], text[64], name[GF_NAME_MAX];
    gf_error err;
    int dfd;

    snprintf(name, sizeof(name), "%s", f->cfg.name);
    snprintf(ended, sizeof(ended), "%s/ended", a->state_dir);
    snprintf(dest, sizeof(dest), "%s/%s.%d", ended, name, (int)f->supervisor);
    snprintf(text, sizeof(text), "time=%lld\nexit=%d\n", (long long)time(NULL), code);
    if ((mkdir(ended, 0755) < 0 && errno != EEXIST) ||
        (dfd = open(f->dir, O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
        gf_release_fraction(a, f);
        return;
    }
    unlinkat(dfd, "agent.sock", 0);
    bool ok = put_file(dfd, "ended", text, 0444, &err) == 0;
    close(dfd);
    if (!ok || rename(f->dir, dest) < 0) {
        gf_release_fraction(a, f);
        return;
    }
    gf_registry_scan(a, &err);
    gf_agent_event(a, "fraction %s ended (exit status %d)", name, code);
}

static bool is_user_fraction(const gf_afraction *f)
{
    char path[GF_PATH_MAX + 16];
    snprintf(path, sizeof(path), "%s/identity", f->dir);
    return access(path, F_OK) < 0 && owner_of(f) != 0 && f->supervisor > 0;
}

static void do_end(gf_agent *a, const gf_msg *in, gf_msg *out, const struct ucred *cr)
{
    const char *name = gf_msg_get(in, "name"), *code = gf_msg_get(in, "exit");
    gf_afraction *f;
    gf_error err;

    gf_registry_scan_if_changed(a, &err);
    if (!name || !(f = gf_registry_find_name_fresh(a, name)))
        return gf_reply_error(out, "name= names no fraction of this node");
    if (cr->uid != 0 && cr->pid != f->supervisor)
        return gf_reply_error(out, "only the fraction's supervisor or root may end it");
    if (!is_user_fraction(f))
        return gf_reply_error(out, "not a user's fraction (gpufrac run as root ends its own)");
    end_fraction(a, f, code ? atoi(code) : 0);
    gf_msg_init(out, "ok");
}

bool gf_user_dispatch(gf_agent *a, const gf_msg *in, gf_msg *out, const struct ucred *cr)
{
    if (strcmp(in->verb, "run") == 0)
        do_run(a, in, out, cr);
    else if (strcmp(in->verb, "end") == 0)
        do_end(a, in, out, cr);
    else
        return false;
    return true;
}

static bool supervisor_holds_lock(const gf_afraction *f)
{
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    char path[GF_PATH_MAX + 16];
    bool held;
    int fd;

    snprintf(path, sizeof(path), "%s/supervisor", f->dir);
    if ((fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0)
        return false;
    held = fcntl(fd, F_OFD_GETLK, &fl) < 0 || fl.l_type != F_UNLCK;
    close(fd);
    return held;
}

static bool live_slot(gf_afraction *f)
{
    for (int s = 0, high = gf_ledger_slot_high(&f->ledger); s < high; s++)
        if (atomic_load(&f->ledger.hdr->slots[s].pid) && gf_ledger_slot_live(&f->ledger, s))
            return true;
    return false;
}

static void gc_ended(gf_agent *a)
{
    char dir[GF_PATH_MAX + 16], path[GF_PATH_MAX + 300];
    time_t now = time(NULL);
    struct dirent *de;
    struct stat st;
    DIR *d;

    snprintf(dir, sizeof(dir), "%s/ended", a->state_dir);
    if (!(d = opendir(dir)))
        return;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
        if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == 0 &&
            now - st.st_ctime > GF_USER_ENDED_KEEP_S)
            rm_dir(path);
    }
    closedir(d);
}

void gf_user_reconcile(gf_agent *a)
{
    static time_t last_gc;

    for (int i = 0; i < a->n_fractions; i++) {
        gf_afraction *f = &a->fractions[i];
        if (!is_user_fraction(f) || supervisor_holds_lock(f) || live_slot(f))
            continue;
        /* a run made through users.sock whose gpufrac run died without "end" */
        char sup[GF_PATH_MAX + 16];
        struct stat st;
        snprintf(sup, sizeof(sup), "%s/supervisor", f->dir);
        if (lstat(sup, &st) < 0 || st.st_uid != 0 || time(NULL) - st.st_mtime < 5)
            continue; /* not ours, or its run is still taking its lock */
        gf_agent_event(a, "fraction %s: its gpufrac run (pid %d) is gone; ending it",
                       f->cfg.name, (int)f->supervisor);
        end_fraction(a, f, -1);
        i = -1;
    }
    if (time(NULL) - last_gc > 60) {
        last_gc = time(NULL);
        gc_ended(a);
    }
}
