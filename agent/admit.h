/* Container fractions (for gpufrac-runtime): admit, attach, release,
 * reconcile. See admit.c. */
#ifndef GPUFRAC_AGENT_ADMIT_H
#define GPUFRAC_AGENT_ADMIT_H

#include <sys/socket.h>

#include "agent.h"
#include "proto.h"

void gf_reply_error(gf_msg *out, const char *msg);
void gf_admit_container(gf_agent *a, const gf_msg *in, gf_msg *out, const struct ucred *cr);
void gf_attach(gf_agent *a, const gf_msg *in, gf_msg *out, const struct ucred *cr, uint64_t fid);
/* Removes a fraction's directory and forgets it. */
void gf_release_fraction(gf_agent *a, gf_afraction *f);
/* Releases fractions whose supervisor and processes are all gone. */
void gf_release_stale(gf_agent *a);

#endif
