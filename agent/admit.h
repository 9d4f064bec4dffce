/* SPDX-License-Identifier: Apache-2.0 */
/* Container fractions (for gpufrac-runtime): admit, attach, release,
 * reconcile. See admit.c. */
#ifndef GPUFRAC_AGENT_ADMIT_H
#define GPUFRAC_AGENT_ADMIT_H

#include "agent.h"
#include "conn.h"

/* name= mode= compute= devices=uuid/request/limit,... into cfg (no paths). */
int gf_admit_parse(const gf_msg *in, gf_fraction_config *cfg, gf_error *err);
/* Guarantees must fit each GPU; modes never share one. */
int gf_admit_check_fit(gf_agent *a, const gf_fraction_config *cfg, gf_error *err);
/* The verbs admit, attach and release (verbs.c). */
void gf_serve_admit(gf_agent *a, gf_request *r, const gf_msg *in, gf_msg *out);
void gf_serve_attach(gf_agent *a, gf_request *r, const gf_msg *in, gf_msg *out);
void gf_serve_release(gf_agent *a, gf_request *r, const gf_msg *in, gf_msg *out);

#endif
