/* SPDX-License-Identifier: Apache-2.0 */
/* Container fractions, made by the agent for the OCI runtime wrapper:
 * admit (check and create), attach (the container's init process), release
 * (remove), and reconcile (remove what a missed poststop hook left). */
#include "admit.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "attrib.h"
#include "conn.h"
#include "events.h"
#include "fit.h"
#include "fracdir.h"
#include "fraction.h"
#include "fsat.h"
#include "gate.h"
#include "journal.h"
#include "mps.h"
#include "nvml.h"
#include "peer.h"
#include "place.h"
#include "quantity.h"
#include "registry.h"
#include "statedir.h"
#include "supervisors.h"

/* "uuid/request/limit,..." into cfg->devices. */
static int parse_devices(const char *v, gf_fraction_config *cfg, gf_error *err)
{
    char buf[GF_PROTO_VAL_MAX], *save = NULL, *item;

    snprintf(buf, sizeof(buf), "%s", v ? v : "");
    for (item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        gf_config_device *d = &cfg->devices[cfg->n_devices];
        char *s1 = strchr(item, '/'), *s2 = s1 ? strchr(s1 + 1, '/') : NULL, *end;
        if (cfg->n_devices == GF_CONFIG_DEVICES_MAX || !s1 || !s2 || s1 - item >= GF_UUID_MAX)
            return gf_error_set(err, GF_EINVAL, "devices: \"%s\" is not uuid/request/limit (bytes)",
                                item);
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
    if (gf_msg_get(in, "compute") &&
        (gf_msg_get_u64(in, "compute", &pct, err) < 0 || !pct || pct > 100))
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
        const gf_agent_gpu *gpu = &a->gpus[g];
        const gf_fit_gpu state = {.total = gpu->dev.total,
                                  .guaranteed = gpu->guaranteed,
                                  .has_fractions = gpu->n_fractions > 0,
                                  .mode = gpu->mode};
        const gf_fit_ask ask = {.request = d->request, .mode = cfg->mode};
        uint64_t free_bytes;
        switch (gf_fit_check(&state, &ask, &free_bytes)) {
        case GF_FIT_OK: break;
        case GF_FIT_MODE:
            return gf_error_set(err, GF_ESTATE,
                                "GPU %s runs %s fractions; a %s fraction cannot "
                                "share it",
                                d->uuid, gf_mode_name(gpu->mode), gf_mode_name(cfg->mode));
        default: /* memory: the request is never 0 (parsed), compute and limit not asked */
            gf_bytes_human(free_bytes, h1, sizeof(h1));
            gf_bytes_human(d->request, h2, sizeof(h2));
            return gf_error_set(err, GF_ESTATE,
                                "GPU %s has %s not guaranteed to other "
                                "fractions; the fraction asks for %s",
                                d->uuid, h1, h2);
        }
    }
    return 0;
}

/* The container's identity record: termlog= only from root's socket (the
 * verb's caller is root): the host file containerd mounts at the
 * terminationMessagePath. */
static int identity_text(const gf_msg *in, char *out, size_t len, gf_error *err)
{
    const char *termlog = gf_msg_get(in, "termlog");

    if (termlog && (termlog[0] != '/' || strchr(termlog, '\n')))
        return gf_error_set(err, GF_EINVAL,
                            "termlog: \"%s\" is not an absolute path (the host file of the "
                            "container's termination message)",
                            termlog);
    snprintf(out, len, "namespace=%s\npod=%s\ncontainer=%s\nadmitted=%lld\ntermlog=%s\n",
             gf_msg_get(in, "ns") ? gf_msg_get(in, "ns") : "",
             gf_msg_get(in, "pod") ? gf_msg_get(in, "pod") : "",
             gf_msg_get(in, "container") ? gf_msg_get(in, "container") : "", (long long)time(NULL),
             termlog ? termlog : "");
    return 0;
}

static int make_fraction(gf_agent *a, gf_fraction_config *cfg, const gf_msg *in, gf_error *err)
{
    char id[1024];
    uint64_t uid = 0;
    gf_error ignored;
    /* the fraction is given to the container's user: its ledger, nobody else's */
    bool give = gf_msg_get(in, "uid") && gf_msg_get_u64(in, "uid", &uid, &ignored) == 0;
    gf_fracdir_spec spec = {.cfg = cfg,
                            .config_mode = 0444,
                            .group = (gid_t)-1,
                            .extra = {GF_FRAC_IDENTITY, id, 0444},
                            .ledger_uid = give ? (uid_t)uid : (uid_t)-1,
                            .ledger_gid = (gid_t)-1};

    if (identity_text(in, id, sizeof(id), err) < 0 || gf_fracdir_make(a, &spec, err) < 0)
        return -1;
    gf_test_crash_point("admit");
    return 0;
}

/* The reply to admit: where the runtime finds what the container needs. */
static void admitted(const gf_afraction *f, const char *pipe, gf_msg *out)
{
    gf_fracdir_reply(f, out);
    gf_msg_add(out, "mps", pipe);
    gf_place_reply(out, f->cfg.devices, f->cfg.n_devices);
}

/* A new container fraction: placed, checked, made and opened, or nothing. */
static gf_afraction *admit_new(gf_agent *a, const gf_msg *in, gf_fraction_config *cfg,
                               gf_error *err)
{
    gf_afraction *f;

    if (gf_journal_refuses(a, "an admission", err) < 0 ||
        (gf_msg_get(in, "place") && gf_place(a, in, cfg, err) < 0) ||
        gf_admit_check_fit(a, cfg, err) < 0 || make_fraction(a, cfg, in, err) < 0)
        return NULL;
    if (!(f = gf_registry_open_new(a, cfg->name, err))) {
        gf_fracdir_remove(a, cfg->name); /* a refusal leaves nothing */
        return NULL;
    }
    gf_agent_event(a, "admitted container fraction %s", cfg->name);
    return f;
}

void gf_serve_admit(gf_agent *a, gf_request *r, const gf_msg *in, gf_msg *out)
{
    gf_fraction_config cfg;
    char pipe[GF_PATH_MAX] = "-";
    gf_afraction *f;
    gf_error err;

    if (r->peer->uid != 0)
        return gf_reply_error(out, "only root (the container runtime) may admit a container");
    if (gf_admit_parse(in, &cfg, &err) < 0)
        return gf_reply_error(out, err.msg);
    if (!(f = gf_registry_find_name_fresh(a, cfg.name)) && !(f = admit_new(a, in, &cfg, &err)))
        return gf_reply_error(out, err.msg);
    if (f->cfg.mode == GF_MODE_SM_SHARING) {
        int g = gf_gpu_index(a, f->cfg.devices[0].uuid);
        if (g < 0 || gf_mps_ensure(a, g, pipe, sizeof(pipe), &err) < 0) {
            gf_release_fraction(a, f);
            return gf_reply_error(out, g < 0 ? "no such GPU" : err.msg);
        }
    }
    admitted(f, pipe, out);
}

/* A supervisor attached already (a user's run, attached when users.sock made
 * its fraction) attaching itself again is a no-op. */
static int attach_pid_or_same(gf_agent *a, gf_afraction *f, pid_t pid, uint64_t start,
                              bool admitted, gf_error *err)
{
    if (!admitted && gf_sup_alive(f) && f->supervisor == pid && start == f->sup_start)
        return 0;
    return gf_sup_attach(a, f, pid, start, admitted, err);
}

/* Who the supervisor of f may be when a process attaches itself. */
static const char *self_attach_refused(const gf_afraction *f, const gf_peer *cr, pid_t pid)
{
    if (f->pod[0])
        return "a container's fraction is attached by its runtime only";
    if (cr->uid != 0 && cr->uid != f->owner)
        return "only the fraction's owner may attach to it";
    if (gf_sup_alive(f) && f->supervisor != pid)
        return "the fraction already has a live supervisor";
    return NULL;
}

/* What gpufrac status shows; the agent itself never reads it back. */
static void write_supervisor(gf_agent *a, const gf_afraction *f, uint64_t pid)
{
    char text[32];
    gf_error err;
    int dfd = gf_at_dir(a->frac_dfd, f->cfg.name);

    snprintf(text, sizeof(text), "%" PRIu64 "\n", pid);
    if (dfd >= 0) {
        gf_at_write(dfd, GF_FRAC_SUPERVISOR, text, 0444, &err);
        close(dfd);
    }
}

/* attach: the runtime (root, root's socket) names a container's init with
 * pid=; gpufrac run attaches itself (the process that connected, peer.h) through
 * its fraction's socket, once, for a fraction its user owns. */
void gf_serve_attach(gf_agent *a, gf_request *r, const gf_msg *in, gf_msg *out)
{
    const gf_peer *cr = r->peer;
    const char *name = gf_msg_get(in, "name"), *refused;
    bool again, runtime = cr->uid == 0 && r->socket == GF_SOCKET_ROOT && gf_msg_get(in, "pid");
    uint64_t pid = (uint64_t)cr->pid;
    gf_afraction *f;
    gf_error err;

    if (runtime && (gf_msg_get_u64(in, "pid", &pid, &err) < 0 || !pid || pid > INT32_MAX))
        return gf_reply_error(out, "pid= must be the container's init process (a host pid)");
    f = r->fid ? gf_fraction_find_fid(a, r->fid)
        : name ? gf_registry_find_name_fresh(a, name)
               : NULL;
    if (!f || (name && strcmp(name, f->cfg.name) != 0))
        return gf_reply_error(out, "name= names no fraction of this node (or not this socket's)");
    if (!runtime && (refused = self_attach_refused(f, cr, (pid_t)pid)))
        return gf_reply_error(out, refused);
    if (gf_gate_refuse_attributed(a, (pid_t)pid, f, out))
        return;
    again = gf_sup_alive(f) && f->supervisor == (pid_t)pid;
    if (attach_pid_or_same(a, f, (pid_t)pid, runtime ? 0 : cr->start, runtime, &err) < 0)
        return gf_reply_error(out, err.msg);
    if (runtime)
        write_supervisor(a, f, pid);
    else if (!again) /* root's gpufrac run, which makes its own fraction */
        gf_agent_event(a, "fraction %s: its gpufrac run (pid %d, uid %u) attached", f->cfg.name,
                       (int)pid, (unsigned)cr->uid);
    gf_msg_init(out, "ok");
}

/* The fraction's processes on GPU g as the driver lists them (host pids). */
static int driver_pids(gf_agent *a, gf_afraction *f, int g, pid_t *pids, int max)
{
    static gf_proc_mem procs[1024];
    gf_error err;
    int n = gf_agent_nvml_procs(a, g, procs, 1024, &err), k = 0;

    for (int i = 0; i < n && k < max; i++)
        if (procs[i].pid > 1 && gf_attribute(a, procs[i].pid) == (int)(f - a->fractions))
            pids[k++] = procs[i].pid;
    return k;
}

/* MPS terminates f's clients on each of its GPUs (sm-sharing); the count,
 * or -1 with why. */
static int terminate_mps_clients(gf_agent *a, gf_afraction *f, gf_error *err)
{
    pid_t pids[256];
    int n = 0;

    for (int g = 0; g < a->n_gpus && f->cfg.mode == GF_MODE_SM_SHARING; g++) {
        int k;
        if (!gf_aconfig_device(&f->cfg, a->gpus[g].dev.uuid))
            continue;
        k = driver_pids(a, f, g, pids, 256);
        if (k && gf_mps_terminate_clients(a, g, pids, k, err) < 0)
            return -1;
        n += k;
    }
    return n;
}

/* Before a fraction stops: MPS terminates its clients (sm-sharing). Its
 * supervisor or root may ask; only root, on root's socket (the runtime), may
 * remove a fraction (remove=1). */
void gf_serve_release(gf_agent *a, gf_request *r, const gf_msg *in, gf_msg *out)
{
    const char *name = gf_msg_get(in, "name"), *remove = gf_msg_get(in, "remove");
    bool drop_it = remove && strcmp(remove, "1") == 0;
    gf_afraction *f;
    gf_error err;
    int n;

    if (drop_it && (r->peer->uid != 0 || r->socket != GF_SOCKET_ROOT))
        return gf_reply_error(out, "only root on the agent's own socket (the container runtime) "
                                   "may remove a fraction");
    if (!name || !(f = gf_registry_find_name_fresh(a, name))) {
        if (!drop_it)
            return gf_reply_error(out, "name= names no fraction of this node");
        gf_msg_init(out, "ok"); /* already gone: releasing twice is fine */
        return;
    }
    if (r->peer->uid != 0 &&
        (r->peer->pid != f->supervisor || f->sup_pidfd < 0 || (r->fid && r->fid != f->fid)))
        return gf_reply_error(out, "only the fraction's supervisor or root may release it");
    if ((n = terminate_mps_clients(a, f, &err)) < 0)
        return gf_reply_error(out, err.msg);
    if (n)
        gf_agent_event(a, "release: MPS terminated %d client(s) of fraction %s", n, name);
    if (drop_it)
        gf_release_fraction(a, f);
    gf_msg_init(out, "ok");
    gf_msg_add_u64(out, "clients", (uint64_t)n);
}
