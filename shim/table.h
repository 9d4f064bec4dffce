/* SPDX-License-Identifier: Apache-2.0 */
/* A process-local map from a handle (device pointer, VMM handle, array) to
 * what was charged for it. Striped locks keep threads apart; each stripe is
 * an open-addressing table that grows. All-zero is a valid empty table, so
 * tables work before any constructor runs. */
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

typedef struct gf_stripe {
    atomic_flag lock; /* held for a few dozen instructions: spin, never sleep */
    gf_entry *slots;
    uint32_t cap, used, live;
} gf_stripe;

typedef struct gf_table {
    gf_stripe stripes[GF_TABLE_STRIPES];
} gf_table;

void gf_table_init(gf_table *t);
/* Keys 0 and 1 are reserved; callers map them away (device pointers and
 * handles are never 0 or 1 in practice; gf_table_key does it anyway). */
bool gf_table_put(gf_table *t, const gf_entry *e);
bool gf_table_take(gf_table *t, uint64_t key, gf_entry *out);
bool gf_table_get(gf_table *t, uint64_t key, gf_entry *out);
/* Calls fn on every live entry under the stripe lock. */
void gf_table_each(gf_table *t, void (*fn)(gf_entry *e, void *arg), void *arg);
void gf_table_reset(gf_table *t);

#endif
