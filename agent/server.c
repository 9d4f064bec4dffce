/* SPDX-License-Identifier: Apache-2.0 */
/* The agent's sockets: one request per datagram (core/proto.h). Callers are
 * who the kernel says they are (peer.h: the credentials and a pidfd of the
 * process that connected, taken at accept; a request from a connection whose
 * process is gone is refused, so a reused pid speaks for nobody), and belong to
 * the fraction the agent attributes them to (attrib.c), never to what they
 * claim or what a ledger says. Connections come through root's socket or a
 * fraction's own; each socket has its own bound of connections (the oldest
 * idle one of that socket makes room), idle ones time out, so one tenant
 * cannot starve another's borrow or the runtime's admission. Bad requests get
 * an error reply; nothing a client sends can stop the loop. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "admit.h"
#include "agent.h"
#include "peer.h"
#include "proto.h"
#include "server.h"
#include "statedir.h"
#include "terminated.h"
#include "user_admit.h"

typedef struct client {
    int fd;           /* -1: free */
    uint64_t fid;     /* the fraction whose socket it came through; 0: root's */
    uint64_t gen;     /* tells a reused slot from the client a late reply was for */
    int64_t last;     /* last request, CLOCK_MONOTONIC ms */
    bool waiting;     /* a reclaim answers it later */
    gf_peer peer;     /* the process that connected (its pidfd is the client's) */
} client;

static client clients[GF_AGENT_CLIENTS_MAX];
static int n_clients;
static uint64_t gens;

typedef struct req {
    const gf_peer *cr;
    uint64_t fid;
    int client;
    bool deferred;
} req;

void gf_server_init(void)
{
    for (int i = 0; i < GF_AGENT_CLIENTS_MAX; i++)
        clients[i].fd = -1;
}

int gf_server_listen(gf_agent *a, gf_error *err)
{
    char def[GF_PATH_MAX + 16];
    snprintf(def, sizeof(def), "%s/" GF_STATE_AGENT_SOCK, a->state_dir);
    if (strcmp(def, a->socket_path) == 0)
        return gf_socket_listen_in(a, a->state_dfd, GF_STATE_AGENT_SOCK, 0, err);
    return gf_socket_listen(a->socket_path, 0, err); /* a path the administrator chose */
}

void gf_reply_error(gf_msg *out, const char *msg)
{
    gf_msg_init(out, "error");
    gf_msg_add(out, "msg", msg);
}

static void drop(gf_agent *a, int i)
{
    epoll_ctl(a->loop_epfd, EPOLL_CTL_DEL, clients[i].fd, NULL);
    close(clients[i].fd);
    close(clients[i].peer.pidfd);
    clients[i].fd = -1;
    n_clients--;
}

/* Room in the bucket of socket fid: past its bound, its least recently
 * active client (not one waiting for a reclaim) goes. */
static bool make_room(gf_agent *a, uint64_t fid)
{
    int in_bucket = 0, oldest = -1;
    for (int i = 0; i < GF_AGENT_CLIENTS_MAX; i++) {
        if (clients[i].fd < 0 || clients[i].fid != fid)
            continue;
        in_bucket++;
        if (!clients[i].waiting && (oldest < 0 || clients[i].last < clients[oldest].last))
            oldest = i;
    }
    if (in_bucket < GF_AGENT_CLIENTS_PER_FRACTION)
        return true;
    if (oldest < 0)
        return false;
    drop(a, oldest);
    return true;
}

void gf_server_accept(gf_agent *a, int lfd, uint64_t fid)
{
    for (int burst = 0; burst < 64; burst++) {
        int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK), i;
        gf_peer peer;
        if (c < 0)
            return;
        /* a connection whose process is gone already is nobody's */
        if (gf_peer_of(c, &peer) < 0) {
            close(c);
            continue;
        }
        if (!make_room(a, fid) || n_clients >= GF_AGENT_CLIENTS_MAX) {
            close(peer.pidfd);
            close(c); /* the client sees the connection close */
            continue;
        }
        for (i = 0; clients[i].fd >= 0; i++)
            ;
        clients[i] = (client){.fd = c, .fid = fid, .gen = ++gens, .last = gf_now_ms(),
                              .peer = peer};
        n_clients++;
        gf_loop_watch(a, c, GF_EV(GF_EV_CLIENT, i));
    }
}

void gf_server_sweep(gf_agent *a)
{
    int64_t cut = gf_now_ms() - (int64_t)a->client_idle_s * 1000;
    for (int i = 0; i < GF_AGENT_CLIENTS_MAX && n_clients; i++)
        if (clients[i].fd >= 0 && !clients[i].waiting && clients[i].last < cut)
            drop(a, i);
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

/* The fraction the caller belongs to, as the agent attributes it; through a
 * fraction's socket it must be that fraction. */
static gf_afraction *caller_fraction(gf_agent *a, const req *r, gf_msg *out)
{
    gf_afraction *f = r->fid ? gf_registry_find_fid(a, r->fid) : NULL;
    int i = gf_attribute(a, r->cr->pid);

    if (r->fid && !f) {
        gf_reply_error(out, "this socket's fraction is gone");
        return NULL;
    }
    if (i < 0 || (f && &a->fractions[i] != f)) {
        char m[256];
        snprintf(m, sizeof(m), "the caller is not a process of %s%s (it must descend from the "
                 "fraction's supervisor, which gpufrac run or the container runtime attaches)",
                 f ? "fraction " : "any fraction", f ? f->cfg.name : "");
        gf_reply_error(out, m);
        return NULL;
    }
    return &a->fractions[i];
}

static void do_borrow(gf_agent *a, const gf_msg *in, gf_msg *out, const req *r, bool give_back)
{
    gf_error err;
    uint64_t bytes, granted = 0;
    gf_afraction *f;
    int g, pidfd;

    if ((g = gpu_of(a, in, out)) < 0)
        return;
    if (gf_msg_get_u64(in, "bytes", &bytes, &err) < 0)
        return gf_reply_error(out, err.msg);
    gf_registry_scan_if_changed(a, &err);
    /* the connection's own pidfd: the loan is the connecting process's, and
     * its number cannot be reused while the loan holds it */
    if ((pidfd = fcntl(r->cr->pidfd, F_DUPFD_CLOEXEC, 0)) < 0)
        return gf_reply_error(out, "the caller exited");
    if (!(f = caller_fraction(a, r, out))) {
        close(pidfd);
        return;
    }
    if (give_back) {
        close(pidfd);
        gf_return_loan(a, f, r->cr->pid, g, bytes);
        gf_msg_init(out, "ok");
        return;
    }
    if (gf_lend(a, f, r->cr->pid, pidfd, g, bytes, &granted, &err) < 0)
        return gf_reply_error(out, err.msg);
    gf_msg_init(out, "ok");
    gf_msg_add_u64(out, "granted", granted);
}

static void do_reclaim(gf_agent *a, const gf_msg *in, gf_msg *out, req *r)
{
    const gf_config_device *cd;
    gf_afraction *f;
    gf_error err;
    uint64_t bytes;
    int g;

    if ((g = gpu_of(a, in, out)) < 0)
        return;
    if (gf_msg_get_u64(in, "bytes", &bytes, &err) < 0)
        return gf_reply_error(out, err.msg);
    gf_registry_scan_if_changed(a, &err);
    if (!(f = caller_fraction(a, r, out)))
        return;
    if (!(cd = gf_aconfig_device(&f->cfg, a->gpus[g].uuid)))
        return gf_reply_error(out, "only a fraction guaranteed memory on this GPU may reclaim");
    if (bytes > cd->request)
        bytes = cd->request; /* nobody takes back more than its own guarantee */
    /* the driver has the memory already: nobody is evicted for nothing */
    if (gf_agent_nvml_refresh(a, &err) == 0 && a->gpus[g].total > a->gpus[g].used &&
        a->gpus[g].total - a->gpus[g].used >= bytes) {
        gf_msg_init(out, "ok");
        gf_msg_add_u64(out, "evicted", 0);
        return;
    }
    gf_terminated_cause(f->cfg.name); /* the "who" of the victims' reason lines */
    int rc = gf_reclaim_start(a, g, bytes, r->client, clients[r->client].gen, &err);
    gf_terminated_cause(NULL);
    if (rc < 0)
        return gf_reply_error(out, err.msg);
    r->deferred = true; /* answered when the borrowers are gone */
}

/* Is pid the live supervisor the agent attached to an sm-sharing fraction on GPU g? */
static bool supervises_sm(gf_agent *a, pid_t pid, int g)
{
    for (int i = 0; i < a->n_fractions; i++) {
        const gf_afraction *f = &a->fractions[i];
        if (f->supervisor == pid && f->sup_pidfd >= 0 && f->cfg.mode == GF_MODE_SM_SHARING &&
            gf_aconfig_device(&f->cfg, a->gpus[g].uuid))
            return true;
    }
    return false;
}

static void do_mps(gf_agent *a, const gf_msg *in, gf_msg *out, const req *r)
{
    char pipe[GF_PATH_MAX];
    gf_error err;
    int g;

    if ((g = gpu_of(a, in, out)) < 0)
        return;
    gf_registry_scan_if_changed(a, &err);
    if (r->cr->uid != 0 && !supervises_sm(a, r->cr->pid, g))
        return gf_reply_error(out, "only root or the supervisor of an sm-sharing fraction on this "
                                "GPU may ask for its MPS daemon");
    if (gf_mps_ensure(a, g, pipe, sizeof(pipe), &err) < 0)
        return gf_reply_error(out, err.msg);
    gf_msg_init(out, "ok");
    gf_msg_add(out, "pipe", pipe);
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

/* Before a fraction stops: MPS terminates its clients (sm-sharing). Its
 * supervisor or root may ask; only root, on root's socket (the runtime), may
 * remove a fraction (remove=1). */
static void do_release(gf_agent *a, const gf_msg *in, gf_msg *out, const req *r)
{
    const char *name = gf_msg_get(in, "name"), *remove = gf_msg_get(in, "remove");
    bool drop_it = remove && strcmp(remove, "1") == 0;
    pid_t pids[256];
    gf_afraction *f;
    gf_error err;
    int n = 0;

    if (drop_it && (r->cr->uid != 0 || r->fid != 0))
        return gf_reply_error(out, "only root on the agent's own socket (the container runtime) "
                                   "may remove a fraction");
    gf_registry_scan_if_changed(a, &err);
    if (!name || !(f = gf_registry_find_name_fresh(a, name))) {
        if (!drop_it)
            return gf_reply_error(out, "name= names no fraction of this node");
        gf_msg_init(out, "ok"); /* already gone: releasing twice is fine */
        return;
    }
    if (r->cr->uid != 0 && (r->cr->pid != f->supervisor || f->sup_pidfd < 0 ||
                            (r->fid && r->fid != f->fid)))
        return gf_reply_error(out, "only the fraction's supervisor or root may release it");
    for (int g = 0; g < a->n_gpus && f->cfg.mode == GF_MODE_SM_SHARING; g++) {
        int k;
        if (!gf_aconfig_device(&f->cfg, a->gpus[g].uuid))
            continue;
        k = driver_pids(a, f, g, pids, 256);
        if (k && gf_mps_terminate_clients(a, g, pids, k, &err) < 0)
            return gf_reply_error(out, err.msg);
        n += k;
    }
    if (n)
        gf_agent_event(a, "release: MPS terminated %d client(s) of fraction %s", n, name);
    if (drop_it)
        gf_release_fraction(a, f);
    gf_msg_init(out, "ok");
    gf_msg_add_u64(out, "clients", (uint64_t)n);
}

/* users.sock: anyone's; only what a local user's gpufrac run needs to make
 * and end its fraction. Everything else goes through root's socket or the
 * fraction's own, never through this one. */
static void dispatch_users(gf_agent *a, const gf_msg *in, gf_msg *out, req *r)
{
    if (strcmp(in->verb, "ping") == 0) {
        gf_msg_init(out, "ok");
        gf_msg_add(out, "agent", "gpufracd");
    } else if (!gf_user_dispatch(a, in, out, r->cr)) {
        char m[160];
        snprintf(m, sizeof(m),
                 "%s is not served on " GF_STATE_USERS_SOCK " (expected ping, run or end)",
                 in->verb);
        gf_reply_error(out, m);
    }
}

static void dispatch(gf_agent *a, const gf_msg *in, gf_msg *out, req *r)
{
    if (r->fid == GF_FID_USERS) {
        dispatch_users(a, in, out, r);
    } else if (strcmp(in->verb, "ping") == 0) {
        gf_msg_init(out, "ok");
        gf_msg_add(out, "agent", "gpufracd");
        gf_msg_add_u64(out, "fractions", (uint64_t)a->n_fractions);
    } else if (strcmp(in->verb, "borrow") == 0 || strcmp(in->verb, "return") == 0) {
        do_borrow(a, in, out, r, in->verb[0] == 'r');
    } else if (strcmp(in->verb, "reclaim") == 0) {
        do_reclaim(a, in, out, r);
    } else if (strcmp(in->verb, "mps") == 0) {
        do_mps(a, in, out, r);
    } else if (strcmp(in->verb, "release") == 0) {
        do_release(a, in, out, r);
    } else if (strcmp(in->verb, "admit") == 0) {
        if (r->fid)
            return gf_reply_error(out, "admit is for root's socket (the container runtime)");
        gf_admit_container(a, in, out, r->cr);
    } else if (strcmp(in->verb, "attach") == 0) {
        gf_attach(a, in, out, r->cr, r->fid);
    } else if (r->fid == 0 && r->cr->uid == 0 && gf_user_dispatch(a, in, out, r->cr)) {
        /* root may end a user's fraction from its own socket too */
    } else {
        char m[160];
        snprintf(m, sizeof(m), "unknown verb %s (expected ping, borrow, return, reclaim, mps, "
                 "release, admit or attach)", in->verb);
        gf_reply_error(out, m);
    }
}

static int send_text(int fd, const char *text, size_t len)
{
    /* never block on a client that does not read its replies */
    if (send(fd, text, len, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 && errno != EAGAIN)
        return -1;
    return 0;
}

void gf_server_reply_to(gf_agent *a, int i, uint64_t gen, const char *text)
{
    if (i < 0 || i >= GF_AGENT_CLIENTS_MAX || clients[i].fd < 0 || clients[i].gen != gen)
        return; /* it hung up meanwhile */
    clients[i].waiting = false;
    clients[i].last = gf_now_ms();
    if (send_text(clients[i].fd, text, strlen(text)) < 0)
        drop(a, i);
}

/* The process that connected is gone and another (a child that inherited
 * the socket, or whoever now holds its pid) speaks on it: told why, dropped. */
static void refuse_orphan(gf_agent *a, int i)
{
    static const char msg[] = GF_PROTO_MAGIC " error msg=the process that opened this connection "
                              "has exited; the agent serves a connection to that process alone "
                              "(connect again)";
    pthread_mutex_lock(&a->lock);
    a->requests_total++;
    a->requests_bad++;
    pthread_mutex_unlock(&a->lock);
    send_text(clients[i].fd, msg, sizeof(msg) - 1);
    drop(a, i);
}

/* Serves what client i sent; drops it when it went away. */
void gf_server_client(gf_agent *a, int i, uint32_t events)
{
    char buf[GF_PROTO_MAX + 1], reply[GF_PROTO_MAX];
    gf_msg in, out;
    gf_error err;
    ssize_t n;
    int len;

    if (i < 0 || i >= GF_AGENT_CLIENTS_MAX || clients[i].fd < 0)
        return;
    for (int round = 0; round < 16; round++) { /* bounded: others get their turn */
        n = recv(clients[i].fd, buf, sizeof(buf), MSG_TRUNC | MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
            drop(a, i);
            return;
        }
        if (n < 0)
            break;
        if (!gf_peer_alive(&clients[i].peer)) {
            refuse_orphan(a, i);
            return;
        }
        req r = {.cr = &clients[i].peer, .fid = clients[i].fid, .client = i};
        clients[i].last = gf_now_ms();
        pthread_mutex_lock(&a->lock);
        a->requests_total++;
        if ((size_t)n > GF_PROTO_MAX) {
            a->requests_bad++;
            gf_reply_error(&out, "request longer than 4096 bytes");
        } else if (gf_msg_decode(buf, (size_t)n, &in, &err) < 0) {
            a->requests_bad++;
            gf_reply_error(&out, err.msg);
        } else if (clients[i].waiting) {
            gf_reply_error(&out, "a reclaim is still waiting for its answer on this connection");
        } else {
            dispatch(a, &in, &out, &r);
        }
        pthread_mutex_unlock(&a->lock);
        if (clients[i].fd < 0)
            return;
        if (r.deferred) {
            clients[i].waiting = true;
            continue;
        }
        len = gf_msg_encode(&out, reply, sizeof(reply));
        if (len < 0)
            len = snprintf(reply, sizeof(reply), GF_PROTO_MAGIC " error msg=reply too long");
        if (send_text(clients[i].fd, reply, (size_t)len) < 0) {
            drop(a, i);
            return;
        }
    }
    if (events & (EPOLLHUP | EPOLLERR))
        drop(a, i);
}
