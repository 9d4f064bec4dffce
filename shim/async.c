/* SPDX-License-Identifier: Apache-2.0 */
/* Stream-ordered allocation. A pool's memory is charged as the driver
 * reserves it (RESERVED_MEM_CURRENT), not per request: that is what the
 * device loses. Each allocation is admitted for its size first, then the
 * charge is trued up to the pool's reservation. Frees return memory to the
 * pool; the pool shrinks at synchronisation, which is seen at the next
 * reconcile (trim, memory query, or refusal).
 *
 * A pool's charge moves without a lock: whoever sees the reservation above
 * the charge moves the charge up to it with a compare-and-swap from a value
 * it read *before* it asked the driver, so a stale answer never lowers a
 * charge another thread raised since, and each byte of growth is settled by
 * exactly one thread. Only a true-up lowers a charge (the same rule), and
 * only a free of a destroyed pool's allocation takes the lock.
 *
 * The driver is asked after every allocation, even one that reused memory:
 * whether the pool grew depends on its stream-ordered reuse, fragmentation
 * and growth granularity, which only the driver knows; and a charge held
 * above the reservation instead would refuse the fraction's other
 * processes, which cannot true this process's pools up. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "async.h"
#include "shim.h"
#include "table.h"

enum { KIND_ASYNC = 30 };
#define DESTROYED GF_POOL_DESTROYED

/* One per pool the process allocated from, however many there are. A record
 * never moves and is never freed (a thread may still hold it): allocations
 * name theirs by address. A pool destroyed with allocations still live keeps
 * its record charged for those until the last of them is freed: the driver
 * holds their memory until then. */
typedef struct pool_charge {
    gf_pool_head head; /* first: a slot names the record by its head */
    CUmemoryPool pool;
    int ordinal;
    _Atomic uint64_t charged;
    _Atomic uint64_t lowering; /* odd while a true-up lowers charged; +2 each */
} pool_charge;

static inline pool_charge *pool_of(gf_pool_head *h)
{
    return (pool_charge *)h;
}

static pthread_mutex_t pools_lock = PTHREAD_MUTEX_INITIALIZER;
static pool_charge **pools; /* the pools not destroyed, under pools_lock */
static int n_pools, cap_pools;
static gf_table async_ptrs; /* pointer -> bytes, record (aux) */

/* Caller holds pools_lock. */
static pool_charge *pool_find(CUmemoryPool pool, int ordinal, bool add)
{
    for (int i = 0; i < n_pools; i++)
        if (pools[i]->pool == pool)
            return pools[i];
    if (!add)
        return NULL;
    if (n_pools == cap_pools) {
        int ncap = cap_pools ? cap_pools * 2 : 16;
        pool_charge **n = realloc(pools, (size_t)ncap * sizeof(*n));
        if (!n)
            return NULL;
        pools = n;
        cap_pools = ncap;
    }
    pool_charge *pc = calloc(1, sizeof(*pc));
    if (!pc)
        return NULL;
    pc->pool = pool;
    pc->ordinal = ordinal;
    pools[n_pools++] = pc;
    return pc;
}

static void pool_unlist(pool_charge *pc)
{
    for (int i = 0; i < n_pools; i++)
        if (pools[i] == pc) {
            pools[i] = pools[--n_pools];
            return;
        }
}

static pool_charge *pool_record(CUmemoryPool pool, int ordinal)
{
    pthread_mutex_lock(&pools_lock);
    pool_charge *pc = pool_find(pool, ordinal, true);
    pthread_mutex_unlock(&pools_lock);
    if (!pc)
        gf_log(GF_LOG_ERROR, "out of host memory: a memory pool's reservation is not counted");
    return pc;
}

/* The calling thread's last pools, valid while the context epoch is the one
 * they were found at: every hook that can change a device's current pool or
 * end a pool (cuDeviceSetMemPool, cuMemSetMemPool, cuMemPoolDestroy, context
 * ends) moves the epoch on. key = epoch ^ ordinal. */
typedef struct pool_cache {
    uint64_t key;
    CUmemoryPool pool;
    pool_charge *pc;
} pool_cache;
static _Thread_local pool_cache current_cache __attribute__((tls_model("initial-exec")));
static _Thread_local pool_cache named_cache __attribute__((tls_model("initial-exec")));

static inline uint64_t cache_key(int ordinal)
{
    return atomic_load_explicit(&gf_ctx_epoch, memory_order_relaxed) ^ (uint64_t)ordinal;
}

/* The record of the ordinal's current pool (what cuMemAllocAsync takes
 * from), or NULL when the driver cannot say. */
static pool_charge *__attribute__((noinline)) pool_current_slow(int ordinal, uint64_t key)
{
    CUmemoryPool target;

    if (!gf_cu.cuDeviceGetMemPool || gf_cu.cuDeviceGetMemPool(&target, ordinal) != CUDA_SUCCESS ||
        !target)
        return NULL;
    pool_charge *pc = pool_record(target, ordinal);
    if (pc)
        current_cache = (pool_cache){.key = key, .pool = target, .pc = pc};
    return pc;
}

static inline pool_charge *pool_current(int ordinal)
{
    uint64_t key = cache_key(ordinal);

    if (__builtin_expect(current_cache.key == key, 1))
        return current_cache.pc;
    return pool_current_slow(ordinal, key);
}

/* The device a pool not seen at its creation belongs to: the one whose
 * default or current pool it is; else (imported, or not a pool) fallback. */
static int pool_device(CUmemoryPool pool, int fallback)
{
    CUmemoryPool p;

    for (int d = 0; d < GF_MAX_ORDINALS; d++) {
        if (!gf_cu.cuDeviceGetDefaultMemPool ||
            gf_cu.cuDeviceGetDefaultMemPool(&p, d) != CUDA_SUCCESS)
            break;
        if (p == pool || (gf_cu.cuDeviceGetMemPool(&p, d) == CUDA_SUCCESS && p == pool))
            return d;
    }
    return fallback;
}

/* The record of a pool named by the caller: charged to the pool's own
 * device, whichever context is current (cuMemPoolCreate records where it
 * was made); NULL for one of no known device with no context current. */
static pool_charge *__attribute__((noinline))
pool_named_slow(CUmemoryPool pool, int ordinal, uint64_t key)
{
    pthread_mutex_lock(&pools_lock);
    pool_charge *pc = pool_find(pool, -1, false);
    pthread_mutex_unlock(&pools_lock);
    if (!pc) {
        int dev = pool_device(pool, ordinal);
        if (dev < 0)
            return NULL;
        pc = pool_record(pool, dev);
    }
    if (pc)
        named_cache = (pool_cache){.key = key, .pool = pool, .pc = pc};
    return pc;
}

static inline pool_charge *pool_named(CUmemoryPool pool, int ordinal)
{
    uint64_t key = cache_key(ordinal);

    if (__builtin_expect(named_cache.key == key && named_cache.pool == pool, 1))
        return named_cache.pc;
    return pool_named_slow(pool, ordinal, key);
}

static uint64_t pool_reserved(CUmemoryPool pool)
{
    cuuint64_t v; /* read only when the driver answered */
    if (!gf_cu.cuMemPoolGetAttribute ||
        gf_cu.cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v) != CUDA_SUCCESS)
        return UINT64_MAX;
    return v;
}

/* Lowers pc->charged to what the driver holds now, when it holds less (the
 * pool shrank at a synchronisation). Never raises it: every growth is an
 * allocation's, which settles it itself (settle_growth). Caller holds
 * pools_lock, so lowerings never overlap; lowering is odd while one runs,
 * which is what an allocation that finds its growth already charged checks
 * (the charge it counted on must not be lowered by an older answer). */
static void pool_true_up(pool_charge *pc)
{
    const gf_ordinal *o = gf_ordinal_get(pc->ordinal);

    if ((atomic_load(&pc->head.outstanding) & DESTROYED) || !o || o->dev < 0)
        return; /* a destroyed pool cannot be asked: its live allocations count */
    atomic_fetch_add(&pc->lowering, 1);
    uint64_t c = atomic_load(&pc->charged), now = pool_reserved(pc->pool);
    if (now < c && atomic_compare_exchange_strong(&pc->charged, &c, now))
        gf_ledger_release(&gf_state.ledger, o->dev, c - now);
    atomic_fetch_add(&pc->lowering, 1);
}

static void pools_reconcile(int ordinal)
{
    pthread_mutex_lock(&pools_lock);
    for (int i = 0; i < n_pools; i++)
        if (ordinal < 0 || pools[i]->ordinal == ordinal)
            pool_true_up(pools[i]);
    pthread_mutex_unlock(&pools_lock);
}

/* The driver did not say what pc holds now: the admission becomes its
 * charge, until a true-up finds the reservation smaller or, for a destroyed
 * pool, its frees give it back. Under the lock, so that a destroy's store
 * of the charge cannot overwrite it. */
static void __attribute__((noinline)) pool_keep_admission(pool_charge *pc, uint64_t admitted)
{
    pthread_mutex_lock(&pools_lock);
    atomic_fetch_add(&pc->charged, admitted);
    pthread_mutex_unlock(&pools_lock);
}

/* One answer of the driver about pc, with what the charge was before it
 * was asked. */
typedef struct pool_answer {
    uint64_t lowering, charged, reserved;
} pool_answer;

static inline pool_answer pool_ask(pool_charge *pc)
{
    pool_answer a = {.lowering = atomic_load(&pc->lowering), .charged = atomic_load(&pc->charged)};
    a.reserved = pool_reserved(pc->pool);
    return a;
}

/* The allocation was admitted for `admitted` bytes (by the hot view when h
 * is not NULL) and the driver answered a; the pool may have grown by less
 * (memory reused) or more (rounding). Settles the charge at the growth: the
 * charge is raised by a compare-and-swap from a value read before the driver
 * was asked, the extra reserved first (so a refusal leaves nothing to undo
 * but the admission); a growth the charge already covers needs no lowering
 * to have begun since. False when the extra does not fit: the admission
 * stays, for alloc_over to give back. */
static bool __attribute__((noinline))
settle_growth(const gf_ordinal *o, gf_hot *h, pool_charge *pc, uint64_t admitted, pool_answer a)
{
    bool reconciled = false;

    for (;; a = pool_ask(pc)) {
        uint64_t g = a.lowering, c = a.charged, now = a.reserved, back = admitted;

        if (g & 1)
            continue;            /* a true-up is lowering the charge: ask again */
        if (now == UINT64_MAX) { /* unanswered (the pool destroyed meanwhile): fail closed */
            pool_keep_admission(pc, admitted);
            return true;
        }
        if (now <= c) {
            if (atomic_load(&pc->lowering) != g)
                continue;
        } else {
            uint64_t growth = now - c, extra = growth > admitted ? growth - admitted : 0;
            if (extra && !gf_ledger_reserve(&gf_state.ledger, o->dev, extra, o->limit)) {
                if (!reconciled) { /* pools that shrank may still be charged: as any refusal */
                    reconciled = true;
                    gf_ledger_reclaim_dead(&gf_state.ledger);
                    gf_reconcile(pc->ordinal, GF_RECONCILE_REFUSAL);
                    continue;
                }
                gf_ledger_note_denied(&gf_state.ledger, o->dev);
                return false;
            }
            if (!atomic_compare_exchange_strong(&pc->charged, &c, now)) {
                if (extra)
                    gf_unadmit(o, extra); /* another moved the charge: ask again */
                continue;
            }
            back = admitted - (growth - extra);
        }
        if (back && h)
            gf_hot_release(h, back);
        else if (back)
            gf_unadmit(o, back);
        return true;
    }
}

GF_HIDDEN gf_async_slot gf_async_slots[1 << GF_ASYNC_SLOT_BITS];

static void __attribute__((noinline)) track_slow(CUdeviceptr p, uint64_t bytes, pool_charge *pc)
{
    gf_entry e = {
        .key = p, .bytes = bytes, .ordinal = pc->ordinal, .kind = KIND_ASYNC, .aux = (uintptr_t)pc};
    if (!gf_table_put(&async_ptrs, &e))
        gf_log(GF_LOG_ERROR, "out of host memory tracking %#llx", (unsigned long long)p);
}

/* In its slot when the slot is free, else in async_ptrs (async.h). */
static inline void track_async(CUdeviceptr p, uint64_t bytes, pool_charge *pc)
{
    gf_async_slot *s = gf_async_slot_home(p);
    uint64_t free_key = 0;

    if (__builtin_expect(p > GF_ASYNC_SLOT_BUSY && atomic_compare_exchange_strong_explicit(
                                                       &s->key, &free_key, GF_ASYNC_SLOT_BUSY,
                                                       memory_order_acquire, memory_order_relaxed),
                         1)) {
        s->bytes = bytes;
        s->pool = &pc->head;
        atomic_store_explicit(&s->key, p, memory_order_release);
        return;
    }
    track_slow(p, bytes, pc);
}

GF_HIDDEN bool gf_async_take(CUdeviceptr dptr, struct gf_entry *out)
{
    return gf_table_take(&async_ptrs, dptr, out);
}

GF_HIDDEN void gf_async_put_back(CUdeviceptr dptr, uint64_t bytes, gf_pool_head *pool)
{
    pool_charge *pc = pool_of(pool);
    gf_entry e = {.key = dptr,
                  .bytes = bytes,
                  .ordinal = pc->ordinal,
                  .kind = KIND_ASYNC,
                  .aux = (uintptr_t)pc};
    gf_table_put(&async_ptrs, &e);
}

/* A destroyed pool gives its bytes back now (the last allocation all that is
 * left), under the lock. */
GF_HIDDEN void gf_async_freed_destroyed(gf_pool_head *pool, uint64_t bytes, uint64_t old)
{
    pool_charge *pc = pool_of(pool);

    pthread_mutex_lock(&pools_lock);
    const gf_ordinal *o = gf_ordinal_get(pc->ordinal);
    uint64_t c = atomic_load(&pc->charged);
    uint64_t left = (old & ~DESTROYED) - bytes;
    uint64_t back = left ? (bytes < c ? bytes : c) : c;
    if (o)
        gf_unadmit(o, back);
    atomic_store(&pc->charged, c - back);
    pthread_mutex_unlock(&pools_lock);
}

/* The driver's allocation from one pool (cuMemAllocFromPoolAsync or its
 * _ptsz variant). */
typedef CUresult (*pool_call)(CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool, CUstream s);
/* The driver's cuMemAllocAsync (or _ptsz): only where nothing is counted. */
typedef CUresult (*async_call)(CUdeviceptr *dptr, size_t bytes, CUstream s);

/* An allocation counted in its pool before the call did not happen (or was
 * given back at once). A destroy meanwhile kept it charged; that charge,
 * with whatever share of the others' it displaced, goes back with the
 * pool's last allocation: at once when there is none. */
static void __attribute__((noinline)) alloc_uncount(pool_charge *pc, uint64_t bytes)
{
    uint64_t old = atomic_fetch_sub(&pc->head.outstanding, bytes);

    if ((old & DESTROYED) && (old & ~DESTROYED) == bytes)
        gf_async_freed_destroyed(&pc->head, bytes, old);
}

/* The settled allocation is tracked (its pool counted it before the call). */
static inline void alloc_done(CUdeviceptr p, uint64_t bytes, pool_charge *pc)
{
    track_async(p, bytes, pc);
}

/* Grew past the limit: the memory goes back to the driver. The admission
 * stays counted until the driver holds less: it becomes the pool's charge,
 * and a true-up after the trim lowers that to the reservation. (Given back
 * before the free, it let the driver hold the growth uncounted meanwhile:
 * room another process of the fraction could allocate into.) */
static CUresult alloc_over(CUdeviceptr *dptr, CUstream stream, pool_charge *pc, uint64_t admitted)
{
    gf_cu.cuMemFreeAsync(*dptr, stream);
    if (gf_cu.cuMemPoolTrimTo)
        gf_cu.cuMemPoolTrimTo(pc->pool, 0);
    pthread_mutex_lock(&pools_lock);
    atomic_fetch_add(&pc->charged, admitted);
    pool_true_up(pc);
    pthread_mutex_unlock(&pools_lock);
    alloc_uncount(pc, admitted);
    *dptr = 0;
    return CUDA_ERROR_OUT_OF_MEMORY;
}

/* The device a stream's work runs on: the current context's for the null,
 * legacy and per-thread streams, else its own context's; -1 when the driver
 * cannot say. */
static int __attribute__((noinline)) stream_ordinal(CUstream s)
{
    CUcontext c, cur = NULL;
    CUdevice d;
    CUresult rc;

    if ((uintptr_t)s <= 2)
        return gf_current_ordinal();
    if (gf_cu.cuStreamGetDevice)
        return gf_cu.cuStreamGetDevice(s, &d) == CUDA_SUCCESS ? d : -1;
    if (!gf_cu.cuStreamGetCtx || gf_cu.cuStreamGetCtx(s, &c) != CUDA_SUCCESS || !c)
        return -1;
    if (gf_cu.cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == c)
        return gf_current_ordinal();
    if (gf_cu.cuCtxPushCurrent_v2(c) != CUDA_SUCCESS)
        return -1;
    rc = gf_cu.cuCtxGetDevice(&d);
    gf_cu.cuCtxPopCurrent_v2(&c);
    return rc == CUDA_SUCCESS ? d : -1;
}

/* Admitted for its size on the pool's device, then settled at the pool's
 * growth. Every case but the hot one (alloc_hot). Without a pool named, the
 * allocation is made from the record's pool, the current pool of the
 * stream's device as last seen: the driver's own choice could be another
 * (another thread set another current pool meanwhile), whose growth the
 * settle would not see. */
static CUresult __attribute__((noinline))
alloc_cold(CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool, CUstream stream, pool_call call,
           async_call plain)
{
    if (!gf_state.active)
        return pool ? call(dptr, bytes, pool, stream) : plain(dptr, bytes, stream);
    for (;;) {
        int ord = pool ? gf_current_ordinal() : stream_ordinal(stream);
        uint64_t key = cache_key(ord);
        CUresult rc;

        if (ord < 0 && !pool) /* no context (the driver refuses), or a stream it cannot place */
            return (uintptr_t)stream > 2 ? CUDA_ERROR_INVALID_HANDLE : plain(dptr, bytes, stream);
        /* no true-up before the call: a refusal trues every pool up before it refuses */
        pool_charge *pc = pool ? pool_named(pool, ord) : pool_current(ord);
        if (!pc) /* a pool of no known device and no context to charge, or out of host memory */
            return pool && ord < 0 ? CUDA_ERROR_INVALID_CONTEXT : CUDA_ERROR_OUT_OF_MEMORY;
        const gf_ordinal *o = gf_ordinal_of(pc->ordinal);
        gf_hot *h = gf_hot_ordinal(pc->ordinal);
        if (!o || !(h ? gf_hot_reserve(h, bytes) || gf_admit(o, bytes) : gf_admit(o, bytes)))
            return CUDA_ERROR_OUT_OF_MEMORY;
        atomic_fetch_add(&pc->head.outstanding, bytes); /* before: a destroy meanwhile keeps it */
        rc = call(dptr, bytes, pc->pool, stream);
        if (rc != CUDA_SUCCESS) {
            gf_unadmit(o, bytes);
            alloc_uncount(pc, bytes);
            if (!pool && rc == CUDA_ERROR_INVALID_VALUE && cache_key(ord) != key)
                continue; /* the current pool was destroyed or changed meanwhile: the new one */
            return rc;
        }
        if (!settle_growth(o, h, pc, bytes, pool_ask(pc)))
            return alloc_over(dptr, stream, pc, bytes);
        alloc_done(*dptr, bytes, pc);
        return rc;
    }
}

/* The hot path's driver call failed: the admission and the count go back;
 * the cold path answers (it retries a current pool that changed meanwhile). */
static CUresult __attribute__((noinline))
alloc_refused(CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool, CUstream stream, pool_call call,
              async_call plain, gf_hot *h, pool_charge *pc, CUresult rc)
{
    gf_hot_release(h, bytes);
    alloc_uncount(pc, bytes);
    if (!pool && rc == CUDA_ERROR_INVALID_VALUE)
        return alloc_cold(dptr, bytes, pool, stream, call, plain);
    return rc;
}

/* The hot path's answer was not "no growth, no lowering": the whole settle. */
static CUresult __attribute__((noinline))
alloc_settle(CUdeviceptr *dptr, size_t bytes, CUstream stream, gf_hot *h, pool_charge *pc,
             pool_answer a)
{
    if (!settle_growth(gf_ordinal_of((int)(h - gf_state.hot)), h, pc, bytes, a))
        return alloc_over(dptr, stream, pc, bytes);
    alloc_done(*dptr, bytes, pc);
    return CUDA_SUCCESS;
}

/* Inline into each hook, so that call is a direct call of the driver: the
 * pool's record cached (one thread-local compare), on the null, legacy or
 * per-thread stream when no pool is named, where the pool did not grow. The
 * same steps as alloc_cold, which takes every other case (a refusal
 * included: it trues up before it refuses). */
static inline __attribute__((always_inline)) CUresult alloc_hot(CUdeviceptr *dptr, size_t bytes,
                                                                CUmemoryPool pool, CUstream stream,
                                                                pool_call call, async_call plain)
{
    int ord = gf_current_ordinal();
    uint64_t key = cache_key(ord);
    pool_charge *pc;
    gf_hot *h;
    CUresult rc;

    if (pool)
        pc = named_cache.key == key && named_cache.pool == pool ? named_cache.pc : NULL;
    else
        pc = current_cache.key == key && (uintptr_t)stream <= 2 ? current_cache.pc : NULL;
    if (__builtin_expect(!pc || !(h = gf_hot_ordinal(pc->ordinal)) || !gf_hot_reserve(h, bytes), 0))
        return alloc_cold(dptr, bytes, pool, stream, call, plain);
    atomic_fetch_add_explicit(&pc->head.outstanding, bytes, memory_order_relaxed);
    rc = call(dptr, bytes, pc->pool, stream);
    if (__builtin_expect(rc != CUDA_SUCCESS, 0))
        return alloc_refused(dptr, bytes, pool, stream, call, plain, h, pc, rc);
    pool_answer a = pool_ask(pc);
    if (__builtin_expect((a.lowering & 1) || a.reserved > a.charged ||
                             atomic_load(&pc->lowering) != a.lowering,
                         0))
        return alloc_settle(dptr, bytes, stream, h, pc, a);
    gf_hot_release(h, bytes); /* reused: the reservation already holds it */
    alloc_done(*dptr, bytes, pc);
    return CUDA_SUCCESS;
}

#define ASYNC_HOOKS(X)                          \
    X(cuMemAllocAsync, cuMemAllocFromPoolAsync) \
    X(cuMemAllocAsync_ptsz, cuMemAllocFromPoolAsync_ptsz)
#define POOL_HOOKS(X) X(cuMemAllocFromPoolAsync) X(cuMemAllocFromPoolAsync_ptsz)

/* Made from the current pool by its handle: the pool the shim settles is
 * the one the driver allocates from. */
#define DEFINE_ASYNC(name, from_pool)                                                \
    GF_EXPORT CUresult name(CUdeviceptr *dptr, size_t bytesize, CUstream stream)     \
    {                                                                                \
        GF_HOOK_ENTER(cu, name);                                                     \
        if (!gf_cu.from_pool) /* every driver with one has the other */              \
            return gf_state.active ? CUDA_ERROR_NOT_SUPPORTED                        \
                                   : gf_cu.name(dptr, bytesize, stream);             \
        return alloc_hot(dptr, bytesize, NULL, stream, gf_cu.from_pool, gf_cu.name); \
    }
ASYNC_HOOKS(DEFINE_ASYNC)

#define DEFINE_FROM_POOL(name)                                                     \
    GF_EXPORT CUresult name(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, \
                            CUstream stream)                                       \
    {                                                                              \
        GF_HOOK_ENTER(cu, name);                                                   \
        if (!pool)                                                                 \
            return gf_cu.name(dptr, bytesize, pool, stream);                       \
        return alloc_hot(dptr, bytesize, pool, stream, gf_cu.name, NULL);          \
    }
POOL_HOOKS(DEFINE_FROM_POOL)

/* A pool made on a device is that device's, to be charged there whichever
 * context is current when it is allocated from. */
GF_EXPORT CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props)
{
    CUresult rc;
    GF_HOOK_ENTER(cu, cuMemPoolCreate);
    rc = gf_cu.cuMemPoolCreate(pool, props);
    if (rc != CUDA_SUCCESS || !pool || !props ||
        props->location.type != CU_MEM_LOCATION_TYPE_DEVICE || props->location.id < 0 ||
        props->location.id >= GF_MAX_ORDINALS)
        return rc;
    pool_record(*pool, props->location.id);
    return rc;
}

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
 * they are freed; only the rest of the reservation goes now. The DESTROYED
 * bit splits the frees: one before it was counted out of what is kept, one
 * after it gives its bytes back itself (gf_async_freed). */
GF_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
    CUresult rc;
    GF_HOOK_ENTER(cu, cuMemPoolDestroy);
    rc = gf_cu.cuMemPoolDestroy(pool);
    if (rc != CUDA_SUCCESS)
        return rc;
    gf_ctx_switched(); /* the handle may come back for another pool; the current pool may change */
    pthread_mutex_lock(&pools_lock);
    pool_charge *pc = pool_find(pool, -1, false);
    if (pc) {
        const gf_ordinal *o = gf_ordinal_get(pc->ordinal);
        uint64_t live = atomic_fetch_or(&pc->head.outstanding, DESTROYED) & ~DESTROYED;
        uint64_t c = atomic_load(&pc->charged), keep = live < c ? live : c;
        if (o)
            gf_unadmit(o, c - keep);
        atomic_store(&pc->charged, keep);
        pool_unlist(pc);
    }
    pthread_mutex_unlock(&pools_lock);
    return rc;
}

/* A device's current pool changes: the threads' cached records go. */
GF_EXPORT CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
    GF_HOOK_ENTER(cu, cuDeviceSetMemPool);
    CUresult rc = gf_cu.cuDeviceSetMemPool(dev, pool);
    gf_ctx_switched();
    return rc;
}

GF_EXPORT CUresult cuMemSetMemPool(CUmemLocation *location, CUmemAllocationType type,
                                   CUmemoryPool pool)
{
    GF_HOOK_ENTER(cu, cuMemSetMemPool);
    CUresult rc = gf_cu.cuMemSetMemPool(location, type, pool);
    gf_ctx_switched();
    return rc;
}

static void pools_after_fork(void)
{
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    pools_lock = fresh;
    pools = NULL; /* the parent's copy may be mid-update: dropped, not freed */
    n_pools = cap_pools = 0;
    gf_table_reset(&async_ptrs);
    memset(gf_async_slots, 0, sizeof(gf_async_slots));
}

static void reconcile(int ordinal, gf_reconcile_why why)
{
    pools_reconcile(why == GF_RECONCILE_REFUSAL ? -1 : ordinal); /* any pool may give back */
}

GF_HIDDEN const gf_family gf_family_async = {.name = "async",
                                             .after_fork = pools_after_fork,
                                             .reconcile = reconcile};
