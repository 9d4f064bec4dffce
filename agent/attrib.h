/* SPDX-License-Identifier: Apache-2.0 */
/* Attribution (attrib.c). */
#ifndef GPUFRAC_AGENT_ATTRIB_H
#define GPUFRAC_AGENT_ATTRIB_H

#include <stdbool.h>
#include <sys/types.h>

#include "agent.h"

/* which fraction a host pid belongs to, from the kernel only: its
 * ancestry up to init (a supervisor the agent attached), else, for container
 * fractions, the supervisor's cgroup. -1: none. gf_attrib_dirty after the
 * supervisors or the fractions change. */
int gf_attribute(gf_agent *a, pid_t pid);
/* Whether a process found to be f's still runs (not its supervisor): a
 * fraction is not stale while one does, slot lock or not. */
bool gf_attrib_has_member(gf_agent *a, const gf_afraction *f);
void gf_attrib_dirty(void);
/* Fraction i's supervisor is new (no other fraction's slot moved): added
 * to the lookup without a rebuild. */
void gf_attrib_added(gf_agent *a, int i);

#endif
