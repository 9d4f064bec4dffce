/* The agent's socket: one request per datagram (core/proto.h). Callers are
 * who the kernel says they are (SO_PEERCRED), never who they claim to be: a
 * process borrows only for the fraction whose ledger slot it holds. Bad
 * requests get an error reply; nothing a client sends can stop the loop. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "admit.h"
#include "agent.h"
#include "proto.h"
#include "server.h"
#include "terminated.h"
#include "user_admit.h"

/* The agent's own socket is root's; a fraction's processes reach the agent
 * through their fraction's socket (<fraction dir>/agent.sock, owned by the
 * fraction's owner). Either way what a caller may do is decided per request
 * from its kernel credentials. */
int gf_server_listen(gf_agent *a, gf_error *err)
{
    return gf_socket_listen(a->socket_path, 0, err);
}

void gf_reply_error(gf_msg *out, const char *msg)
{
    gf_msg_init(out, "error");
    gf_msg_add(out, "msg", msg);
}

static int gpu_of(gf_agent *a, const gf_msg *in, gf_msg *out)
{
    const char *dev = gf_msg_get(in, "dev");
    int g = dev ? gf_gpu_index(a, dev) : -1;
    if (g < 0) {
        char m[GF_PROTO_VAL_MAX];
        snprintf(m, sizeof(m), "dev=%s is not a GPU of this node", dev ? dev : "(missing)");
        gf_reply_error(out, m);
    }
    return g;
}

static void do_borrow(gf_agent *a, const gf_msg *in, gf_msg *out, pid_t peer, bool give_back)
{
    gf_error err;
    uint64_t bytes, granted = 0;
    int slot, g;
    gf_afraction *f;

    if ((g = gpu_of(a, in, out)) < 0)
        return;
    if (gf_msg_get_u64(in, "bytes", &bytes, &err) < 0)
        return gf_reply_error(out, err.msg);
    gf_registry_scan_if_changed(a, &err);
    f = gf_registry_find_pid_fresh(a, peer, &slot);
    if (!f) {
        char m[128];
        snprintf(m, sizeof(m), "pid %d holds no slot in any fraction", (int)peer);
        return gf_reply_error(out, m);
    }
    if (give_back) {
        gf_return_loan(a, f, slot, g, bytes);
        gf_msg_init(out, "ok");
        return;
    }
    if (gf_lend(a, f, slot, g, bytes, &granted, &err) < 0)
        return gf_reply_error(out, err.msg);
    gf_msg_init(out, "ok");
    gf_msg_add_u64(out, "granted", granted);
}

static void do_reclaim(gf_agent *a, const gf_msg *in, gf_msg *out, pid_t peer)
{
    gf_error err;
    uint64_t bytes;
    int g, evicted;

    if ((g = gpu_of(a, in, out)) < 0)
        return;
    if (gf_msg_get_u64(in, "bytes", &bytes, &err) < 0)
        return gf_reply_error(out, err.msg);
    gf_registry_scan_if_changed(a, &err);
    const gf_afraction *owner = gf_registry_find_pid_fresh(a, peer, NULL);
    if (!owner)
        return gf_reply_error(out, "only a process of a fraction may ask to reclaim");
    gf_terminated_cause(owner->cfg.name);
    int rc = gf_reclaim(a, a->gpus[g].uuid, bytes, &evicted, &err);
    gf_terminated_cause(NULL);
    if (rc < 0)
        return gf_reply_error(out, err.msg);
    gf_msg_init(out, "ok");
    gf_msg_add_u64(out, "evicted", (uint64_t)evicted);
}

/* Is pid the supervisor of an sm-sharing fraction on GPU g? */
static bool supervises_sm(gf_agent *a, pid_t pid, int g)
{
    for (int i = 0; i < a->n_fractions; i++) {
        const gf_afraction *f = &a->fractions[i];
        if (f->supervisor == pid && f->cfg.mode == GF_MODE_SM_SHARING &&
            gf_config_find_device(&f->cfg, a->gpus[g].uuid))
            return true;
    }
    return false;
}

static void do_mps(gf_agent *a, const gf_msg *in, gf_msg *out, const struct ucred *cr)
{
    char pipe[GF_PATH_MAX];
    gf_error err;
    int g;

    if ((g = gpu_of(a, in, out)) < 0)
        return;
    gf_registry_scan_if_changed(a, &err);
    if (cr->uid != 0 && !supervises_sm(a, cr->pid, g))
        return gf_reply_error(out, "only root or the supervisor of an sm-sharing fraction on this "
                                "GPU may ask for its MPS daemon");
    if (gf_mps_ensure(a, g, pipe, sizeof(pipe), &err) < 0)
        return gf_reply_error(out, err.msg);
    gf_msg_init(out, "ok");
    gf_msg_add(out, "pipe", pipe);
}

/* Before a fraction stops: MPS terminates its clients (sm-sharing). Only its
 * supervisor or root may ask. */
static void do_release(gf_agent *a, const gf_msg *in, gf_msg *out, const struct ucred *cr)
{
    const char *name = gf_msg_get(in, "name"), *remove = gf_msg_get(in, "remove");
    bool drop = remove && strcmp(remove, "1") == 0;
    pid_t pids[256];
    gf_afraction *f;
    gf_error err;
    int n = 0;

    gf_registry_scan_if_changed(a, &err);
    if (!name || !(f = gf_registry_find_name_fresh(a, name))) {
        if (!drop)
            return gf_reply_error(out, "name= names no fraction of this node");
        gf_msg_init(out, "ok"); /* already gone: releasing twice is fine */
        return;
    }
    if (cr->uid != 0 && cr->pid != f->supervisor)
        return gf_reply_error(out, "only the fraction's supervisor or root may release it");
    for (int s = 0, high = gf_ledger_slot_high(&f->ledger); s < high && n < 256; s++)
        if (atomic_load(&f->ledger.hdr->slots[s].pid) && gf_ledger_slot_live(&f->ledger, s))
            pids[n++] = atomic_load(&f->ledger.hdr->slots[s].pid);
    for (int g = 0; g < a->n_gpus && f->cfg.mode == GF_MODE_SM_SHARING && n; g++)
        if (gf_config_find_device(&f->cfg, a->gpus[g].uuid) &&
            gf_mps_terminate_clients(a, g, pids, n, &err) < 0)
            return gf_reply_error(out, err.msg);
    if (n && f->cfg.mode == GF_MODE_SM_SHARING)
        gf_agent_event(a, "release: MPS terminated %d client(s) of fraction %s", n, name);
    if (drop)
        gf_release_fraction(a, f);
    gf_msg_init(out, "ok");
    gf_msg_add_u64(out, "clients", (uint64_t)n);
}

static void dispatch(gf_agent *a, const gf_msg *in, gf_msg *out, const struct ucred *cr)
{
    if (strcmp(in->verb, "ping") == 0) {
        gf_msg_init(out, "ok");
        gf_msg_add(out, "agent", "gpufracd");
        gf_msg_add_u64(out, "fractions", (uint64_t)a->n_fractions);
    } else if (strcmp(in->verb, "borrow") == 0 || strcmp(in->verb, "return") == 0) {
        do_borrow(a, in, out, cr->pid, in->verb[0] == 'r');
    } else if (strcmp(in->verb, "reclaim") == 0) {
        do_reclaim(a, in, out, cr->pid);
    } else if (strcmp(in->verb, "mps") == 0) {
        do_mps(a, in, out, cr);
    } else if (strcmp(in->verb, "release") == 0) {
        do_release(a, in, out, cr);
    } else if (strcmp(in->verb, "admit") == 0) {
        gf_admit_container(a, in, out, cr);
    } else if (strcmp(in->verb, "attach") == 0) {
        gf_attach_container(a, in, out, cr);
    } else if (gf_user_dispatch(a, in, out, cr)) {
        /* run, end: a local user's own fractions (user_admit.c) */
    } else {
        char m[160];
        snprintf(m, sizeof(m), "unknown verb %s (expected ping, borrow, return, reclaim, mps, release, admit, attach, run or end)",
                 in->verb);
        gf_reply_error(out, m);
    }
}

/* Serves one datagram from a connected client. Returns -1 when the client
 * went away (the caller closes it). */
int gf_server_serve(gf_agent *a, int fd)
{
    char buf[GF_PROTO_MAX + 1], reply[GF_PROTO_MAX];
    struct ucred cr;
    socklen_t crlen = sizeof(cr);
    gf_msg in, out;
    gf_error err;
    ssize_t n;
    int len;

    n = recv(fd, buf, sizeof(buf), MSG_TRUNC | MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
        return -1;
    if (n < 0)
        return 0;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) < 0)
        return -1;
    pthread_mutex_lock(&a->lock);
    a->requests_total++;
    if ((size_t)n > GF_PROTO_MAX) {
        a->requests_bad++;
        gf_reply_error(&out, "request longer than 4096 bytes");
    } else if (gf_msg_decode(buf, (size_t)n, &in, &err) < 0) {
        a->requests_bad++;
        gf_reply_error(&out, err.msg);
    } else {
        dispatch(a, &in, &out, &cr);
    }
    pthread_mutex_unlock(&a->lock);
    len = gf_msg_encode(&out, reply, sizeof(reply));
    if (len < 0)
        len = snprintf(reply, sizeof(reply), GF_PROTO_MAGIC " error msg=reply too long");
    /* never block on a client that does not read its replies */
    if (send(fd, reply, (size_t)len, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 && errno != EAGAIN)
        return -1;
    return 0;
}
