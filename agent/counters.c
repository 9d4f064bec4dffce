/* Agent-wide counters outlive the fractions they counted, and restarts: they
 * are journaled (journal.c) when they change, at once for evictions and
 * watchdog kills, on the next tick for request counts. */
#include "agent.h"

void gf_counters_save(gf_agent *a)
{
    gf_journal_counters(a);
}
