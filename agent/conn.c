/* SPDX-License-Identifier: Apache-2.0 */
/* The agent's connections (conn.h). Callers are who the kernel says they are
 * (peer.h: the credentials and a pidfd of the process that connected, taken
 * at accept); a request on a connection whose process is gone is refused, so
 * a reused pid speaks for nobody. Each socket has its own bound of
 * connections (the oldest idle one of that socket makes room) and idle ones
 * time out, so one tenant cannot starve another's borrow or the runtime's
 * admission. A bad request gets an error reply; nothing a client sends can
 * stop the loop. */
#include "conn.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "loop.h"
#include "peer.h"
#include "proc.h"

typedef struct client {
    int fd; /* -1: free */
    gf_socket_kind socket;
    uint64_t fid; /* the fraction whose socket it came through */
    uint64_t gen; /* tells a reused slot from the client a late reply was for */
    int64_t last; /* last request, CLOCK_MONOTONIC ms */
    bool waiting; /* a deferred reply is owed to it */
    gf_peer peer; /* the process that connected (its pidfd is the client's) */
} client;

static client clients[GF_AGENT_CLIENTS_MAX];
static int n_clients;
static uint64_t gens;
static gf_conn_serve_fn serve_request;

void gf_conn_init(gf_conn_serve_fn serve)
{
    for (int i = 0; i < GF_AGENT_CLIENTS_MAX; i++)
        clients[i].fd = -1;
    serve_request = serve;
}

void gf_reply_error(gf_msg *out, const char *msg)
{
    gf_msg_init(out, "error");
    gf_msg_add(out, "msg", msg);
}

static void drop(gf_agent *a, int i)
{
    gf_loop_close(&a->loop, &clients[i].fd);
    close(clients[i].peer.pidfd);
    n_clients--;
}

/* The bucket of a connection: its socket, and for fractions' sockets the
 * fraction. */
static bool same_bucket(const client *c, gf_socket_kind socket, uint64_t fid)
{
    return c->socket == socket && c->fid == fid;
}

/* Room in the bucket: past its bound, its least recently active client (not
 * one owed a reply) goes. */
static bool make_room(gf_agent *a, gf_socket_kind socket, uint64_t fid)
{
    int in_bucket = 0, oldest = -1;
    for (int i = 0; i < GF_AGENT_CLIENTS_MAX; i++) {
        if (clients[i].fd < 0 || !same_bucket(&clients[i], socket, fid))
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

void gf_conn_accept(gf_agent *a, int lfd, gf_socket_kind socket, uint64_t fid)
{
    if (socket != GF_SOCKET_FRACTION)
        fid = 0;
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
        if (!make_room(a, socket, fid) || n_clients >= GF_AGENT_CLIENTS_MAX) {
            close(peer.pidfd);
            close(c); /* the client sees the connection close */
            continue;
        }
        for (i = 0; clients[i].fd >= 0; i++)
            ;
        clients[i] = (client){.fd = c,
                              .socket = socket,
                              .fid = fid,
                              .gen = ++gens,
                              .last = gf_now_ms(),
                              .peer = peer};
        n_clients++;
        gf_loop_watch(&a->loop, c, GF_EV_CLIENT, (uint64_t)i);
    }
}

void gf_conn_sweep(gf_agent *a)
{
    int64_t cut = gf_now_ms() - (int64_t)a->client_idle_s * 1000;
    for (int i = 0; i < GF_AGENT_CLIENTS_MAX && n_clients; i++)
        if (clients[i].fd >= 0 && !clients[i].waiting && clients[i].last < cut)
            drop(a, i);
}

static int send_text(int fd, const char *text, size_t len)
{
    /* never block on a client that does not read its replies */
    if (send(fd, text, len, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 && errno != EAGAIN)
        return -1;
    return 0;
}

/* out encoded, or an error saying it was too long. */
static int encode(const gf_msg *out, char *buf, size_t len)
{
    int n = gf_msg_encode(out, buf, len);

    if (n < 0)
        n = snprintf(buf, len, GF_PROTO_MAGIC " error msg=reply too long");
    return n;
}

void gf_conn_reply(gf_agent *a, gf_reply_token t, const gf_msg *out)
{
    char reply[GF_PROTO_MAX];
    int i = t.slot, len;

    if (i < 0 || i >= GF_AGENT_CLIENTS_MAX || clients[i].fd < 0 || clients[i].gen != t.gen)
        return; /* it hung up meanwhile */
    clients[i].waiting = false;
    clients[i].last = gf_now_ms();
    len = encode(out, reply, sizeof(reply));
    if (send_text(clients[i].fd, reply, (size_t)len) < 0)
        drop(a, i);
}

/* The process that connected is gone and another (a child that inherited
 * the socket, or whoever now holds its pid) speaks on it: told why, dropped. */
static void refuse_orphan(gf_agent *a, int i)
{
    static const char msg[] = GF_PROTO_MAGIC
        " error msg=the process that opened this connection "
        "has exited; the agent serves a connection to that process alone "
        "(connect again)";
    pthread_mutex_lock(&a->lock);
    a->requests_total++;
    a->requests_bad++;
    pthread_mutex_unlock(&a->lock);
    send_text(clients[i].fd, msg, sizeof(msg) - 1);
    drop(a, i);
}

/* Decodes one datagram of n bytes and serves it into out (a->lock held). */
static void serve(gf_agent *a, client *c, gf_request *r, const char *buf, ssize_t n, gf_msg *out)
{
    gf_error err;
    gf_msg in;

    a->requests_total++;
    if ((size_t)n > GF_PROTO_MAX) {
        a->requests_bad++;
        gf_reply_error(out, "request longer than 4096 bytes");
    } else if (gf_msg_decode(buf, (size_t)n, &in, &err) < 0) {
        a->requests_bad++;
        gf_reply_error(out, err.msg);
    } else if (c->waiting) {
        gf_reply_error(out, "a reclaim is still waiting for its answer on this connection");
    } else {
        serve_request(a, r, &in, out);
    }
}

/* Serves what client i sent; drops it when it went away. */
void gf_conn_ready(void *agent, uint64_t slot, uint32_t events)
{
    char buf[GF_PROTO_MAX + 1], reply[GF_PROTO_MAX];
    gf_agent *a = agent;
    int i = (int)slot, len;
    gf_msg out;
    ssize_t n;

    if (slot >= GF_AGENT_CLIENTS_MAX || clients[i].fd < 0)
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
        gf_request r = {.peer = &clients[i].peer,
                        .socket = clients[i].socket,
                        .fid = clients[i].fid,
                        .token = {i, clients[i].gen}};
        clients[i].last = gf_now_ms();
        pthread_mutex_lock(&a->lock);
        serve(a, &clients[i], &r, buf, n, &out);
        pthread_mutex_unlock(&a->lock);
        if (clients[i].fd < 0)
            return;
        if (r.deferred) {
            clients[i].waiting = true;
            continue;
        }
        len = encode(&out, reply, sizeof(reply));
        if (send_text(clients[i].fd, reply, (size_t)len) < 0) {
            drop(a, i);
            return;
        }
    }
    if (events & (EPOLLHUP | EPOLLERR))
        drop(a, i);
}
