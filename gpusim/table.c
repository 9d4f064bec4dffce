/* SPDX-License-Identifier: Apache-2.0 */
/* Striped hash tables for device pointers and handles: one mutex per stripe,
 * so threads allocating at once rarely meet. Keys are 256-byte aligned fake
 * addresses or handle values. */
#include <stdlib.h>

#include "gs.h"

gs_table gs_ptrs;
gs_table gs_handles;

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void init_tables(void)
{
    for (int i = 0; i < GS_STRIPES; i++) {
        pthread_mutex_init(&gs_ptrs.s[i].mu, NULL);
        pthread_mutex_init(&gs_handles.s[i].mu, NULL);
    }
}

static inline uint64_t hash(uint64_t k)
{
    k ^= k >> 29;
    k *= 0x9e3779b97f4a7c15ULL;
    return k ^ (k >> 32);
}

#define STRIPE(h) ((unsigned)((h) % GS_STRIPES))
#define BUCKET(h) ((unsigned)(((h) >> 8) % GS_BUCKETS))

int gs_table_put(gs_table *t, uint64_t key, uint64_t size, int pdev, int kind, void *owner)
{
    uint64_t h = hash(key);
    gs_entry *e = malloc(sizeof *e);
    if (!e)
        return -1;
    pthread_once(&init_once, init_tables);
    *e = (gs_entry){.key = key, .size = size, .pdev = pdev, .kind = kind, .owner = owner};
    pthread_mutex_lock(&t->s[STRIPE(h)].mu);
    e->next = t->s[STRIPE(h)].b[BUCKET(h)];
    t->s[STRIPE(h)].b[BUCKET(h)] = e;
    pthread_mutex_unlock(&t->s[STRIPE(h)].mu);
    return 0;
}

gs_entry *gs_table_take(gs_table *t, uint64_t key)
{
    uint64_t h = hash(key);
    gs_entry **pp, *e = NULL;
    pthread_once(&init_once, init_tables);
    pthread_mutex_lock(&t->s[STRIPE(h)].mu);
    for (pp = &t->s[STRIPE(h)].b[BUCKET(h)]; *pp; pp = &(*pp)->next) {
        if ((*pp)->key == key) {
            e = *pp;
            *pp = e->next;
            break;
        }
    }
    pthread_mutex_unlock(&t->s[STRIPE(h)].mu);
    return e;
}

bool gs_table_get(gs_table *t, uint64_t key, gs_entry *out)
{
    uint64_t h = hash(key);
    bool found = false;
    pthread_once(&init_once, init_tables);
    pthread_mutex_lock(&t->s[STRIPE(h)].mu);
    for (gs_entry *e = t->s[STRIPE(h)].b[BUCKET(h)]; e; e = e->next) {
        if (e->key == key) {
            *out = *e;
            found = true;
            break;
        }
    }
    pthread_mutex_unlock(&t->s[STRIPE(h)].mu);
    return found;
}

void gs_entry_free(gs_entry *e)
{
    free(e);
}

gs_entry *gs_table_take_if(gs_table *t, bool (*pred)(const gs_entry *, void *), void *arg)
{
    gs_entry *out = NULL;
    pthread_once(&init_once, init_tables);
    for (int s = 0; s < GS_STRIPES; s++) {
        pthread_mutex_lock(&t->s[s].mu);
        for (int b = 0; b < GS_BUCKETS; b++) {
            gs_entry **pp = &t->s[s].b[b];
            while (*pp) {
                gs_entry *e = *pp;
                if (pred(e, arg)) {
                    *pp = e->next;
                    e->next = out;
                    out = e;
                } else {
                    pp = &e->next;
                }
            }
        }
        pthread_mutex_unlock(&t->s[s].mu);
    }
    return out;
}

/* fork child: single-threaded, the parent's entries are not ours. */
void gs_table_forget_all(gs_table *t)
{
    for (int s = 0; s < GS_STRIPES; s++) {
        pthread_mutex_init(&t->s[s].mu, NULL);
        for (int b = 0; b < GS_BUCKETS; b++) {
            gs_entry *e = t->s[s].b[b];
            while (e) {
                gs_entry *n = e->next;
                free(e);
                e = n;
            }
            t->s[s].b[b] = NULL;
        }
    }
}
