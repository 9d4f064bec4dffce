/* SPDX-License-Identifier: Apache-2.0 */
#include "table.h"

#include <stdlib.h>
#include <string.h>

#include "shim.h"

static inline uint64_t mix(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ULL;
    return k ^ (k >> 33);
}

static inline uint64_t fixkey(uint64_t k)
{
    return k < 2 ? k + 0x8000000000000000ULL : k;
}

static inline void stripe_lock(gf_stripe *s)
{
    while (atomic_flag_test_and_set_explicit(&s->lock, memory_order_acquire))
        __builtin_ia32_pause();
}

static inline void stripe_unlock(gf_stripe *s)
{
    atomic_flag_clear_explicit(&s->lock, memory_order_release);
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

static gf_entry *probe(gf_stripe *s, uint64_t key, uint64_t h, bool for_insert)
{
    uint32_t mask = s->cap - 1;
    gf_entry *tomb = NULL;
    for (uint32_t i = (uint32_t)h & mask;; i = (i + 1) & mask) {
        gf_entry *e = &s->slots[i];
        if (e->key == key)
            return e;
        if (e->key == 1 && !tomb)
            tomb = e;
        if (e->key == 0)
            return for_insert ? (tomb ? tomb : e) : NULL;
    }
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
            *probe(s, old[i].key, mix(old[i].key) >> 8, true) = old[i];
    free(old);
    return true;
}

GF_HIDDEN bool gf_table_put(gf_table *t, const gf_entry *in)
{
    uint64_t key = fixkey(in->key), h = mix(key);
    gf_stripe *s = &t->stripes[h % GF_TABLE_STRIPES];
    bool ok = true;

    stripe_lock(s);
    if ((s->used + 1) * 4 >= s->cap * 3 && !grow(s)) {
        ok = false;
        goto out;
    }
    gf_entry *e = probe(s, key, h >> 8, true);
    if (e->key != key) {
        if (e->key == 0)
            s->used++;
        s->live++;
    }
    *e = *in;
    e->key = key;
out:
    stripe_unlock(s);
    return ok;
}

static bool lookup(gf_table *t, uint64_t key, gf_entry *out, bool remove)
{
    key = fixkey(key);
    uint64_t h = mix(key);
    gf_stripe *s = &t->stripes[h % GF_TABLE_STRIPES];
    bool found = false;

    stripe_lock(s);
    if (s->cap) {
        gf_entry *e = probe(s, key, h >> 8, false);
        if (e) {
            found = true;
            if (out)
                *out = *e;
            if (remove) {
                /* no tombstone when the run ends here: keeps probes short
                 * for the common allocate-then-free pattern */
                uint32_t next = (uint32_t)(e - s->slots + 1) & (s->cap - 1);
                if (s->slots[next].key == 0) {
                    e->key = 0;
                    s->used--;
                } else {
                    e->key = 1;
                }
                s->live--;
            }
        }
    }
    stripe_unlock(s);
    return found;
}

GF_HIDDEN bool gf_table_take(gf_table *t, uint64_t key, gf_entry *out)
{
    return lookup(t, key, out, true);
}

GF_HIDDEN bool gf_table_get(gf_table *t, uint64_t key, gf_entry *out)
{
    return lookup(t, key, out, false);
}

GF_HIDDEN void gf_table_each(gf_table *t, void (*fn)(gf_entry *e, void *arg), void *arg)
{
    for (int i = 0; i < GF_TABLE_STRIPES; i++) {
        gf_stripe *s = &t->stripes[i];
        stripe_lock(s);
        for (uint32_t j = 0; j < s->cap; j++)
            if (s->slots[j].key > 1)
                fn(&s->slots[j], arg);
        stripe_unlock(s);
    }
}
