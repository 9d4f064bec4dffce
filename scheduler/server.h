/* SPDX-License-Identifier: Apache-2.0 */
/* The extender's HTTP endpoint (libmicrohttpd, GF_SERVER_THREADS polling
 * threads for every connection, a bind's connection suspended until the API
 * server answers): POST <prefix>filter, <prefix>prioritize, <prefix>bind;
 * GET /metrics, /healthz. */
#ifndef GPUFRAC_SCHED_SERVER_H
#define GPUFRAC_SCHED_SERVER_H

#include "error.h"
#include "extender.h"

#define GF_SERVER_ADDR_MAX 160
/* MHD's pool: a filter or a page never waits behind another one's work (a
 * bind's own wait for the API server holds no thread) */
#define GF_SERVER_THREADS 2
/* libmicrohttpd's connection limit, and the binds that may wait for the API
 * server at once: a suspended bind keeps its connection until the answer
 * comes, so the rest of the limit stays for filter, prioritize and the
 * pages (a stalled API server would otherwise shut them all out) */
#define GF_SERVER_CONNECTIONS 256
#define GF_SERVER_BINDS_MAX 192

typedef struct gf_server gf_server;

/* listen: "host:port", "[v6]:port" or ":port" (loopback); port 0 picks one.
 * prefix: the path the verbs hang under ("/" or e.g. "/gpufrac"). */
int gf_server_start(gf_server **out, gf_extender *x, const char *listen, const char *prefix,
                    gf_error *err);
/* The address actually bound ("127.0.0.1:41234"). */
const char *gf_server_address(const gf_server *s);
void gf_server_stop(gf_server *s);

#endif
