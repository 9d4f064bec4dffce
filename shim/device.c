/* SPDX-License-Identifier: Apache-2.0 */
/* Device ordinals of this process, mapped to the fraction's ledger devices,
 * their hot views, and the calling thread's current ordinal: cached, and
 * right as long as every context switch passes through a hook that moves
 * gf_ctx_epoch on (shim.h). */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "shim.h"

static pthread_mutex_t ordinal_lock = PTHREAD_MUTEX_INITIALIZER;

GF_HIDDEN void gf_uuid_format(const CUuuid *u, char *buf, size_t len)
{
    const unsigned char *b = (const unsigned char *)u->bytes;
    snprintf(buf, len, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
             b[14], b[15]);
}

static void ordinal_fill(gf_ordinal *o, CUdevice ordinal)
{
    char uuid[GF_UUID_MAX];
    CUuuid u;
    gf_error err;
    const gf_config_device *cd;

    o->dev = -1;
    o->limit = 0;
    if (!gf_cu.cuDeviceGetUuid || gf_cu.cuDeviceGetUuid(&u, ordinal) != CUDA_SUCCESS) {
        gf_log(GF_LOG_ERROR, "cannot read the UUID of device %d: it gets no memory", ordinal);
        return;
    }
    gf_uuid_format(&u, uuid, sizeof(uuid));
    snprintf(o->uuid, sizeof(o->uuid), "%s", uuid);
    cd = gf_config_find_device(&gf_state.cfg, uuid);
    if (!cd) {
        gf_log(GF_LOG_WARN, "device %d (%s) is not part of fraction %s: it gets no memory", ordinal,
               uuid, gf_state.cfg.name);
        return;
    }
    o->dev = gf_ledger_device_index(&gf_state.ledger, uuid, cd->request, cd->limit, &err);
    if (o->dev < 0) {
        gf_log(GF_LOG_ERROR, "%s: device %d gets no memory", err.msg, ordinal);
        return;
    }
    o->limit = cd->limit < gf_state.env_limit ? cd->limit : gf_state.env_limit;
    gf_log(GF_LOG_INFO, "device %d = %s, limit %llu bytes", ordinal, uuid,
           (unsigned long long)o->limit);
}

/* The hot view of a ready ordinal, where admission needs nothing but the
 * ledger's compare-and-swap (see gf_hot). */
static void ordinal_heat(const gf_ordinal *o, gf_hot *h)
{
    gf_ledger *lg = &gf_state.ledger;

    if (!gf_state.active || o->dev < 0 || gf_state.cfg.agent[0] || !lg->hdr || lg->slot < 0)
        return;
    gf_ledger_device *d = &lg->hdr->devices[o->dev];
    h->cap = o->limit < d->limit ? o->limit : d->limit;
    h->used = &d->used;
    h->mine = &lg->hdr->slots[lg->slot].used[o->dev];
    h->peak = &d->peak;
    atomic_store_explicit(&h->on, 1, memory_order_release);
}

GF_HIDDEN void gf_ordinals_hot(bool hot)
{
    for (int i = 0; i < GF_MAX_ORDINALS; i++) {
        atomic_store_explicit(&gf_state.hot[i].on, 0, memory_order_relaxed);
        if (hot && atomic_load_explicit(&gf_state.ordinals[i].state, memory_order_acquire))
            ordinal_heat(&gf_state.ordinals[i], &gf_state.hot[i]);
    }
}

GF_HIDDEN void gf_return_charge_cold(int ordinal, uint64_t bytes)
{
    const gf_ordinal *o = gf_ordinal_of(ordinal);
    if (o)
        gf_unadmit(o, bytes);
}

GF_HIDDEN const gf_ordinal *gf_ordinal_get_slow(CUdevice ordinal)
{
    static const gf_ordinal none = {.state = 1, .dev = -1, .limit = 0};
    gf_ordinal *o;

    if (!gf_state.active)
        return gf_state.env_limit == 0 ? &none : NULL;
    if (ordinal < 0 || ordinal >= GF_MAX_ORDINALS)
        return &none;
    o = &gf_state.ordinals[ordinal];
    if (__builtin_expect(atomic_load_explicit(&o->state, memory_order_acquire), 1))
        return o;
    pthread_mutex_lock(&ordinal_lock);
    if (!atomic_load_explicit(&o->state, memory_order_relaxed)) {
        ordinal_fill(o, ordinal);
        ordinal_heat(o, &gf_state.hot[ordinal]);
        atomic_store_explicit(&o->state, 1, memory_order_release);
    }
    pthread_mutex_unlock(&ordinal_lock);
    return o;
}

GF_HIDDEN _Atomic uint64_t gf_ctx_epoch = 256;
GF_HIDDEN _Thread_local uint64_t gf_ctx_cache __attribute__((tls_model("initial-exec")));

GF_HIDDEN void gf_ctx_switched(void)
{
    atomic_fetch_add_explicit(&gf_ctx_epoch, 256, memory_order_relaxed);
}

/* Asks the driver and caches the answer for this epoch. The epoch is read
 * first: a switch by another thread meanwhile only makes the next call ask
 * again. No context (an error) is not cached. */
GF_HIDDEN int gf_current_ordinal_slow(void)
{
    uint64_t epoch = atomic_load_explicit(&gf_ctx_epoch, memory_order_relaxed);
    CUdevice d;

    if (!gf_cu.cuCtxGetDevice || gf_cu.cuCtxGetDevice(&d) != CUDA_SUCCESS)
        return -1;
    if (d >= 0 && d < 256)
        gf_ctx_cache = epoch ^ (uint64_t)d;
    return d;
}

GF_HIDDEN void gf_reconcile(int ordinal, gf_reconcile_why why)
{
    for (const gf_family *const *f = gf_families; *f; f++)
        if ((*f)->reconcile)
            (*f)->reconcile(ordinal, why);
}

static bool reserve(const gf_ordinal *o, uint64_t bytes)
{
    /* with an agent, past the request only what it lent; without one the
     * limit is the hard cap */
    uint64_t cap = gf_state.cfg.agent[0] ? gf_ledger_burst_cap(&gf_state.ledger, o->dev, o->limit)
                                         : o->limit;
    return gf_ledger_reserve(&gf_state.ledger, o->dev, bytes, cap);
}

/* The ordinal o stands for, or -1 (the view of no device). */
static int ordinal_of(const gf_ordinal *o)
{
    if (o >= gf_state.ordinals && o < gf_state.ordinals + GF_MAX_ORDINALS)
        return (int)(o - gf_state.ordinals);
    return -1;
}

GF_HIDDEN bool gf_admit_slow(const gf_ordinal *o, uint64_t bytes)
{
    if (o->dev < 0)
        return bytes == 0;
    if (reserve(o, bytes))
        return true;
    /* before refusing: memory of dead processes, idle pool reservations, and
     * overhead this process no longer holds */
    gf_ledger_reclaim_dead(&gf_state.ledger);
    gf_reconcile(ordinal_of(o), GF_RECONCILE_REFUSAL);
    if (reserve(o, bytes))
        return true;
    while (gf_agent_borrow(o, bytes)) /* burst: each loan raises the cap */
        if (reserve(o, bytes))
            return true;
    gf_ledger_note_denied(&gf_state.ledger, o->dev);
    gf_log(GF_LOG_INFO, "refused %llu bytes: fraction %s uses %llu of %llu",
           (unsigned long long)bytes, gf_state.cfg.name, (unsigned long long)gf_used(o),
           (unsigned long long)o->limit);
    return false;
}

GF_HIDDEN void gf_unadmit_slow(const gf_ordinal *o, uint64_t bytes)
{
    if (o->dev < 0 || !bytes)
        return;
    gf_ledger_release(&gf_state.ledger, o->dev, bytes);
    if (gf_state.cfg.agent[0])
        gf_agent_maybe_return(o);
}

/* The driver refused memory the fraction is guaranteed (within its
 * request): borrowers hold it. Has the agent take loans back. */
GF_HIDDEN bool gf_reclaim_for(const gf_ordinal *o, uint64_t bytes)
{
    if (!gf_state.cfg.agent[0] || o->dev < 0)
        return false;
    if (gf_used(o) > gf_state.ledger.hdr->devices[o->dev].request)
        return false; /* this allocation reaches into burst: no claim on others */
    return gf_agent_reclaim(o, bytes);
}

GF_HIDDEN uint64_t gf_used(const gf_ordinal *o)
{
    if (o->dev < 0)
        return 0;
    return atomic_load_explicit(&gf_state.ledger.hdr->devices[o->dev].used, memory_order_relaxed);
}
