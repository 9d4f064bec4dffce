/* SPDX-License-Identifier: Apache-2.0 */
/* Evictions and watchdog kills by whom they hit (metrics_idents.c): a
 * container's namespace/pod/container, any other fraction's user. They
 * outlive the fraction, so Prometheus sees an eviction after the fraction is
 * gone; at most GF_IDENTS_MAX label sets, the oldest dropped first (those
 * never evicted nor killed before any other), so tenants cannot grow the
 * page. Journaled as they change ("icount"), restored at start: a restart
 * never lowers them. The loop's alone (a->lock held). */
#ifndef GPUFRAC_AGENT_METRICS_IDENTS_H
#define GPUFRAC_AGENT_METRICS_IDENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "agent.h"

#define GF_IDENTS_MAX 256
#define GF_IDENTS_LINE_MAX 1024 /* a record, %-encoded identity included */

typedef struct gf_ident {
    bool pod; /* ns/pod/container; else uid (uid_known) */
    char ns[64], pod_name[128], container[64];
    uid_t uid;
    bool uid_known; /* false: the fraction had no ledger open ("unknown") */
} gf_ident;

typedef struct gf_ident_count {
    gf_ident id;
    uint64_t evictions, kills;
    uint64_t seq;   /* when last opened or counted: the smallest is dropped first */
    bool journaled; /* the journal holds it as it is */
} gf_ident_count;

/* A fraction was opened (its identity read, its counts restored): its
 * label set is shown from now on (at 0 if it was never hit), so the first
 * eviction is an increase Prometheus sees. */
void gf_idents_opened(gf_agent *a, const gf_afraction *f);
/* f's counters (evictions, watchdog_kills) changed: what they grew by since
 * it was opened or last counted goes to its label set; true with the record
 * to journal at once in line (GF_IDENTS_LINE_MAX). */
bool gf_idents_counted(gf_agent *a, const gf_afraction *f, char *line, size_t len);
/* The record of a label set the journal does not hold yet (one shown at 0
 * since its fraction opened), marked as held; false when there is none.
 * Before a page shows them, so none a scrape saw is gone after a restart. */
bool gf_idents_unjournaled(char *line, size_t len);
/* The journal's "icount" record (replay) and the lines of a snapshot (every
 * label set, then all held). */
void gf_idents_replay(const char *line);
void gf_idents_write(FILE *fp);
/* Copies the label sets, oldest first, into out (GF_IDENTS_MAX entries). */
size_t gf_idents_copy(gf_ident_count *out);

#endif
