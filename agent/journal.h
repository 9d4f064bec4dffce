/* SPDX-License-Identifier: Apache-2.0 */
/* The agent's journal (journal.c). */
#ifndef GPUFRAC_AGENT_JOURNAL_H
#define GPUFRAC_AGENT_JOURNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent.h"

/* the agent's durable state in <state>/agent/journal, one line per
 * change (append + fdatasync), compacted at start and when it grows. */
int gf_journal_open(gf_agent *a, gf_error *err);
/* Appends one record; -1 when it could not be made durable (the journal is
 * then full until gf_journal_reserve finds room). */
int gf_journal(gf_agent *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Keeps space allocated past the journal's end, so records that give back
 * (return, evict, unsup) fit when the file system fills; when it cannot, or
 * the file system has less free than that reserve, the journal is full and
 * nothing new is granted. From the tick. */
void gf_journal_reserve(gf_agent *a);
/* -1 with why (and an event) when the journal is full: `what` (a loan, an
 * admission, a run) is not granted. */
int gf_journal_refuses(gf_agent *a, const char *what, gf_error *err);
void gf_journal_compact(gf_agent *a);
/* The agent-wide counters outlive the fractions they counted, and
 * restarts: they are journaled when they change, at once for evictions and
 * watchdog kills, on the next tick for request counts, and in any case
 * before a metrics page shows them, so none is ever lower after a restart.
 * Journals the agent-wide and per-GPU counters when they changed since the
 * last time (ticks alone excepted: an idle agent writes nothing). */
void gf_journal_counters(gf_agent *a);
/* Journals every counter the metrics page shows that the journal does not
 * hold yet, so no value a scrape saw is lost to a SIGKILL (counters never go
 * down across a restart). Call under a->lock, before the page is rendered. */
void gf_journal_exposed(gf_agent *a);
/* A fraction's own counters (watchdog kills, evictions per device): journaled
 * when they change, restored when the fraction is opened again. */
void gf_journal_fraction_counts(gf_agent *a, const gf_afraction *f);
void gf_journal_restore_counts(gf_agent *a, gf_afraction *f);
/* The supervisor the journal recorded for a fraction (consumed on open). */
bool gf_journal_supervisor(gf_agent *a, const char *name, pid_t *pid, uint64_t *start,
                           bool *admitted);

/* test builds only: GPUFRAC_TEST_CRASH_AT=<step> SIGKILLs the agent there */
#ifdef GF_TEST_HOOKS
void gf_test_crash_point(const char *step);
#else
#define gf_test_crash_point(step) ((void)0)
#endif

#endif
