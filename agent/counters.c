/* SPDX-License-Identifier: Apache-2.0 */
/* Agent-wide counters outlive the fractions they counted, and restarts: they
 * are journaled (journal.c) when they change, at once for evictions and
 * watchdog kills, on the next tick for request counts, and in any case before
 * a metrics page shows them, so none is ever lower after a restart. */
#include "agent.h"

void gf_counters_save(gf_agent *a)
{
    gf_journal_counters(a);
}
