/* SPDX-License-Identifier: Apache-2.0 */
/* A process-local map from a handle (device pointer, VMM handle, array) to
 * what was charged for it. Striped locks keep threads apart; each stripe is
 * an open-addressing table that grows, on a cache line of its own. All-zero
 * is a valid empty table, so tables work before any constructor runs. */
#ifndef GPUFRAC_TABLE_H
#define GPUFRAC_TABLE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define GF_TABLE_STRIPES 64

typedef struct gf_entry {
    uint64_t key; /* 0 = empty, 1 = deleted */
    uint64_t bytes;
    int32_t ordinal;
    int32_t kind;
    uint64_t aux;
} gf_entry;

/* One cache line each, so threads on different stripes never share one. */
typedef struct gf_stripe {
    _Alignas(64) _Atomic uint32_t lock; /* held for a few dozen instructions: spin, then yield */
    uint32_t cap, used, live;
    gf_entry *slots;
    char pad[40];
} gf_stripe;
_Static_assert(sizeof(gf_stripe) == 64, "a stripe is one cache line");

typedef struct gf_table {
    gf_stripe stripes[GF_TABLE_STRIPES];
} gf_table;

void gf_table_init(gf_table *t);
void gf_table_reset(gf_table *t);
/* Replaces the entry with e's key, or adds e (for a handle whose figure
 * changes). False when out of host memory. */
bool gf_table_set(gf_table *t, const gf_entry *e);
/* Calls fn on every live entry under the stripe lock. */
void gf_table_each(gf_table *t, void (*fn)(gf_entry *e, void *arg), void *arg);

/* ---- the fast paths, inline: one multiply, one lock, one probe, one copy ---- */
#define GF_TABLE_STRIPE_BITS 6
_Static_assert(GF_TABLE_STRIPES == 1 << GF_TABLE_STRIPE_BITS, "stripes are a power of two");

void gf_stripe_lock_slow(gf_stripe *s);
/* Grows s, inserts e and unlocks s. */
bool gf_table_put_slow(gf_stripe *s, uint64_t key, uint64_t h, const gf_entry *e);

/* Keys 0 and 1 are reserved (empty, deleted): callers' 0 and 1 are mapped
 * away. Fibonacci hashing: the high bits of the product are well mixed. */
static inline uint64_t gf_table_key(uint64_t k)
{
    return k < 2 ? k + 0x8000000000000000ULL : k;
}

static inline uint64_t gf_table_hash(uint64_t key)
{
    return key * 0x9e3779b97f4a7c15ULL;
}

static inline gf_stripe *gf_table_stripe(gf_table *t, uint64_t h)
{
    return &t->stripes[h >> (64 - GF_TABLE_STRIPE_BITS)];
}

static inline uint32_t gf_table_home(uint64_t h)
{
    return (uint32_t)(h >> 24);
}

static inline void gf_stripe_lock(gf_stripe *s)
{
    if (__builtin_expect(atomic_exchange_explicit(&s->lock, 1, memory_order_acquire), 0))
        gf_stripe_lock_slow(s);
}

static inline void gf_stripe_unlock(gf_stripe *s)
{
    atomic_store_explicit(&s->lock, 0, memory_order_release);
}

/* The first empty or deleted slot from h's home. Caller holds the lock. */
static inline gf_entry *gf_stripe_free_slot(gf_stripe *s, uint64_t h)
{
    uint32_t mask = s->cap - 1, i = gf_table_home(h) & mask;
    while (s->slots[i].key > 1)
        i = (i + 1) & mask;
    return &s->slots[i];
}

/* Adds a new entry to s, whose lock the caller holds; unlocks it. */
static inline bool gf_stripe_insert(gf_stripe *s, uint64_t key, uint64_t h, const gf_entry *in)
{
    if (__builtin_expect((s->used + 1) * 4 >= s->cap * 3, 0))
        return gf_table_put_slow(s, key, h, in);
    gf_entry *e = gf_stripe_free_slot(s, h);
    s->used += e->key == 0;
    s->live++;
    *e = *in;
    e->key = key;
    gf_stripe_unlock(s);
    return true;
}

/* Adds e. A key already present is not looked for: the driver hands out an
 * address only while no live allocation has it, so an older entry with the
 * same key is one the driver freed unseen (a destroyed context's), and
 * taking either entry later returns a charge the driver no longer holds.
 * False when out of host memory. */
static inline bool gf_table_put(gf_table *t, const gf_entry *in)
{
    uint64_t key = gf_table_key(in->key), h = gf_table_hash(key);
    gf_stripe *s = gf_table_stripe(t, h);

    gf_stripe_lock(s);
    return gf_stripe_insert(s, key, h, in);
}

/* Finds key (copied to out when out is not NULL) and, with remove, removes
 * it: without a tombstone when the run ends after it, which keeps probes
 * short for the allocate-then-free pattern. */
static inline bool gf_table_find(gf_table *t, uint64_t key, gf_entry *out, bool remove)
{
    key = gf_table_key(key);
    uint64_t h = gf_table_hash(key);
    gf_stripe *s = gf_table_stripe(t, h);
    bool found = false;

    gf_stripe_lock(s);
    if (__builtin_expect(s->cap != 0, 1)) {
        uint32_t mask = s->cap - 1, i = gf_table_home(h) & mask;
        while (s->slots[i].key != key && s->slots[i].key != 0)
            i = (i + 1) & mask;
        gf_entry *e = &s->slots[i];
        if ((found = e->key == key)) {
            if (out)
                *out = *e;
            if (remove) {
                bool last = s->slots[(i + 1) & mask].key == 0;
                e->key = last ? 0 : 1;
                s->used -= last;
                s->live--;
            }
        }
    }
    gf_stripe_unlock(s);
    return found;
}

static inline bool gf_table_take(gf_table *t, uint64_t key, gf_entry *out)
{
    return gf_table_find(t, key, out, true);
}

static inline bool gf_table_get(gf_table *t, uint64_t key, gf_entry *out)
{
    return gf_table_find(t, key, out, false);
}

#endif
