/* SPDX-License-Identifier: Apache-2.0 */
/* Stream-ordered allocation. A pool's memory is charged as the driver
 * reserves it (RESERVED_MEM_CURRENT), not per request: that is what the
 * device loses. Each allocation is admitted for its size first, then the
 * charge is trued up to the pool's reservation. Frees return memory to the
 * pool; the pool shrinks at synchronisation, which is seen at the next
 * reconcile (trim, memory query, or refusal) or right after the next
 * allocation from that pool. */
#include <pthread.h>
#include <stdlib.h>

#include "async.h"
#include "shim.h"
#include "table.h"

enum { KIND_ASYNC = 30 };

/* One per pool the process allocated from, however many there are. A pool
 * destroyed with allocations still live stays here, charged for those, until
 * the last of them is freed: the driver holds their memory until then. */
typedef struct pool_charge {
    CUmemoryPool pool;
    uint64_t id; /* the pool handle may be reused once destroyed: pointers name this */
    int ordinal;
    bool destroyed;
    uint64_t charged;
    uint64_t outstanding; /* bytes of live allocations from it */
} pool_charge;

static pthread_mutex_t pools_lock = PTHREAD_MUTEX_INITIALIZER;
static pool_charge *pools;
static int n_pools, cap_pools;
static uint64_t next_id = 1;
static gf_table async_ptrs; /* pointer -> bytes, pool id (aux) */

/* Caller holds pools_lock. */
static pool_charge *pool_find(CUmemoryPool pool, int ordinal, bool add)
{
    for (int i = 0; i < n_pools; i++)
        if (pools[i].pool == pool && !pools[i].destroyed)
            return &pools[i];
    if (!add)
        return NULL;
    if (n_pools == cap_pools) {
        int ncap = cap_pools ? cap_pools * 2 : 16;
        pool_charge *n = realloc(pools, (size_t)ncap * sizeof(*n));
        if (!n)
            return NULL;
        pools = n;
        cap_pools = ncap;
    }
    pools[n_pools] = (pool_charge){.pool = pool, .ordinal = ordinal, .id = next_id++};
    return &pools[n_pools++];
}

static pool_charge *pool_by_id(uint64_t id)
{
    for (int i = 0; i < n_pools; i++)
        if (pools[i].id == id)
            return &pools[i];
    return NULL;
}

static void pool_remove(pool_charge *pc)
{
    *pc = pools[--n_pools];
}

static uint64_t pool_reserved(CUmemoryPool pool)
{
    cuuint64_t v = 0;
    if (!gf_cu.cuMemPoolGetAttribute ||
        gf_cu.cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v) != CUDA_SUCCESS)
        return UINT64_MAX;
    return v;
}

/* Moves pc->charged to what the driver holds now. Caller holds pools_lock. */
static void pool_true_up(pool_charge *pc)
{
    const gf_ordinal *o = gf_ordinal_get(pc->ordinal);
    uint64_t now;

    if (pc->destroyed || !o || o->dev < 0)
        return; /* a destroyed pool cannot be asked: its live allocations count */
    now = pool_reserved(pc->pool);
    if (now == UINT64_MAX || now == pc->charged)
        return;
    if (now < pc->charged)
        gf_ledger_release(&gf_state.ledger, o->dev, pc->charged - now);
    else
        gf_ledger_charge(&gf_state.ledger, o->dev, now - pc->charged);
    pc->charged = now;
}

static void pools_reconcile(int ordinal)
{
    pthread_mutex_lock(&pools_lock);
    for (int i = 0; i < n_pools; i++)
        if (ordinal < 0 || pools[i].ordinal == ordinal)
            pool_true_up(&pools[i]);
    pthread_mutex_unlock(&pools_lock);
}

/* What the pool holds now against what it is charged: a shrink (the pool
 * trimmed at a synchronisation) is given back, a growth is what the
 * allocation took. Caller holds pools_lock. */
static uint64_t pool_growth(pool_charge *pc, const gf_ordinal *o, uint64_t now)
{
    if (now == UINT64_MAX)
        return 0;
    if (now < pc->charged) {
        gf_ledger_release(&gf_state.ledger, o->dev, pc->charged - now);
        pc->charged = now;
    }
    return now - pc->charged;
}

/* The allocation was admitted for `admitted` bytes; the pool may have grown
 * by less (memory reused) or more (rounding). Settles the charge at the
 * growth and counts the allocation against its pool, all under one take of
 * the lock and one query of the pool; returns false when the extra does not
 * fit (nothing stays charged). */
static bool settle_growth(const gf_ordinal *o, CUmemoryPool target, int ord, uint64_t admitted,
                          uint64_t bytes, uint64_t *id)
{
    bool ok = true;
    pthread_mutex_lock(&pools_lock);
    pool_charge *pc = pool_find(target, ord, true);
    uint64_t now = pool_reserved(target);
    uint64_t growth = pc ? pool_growth(pc, o, now) : 0;

    if (growth <= admitted) {
        gf_unadmit(o, admitted - growth);
    } else if (gf_ledger_reserve(&gf_state.ledger, o->dev, growth - admitted, o->limit)) {
        ;
    } else {
        gf_ledger_note_denied(&gf_state.ledger, o->dev);
        gf_unadmit(o, admitted);
        ok = false;
    }
    if (!pc) {
        *id = 0;
        gf_log(GF_LOG_ERROR, "out of host memory: a memory pool's reservation is not counted");
    } else {
        if (ok && growth)
            pc->charged = now;
        if (ok)
            pc->outstanding += bytes;
        *id = pc->id;
    }
    pthread_mutex_unlock(&pools_lock);
    return ok;
}

static void track_async(CUdeviceptr p, uint64_t bytes, int ord, uint64_t id)
{
    gf_entry e = {.key = p, .bytes = bytes, .ordinal = ord, .kind = KIND_ASYNC, .aux = id};
    if (id && !gf_table_put(&async_ptrs, &e))
        gf_log(GF_LOG_ERROR, "out of host memory tracking %#llx", (unsigned long long)p);
}

GF_HIDDEN bool gf_async_take(CUdeviceptr dptr, struct gf_entry *out)
{
    return gf_table_take(&async_ptrs, dptr, out);
}

GF_HIDDEN void gf_async_put_back(const struct gf_entry *e)
{
    gf_table_put(&async_ptrs, e);
}

/* The driver took the free: a destroyed pool gives its bytes back now, and
 * goes once its last allocation has. */
GF_HIDDEN void gf_async_freed(const struct gf_entry *e)
{
    pthread_mutex_lock(&pools_lock);
    pool_charge *pc = pool_by_id(e->aux);
    if (pc) {
        pc->outstanding -= e->bytes < pc->outstanding ? e->bytes : pc->outstanding;
        if (pc->destroyed) {
            const gf_ordinal *o = gf_ordinal_get(pc->ordinal);
            uint64_t back = pc->outstanding ? (e->bytes < pc->charged ? e->bytes : pc->charged)
                                            : pc->charged;
            if (o)
                gf_unadmit(o, back);
            pc->charged -= back;
            if (!pc->outstanding)
                pool_remove(pc);
        }
    }
    pthread_mutex_unlock(&pools_lock);
}

typedef CUresult (*async_call)(CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool, CUstream s,
                               void *fn);

static CUresult alloc_async(CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool, CUstream stream,
                            async_call call, void *fn)
{
    int ord = gf_current_ordinal();
    const gf_ordinal *o = ord >= 0 ? gf_ordinal_get(ord) : NULL;
    CUmemoryPool target = pool;
    CUresult rc;

    if (!o)
        return call(dptr, bytes, pool, stream, fn);
    uint64_t id = 0;

    /* no true-up before the call: a pool that shrank is settled after it
     * (pool_growth), and a refusal trues every pool up before it refuses */
    if (!target && (!gf_cu.cuDeviceGetMemPool || gf_cu.cuDeviceGetMemPool(&target, ord)))
        target = NULL;
    if (!gf_admit(o, bytes))
        return CUDA_ERROR_OUT_OF_MEMORY;
    rc = call(dptr, bytes, pool, stream, fn);
    if (rc != CUDA_SUCCESS || !target) {
        gf_unadmit(o, bytes);
        return rc;
    }
    if (!settle_growth(o, target, ord, bytes, bytes, &id)) { /* grew past the limit: give it back */
        gf_cu.cuMemFreeAsync(*dptr, stream);
        if (gf_cu.cuMemPoolTrimTo)
            gf_cu.cuMemPoolTrimTo(target, 0);
        *dptr = 0;
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    track_async(*dptr, bytes, ord, id);
    return rc;
}

static CUresult call_async(CUdeviceptr *d, size_t b, CUmemoryPool p, CUstream s, void *fn)
{
    (void)p;
    return ((CUresult(*)(CUdeviceptr *, size_t, CUstream))fn)(d, b, s);
}

static CUresult call_from_pool(CUdeviceptr *d, size_t b, CUmemoryPool p, CUstream s, void *fn)
{
    return ((CUresult(*)(CUdeviceptr *, size_t, CUmemoryPool, CUstream))fn)(d, b, p, s);
}

#define ASYNC_HOOKS(X) X(cuMemAllocAsync) X(cuMemAllocAsync_ptsz)
#define POOL_HOOKS(X) X(cuMemAllocFromPoolAsync) X(cuMemAllocFromPoolAsync_ptsz)

#define DEFINE_ASYNC(name)                                                                \
    GF_EXPORT CUresult name(CUdeviceptr *dptr, size_t bytesize, CUstream stream)          \
    {                                                                                     \
        GF_HOOK_ENTER(cu, name);                                                          \
        return alloc_async(dptr, bytesize, NULL, stream, call_async, (void *)gf_cu.name); \
    }
ASYNC_HOOKS(DEFINE_ASYNC)

#define DEFINE_FROM_POOL(name)                                                                \
    GF_EXPORT CUresult name(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,            \
                            CUstream stream)                                                  \
    {                                                                                         \
        GF_HOOK_ENTER(cu, name);                                                              \
        if (!pool)                                                                            \
            return gf_cu.name(dptr, bytesize, pool, stream);                                  \
        return alloc_async(dptr, bytesize, pool, stream, call_from_pool, (void *)gf_cu.name); \
    }
POOL_HOOKS(DEFINE_FROM_POOL)

GF_EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
    CUresult rc;
    GF_HOOK_ENTER(cu, cuMemPoolTrimTo);
    rc = gf_cu.cuMemPoolTrimTo(pool, minBytesToKeep);
    pthread_mutex_lock(&pools_lock);
    pool_charge *pc = pool_find(pool, -1, false);
    if (pc)
        pool_true_up(pc);
    pthread_mutex_unlock(&pools_lock);
    return rc;
}

/* The driver keeps a destroyed pool's memory for its live allocations until
 * they are freed; only the rest of the reservation goes now. */
GF_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
    CUresult rc;
    GF_HOOK_ENTER(cu, cuMemPoolDestroy);
    rc = gf_cu.cuMemPoolDestroy(pool);
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&pools_lock);
    pool_charge *pc = pool_find(pool, -1, false);
    if (pc) {
        const gf_ordinal *o = gf_ordinal_get(pc->ordinal);
        uint64_t keep = pc->outstanding < pc->charged ? pc->outstanding : pc->charged;
        if (o)
            gf_unadmit(o, pc->charged - keep);
        pc->charged = keep;
        pc->destroyed = true;
        if (!pc->outstanding)
            pool_remove(pc);
    }
    pthread_mutex_unlock(&pools_lock);
    return rc;
}

static void pools_after_fork(void)
{
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    pools_lock = fresh;
    pools = NULL; /* the parent's copy may be mid-update: dropped, not freed */
    n_pools = cap_pools = 0;
    gf_table_reset(&async_ptrs);
}

static void reconcile(int ordinal, gf_reconcile_why why)
{
    pools_reconcile(why == GF_RECONCILE_REFUSAL ? -1 : ordinal); /* any pool may give back */
}

GF_HIDDEN const gf_family gf_family_async = {.name = "async",
                                             .after_fork = pools_after_fork,
                                             .reconcile = reconcile};
