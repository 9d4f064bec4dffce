/* SPDX-License-Identifier: Apache-2.0 */
/* The agent's events (events.c). */
#ifndef GPUFRAC_AGENT_EVENTS_H
#define GPUFRAC_AGENT_EVENTS_H

#include "agent.h"

/* one line per reclaim/eviction/kill in the log and events.log
 * (bounded and rotated; lines of one fmt rate-limited). gf_events_flush, at
 * every tick, says how many lines were suppressed. */
void gf_agent_event(gf_agent *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void gf_events_flush(gf_agent *a);

#endif
