/* SPDX-License-Identifier: Apache-2.0 */
/* One agent per state directory (singleton.c). */
#ifndef GPUFRAC_AGENT_SINGLETON_H
#define GPUFRAC_AGENT_SINGLETON_H

#include "agent.h"

/* takes <state>/agent/lock for the process' life (after the
 * private directory is opened, before anything else in the state directory is
 * touched); fails naming the pid of the agent that holds it. */
int gf_agent_lock(gf_agent *a, gf_error *err);

#endif
