/* SPDX-License-Identifier: Apache-2.0 */
/* The model's records, shared by model.c (bookkeeping) and placement.c
 * (choosing GPUs). Not part of the API. */
#ifndef GPUFRAC_SCHED_MODEL_INT_H
#define GPUFRAC_SCHED_MODEL_INT_H

#include <pthread.h>

#include "model.h"

typedef struct mgpu {
    char *id;
    int index;
    bool has_uuid;
    uint64_t total;       /* bytes; 0 = unknown */
    uint64_t requested;   /* sum of the requests placed here */
    unsigned pods[2];     /* by gf_mode */
    unsigned compute_pct; /* SM percents of the sm-sharing pods placed here */
    bool closed;          /* the device plugin's, not reserved for fractions (model_reserve.c) */
} mgpu;

struct mpod;

/* First member of every hashed record. */
typedef struct mentry {
    char *key;
    struct mentry *hnext;
    size_t hash; /* of key (gf_model_hash), kept by the table */
} mentry;

/* A namespace (model_quota.c): its GPU memory quota and what its placed
 * fractional pods request. Kept while the Namespace exists or pods point
 * at it. */
typedef struct mns {
    mentry e; /* key: the namespace name */
    bool present;
    bool has_quota;
    uint64_t quota; /* bytes */
    char *error;    /* the quota annotation could not be read: fail closed */
    uint64_t used;  /* sum of the charges of its placed pods */
    unsigned refs;  /* pods pointing here */
    unsigned gen;
} mns;

/* Filter reads the first two cache lines of a node (the struct is
 * allocated on a line, its name inline after it): keep them first. */
typedef struct mnode {
    mentry e;     /* key: the node name */
    bool present; /* false: only referenced by pods, no Node seen */
    bool unschedulable, ready, memory_known;
    gf_inventory_source source;
    char *inventory_error; /* NULL = fine */
    size_t n_gpus;
    mgpu *gpus;
    /* The summary placement reads instead of every GPU, recomputed from the
     * GPUs (gf_model_node_summarize) after every change to their total,
     * requested bytes or pod counts: busy = GPUs with a fraction;
     * order[policy] = the positions 0..n_gpus in that policy's candidate
     * order (ties: lower position first); the sums of the GPUs' total and
     * requested bytes. */
    unsigned busy;
    unsigned dp_gpus; /* nvidia.com/gpu allocatable: the device plugin hands GPUs out */
    uint8_t order[2][GF_SCHED_GPUS_MAX];
    uint64_t sum_total, sum_requested;
    struct mpod *pods; /* placed here, linked by nnext/nprev */
    unsigned gen;
    char **reserved; /* ids of the GPUs reservation pods hold for fractions */
    size_t n_reserved;
} mnode;

typedef struct mpod {
    mentry e; /* key: the pod uid */
    char *container;
    struct mpod *nnext, *nprev;
    mnode *node;   /* NULL: pending */
    char *devices; /* the GPUs as written (annotation or our placement) */
    gf_amount request;
    gf_mode mode;
    int num_devices;
    unsigned compute_pct; /* sm-sharing with a portion: floor(portion x 100); else 0 */
    int32_t priority;
    gf_amount limit;
    bool init;           /* container is an init container */
    uint8_t n_more;      /* further fractional containers (gf_sched_pod.more) */
    gf_sched_part *more; /* malloc'd; NULL when n_more == 0 */
    bool assumed;        /* placed by us, not yet confirmed by the watch */
    bool held;           /* assumed by filter's one-node answer; no bind yet */
    bool resolved;       /* devices matched GPUs of node and are charged */
    uint8_t n_gpus;
    uint8_t gpu[GF_SCHED_GPUS_MAX]; /* positions in node->gpus */
    uint64_t assumed_at;
    unsigned gen;
    mns *ns;             /* its namespace (model_quota.c) */
    uint64_t ns_charged; /* what it adds to ns->used now */
} mpod;

typedef struct mtable {
    mentry **buckets;
    size_t n_buckets, count;
} mtable;

struct gf_model {
    pthread_rwlock_t lock;
    char *prefix;
    mtable nodes, pods;
    unsigned gen[2];
    mtable nss;      /* namespaces (model_quota.c) */
    unsigned ns_gen; /* their re-list generation */
};

/* The bytes request charges on a GPU of total bytes (0 when unresolvable). */
uint64_t gf_sched_charge_portion(const gf_amount *request, uint64_t total);

static inline uint64_t gf_sched_charge(const gf_amount *request, uint64_t total)
{
    return request->is_portion ? gf_sched_charge_portion(request, total) : request->bytes;
}

/* The charge of first (init or not) and more[0..n) together: the largest
 * init request or the sum of the others, whichever is more. */
uint64_t gf_sched_charge_parts(const gf_amount *first, bool first_init, const gf_sched_part *more,
                               size_t n, uint64_t total);

static inline uint64_t gf_sched_mpod_charge(const mpod *p, uint64_t total)
{
    return gf_sched_charge_parts(&p->request, p->init, p->more, p->n_more, total);
}

/* No fraction of the other mode on g. */
static inline bool gf_sched_gpu_mode_ok(const mgpu *g, gf_mode mode)
{
    return g->pods[mode == GF_MODE_SM_SHARING ? GF_MODE_TIME_SLICING : GF_MODE_SM_SHARING] == 0;
}

/* The SM percent pod promises on each of its GPUs (0: none). */
unsigned gf_sched_pod_compute_pct(const gf_sched_pod *pod);

/* Would g take pod now (memory, mode, limit, SM share)? */
bool gf_sched_gpu_fits(const mgpu *g, const gf_sched_pod *pod);

/* Adds (sign > 0) or removes p's charge on the GPUs of n it is placed on
 * (and summarizes n again). */
void gf_model_charge(mnode *n, const mpod *p, int sign);

/* Recomputes n's summary (order, busy, sums) from its GPUs (placement.c). */
void gf_model_node_summarize(mnode *n);

/* Lookups, the caller holding the lock. */
mnode *gf_model_node_find(const gf_model *m, const char *name);
mpod *gf_model_pod_find(const gf_model *m, const char *uid);

/* The tables' hash of a key. */
size_t gf_model_hash(const char *key);
/* gf_model_node_find with the name's hash already known. */
mnode *gf_model_node_find_hashed(const gf_model *m, const char *name, size_t hash);
/* Filter walks thousands of nodes, each lookup a chain of dependent loads
 * (bucket, node, its GPUs): it starts each stage a few nodes ahead, so they
 * overlap the work on the nodes before. Each only prefetches, reading what
 * the stage before started loading. */
void gf_model_bucket_prefetch(const gf_model *m, size_t hash);
void gf_model_node_prefetch(const gf_model *m, size_t hash);
void gf_model_gpus_prefetch(const gf_model *m, const char *name, size_t hash);

/* Chooses n GPUs of node for pod (positions into pos); on no fit fills
 * verdict's reason/status and returns -1. Scores into verdict on success. */
int gf_sched_choose(const mnode *node, const gf_sched_pod *pod, gf_policy policy, uint8_t *pos,
                    gf_sched_verdict *verdict);

/* Recomputes the closed flag of n's GPUs (model_reserve.c): with dp_gpus,
 * only the GPUs a reservation holds are open to fractions. */
void gf_model_reserved_apply(mnode *n);
void gf_model_reserved_free(mnode *n);

/* The hash tables of model.c. */
mentry *gf_model_table_find(const mtable *t, const char *key);
int gf_model_table_add(mtable *t, mentry *e);
void gf_model_table_remove(mtable *t, mentry *e);

/* Namespaces (model_quota.c). attach: p's namespace record (created when
 * new); detach before p is freed; charge: ns->used follows p's placement
 * (call after every place/unplace/re-resolve; idempotent). */
int gf_model_ns_attach(gf_model *m, mpod *p, const char *ns);
void gf_model_ns_detach(gf_model *m, mpod *p);
void gf_model_ns_charge(mpod *p);
void gf_model_ns_free_all(gf_model *m);
/* pod's namespace when it has a quota (valid or not), else NULL: no limit. */
const mns *gf_model_quota_of(const gf_model *m, const gf_sched_pod *pod);
/* What pod adds to ns->used already (placed there: a hold, a retry; it is
 * not counted twice); once per request, like gf_model_quota_of. */
uint64_t gf_model_quota_already(const gf_model *m, const mns *ns, const gf_sched_pod *pod);
/* Whether pod, placed at pos of n, stays within the quota of ns (from
 * gf_model_quota_of; NULL: yes; already: gf_model_quota_already's); else
 * fills v (GF_FAIL, the reason naming the quota and the use). */
bool gf_model_quota_fits(const mns *ns, uint64_t already, const gf_sched_pod *pod, const mnode *n,
                         const uint8_t *pos, gf_sched_verdict *v);

/* Writes the placement of pod record p (placed, resolved). */
void gf_sched_placement_fill(const gf_model *m, const mpod *p, gf_sched_placement *out);

/* Places pod at positions pos of node as an assumption (write lock held). */
int gf_model_assume_locked(gf_model *m, const gf_sched_pod *pod, mnode *node, const uint8_t *pos,
                           size_t n, gf_error *err);

/* Unplaces p when it is an assumption (write lock held). */
void gf_model_forget_locked(mpod *p);

#endif
