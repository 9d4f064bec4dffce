/* SPDX-License-Identifier: Apache-2.0 */
/* The agent's events as a test sees them: the real gf_agent_event
 * (agent/events.c) writes its log lines into a memory file the test makes
 * the agent's log (events.log is not written: no state directory). Include
 * from one source file of a test, after agent.h. */
#ifndef GPUFRAC_TEST_AGENT_EVENTS_H
#define GPUFRAC_TEST_AGENT_EVENTS_H

#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "agent.h"

static int events_fd = -1;

#define GF_UNUSED_OK __attribute__((unused))
static char events_text[1 << 16];

/* Points a's log at a new, empty memory file (forgetting earlier events). */
static void events_capture(gf_agent *a)
{
    if (events_fd >= 0)
        close(events_fd);
    events_fd = memfd_create("agent-events", MFD_CLOEXEC);
    a->log_fd = events_fd;
    a->state_dfd = -1;
}

static size_t events_read(void)
{
    ssize_t n = pread(events_fd, events_text, sizeof(events_text) - 1, 0);

    events_text[n > 0 ? n : 0] = '\0';
    return n > 0 ? (size_t)n : 0;
}

/* How many events there were since events_capture. */
GF_UNUSED_OK static int events_count(void)
{
    int n = 0;

    events_read();
    for (const char *p = events_text; (p = strchr(p, '\n')); p++)
        n++;
    return n;
}

/* The text of the last event ("" when none), without the log line's prefix. */
GF_UNUSED_OK static const char *events_last(void)
{
    static char last[1024];
    size_t len = events_read();
    char *line, *text;

    last[0] = '\0';
    if (len == 0)
        return last;
    events_text[len - 1] = '\0'; /* the last newline */
    line = strrchr(events_text, '\n');
    line = line ? line + 1 : events_text;
    text = strstr(line, ": ");
    snprintf(last, sizeof(last), "%.1023s", text ? text + 2 : line);
    return last;
}

#endif
