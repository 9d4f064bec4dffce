/* SPDX-License-Identifier: Apache-2.0 */
/* async.c's side of a free: the one call between families. alloc.c's frees
 * (cuMemFree*, cuMemFreeAsync*) take every device pointer; one that came from
 * a pool is async.c's, and only async.c knows what its pool is charged.
 *
 * A stream-ordered pointer sits in its direct-mapped slot (below) or in
 * async.c's table behind them, never both, and is taken from either exactly
 * once. A slot is claimed by a compare-and-swap of its key to
 * GF_ASYNC_SLOT_BUSY (so only the thread holding it reads or writes the rest)
 * and published by storing the key. The slot's take and the count of a
 * pool's live bytes are inline here, so that a free of a stream-ordered
 * pointer calls nothing but the driver. */
#ifndef GPUFRAC_SHIM_ASYNC_H
#define GPUFRAC_SHIM_ASYNC_H

#include <stdbool.h>

#include "shim.h"
#include "table.h"

#define GF_ASYNC_SLOT_BITS 12
#define GF_ASYNC_SLOT_BUSY 1ULL
#define GF_POOL_DESTROYED (1ULL << 63) /* in outstanding: the pool was destroyed */

/* The head of async.c's record of a pool: what a free changes. */
typedef struct gf_pool_head {
    _Atomic uint64_t outstanding; /* bytes of live allocations from it, | GF_POOL_DESTROYED */
} gf_pool_head;

typedef struct gf_async_slot {
    _Atomic uint64_t key; /* 0 free, GF_ASYNC_SLOT_BUSY claimed, else the pointer */
    uint64_t bytes;
    gf_pool_head *pool;
    uint64_t pad;
} gf_async_slot;
GF_HIDDEN extern gf_async_slot gf_async_slots[1 << GF_ASYNC_SLOT_BITS];

static inline gf_async_slot *gf_async_slot_home(uint64_t p)
{
    return &gf_async_slots[gf_table_hash(p) >> (64 - GF_ASYNC_SLOT_BITS)];
}

/* Takes p out of its slot: its bytes and pool record; false if it is not
 * there (one load when it is not). */
static inline bool gf_async_take_fast(CUdeviceptr p, uint64_t *bytes, gf_pool_head **pool)
{
    gf_async_slot *s = gf_async_slot_home(p);
    uint64_t k = p;

    if (__builtin_expect(atomic_load_explicit(&s->key, memory_order_relaxed) != p, 0) ||
        p <= GF_ASYNC_SLOT_BUSY ||
        !atomic_compare_exchange_strong_explicit(&s->key, &k, GF_ASYNC_SLOT_BUSY,
                                                 memory_order_acquire, memory_order_relaxed))
        return false;
    *bytes = s->bytes;
    *pool = s->pool;
    atomic_store_explicit(&s->key, 0, memory_order_release);
    return true;
}

/* Takes a stream-ordered allocation out of the table behind the slots; false
 * if dptr is none. */
GF_HIDDEN bool gf_async_take(CUdeviceptr dptr, gf_entry *out);
/* The driver refused the free: the allocation is tracked again. */
GF_HIDDEN void gf_async_put_back(CUdeviceptr dptr, uint64_t bytes, gf_pool_head *pool);
/* The driver took the free of a destroyed pool's allocation (old: what
 * outstanding held before it). */
GF_HIDDEN void gf_async_freed_destroyed(gf_pool_head *pool, uint64_t bytes, uint64_t old);

/* The driver took the free. A live pool's charge stays for its reservation;
 * a destroyed one gives the bytes back (out of line, under async.c's lock). */
static inline void gf_async_freed(gf_pool_head *pool, uint64_t bytes)
{
    uint64_t old = atomic_fetch_sub(&pool->outstanding, bytes);

    if (__builtin_expect(old & GF_POOL_DESTROYED, 0))
        gf_async_freed_destroyed(pool, bytes, old);
}

#endif
