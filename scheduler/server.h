/* SPDX-License-Identifier: Apache-2.0 */
/* The extender's HTTP endpoint (libmicrohttpd, a thread per connection):
 * POST <prefix>filter, <prefix>prioritize, <prefix>bind; GET /metrics,
 * /healthz. */
#ifndef GPUFRAC_SCHED_SERVER_H
#define GPUFRAC_SCHED_SERVER_H

#include "error.h"
#include "extender.h"

#define GF_SERVER_ADDR_MAX 160

typedef struct gf_server gf_server;

/* listen: "host:port", "[v6]:port" or ":port" (loopback); port 0 picks one.
 * prefix: the path the verbs hang under ("/" or e.g. "/gpufrac"). */
int gf_server_start(gf_server **out, gf_extender *x, const char *listen, const char *prefix,
                    gf_error *err);
/* The address actually bound ("127.0.0.1:41234"). */
const char *gf_server_address(const gf_server *s);
void gf_server_stop(gf_server *s);

#endif
