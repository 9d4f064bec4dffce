/* SPDX-License-Identifier: Apache-2.0 */
/* The connections of the agent's sockets: accept, one request per datagram
 * (core/proto.h), one reply each, now or later through a reply token.
 * It knows the transport and who connected (peer.h), no verb: what a request
 * asks is served by the function given to gf_conn_init (verbs.h). */
#ifndef GPUFRAC_AGENT_CONN_H
#define GPUFRAC_AGENT_CONN_H

#include <stdbool.h>
#include <stdint.h>

#include "agent.h"
#include "peer.h"
#include "proto.h"

/* Which socket a connection came through. */
typedef enum gf_socket_kind {
    GF_SOCKET_ROOT = 1,     /* the agent's own (root's alone) */
    GF_SOCKET_FRACTION = 2, /* <state>/fractions/<name>/agent.sock */
    GF_SOCKET_USERS = 4,    /* <state>/users.sock (anyone's) */
} gf_socket_kind;

/* A late reply's address: a connection slot and the generation that tells
 * it from a later connection in the same slot. Opaque to its holders. */
typedef struct gf_reply_token {
    int slot;
    uint64_t gen;
} gf_reply_token;

typedef struct gf_request {
    const gf_peer *peer; /* the process that connected, as the kernel said */
    gf_socket_kind socket;
    uint64_t fid; /* the fraction whose socket it came through; 0 for others */
    gf_reply_token token;
    bool deferred; /* set by a handler that answers later through token */
} gf_request;

/* Serves one decoded request into out (a->lock held), or sets r->deferred. */
typedef void (*gf_conn_serve_fn)(gf_agent *a, gf_request *r, const gf_msg *in, gf_msg *out);

void gf_conn_init(gf_conn_serve_fn serve);
/* Accepts what waits on listening socket lfd (of fraction fid when socket is
 * GF_SOCKET_FRACTION). */
void gf_conn_accept(gf_agent *a, int lfd, gf_socket_kind socket, uint64_t fid);
/* The loop's function for connections (watched as GF_EV_CLIENT, id = slot). */
void gf_conn_ready(void *agent, uint64_t slot, uint32_t events);
/* Closes connections idle for longer than a->client_idle_s. */
void gf_conn_sweep(gf_agent *a);
/* Sends a deferred reply; nothing when that connection has gone meanwhile. */
void gf_conn_reply(gf_agent *a, gf_reply_token t, const gf_msg *out);
void gf_reply_error(gf_msg *out, const char *msg);

#endif
