/* SPDX-License-Identifier: Apache-2.0 */
/* The verbs of the agent's sockets, in one table: the verb, the sockets it
 * is served on, who may call it there, and its handler (in its domain's
 * file). A verb not served on a socket is refused there, saying what is. */
#ifndef GPUFRAC_AGENT_VERBS_H
#define GPUFRAC_AGENT_VERBS_H

#include "agent.h"
#include "conn.h"

/* gf_conn_init's serve function. */
void gf_verbs_serve(gf_agent *a, gf_request *r, const gf_msg *in, gf_msg *out);

#endif
