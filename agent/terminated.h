/* SPDX-License-Identifier: Apache-2.0 */
/* Why the agent terminated a process, told to the process's owner.
 *
 *   <fraction dir>/terminated   one line per process the agent terminated:
 *       pid=<host pid> by=reclaim|watchdog gpu=<index> uuid=<UUID> time=<unix> reason=<text>
 *
 * Written only by the agent (it owns the fraction directory; the file is
 * created 0644 with O_NOFOLLOW and never read back by the agent), read by
 * `gpufrac run`, which prints the reason, and by `gpufrac status`. Everything
 * in it comes from the agent's own decision, never from tenant data. */
#ifndef GPUFRAC_AGENT_TERMINATED_H
#define GPUFRAC_AGENT_TERMINATED_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent.h"

typedef enum gf_term_cause {
    GF_TERM_RECLAIM,  /* its burst loan was taken back for a guaranteed owner */
    GF_TERM_WATCHDOG, /* the driver reported more than the fraction's limit */
} gf_term_cause;

/* Names the fraction whose allocation caused the next reclaims (until
 * cleared with NULL): the "who" of the reason line. */
void gf_terminated_cause(const char *who);

/* Records that pid of fraction f was terminated on GPU gpu. For a reclaim,
 * bytes is the loan taken back; for the watchdog, bytes is the driver's
 * figure for the fraction on that GPU and limit its limit there. Also counts
 * the kill per GPU for the metrics (f->watchdog_kills_gpu). */
void gf_terminated_record(gf_agent *a, gf_afraction *f, pid_t pid, int gpu, gf_term_cause by,
                          uint64_t bytes, uint64_t limit);

#endif
