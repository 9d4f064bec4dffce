/* SPDX-License-Identifier: Apache-2.0 */
/* Container fractions, made by the agent for the OCI runtime wrapper:
 * admit (check and create), attach (the container's init process), release
 * (remove), and reconcile (remove what a missed poststop hook left). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "admit.h"
#include "fsat.h"
#include "place.h"
#include "quantity.h"
#include "statedir.h"
#include "user_admit.h"

/* "uuid/request/limit,..." into cfg->devices. */
static int parse_devices(const char *v, gf_fraction_config *cfg, gf_error *err)
{
    char buf[GF_PROTO_VAL_MAX], *save = NULL, *item;

    snprintf(buf, sizeof(buf), "%s", v ? v : "");
    for (item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        gf_config_device *d = &cfg->devices[cfg->n_devices];
        char *s1 = strchr(item, '/'), *s2 = s1 ? strchr(s1 + 1, '/') : NULL, *end;
        if (cfg->n_devices == GF_CONFIG_DEVICES_MAX || !s1 || !s2 || s1 - item >= GF_UUID_MAX)
            return gf_error_set(err, GF_EINVAL,
                                "devices: \"%s\" is not uuid/request/limit (bytes)", item);
        memcpy(d->uuid, item, (size_t)(s1 - item));
        d->uuid[s1 - item] = '\0';
        for (size_t k = 0; k < cfg->n_devices; k++)
            if (strcmp(cfg->devices[k].uuid, d->uuid) == 0)
                return gf_error_set(err, GF_EINVAL, "devices: GPU %s is named more than once",
                                    d->uuid);
        d->request = strtoull(s1 + 1, &end, 10);
        if (end != s2 || !d->request)
            return gf_error_set(err, GF_EINVAL, "devices: bad request in \"%s\"", item);
        d->limit = strtoull(s2 + 1, &end, 10);
        if (*end || d->limit < d->request)
            return gf_error_set(err, GF_EINVAL, "devices: bad limit in \"%s\"", item);
        cfg->n_devices++;
    }
    if (!cfg->n_devices)
        return gf_error_set(err, GF_EINVAL, "devices= names no device");
    return 0;
}

int gf_admit_parse(const gf_msg *in, gf_fraction_config *cfg, gf_error *err)
{
    const char *name = gf_msg_get(in, "name"), *mode = gf_msg_get(in, "mode");
    uint64_t pct = 100;

    memset(cfg, 0, sizeof(*cfg));
    cfg->version = GF_CONFIG_VERSION;
    if (!gf_name_valid(name))
        return gf_error_set(err, GF_EINVAL, "name=%s is not a valid fraction name",
                            name ? name : "(missing)");
    snprintf(cfg->name, sizeof(cfg->name), "%s", name);
    if (mode && gf_mode_parse(mode, "mode", &cfg->mode, err) < 0)
        return -1;
    if (gf_msg_get(in, "compute") && (gf_msg_get_u64(in, "compute", &pct, err) < 0 || !pct ||
                                      pct > 100))
        return gf_error_set(err, GF_EINVAL, "compute= must be a percentage from 1 to 100");
    cfg->compute_percent = (int)pct;
    if (gf_msg_get(in, "place"))
        return 0; /* no devices given: gf_place picks them */
    return parse_devices(gf_msg_get(in, "devices"), cfg, err);
}

/* Guarantees must fit each GPU; modes never share one. */
int gf_admit_check_fit(gf_agent *a, const gf_fraction_config *cfg, gf_error *err)
{
    char h1[32], h2[32];
    for (size_t i = 0; i < cfg->n_devices; i++) {
        const gf_config_device *d = &cfg->devices[i];
        int g = gf_gpu_index(a, d->uuid);
        if (g < 0)
            return gf_error_set(err, GF_ENOTFOUND, "%s is not a GPU of this node", d->uuid);
        gf_gpu *gpu = &a->gpus[g];
        if (gpu->n_fractions && gpu->mode != cfg->mode)
            return gf_error_set(err, GF_ESTATE, "GPU %s runs %s fractions; a %s fraction cannot "
                                "share it", d->uuid, gf_mode_name(gpu->mode),
                                gf_mode_name(cfg->mode));
        if (gpu->guaranteed + d->request > gpu->total) {
            gf_bytes_human(gpu->total > gpu->guaranteed ? gpu->total - gpu->guaranteed : 0, h1,
                           sizeof(h1));
            gf_bytes_human(d->request, h2, sizeof(h2));
            return gf_error_set(err, GF_ESTATE, "GPU %s has %s not guaranteed to other "
                                "fractions; the fraction asks for %s", d->uuid, h1, h2);
        }
    }
    return 0;
}

static int make_fraction(gf_agent *a, gf_fraction_config *cfg, const gf_msg *in, gf_error *err)
{
    char tmp[GF_NAME_MAX + 16], dir[GF_PATH_MAX + 96], text[GF_CONFIG_TEXT_MAX], id[1024];
    char ledger_tmp[GF_PATH_MAX + 128];
    const char *termlog = gf_msg_get(in, "termlog");
    uint64_t uid = 0;
    int dfd = -1;

    if (termlog && (termlog[0] != '/' || strchr(termlog, '\n')))
        return gf_error_set(err, GF_EINVAL,
                            "termlog: \"%s\" is not an absolute path (the host file of the "
                            "container's termination message)", termlog);
    snprintf(dir, sizeof(dir), "%s/" GF_STATE_FRACTIONS "/%s", a->state_dir, cfg->name);
    snprintf(tmp, sizeof(tmp), GF_STATE_NEW_PREFIX "%s", cfg->name);
    if ((size_t)snprintf(cfg->ledger, sizeof(cfg->ledger), "%s/" GF_FRAC_LEDGER, dir) >=
        sizeof(cfg->ledger))
        return gf_error_set(err, GF_EINVAL, "state directory path too long");
    if ((size_t)snprintf(cfg->agent, sizeof(cfg->agent), "%s/" GF_FRAC_AGENT_SOCK, dir) >=
        sizeof(cfg->agent))
        return gf_error_set(err, GF_EINVAL, "state directory path too long");
    gf_at_rmdir(a->frac_dfd, tmp);
    if (mkdirat(a->frac_dfd, tmp, 0711) < 0)
        return gf_error_sys(err, "creating %s/" GF_STATE_FRACTIONS "/%s", a->state_dir, tmp);
    if ((dfd = gf_at_dir(a->frac_dfd, tmp)) < 0) {
        gf_error_sys(err, "opening %s/" GF_STATE_FRACTIONS "/%s", a->state_dir, tmp);
        goto fail;
    }
    if (gf_config_format(cfg, text, sizeof(text)) < 0 ||
        gf_at_write(dfd, GF_FRAC_CONFIG, text, 0444, err) < 0)
        goto fail;
    /* termlog= only from root's socket (gf_admit_container's caller checks):
     * the host file containerd mounts at the terminationMessagePath */
    snprintf(id, sizeof(id), "namespace=%s\npod=%s\ncontainer=%s\nadmitted=%lld\ntermlog=%s\n",
             gf_msg_get(in, "ns") ? gf_msg_get(in, "ns") : "",
             gf_msg_get(in, "pod") ? gf_msg_get(in, "pod") : "",
             gf_msg_get(in, "container") ? gf_msg_get(in, "container") : "", (long long)time(NULL),
             gf_msg_get(in, "termlog") ? gf_msg_get(in, "termlog") : "");
    snprintf(ledger_tmp, sizeof(ledger_tmp), "%s/" GF_STATE_FRACTIONS "/%s/" GF_FRAC_LEDGER,
             a->state_dir, tmp);
    /* the directory is root's and new: a path into it is not redirected */
    if (gf_at_write(dfd, GF_FRAC_IDENTITY, id, 0444, err) < 0 ||
        gf_ledger_create_for(ledger_tmp, cfg, 0600, err) < 0)
        goto fail;
    /* the fraction is given to the container's user: its ledger, nobody else's */
    if (gf_msg_get(in, "uid") && gf_msg_get_u64(in, "uid", &uid, err) == 0 &&
        fchownat(dfd, GF_FRAC_LEDGER, (uid_t)uid, (gid_t)-1, AT_SYMLINK_NOFOLLOW) < 0) {
        gf_error_sys(err, "giving %s to uid %" PRIu64, ledger_tmp, uid);
        goto fail;
    }
    if (renameat(a->frac_dfd, tmp, a->frac_dfd, cfg->name) < 0) {
        gf_error_sys(err, "installing %s", dir);
        goto fail;
    }
    close(dfd);
    gf_test_crash_point("admit");
    return 0;
fail:
    if (dfd >= 0)
        close(dfd);
    gf_at_rmdir(a->frac_dfd, tmp);
    return -1;
}

void gf_admit_container(gf_agent *a, const gf_msg *in, gf_msg *out, const gf_peer *cr)
{
    gf_fraction_config cfg;
    char pipe[GF_PATH_MAX] = "-";
    gf_afraction *f;
    gf_error err;

    if (cr->uid != 0)
        return gf_reply_error(out, "only root (the container runtime) may admit a container");
    if (gf_admit_parse(in, &cfg, &err) < 0)
        return gf_reply_error(out, err.msg);
    gf_registry_scan_if_changed(a, &err);
    if (!gf_registry_find_name_fresh(a, cfg.name)) {
        if (gf_journal_refuses(a, "an admission", &err) < 0)
            return gf_reply_error(out, err.msg);
        if ((gf_msg_get(in, "place") && gf_place(a, in, &cfg, &err) < 0) ||
            gf_admit_check_fit(a, &cfg, &err) < 0 || make_fraction(a, &cfg, in, &err) < 0)
            return gf_reply_error(out, err.msg);
        if (!gf_registry_open_new(a, cfg.name, &err)) {
            gf_remove_fraction_dir(a, cfg.name); /* a refusal leaves nothing */
            return gf_reply_error(out, err.msg);
        }
        gf_agent_event(a, "admitted container fraction %s", cfg.name);
    }
    if (!(f = gf_registry_find_name_fresh(a, cfg.name)))
        return gf_reply_error(out, "the fraction vanished while it was made");
    if (f->cfg.mode == GF_MODE_SM_SHARING) {
        int g = gf_gpu_index(a, f->cfg.devices[0].uuid);
        if (g < 0 || gf_mps_ensure(a, g, pipe, sizeof(pipe), &err) < 0) {
            gf_release_fraction(a, f);
            return gf_reply_error(out, g < 0 ? "no such GPU" : err.msg);
        }
    }
    char config[GF_PATH_MAX + 16];
    snprintf(config, sizeof(config), "%s/" GF_FRAC_CONFIG, f->dir);
    gf_msg_init(out, "ok");
    gf_msg_add(out, "config", config);
    gf_msg_add(out, "ledger", f->cfg.ledger);
    gf_msg_add(out, "socket", f->cfg.agent);
    gf_msg_add(out, "mps", pipe);
    gf_place_reply(out, f->cfg.devices, f->cfg.n_devices);
}

int gf_attach_pid(gf_agent *a, gf_afraction *f, pid_t pid, uint64_t start, bool admitted,
                  gf_error *err)
{
    int fd = gf_pidfd_verified(pid, start);

    if (fd < 0 || !gf_proc_stat(pid, &start, NULL) || gf_pidfd_exited(fd)) {
        if (fd >= 0)
            close(fd);
        return gf_error_set(err, GF_ENOTFOUND, "pid= is no live process of this node");
    }
    /* a supervisor the journal does not hold would be lost to a restart */
    if (gf_journal_refuses(a, "a supervisor", err) < 0 ||
        gf_journal(a, "sup %s %d %" PRIu64 " %d", f->cfg.name, (int)pid, start, admitted) < 0) {
        close(fd);
        return gf_journal_refuses(a, "a supervisor", err);
    }
    bool replaced = f->sup_pidfd >= 0;
    if (replaced) {
        epoll_ctl(a->loop_epfd, EPOLL_CTL_DEL, f->sup_pidfd, NULL);
        close(f->sup_pidfd);
    }
    f->supervisor = pid;
    f->sup_start = start;
    f->sup_pidfd = fd;
    f->sup_admitted = admitted;
    f->sup_seen = true;
    gf_loop_watch(a, fd, GF_EV(GF_EV_SUP, f->fid));
    if (replaced)
        gf_attrib_dirty();
    else
        gf_attrib_added(a, (int)(f - a->fractions));
    return 0;
}

bool gf_refuse_if_attributed(gf_agent *a, pid_t pid, const gf_afraction *f, gf_msg *out)
{
    int i = gf_attribute(a, pid);
    char m[GF_NAME_MAX + 160];

    if (i < 0 || (f && &a->fractions[i] == f))
        return false;
    snprintf(m, sizeof(m), "the process is already in fraction %s; a process of one fraction "
             "is never made another's supervisor", a->fractions[i].cfg.name);
    gf_reply_error(out, m);
    return true;
}

/* A supervisor attached already (a user's run, attached when users.sock made
 * its fraction) attaching itself again is a no-op. */
static int attach_pid_or_same(gf_agent *a, gf_afraction *f, pid_t pid, uint64_t start,
                              bool admitted, gf_error *err)
{
    if (!admitted && f->sup_pidfd >= 0 && f->supervisor == pid && !gf_pidfd_exited(f->sup_pidfd) &&
        start == f->sup_start)
        return 0;
    return gf_attach_pid(a, f, pid, start, admitted, err);
}

/* attach: the runtime (root, root's socket) names a container's init with
 * pid=; gpufrac run attaches itself (the process that connected, peer.h) through
 * its fraction's socket, once, for a fraction its user owns. */
void gf_attach(gf_agent *a, const gf_msg *in, gf_msg *out, const gf_peer *cr, uint64_t fid)
{
    const char *name = gf_msg_get(in, "name");
    bool runtime = cr->uid == 0 && fid == 0 && gf_msg_get(in, "pid");
    char text[32];
    uint64_t pid = (uint64_t)cr->pid;
    gf_afraction *f;
    gf_error err;

    if (runtime && (gf_msg_get_u64(in, "pid", &pid, &err) < 0 || !pid || pid > INT32_MAX))
        return gf_reply_error(out, "pid= must be the container's init process (a host pid)");
    gf_registry_scan_if_changed(a, &err);
    f = fid ? gf_registry_find_fid(a, fid) : name ? gf_registry_find_name_fresh(a, name) : NULL;
    if (!f || (name && strcmp(name, f->cfg.name) != 0))
        return gf_reply_error(out, "name= names no fraction of this node (or not this socket's)");
    if (!runtime) {
        if (f->pod[0])
            return gf_reply_error(out, "a container's fraction is attached by its runtime only");
        if (cr->uid != 0 && cr->uid != f->owner)
            return gf_reply_error(out, "only the fraction's owner may attach to it");
        if (f->sup_pidfd >= 0 && !gf_pidfd_exited(f->sup_pidfd) && f->supervisor != (pid_t)pid)
            return gf_reply_error(out, "the fraction already has a live supervisor");
    }
    if (gf_refuse_if_attributed(a, (pid_t)pid, f, out))
        return;
    if (attach_pid_or_same(a, f, (pid_t)pid, runtime ? 0 : cr->start, runtime, &err) < 0)
        return gf_reply_error(out, err.msg);
    if (runtime) { /* shown by gpufrac status; the agent itself never reads it back */
        int dfd = gf_at_dir(a->frac_dfd, f->cfg.name);
        snprintf(text, sizeof(text), "%" PRIu64 "\n", pid);
        if (dfd >= 0) {
            gf_at_write(dfd, GF_FRAC_SUPERVISOR, text, 0444, &err);
            close(dfd);
        }
    }
    gf_msg_init(out, "ok");
}

void gf_remove_fraction_dir(gf_agent *a, const char *name)
{
    char old[GF_NAME_MAX + 16];

    snprintf(old, sizeof(old), GF_STATE_OLD_PREFIX "%s", name);
    if (renameat(a->frac_dfd, name, a->frac_dfd, old) == 0)
        gf_at_rmdir(a->frac_dfd, old);
}

void gf_release_fraction(gf_agent *a, gf_afraction *f)
{
    char name[GF_NAME_MAX];

    snprintf(name, sizeof(name), "%s", f->cfg.name);
    gf_remove_fraction_dir(a, name);
    gf_journal(a, "unsup %s", name);
    gf_registry_forget(a, f);
    gf_agent_event(a, "released fraction %s", name);
}

/* A container admitted whose init never attached (its runtime died, or
 * never ran it) does not keep its guarantee: past a->attach_timeout_s, with
 * no process holding a slot, it is released. */
static bool never_attached(gf_agent *a, const gf_afraction *f)
{
    return f->has_identity && !f->sup_seen && f->sup_pidfd < 0 && f->admitted_at > 0 &&
           time(NULL) - f->admitted_at > a->attach_timeout_s &&
           !gf_ledger_view_any_live(f->ledger_fd);
}

static bool release_unattached(gf_agent *a, gf_afraction *f)
{
    if (!never_attached(a, f))
        return false;
    gf_agent_event(a, "fraction %s: admitted %lld s ago and its container never attached: "
                      "releasing its guarantee", f->cfg.name,
                   (long long)(time(NULL) - f->admitted_at));
    gf_release_fraction(a, f);
    return true;
}

/* A fraction whose supervisor (attached by the agent) is gone and that no
 * process holds a slot of any more (the kernel's lock table says so) is
 * released: its guarantee ends within a tick, whoever made it. */
void gf_release_stale(gf_agent *a)
{
    for (int i = 0; i < a->n_fractions; i++) {
        gf_afraction *f = &a->fractions[i];
        if (release_unattached(a, f)) {
            i = -1; /* the registry changed under us: start over */
            continue;
        }
        if (f->sup_pidfd >= 0 && gf_pidfd_exited(f->sup_pidfd)) {
            epoll_ctl(a->loop_epfd, EPOLL_CTL_DEL, f->sup_pidfd, NULL);
            close(f->sup_pidfd);
            f->sup_pidfd = -1;
            gf_attrib_dirty();
        }
        if (!f->sup_seen || f->sup_pidfd >= 0 || gf_ledger_view_any_live(f->ledger_fd) ||
            gf_attrib_has_member(a, f))
            continue;
        int before = a->n_fractions;
        f->sup_seen = false; /* tried once: a fraction that cannot be removed is not retried */
        if (gf_user_fraction(a, f)) { /* kept a while for its owner's gpufrac status */
            gf_user_end_stale(a, f);
        } else {
            gf_agent_event(a, "fraction %s: its supervisor and all its processes are gone: "
                              "releasing its guarantee", f->cfg.name);
            gf_release_fraction(a, f);
        }
        if (a->n_fractions < before)
            i = -1; /* the registry changed under us: start over */
    }
}
