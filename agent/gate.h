/* SPDX-License-Identifier: Apache-2.0 */
/* The tenant gate: who a caller is and what it names, judged from the
 * kernel's word and the agent's own record, never from what the caller says.
 * A request's caller is the process that connected (conn.h); its fraction is
 * the one the agent attributes that process to (attrib.c), and through a
 * fraction's socket it must be that fraction. Every verb that acts for a
 * tenant asks here first; each refusal is an error reply saying why. */
#ifndef GPUFRAC_AGENT_GATE_H
#define GPUFRAC_AGENT_GATE_H

#include <stdbool.h>

#include "agent.h"
#include "conn.h"

/* The node GPU dev= names, or -1 with an error in out. */
int gf_gate_gpu(gf_agent *a, const gf_msg *in, gf_msg *out);
/* The fraction the caller belongs to, or NULL with an error in out. */
gf_afraction *gf_gate_caller_fraction(gf_agent *a, const gf_request *r, gf_msg *out);
/* True (an error in out) when pid already belongs to a fraction other than f
 * (NULL: to any): it is never re-attached elsewhere. */
bool gf_gate_refuse_attributed(gf_agent *a, pid_t pid, const gf_afraction *f, gf_msg *out);

#endif
