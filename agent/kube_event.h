/* SPDX-License-Identifier: Apache-2.0 */
/* Warning Events on pods (kube_event.c). */
#ifndef GPUFRAC_AGENT_KUBE_EVENT_H
#define GPUFRAC_AGENT_KUBE_EVENT_H

#include <stdbool.h>
#include <sys/types.h>

#include "agent.h"

/* A Warning Event on the pod of a container fraction: why the agent
 * terminated one of its processes (the watchdog's kill or a reclaim). */
void gf_kube_event_terminated(gf_agent *a, const gf_afraction *f, pid_t pid, bool watchdog,
                              const char *reason);

#endif
