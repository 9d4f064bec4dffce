/* SPDX-License-Identifier: Apache-2.0 */
/* What /metrics shows, copied out of the agent's state by the loop that owns
 * it (gf_metrics_publish: at every tick, and when fractions come or go), so a
 * scrape formats the page without a->lock and never holds up admission or
 * lending. A published snapshot is never written again: readers take a
 * reference under a lock held only for the pointer swap or the reference,
 * and the last one to let go frees it. */
#ifndef GPUFRAC_AGENT_METRICS_SNAPSHOT_H
#define GPUFRAC_AGENT_METRICS_SNAPSHOT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "agent.h"
#include "metrics_idents.h"
#include "metrics_refusals.h"

typedef struct gf_msnap_fraction {
    char name[GF_NAME_MAX];
    char ns[64], pod[128], container[64]; /* pod "" outside Kubernetes */
    uid_t owner;                          /* the ledger's owner at open */
    bool owner_known;                     /* false: no ledger open ("unknown") */
} gf_msnap_fraction;

/* One (fraction, GPU of the node its config covers) pair. */
typedef struct gf_msnap_row {
    uint32_t fraction, gpu; /* indexes into the snapshot's fractions and gpus */
    uint64_t request, limit, accounted, driver, burst, denied, evictions, watchdog_kills;
} gf_msnap_row;

typedef struct gf_msnap_gpu {
    int index;
    char uuid[GF_UUID_MAX];
    char name[96];
    uint64_t total, guaranteed, used, lent, mps_restarts;
    bool mps_up;
} gf_msnap_gpu;

typedef struct gf_msnap {
    atomic_int refs;
    char host[256]; /* dcgm-exporter's Hostname */
    int n_gpus;
    gf_msnap_gpu gpus[GF_AGENT_GPUS_MAX];
    size_t n_fractions, n_rows;
    gf_msnap_fraction *fractions; /* in the same allocation as the snapshot */
    gf_msnap_row *rows;           /* grouped by fraction, in the agent's order */
    uint64_t requests_total, requests_bad, evictions_total, watchdog_kills_total, ticks;
    time_t last_tick;
    size_t n_idents; /* oldest first */
    gf_ident_count idents[GF_IDENTS_MAX];
    gf_refusals refusals;
} gf_msnap;

/* The latest published snapshot with a reference taken, or NULL before the
 * first. */
gf_msnap *gf_msnap_acquire(gf_agent *a);
void gf_msnap_release(gf_msnap *s);

/* copies what /metrics shows out of a (a->lock held:
 * the loop, at every tick and when fractions came or went) and makes it the
 * page's; a page is at most one watchdog period (plus a tick) old. */
int gf_metrics_publish(gf_agent *a, gf_error *err);
void gf_metrics_unpublish(gf_agent *a); /* drops the agent's reference */
/* Publishes when fractions changed (or a change waits) and none was
 * published in the last 20 ms (a->lock held); the loop's alone. */
void gf_metrics_publish_soon(gf_agent *a, bool changed);
/* Whether a change waits for gf_metrics_publish_soon (read without a->lock). */
bool gf_metrics_publish_pending(void);

#endif
