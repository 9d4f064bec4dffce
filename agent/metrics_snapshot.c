/* SPDX-License-Identifier: Apache-2.0 */
/* The /metrics snapshot (metrics_snapshot.h): taken by the loop under
 * a->lock, swapped in under swap_lock, which guards only a->msnap and the
 * taking of a reference; nothing else is done while it is held. One
 * allocation per snapshot (the header, then the fractions, then the rows), so
 * taking one costs a malloc and a copy of what the page shows. */
#include "metrics_snapshot.h"

#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fraction.h"
#include "journal.h"
#include "proc.h"
#include "usernames.h"

static pthread_mutex_t swap_lock = PTHREAD_MUTEX_INITIALIZER;

static size_t count_rows(const gf_agent *a)
{
    size_t n = 0;

    for (int i = 0; i < a->n_fractions; i++)
        for (int g = 0; g < a->n_gpus; g++)
            n += gf_aconfig_device(&a->fractions[i].cfg, a->gpus[g].dev.uuid) != NULL;
    return n;
}

/* Fixed arrays of the same size as the fraction's (a memcpy each: a
 * thousand snprintf would be most of a snapshot's cost). */
_Static_assert(sizeof(((gf_msnap_fraction *)0)->name) == sizeof(((gf_aconfig *)0)->name), "name");
_Static_assert(sizeof(((gf_msnap_fraction *)0)->ns) == sizeof(((gf_afraction *)0)->ns), "ns");
_Static_assert(sizeof(((gf_msnap_fraction *)0)->pod) == sizeof(((gf_afraction *)0)->pod), "pod");
_Static_assert(sizeof(((gf_msnap_fraction *)0)->container) ==
                   sizeof(((gf_afraction *)0)->container),
               "container");

static void copy_fraction(gf_msnap_fraction *out, const gf_afraction *f)
{
    memcpy(out->name, f->cfg.name, sizeof(out->name));
    memcpy(out->ns, f->ns, sizeof(out->ns));
    memcpy(out->pod, f->pod, sizeof(out->pod));
    memcpy(out->container, f->container, sizeof(out->container));
    out->owner = f->owner;
    out->owner_known = f->ledger_fd >= 0;
}

/* The values of fraction f on node GPU g through config device cd. */
static void copy_row(gf_msnap_row *w, const gf_afraction *f, int g, const gf_config_device *cd)
{
    /* the agent's private copy (ledger_view.h), its lent/evictions the agent's own */
    const gf_ledger_device *ld = gf_fraction_ledger_device(f, g, true, NULL);
    size_t d = (size_t)(cd - f->cfg.devices);

    w->request = cd->request;
    w->limit = cd->limit;
    w->driver = f->driver_used[d];
    w->accounted = ld ? atomic_load(&ld->used) : 0;
    w->burst = ld ? atomic_load(&ld->lent) : 0;
    w->denied = ld ? atomic_load(&ld->denied) : 0;
    w->evictions = f->evictions[d];
    /* one GPU: the fraction's journaled count, which survives restarts;
     * several: the agent's own per-GPU count since it started */
    w->watchdog_kills = f->cfg.n_devices == 1 ? f->watchdog_kills : f->watchdog_kills_gpu[d];
}

static void copy_gpu(gf_msnap_gpu *out, const gf_agent_gpu *g)
{
    out->index = g->dev.index;
    snprintf(out->uuid, sizeof(out->uuid), "%s", g->dev.uuid);
    snprintf(out->name, sizeof(out->name), "%s", g->dev.name);
    out->total = g->dev.total;
    out->guaranteed = g->guaranteed;
    out->used = g->dev.used;
    out->lent = g->lent;
    out->mps_up = g->mps_running && !g->mps_fault;
    out->mps_restarts = g->mps_restarts;
}

static void copy_agent(gf_msnap *s, const gf_agent *a)
{
    char name[GF_USERNAME_MAX];

    /* dcgm-exporter's Hostname: the node's name where the agent publishes one */
    if (a->node_name[0])
        snprintf(s->host, sizeof(s->host), "%s", a->node_name);
    else if (gethostname(s->host, sizeof(s->host) - 1) < 0)
        snprintf(s->host, sizeof(s->host), "unknown");
    s->n_gpus = a->n_gpus;
    for (int g = 0; g < a->n_gpus; g++)
        copy_gpu(&s->gpus[g], &a->gpus[g]);
    s->requests_total = a->requests_total;
    s->requests_bad = a->requests_bad;
    s->evictions_total = a->evictions_total;
    s->watchdog_kills_total = a->watchdog_kills_total;
    s->ticks = a->ticks;
    s->last_tick = a->last_tick;
    s->n_idents = gf_idents_copy(s->idents);
    for (size_t i = 0; i < s->n_idents; i++) /* as warm_name: gone fractions' users too */
        if (!s->idents[i].id.pod && s->idents[i].id.uid_known)
            gf_username(s->idents[i].id.uid, name, sizeof(name));
    s->refusals = gf_refusals_now;
}

/* Has the owner's name looked up now, not at the first scrape, so the page
 * a scraper first sees (after a restart too) already carries it. */
static void warm_name(const gf_afraction *f)
{
    char name[GF_USERNAME_MAX];

    if (f->ledger_fd >= 0)
        gf_username(f->owner, name, sizeof(name));
}

static gf_msnap *take(const gf_agent *a, gf_error *err)
{
    size_t nf = (size_t)a->n_fractions, nr = count_rows(a), align = alignof(gf_msnap_row);
    size_t rows_at = (sizeof(gf_msnap) + nf * sizeof(gf_msnap_fraction) + align - 1) / align *
                     align;
    gf_msnap *s = calloc(1, rows_at + nr * sizeof(gf_msnap_row));

    if (!s) {
        gf_error_set(err, GF_ENOSPACE, "metrics snapshot of %zu fractions: out of memory", nf);
        return NULL;
    }
    atomic_init(&s->refs, 1);
    s->fractions = (gf_msnap_fraction *)(s + 1);
    s->rows = (void *)((char *)s + rows_at); /* rows_at is a multiple of their alignment */
    s->n_fractions = nf;
    copy_agent(s, a);
    for (size_t i = 0; i < nf; i++) {
        const gf_afraction *f = &a->fractions[i];
        copy_fraction(&s->fractions[i], f);
        warm_name(f);
        for (int g = 0; g < a->n_gpus; g++) {
            const gf_config_device *cd = gf_aconfig_device(&f->cfg, a->gpus[g].dev.uuid);
            if (!cd)
                continue;
            gf_msnap_row *w = &s->rows[s->n_rows++];
            w->fraction = (uint32_t)i;
            w->gpu = (uint32_t)g;
            copy_row(w, f, g, cd);
        }
    }
    return s;
}

int gf_metrics_publish(gf_agent *a, gf_error *err)
{
    gf_msnap *s, *old;

    /* what a page can show is journaled first: no counter a scrape saw is
     * lower after a restart */
    gf_journal_exposed(a);
    s = take(a, err);

    if (!s)
        return -1;
    pthread_mutex_lock(&swap_lock);
    old = a->msnap;
    a->msnap = s;
    pthread_mutex_unlock(&swap_lock);
    gf_msnap_release(old);
    return 0;
}

gf_msnap *gf_msnap_acquire(gf_agent *a)
{
    gf_msnap *s;

    pthread_mutex_lock(&swap_lock);
    if ((s = a->msnap))
        atomic_fetch_add(&s->refs, 1);
    pthread_mutex_unlock(&swap_lock);
    return s;
}

void gf_msnap_release(gf_msnap *s)
{
    if (s && atomic_fetch_sub(&s->refs, 1) == 1)
        free(s);
}

void gf_metrics_unpublish(gf_agent *a)
{
    gf_msnap *old;

    pthread_mutex_lock(&swap_lock);
    old = a->msnap;
    a->msnap = NULL;
    pthread_mutex_unlock(&swap_lock);
    gf_msnap_release(old);
}

/* A change of fractions is on the page at once when none was published in
 * the last PUBLISH_GAP_MS, else at the first wake-up after that (or the
 * tick): a burst of admissions costs one copy of every fraction per gap, not
 * one per admission. */
#define PUBLISH_GAP_MS 20
static bool publish_pending; /* the loop's alone: read without a->lock */

void gf_metrics_publish_soon(gf_agent *a, bool changed)
{
    static int64_t last;
    bool pending = publish_pending || changed;
    int64_t now = gf_now_ms();
    gf_error err;

    publish_pending = pending;
    if (!pending || now - last < PUBLISH_GAP_MS)
        return;
    publish_pending = false;
    last = now;
    gf_metrics_publish(a, &err);
}

bool gf_metrics_publish_pending(void)
{
    return publish_pending;
}
