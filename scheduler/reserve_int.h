/* SPDX-License-Identifier: Apache-2.0 */
/* The reserver's records, shared by reserve.c (the watch's side) and
 * reserve_run.c (its thread and API calls). Not part of the API. */
#ifndef GPUFRAC_SCHED_RESERVE_INT_H
#define GPUFRAC_SCHED_RESERVE_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "reserve.h"

#define TICK_MS 250
#define ACTIONS_MAX 16

typedef struct rres { /* a reservation pod */
    char uid[GF_SCHED_UID_MAX], name[GF_SCHED_NAME_MAX], node[GF_SCHED_NAME_MAX];
    char gpu[GF_SCHED_GPU_ID_MAX]; /* "" until it reports */
    bool bad;                      /* to delete: failed, or reported no GPU of the node */
    bool deleting;                 /* DELETE sent or about to be */
    bool seen;                     /* in the current re-list */
    uint64_t idle_since;           /* ms; 0 while its GPU hosts fractions */
    bool used;                     /* a fraction was placed on its GPU */
} rres;

typedef struct rwhole { /* a bound pod asking nvidia.com/gpu (reservations too) */
    char uid[GF_SCHED_UID_MAX], node[GF_SCHED_NAME_MAX];
    unsigned gpus;
    bool seen;
} rwhole;

typedef struct rnode {
    char name[GF_SCHED_NAME_MAX];
    unsigned want;           /* reservations filter asked for */
    bool creating;           /* a POST in flight */
    bool arrived;            /* the watch brought a reservation of the node since */
    uint64_t retry_at;       /* no reservation before this (ms) */
    uint64_t starting_until; /* created, maybe not in the watch yet (ms) */
    char error[160];         /* why the last one failed */
    int labelled;            /* reserved count last written to the label; -1: never */
} rnode;

struct gf_reserver {
    gf_kube *kube;
    gf_model *model;
    char ns[GF_SCHED_NAME_MAX], image[512];
    unsigned idle_s;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    pthread_t thread;
    bool started;
    atomic_bool stop;
    rres *res;
    size_t n_res, cap_res;
    rwhole *whole;
    size_t n_whole, cap_whole;
    rnode *nodes;
    size_t n_nodes, cap_nodes;
};

/* Helpers over the records; the lock held. */
void *gf_rsv_grow(void *arr, size_t *cap, size_t n, size_t size);
rnode *gf_rsv_node_get(gf_reserver *r, const char *name);
bool gf_rsv_res_open(const rres *x);
size_t gf_rsv_open_on(const gf_reserver *r, const char *node);
size_t gf_rsv_pending_on(const gf_reserver *r, const char *node, const char **name);
unsigned gf_rsv_used_on(const gf_reserver *r, const char *node);
void gf_rsv_node_sync(gf_reserver *r, const char *node);

#endif
