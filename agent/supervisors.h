/* SPDX-License-Identifier: Apache-2.0 */
/* A fraction's supervisor: the host process the agent attached (gpufrac run,
 * or a container's init the runtime named), held by a pidfd the loop watches
 * as (GF_EV_SUP, fid) and journaled, so attribution (attrib.c) survives a
 * restart (registry.c restores it from the journal when it opens the
 * fraction). Attaching and losing one are written here only. */
#ifndef GPUFRAC_AGENT_SUPERVISORS_H
#define GPUFRAC_AGENT_SUPERVISORS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent.h"

/* Makes host pid f's supervisor: pidfd watched by the loop, journaled. With
 * start != 0 the process must be the one that started then (a caller the
 * kernel named, peer.h); 0 only for a container's init the runtime names. */
int gf_sup_attach(gf_agent *a, gf_afraction *f, pid_t pid, uint64_t start, bool admitted,
                  gf_error *err);
/* f's supervisor is gone: its pidfd is unwatched and closed (the record of
 * who it was stays, for stale release). */
void gf_sup_lost(gf_agent *a, gf_afraction *f);
/* Whether f has a supervisor that still runs. */
bool gf_sup_alive(const gf_afraction *f);

#endif
