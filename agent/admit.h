/* SPDX-License-Identifier: Apache-2.0 */
/* Container fractions (for gpufrac-runtime): admit, attach, release,
 * reconcile. See admit.c. */
#ifndef GPUFRAC_AGENT_ADMIT_H
#define GPUFRAC_AGENT_ADMIT_H

#include <sys/socket.h>
#include <sys/types.h>

#include "agent.h"
#include "peer.h"
#include "proto.h"

void gf_reply_error(gf_msg *out, const char *msg);
/* name= mode= compute= devices=uuid/request/limit,... into cfg (no paths). */
int gf_admit_parse(const gf_msg *in, gf_fraction_config *cfg, gf_error *err);
/* Guarantees must fit each GPU; modes never share one. */
int gf_admit_check_fit(gf_agent *a, const gf_fraction_config *cfg, gf_error *err);
void gf_admit_container(gf_agent *a, const gf_msg *in, gf_msg *out, const gf_peer *cr);
void gf_attach(gf_agent *a, const gf_msg *in, gf_msg *out, const gf_peer *cr, uint64_t fid);
/* Makes host pid f's supervisor: pidfd watched by the loop, journaled. With
 * start != 0 the process must be the one that started then (a caller the
 * kernel named, peer.h); 0 only for a container's init the runtime names. */
int gf_attach_pid(gf_agent *a, gf_afraction *f, pid_t pid, uint64_t start, bool admitted,
                  gf_error *err);
/* True (an error in out) when pid already belongs to a fraction other than f
 * (NULL: to any): it is never re-attached elsewhere. */
bool gf_refuse_if_attributed(gf_agent *a, pid_t pid, const gf_afraction *f, gf_msg *out);
/* Removes <state>/fractions/name (renamed aside first, then emptied). */
void gf_remove_fraction_dir(gf_agent *a, const char *name);
/* Removes a fraction's directory and forgets it. */
void gf_release_fraction(gf_agent *a, gf_afraction *f);
/* Releases fractions whose supervisor and processes are all gone. */
void gf_release_stale(gf_agent *a);

#endif
