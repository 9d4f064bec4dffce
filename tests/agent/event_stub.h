/* SPDX-License-Identifier: Apache-2.0 */
/* A stand-in for the agent's gf_agent_event, for tests that link only some
 * parts of the agent: keeps the text of the last event in last_event and
 * counts them in n_events (the test resets both). Include from one source
 * file of a test executable, after agent.h. */
#ifndef GPUFRAC_TEST_EVENT_STUB_H
#define GPUFRAC_TEST_EVENT_STUB_H

#include <stdarg.h>
#include <stdio.h>

#include "agent.h"

static char last_event[1024];
static int n_events;

void gf_agent_event(gf_agent *a, const char *fmt, ...)
{
    va_list ap;

    (void)a;
    va_start(ap, fmt);
    vsnprintf(last_event, sizeof(last_event), fmt, ap);
    va_end(ap);
    n_events++;
}

#endif
