/* SPDX-License-Identifier: Apache-2.0 */
/* Plain, legacy, pitched and managed allocations, and every free of a device
 * pointer (a stream-ordered one's charge is its pool's: async.h). */
#include <limits.h>
#include <string.h>

#include "async.h"
#include "shim.h"
#include "table.h"

enum { KIND_PLAIN = 1, KIND_PITCH, KIND_MANAGED, KIND_LEGACY };

/* All-zero is an empty table with unlocked (glibc) mutexes, so the tables
 * work before any constructor has run. */
GF_HIDDEN gf_table gf_ptrs;

/* In front of gf_ptrs, one direct-mapped slot per hash: a pointer whose slot
 * is free is kept there, any other in gf_ptrs, and a free looks in its slot
 * first. A slot is claimed by a compare-and-swap of its key to FAST_BUSY (so
 * its word is only ever read or written by the one thread holding it) and
 * published by storing the key; a pointer is in its slot or in gf_ptrs,
 * never both, and is taken from either exactly once. word = bytes << 6 |
 * ordinal: larger charges and ordinals go to gf_ptrs. */
#define FAST_BITS 12
#define FAST_BUSY 1ULL
#define FAST_ORD_BITS 6
_Static_assert(GF_MAX_ORDINALS <= 1 << FAST_ORD_BITS, "an ordinal fits its bits");

typedef struct fast_slot {
    _Atomic uint64_t key; /* 0 free, FAST_BUSY claimed, else the pointer */
    uint64_t word;
} fast_slot;
static fast_slot fast[1 << FAST_BITS];

static inline fast_slot *fast_home(uint64_t p)
{
    return &fast[gf_table_hash(p) >> (64 - FAST_BITS)];
}

static inline bool fast_put(uint64_t p, uint64_t bytes, int ordinal)
{
    fast_slot *s = fast_home(p);
    uint64_t free_key = 0;

    if (p <= FAST_BUSY || bytes >> (64 - FAST_ORD_BITS) || (unsigned)ordinal >= GF_MAX_ORDINALS ||
        !atomic_compare_exchange_strong_explicit(&s->key, &free_key, FAST_BUSY,
                                                 memory_order_acquire, memory_order_relaxed))
        return false;
    s->word = bytes << FAST_ORD_BITS | (uint64_t)ordinal;
    atomic_store_explicit(&s->key, p, memory_order_release);
    return true;
}

/* Takes p out of its slot: its word (bytes << FAST_ORD_BITS | ordinal). */
static inline bool fast_take(uint64_t p, uint64_t *word)
{
    fast_slot *s = fast_home(p);
    uint64_t k = p;

    if (__builtin_expect(atomic_load_explicit(&s->key, memory_order_relaxed) != p, 0) ||
        p <= FAST_BUSY ||
        !atomic_compare_exchange_strong_explicit(&s->key, &k, FAST_BUSY, memory_order_acquire,
                                                 memory_order_relaxed))
        return false;
    *word = s->word;
    atomic_store_explicit(&s->key, 0, memory_order_release);
    return true;
}

static inline uint64_t word_bytes(uint64_t w)
{
    return w >> FAST_ORD_BITS;
}

static inline int word_ordinal(uint64_t w)
{
    return (int)(w & ((1u << FAST_ORD_BITS) - 1));
}

static void __attribute__((noinline))
remember_slow(CUdeviceptr p, uint64_t bytes, int ordinal, int kind)
{
    gf_entry e = {.key = p, .bytes = bytes, .ordinal = ordinal, .kind = kind};
    if (!gf_table_put(&gf_ptrs, &e))
        gf_log(GF_LOG_ERROR, "out of host memory tracking %#llx: its %llu bytes stay counted",
               (unsigned long long)p, (unsigned long long)bytes);
}

static inline __attribute__((always_inline)) void remember(CUdeviceptr p, uint64_t bytes,
                                                           int ordinal, int kind)
{
    if (__builtin_expect(!fast_put(p, bytes, ordinal), 0))
        remember_slow(p, bytes, ordinal, kind);
}

typedef CUresult (*alloc_call)(void *dptr, size_t bytes, unsigned int flags);

static inline __attribute__((always_inline)) CUdeviceptr returned(void *dptr, int kind)
{
    return kind == KIND_LEGACY ? *(CUdeviceptr_v1 *)dptr : *(CUdeviceptr *)dptr;
}

/* Reserve first, then ask the driver: the fraction can never pass its limit,
 * not even for the duration of one call. Every case but the hot one. */
static CUresult __attribute__((noinline))
alloc_cold(void *dptr, size_t bytes, int kind, alloc_call call, unsigned int flags)
{
    int ord = gf_current_ordinal();
    const gf_ordinal *o = ord >= 0 ? gf_ordinal_of(ord) : NULL;
    CUresult rc;

    if (!o)
        return call(dptr, bytes, flags);
    if (!gf_admit(o, bytes))
        return CUDA_ERROR_OUT_OF_MEMORY;
    rc = call(dptr, bytes, flags);
    if (rc == CUDA_ERROR_OUT_OF_MEMORY && gf_reclaim_for(o, bytes))
        rc = call(dptr, bytes, flags); /* borrowers were made to give it back */
    if (rc != CUDA_SUCCESS) {
        gf_unadmit(o, bytes);
        return rc;
    }
    remember(returned(dptr, kind), bytes, ord, kind);
    return rc;
}

/* The driver refused the hot path's allocation: the reservation goes back. */
static CUresult __attribute__((noinline)) alloc_refused(int ord, uint64_t bytes, CUresult rc)
{
    gf_hot_release(&gf_state.hot[ord], bytes);
    return rc;
}

/* Inline into each hook, so that call is a direct call of the driver. The
 * hot ordinal's path (no agent: a refused call has no loan to take back);
 * a refusal goes the cold way, which reclaims before it refuses. Everything
 * off it is out of line, so the hook keeps few registers across the call. */
static inline __attribute__((always_inline)) CUresult
alloc_admitted(void *dptr, size_t bytes, int kind, alloc_call call, unsigned int flags)
{
    int ord = gf_current_ordinal();
    gf_hot *h = gf_hot_ordinal(ord);
    CUresult rc;

    if (__builtin_expect(!h || !gf_hot_reserve(h, bytes), 0))
        return alloc_cold(dptr, bytes, kind, call, flags);
    rc = call(dptr, bytes, flags);
    if (__builtin_expect(rc != CUDA_SUCCESS, 0))
        return alloc_refused(ord, bytes, rc);
    remember(returned(dptr, kind), bytes, ord, kind);
    return CUDA_SUCCESS;
}

static CUresult call_alloc(void *dptr, size_t bytes, unsigned int flags)
{
    (void)flags;
    return gf_cu.cuMemAlloc_v2(dptr, bytes);
}

static CUresult call_managed(void *dptr, size_t bytes, unsigned int flags)
{
    return gf_cu.cuMemAllocManaged(dptr, bytes, flags);
}

static CUresult call_legacy(void *dptr, size_t bytes, unsigned int flags)
{
    (void)flags;
    return gf_cu.cuMemAlloc(dptr, (unsigned int)bytes);
}

GF_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    GF_HOOK_ENTER(cu, cuMemAlloc_v2);
    return alloc_admitted(dptr, bytesize, KIND_PLAIN, call_alloc, 0);
}

GF_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    GF_HOOK_ENTER(cu, cuMemAllocManaged);
    return alloc_admitted(dptr, bytesize, KIND_MANAGED, call_managed, flags);
}

GF_EXPORT CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize)
{
    GF_HOOK_ENTER(cu, cuMemAlloc);
    return alloc_admitted(dptr, bytesize, KIND_LEGACY, call_legacy, 0);
}

/* The pitch is the driver's choice, so the charge comes after the call; a
 * refusal gives the memory straight back. call makes the allocation (the
 * _v2 or the pre-3.2 one) and returns the pointer and pitch it got. */
typedef CUresult (*pitch_call)(const size_t args[3], CUdeviceptr *dptr, size_t *pitch);

static CUresult alloc_pitched(const size_t args[3], CUdeviceptr *dptr, size_t *pitch,
                              pitch_call call, int kind)
{
    int ord = gf_current_ordinal();
    const gf_ordinal *o = ord >= 0 ? gf_ordinal_get(ord) : NULL;
    uint64_t least = (uint64_t)args[0] * args[1], bytes;
    CUresult rc;

    if (o && !gf_admit(o, least))
        return CUDA_ERROR_OUT_OF_MEMORY;
    rc = call(args, dptr, pitch);
    if (!o)
        return rc;
    gf_unadmit(o, least);
    if (rc != CUDA_SUCCESS)
        return rc;
    bytes = (uint64_t)*pitch * args[1];
    if (!gf_admit(o, bytes)) {
        if (kind == KIND_LEGACY)
            gf_cu.cuMemFree((CUdeviceptr_v1)*dptr);
        else
            gf_cu.cuMemFree_v2(*dptr);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    remember(*dptr, bytes, ord, kind);
    return rc;
}

static CUresult call_pitch(const size_t a[3], CUdeviceptr *dptr, size_t *pitch)
{
    return gf_cu.cuMemAllocPitch_v2(dptr, pitch, a[0], a[1], (unsigned int)a[2]);
}

static CUresult call_pitch_legacy(const size_t a[3], CUdeviceptr *dptr, size_t *pitch)
{
    CUdeviceptr_v1 d = 0;
    unsigned int p = 0;
    CUresult rc = gf_cu.cuMemAllocPitch(&d, &p, (unsigned int)a[0], (unsigned int)a[1],
                                        (unsigned int)a[2]);
    *dptr = d;
    *pitch = p;
    return rc;
}

GF_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height,
                                      unsigned int elemsize)
{
    size_t args[3] = {width, height, elemsize};
    CUdeviceptr d = 0;
    size_t pt = 0;
    CUresult rc;

    GF_HOOK_ENTER(cu, cuMemAllocPitch_v2);
    if (!dptr || !pitch)
        return gf_cu.cuMemAllocPitch_v2(dptr, pitch, width, height, elemsize);
    rc = alloc_pitched(args, &d, &pt, call_pitch, KIND_PITCH);
    if (rc == CUDA_SUCCESS) {
        *dptr = d;
        *pitch = pt;
    }
    return rc;
}

/* the pre-3.2 ABI: 32-bit pointer, pitch and sizes */
GF_EXPORT CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pPitch,
                                   unsigned int WidthInBytes, unsigned int Height,
                                   unsigned int ElementSizeBytes)
{
    size_t args[3] = {WidthInBytes, Height, ElementSizeBytes};
    CUdeviceptr d = 0;
    size_t pt = 0;
    CUresult rc;

    GF_HOOK_ENTER(cu, cuMemAllocPitch);
    if (!dptr || !pPitch)
        return gf_cu.cuMemAllocPitch(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
    rc = alloc_pitched(args, &d, &pt, call_pitch_legacy, KIND_LEGACY);
    if (rc == CUDA_SUCCESS) {
        *dptr = (CUdeviceptr_v1)d;
        *pPitch = (unsigned int)pt;
    }
    return rc;
}

/* Frees always reach the driver, tracked or not; the charge is returned only
 * when the driver accepted the free. Every case but a pointer in its slot. */
static CUresult __attribute__((noinline))
free_cold(CUdeviceptr dptr, CUresult (*call)(CUdeviceptr, void *), void *arg)
{
    gf_entry e;
    uint64_t bytes;
    gf_pool_head *pool;
    bool async = gf_async_take_fast(dptr, &bytes, &pool);
    bool tracked = !async && gf_table_take(&gf_ptrs, dptr, &e);
    CUresult rc;

    if (!async && !tracked && gf_async_take(dptr, &e)) {
        async = true;
        bytes = e.bytes;
        pool = (gf_pool_head *)(uintptr_t)e.aux;
    }
    if (async) { /* a stream-ordered allocation: its pool holds the charge */
        rc = call(dptr, arg);
        if (rc == CUDA_SUCCESS)
            gf_async_freed(pool, bytes);
        else
            gf_async_put_back(dptr, bytes, pool);
        return rc;
    }
    rc = call(dptr, arg);
    if (!tracked)
        return rc;
    if (rc != CUDA_SUCCESS) {
        gf_table_put(&gf_ptrs, &e);
        return rc;
    }
    gf_return_charge(e.ordinal, e.bytes);
    return rc;
}

/* The driver refused the free of a pointer taken from its slot: it stays
 * tracked, in the table. */
static CUresult __attribute__((noinline)) free_refused(CUdeviceptr p, uint64_t w, CUresult rc)
{
    gf_entry e = {.key = p, .bytes = word_bytes(w), .ordinal = word_ordinal(w)};
    gf_table_put(&gf_ptrs, &e);
    return rc;
}

static inline __attribute__((always_inline)) CUresult
free_tracked(CUdeviceptr dptr, CUresult (*call)(CUdeviceptr, void *), void *arg)
{
    uint64_t w;
    CUresult rc;

    if (__builtin_expect(!fast_take(dptr, &w), 0))
        return free_cold(dptr, call, arg);
    rc = call(dptr, arg);
    if (__builtin_expect(rc != CUDA_SUCCESS, 0))
        return free_refused(dptr, w, rc);
    gf_return_charge(word_ordinal(w), word_bytes(w));
    return CUDA_SUCCESS;
}

static CUresult call_free(CUdeviceptr p, void *arg)
{
    (void)arg;
    return gf_cu.cuMemFree_v2(p);
}

static CUresult call_free_legacy(CUdeviceptr p, void *arg)
{
    (void)arg;
    return gf_cu.cuMemFree((CUdeviceptr_v1)p);
}

GF_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    GF_HOOK_ENTER(cu, cuMemFree_v2);
    return free_tracked(dptr, call_free, NULL);
}

GF_EXPORT CUresult cuMemFree(CUdeviceptr_v1 dptr)
{
    GF_HOOK_ENTER(cu, cuMemFree);
    return free_tracked(dptr, call_free_legacy, NULL);
}

/* The driver refused the free of a stream-ordered pointer taken from its
 * slot: it stays tracked. */
static CUresult __attribute__((noinline))
free_async_refused(CUdeviceptr p, uint64_t bytes, gf_pool_head *pool, CUresult rc)
{
    gf_async_put_back(p, bytes, pool);
    return rc;
}

/* A stream-ordered free most often frees a stream-ordered pointer: its slot
 * is looked in first, inline; anything else as cuMemFree does. */
static inline __attribute__((always_inline)) CUresult
free_async_tracked(CUdeviceptr dptr, CUresult (*call)(CUdeviceptr, void *), void *arg)
{
    uint64_t bytes;
    gf_pool_head *pool;
    CUresult rc;

    if (__builtin_expect(!gf_async_take_fast(dptr, &bytes, &pool), 0))
        return free_tracked(dptr, call, arg);
    rc = call(dptr, arg);
    if (__builtin_expect(rc != CUDA_SUCCESS, 0))
        return free_async_refused(dptr, bytes, pool, rc);
    gf_async_freed(pool, bytes);
    return CUDA_SUCCESS;
}

/* cuMemFreeAsync also frees plain allocations: those carry their own charge. */
#define DEFINE_FREE_ASYNC(name)                                \
    static CUresult call_##name(CUdeviceptr p, void *stream)   \
    {                                                          \
        return gf_cu.name(p, (CUstream)stream);                \
    }                                                          \
    GF_EXPORT CUresult name(CUdeviceptr dptr, CUstream stream) \
    {                                                          \
        GF_HOOK_ENTER(cu, name);                               \
        return free_async_tracked(dptr, call_##name, stream);  \
    }
DEFINE_FREE_ASYNC(cuMemFreeAsync)
DEFINE_FREE_ASYNC(cuMemFreeAsync_ptsz)

/* In a forked child the parent's device memory is not ours to free. */
static void alloc_after_fork(void)
{
    gf_table_reset(&gf_ptrs);
    memset(fast, 0, sizeof(fast));
}

GF_HIDDEN const gf_family gf_family_alloc = {.name = "alloc", .after_fork = alloc_after_fork};
