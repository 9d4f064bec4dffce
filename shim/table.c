/* SPDX-License-Identifier: Apache-2.0 */
/* The table's slow paths (table.h has the fast ones): a contended stripe
 * lock and growth. A thread that finds the lock taken spins briefly, then
 * yields: on a machine with more runnable threads than cores the holder may
 * have been preempted, and spinning for its whole time slice is what made
 * the alloc/free pair scale badly in threads. */
#include "table.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "shim.h"

GF_HIDDEN void gf_stripe_lock_slow(gf_stripe *s)
{
    for (int spins = 0;; spins++) {
        if (spins < 64)
            __builtin_ia32_pause();
        else
            sched_yield(); /* the holder may be off the CPU */
        if (!atomic_load_explicit(&s->lock, memory_order_relaxed) &&
            !atomic_exchange_explicit(&s->lock, 1, memory_order_acquire))
            return;
    }
}

GF_HIDDEN void gf_table_init(gf_table *t)
{
    memset(t, 0, sizeof(*t));
}

GF_HIDDEN void gf_table_reset(gf_table *t)
{
    /* after fork: the old memory may be mid-update by a thread that no longer
     * exists, so it is dropped, not freed */
    gf_table_init(t);
}

static bool grow(gf_stripe *s)
{
    uint32_t ncap = s->cap ? s->cap * 2 : 64;
    gf_entry *old = s->slots;
    uint32_t ocap = s->cap;

    if (s->live * 2 < s->cap)
        ncap = s->cap; /* mostly tombstones: rebuild at the same size */
    s->slots = calloc(ncap, sizeof(gf_entry));
    if (!s->slots) {
        s->slots = old;
        return false;
    }
    s->cap = ncap;
    s->used = s->live;
    for (uint32_t i = 0; i < ocap; i++)
        if (old[i].key > 1)
            *gf_stripe_free_slot(s, gf_table_hash(old[i].key)) = old[i];
    free(old);
    return true;
}

GF_HIDDEN bool gf_table_put_slow(gf_stripe *s, uint64_t key, uint64_t h, const gf_entry *in)
{
    bool ok = grow(s);
    if (ok) {
        gf_entry *e = gf_stripe_free_slot(s, h);
        s->used += e->key == 0;
        s->live++;
        *e = *in;
        e->key = key;
    }
    gf_stripe_unlock(s);
    return ok;
}

GF_HIDDEN bool gf_table_set(gf_table *t, const gf_entry *in)
{
    uint64_t key = gf_table_key(in->key), h = gf_table_hash(key);
    gf_stripe *s = gf_table_stripe(t, h);

    gf_stripe_lock(s);
    for (uint32_t mask = s->cap - 1, i = gf_table_home(h) & mask; s->cap; i = (i + 1) & mask) {
        gf_entry *e = &s->slots[i];
        if (e->key == 0)
            break;
        if (e->key == key) {
            *e = *in;
            e->key = key;
            gf_stripe_unlock(s);
            return true;
        }
    }
    return gf_stripe_insert(s, key, h, in);
}

GF_HIDDEN void gf_table_each(gf_table *t, void (*fn)(gf_entry *e, void *arg), void *arg)
{
    for (int i = 0; i < GF_TABLE_STRIPES; i++) {
        gf_stripe *s = &t->stripes[i];
        gf_stripe_lock(s);
        for (uint32_t j = 0; j < s->cap; j++)
            if (s->slots[j].key > 1)
                fn(&s->slots[j], arg);
        gf_stripe_unlock(s);
    }
}
