/* SPDX-License-Identifier: Apache-2.0 */
/* The watchdog (watchdog.c). */
#ifndef GPUFRAC_AGENT_WATCHDOG_H
#define GPUFRAC_AGENT_WATCHDOG_H

#include <stdint.h>

#include "agent.h"

/* compares NVML per-process memory with each fraction's bound;
 * terminates a process of a fraction whose driver-measured footprint on a
 * GPU passes it. The bound is the config's limit (or, for a fraction that
 * borrows from this agent, request + what the agent lent it), plus one
 * tolerance per GPU (gf_watchdog_tolerance). Call with a->lock held. */
#define GF_WATCHDOG_TOLERANCE_MIN (64ULL << 20)
uint64_t gf_watchdog_tolerance(const gf_agent *a, int gpu);
int gf_watchdog_tick(gf_agent *a, gf_error *err);

#endif
