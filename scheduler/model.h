/* SPDX-License-Identifier: Apache-2.0 */
/* The scheduler extender's in-memory cluster model: GPU inventory per node,
 * the fractional pods placed on each GPU, and the placement of a new
 * fractional pod.
 *
 * Accounting. Per GPU: total memory (bytes), requested bytes (the sum of the
 * REQUESTS of the pods placed there, never the limits), the compute mode of
 * the fractions on it (none while empty) and the pod count. A portion request
 * is resolved against each GPU's own memory with gf_amount_resolve (floored to
 * whole MiB, as the node agent enforces it), not KAI's 2-decimal rounding.
 *
 * Placement of a pod with request R on N devices (all on one node) in mode M:
 * a GPU is a candidate when (total - requested) >= R, its mode is M or none
 * (modes never share a GPU), its memory holds the pod's limit (what bind
 * writes and the node enforces; refused with bind's message otherwise) and,
 * for an sm-sharing pod with a compute portion, the SM percents already
 * promised on it plus the pod's (floor(portion x 100), as the node sets
 * CUDA_MPS_ACTIVE_THREAD_PERCENTAGE) stay <= 100. sm-sharing pods without a
 * portion promise no share. binpack (default): fullest candidate first
 * (highest requested/total), idle GPUs last; spread: emptiest first.
 * Scores 0..10 per node: binpack 0..4 when only idle GPUs take the pod (more
 * for nodes whose GPUs are already in use: consolidation), 5..10 when a partly
 * used GPU takes it (by that GPU's fullness after placement); spread
 * round(5 x free share of the fullest chosen GPU + 5 x free share of the
 * node's GPU memory), both after placement.
 *
 * Bookkeeping. gf_model_reserve (or gf_model_assume) counts a placement at
 * once, before the watch echoes the bind, so a burst of pods submitted
 * together is never over-packed. Watch events feed gf_model_pod_update /
 * gf_model_pod_delete and are idempotent: a pod seen again with the same node
 * and devices confirms the assumption (never counted twice); a pod seen
 * without a node while assumed keeps its assumption (the bind is in flight);
 * a terminal phase (Succeeded/Failed) or a delete frees its GPUs. A pod with a
 * deletionTimestamp stays counted until it is gone. Assumptions never
 * confirmed are dropped by gf_model_expire_assumed.
 *
 * Inventory. From the node agent's annotation gpufrac.io/gpus (see below),
 * else from GPU Feature Discovery labels nvidia.com/gpu.count and
 * nvidia.com/gpu.memory (MiB; values >= 1048576 are bytes, a GFD
 * bug), with ids "<node>/gpu<i>" and no UUIDs. A count without memory: the
 * node cannot host fractions (memory unknown, every request refused with a
 * reason saying so; portions too, since accounting is in bytes).
 *
 * Whole GPUs. On a node whose status.allocatable has nvidia.com/gpu (a
 * device plugin hands whole GPUs to pods) a GPU takes fractions only while a
 * reservation pod holds it from the device plugin (gf_model_node_reserved,
 * kept by reserve.c); the others are closed, since the kubelet may give them
 * to a whole-GPU pod at any time. A node without it: every GPU is open.
 *
 * Threads: one writer (the watch thread; gf_model_reserve/forget from HTTP
 * threads also write) and concurrent readers; one rwlock inside. */
#ifndef GPUFRAC_SCHED_MODEL_H
#define GPUFRAC_SCHED_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "amount.h"
#include "error.h"
#include "node_gpus.h"
#include "spec.h"

/* The agent's node annotation: its name and format are core/node_gpus.h's. */
#define GF_SCHED_GPUS_ANNOTATION GF_NODE_GPUS_ANNOTATION
#define GF_SCHED_GFD_COUNT_LABEL "nvidia.com/gpu.count"
#define GF_SCHED_GFD_MEMORY_LABEL "nvidia.com/gpu.memory"
#define GF_SCHED_WHOLE_GPU_RESOURCE "nvidia.com/gpu" /* the device plugin's resource */

#define GF_SCHED_NAME_MAX 254 /* DNS subdomain (253) + NUL */
#define GF_SCHED_UID_MAX 64
#define GF_SCHED_CONTAINER_MAX 64
#define GF_SCHED_GPUS_MAX GF_NODE_GPUS_MAX
#define GF_SCHED_GPU_ID_MAX GF_NODE_GPU_ID_MAX
#define GF_SCHED_REASON_MAX 320
#define GF_SCHED_KEY_MAX 128

typedef enum gf_pod_phase {
    GF_PHASE_PENDING = 0,
    GF_PHASE_RUNNING,
    GF_PHASE_SUCCEEDED,
    GF_PHASE_FAILED,
    GF_PHASE_UNKNOWN,
} gf_pod_phase;

#define GF_SCHED_PARTS_MAX 8 /* fractional containers of one pod */

/* A further fractional container of a pod (the first one is the pod's own
 * container/request/limit/compute fields). */
typedef struct gf_sched_part {
    char container[GF_SCHED_CONTAINER_MAX];
    bool init; /* an init container */
    gf_amount request, limit;
    bool has_compute;
    double compute;
} gf_sched_part;

/* A pod as decoded from a v1.Pod (decode.h). All its fractional containers
 * go to the same GPU(s), in one mode, on the same number of devices; each
 * GPU is charged as Kubernetes sums a pod's requests: the largest init
 * container's request or the sum of the regular containers', whichever is
 * more (init containers run alone, before the others). */
typedef struct gf_sched_pod {
    char ns[GF_SCHED_NAME_MAX];
    char name[GF_SCHED_NAME_MAX];
    char uid[GF_SCHED_UID_MAX];
    char node[GF_SCHED_NAME_MAX]; /* spec.nodeName; "" = unassigned */
    gf_pod_phase phase;
    bool deleting;   /* metadata.deletionTimestamp set */
    bool fractional; /* some container carries a fraction */
    /* fractional but the annotations are malformed: error names the key and
     * value (gf_annotations_decode's message); the pod fits nowhere */
    bool invalid;
    char error[GF_ERROR_MSG_MAX];
    /* when fractional && !invalid: */
    char container[GF_SCHED_CONTAINER_MAX]; /* the first container with a fraction */
    bool init;                              /* container is an init container */
    gf_amount request, limit;               /* container's, per device */
    int num_devices;                        /* >= 1 */
    gf_mode mode;
    bool has_compute;
    double compute;
    char devices[GF_DEVICES_MAX]; /* gpus.devices as written; "" = not bound */
    int32_t priority;             /* spec.priority (0 when unset) */
    size_t n_more;                /* further fractional containers */
    gf_sched_part more[GF_SCHED_PARTS_MAX - 1];
} gf_sched_pod;

/* The bytes pod's fractional containers are charged on a GPU of total bytes
 * (0 when a portion does not resolve there). */
uint64_t gf_sched_pod_charge(const gf_sched_pod *pod, uint64_t total);

typedef gf_node_gpu gf_sched_gpu; /* the annotation's GPU, or one from GFD labels */

typedef enum gf_inventory_source {
    GF_INV_NONE = 0, /* neither annotation nor labels */
    GF_INV_AGENT,    /* gpufrac.io/gpus */
    GF_INV_GFD,      /* nvidia.com/gpu.count + nvidia.com/gpu.memory */
} gf_inventory_source;

/* A node as decoded from a v1.Node (decode.h). */
typedef struct gf_sched_node {
    char name[GF_SCHED_NAME_MAX];
    bool unschedulable; /* spec.unschedulable */
    bool ready;         /* Ready condition True, or no Ready condition at all */
    gf_inventory_source source;
    bool memory_known; /* every GPU's memory is known */
    unsigned dp_gpus;  /* status.allocatable nvidia.com/gpu (0: no device plugin) */
    size_t n_gpus;
    gf_sched_gpu gpus[GF_SCHED_GPUS_MAX];
    /* non-empty: the inventory could not be read (bad annotation or labels);
     * the node then hosts nothing and filter reports this text */
    char inventory_error[GF_ERROR_MSG_MAX];
} gf_sched_node;

typedef enum gf_policy {
    GF_POLICY_BINPACK = 0,
    GF_POLICY_SPREAD,
} gf_policy;

/* "binpack" | "spread". */
int gf_policy_parse(const char *s, gf_policy *out, gf_error *err);
const char *gf_policy_name(gf_policy p);

typedef enum gf_verdict_status {
    GF_FIT = 0,
    GF_FAIL,              /* FailedNodes: may fit later (GPUs free up) */
    GF_FAIL_UNRESOLVABLE, /* FailedAndUnresolvableNodes: never on this node */
} gf_verdict_status;

/* Filter and prioritize result for one node. */
typedef struct gf_sched_verdict {
    gf_verdict_status status;
    int score;                        /* 0..10; 0 unless GF_FIT */
    double rank;                      /* the score before rounding */
    char reason[GF_SCHED_REASON_MAX]; /* "" when GF_FIT */
    /* GF_FAIL on a device-plugin node: this many more GPUs reserved for
     * fractions (of its idle, closed ones) would take the pod */
    unsigned reserve;
} gf_sched_verdict;

/* Where a pod goes: the node, its GPUs and what to write at bind. */
typedef struct gf_sched_placement {
    char node[GF_SCHED_NAME_MAX];
    size_t n;                         /* = num_devices */
    int gpu_index[GF_SCHED_GPUS_MAX]; /* gf_sched_gpu.index of each */
    char gpu_id[GF_SCHED_GPUS_MAX][GF_SCHED_GPU_ID_MAX];
    uint64_t request[GF_SCHED_GPUS_MAX]; /* bytes accounted on each */
    /* the pod annotation to write with the Binding:
     * "<prefix><container>.gpus.devices" = UUIDs (indices where unknown) */
    char devices_key[GF_SCHED_KEY_MAX];
    char devices[GF_DEVICES_MAX];
} gf_sched_placement;

/* One GPU's accounting (tests, metrics, debugging). */
typedef struct gf_model_gpu_state {
    char id[GF_SCHED_GPU_ID_MAX];
    int index;
    uint64_t total, requested;
    bool has_mode; /* false while no fraction is placed */
    gf_mode mode;
    unsigned pods;
    unsigned compute_pct; /* SM percent promised to sm-sharing pods (<= 100) */
    bool closed;          /* the device plugin's: no reservation holds it for fractions */
} gf_model_gpu_state;

typedef struct gf_model_stats {
    size_t nodes, gpus;
    size_t pods;         /* fractional pods placed (confirmed + assumed) */
    size_t assumed;      /* of which not yet confirmed by the watch */
    size_t pending;      /* fractional pods known, not placed */
    size_t unresolved;   /* placed pods whose devices match no GPU of the node */
    size_t memory_bytes; /* the model's own heap use, approximately */
} gf_model_stats;

typedef enum gf_model_kind {
    GF_MODEL_NODES = 0,
    GF_MODEL_PODS,
} gf_model_kind;

typedef struct gf_model gf_model;

/* prefix: the NvFractions prefix for devices_key (NULL = GF_NVFRACTIONS_PREFIX). */
int gf_model_new(const char *prefix, gf_model **out, gf_error *err);
void gf_model_free(gf_model *m);

/* --- writer side (watch thread) --- */

/* Adds or replaces a node; the pods placed on it are re-resolved against
 * the new inventory. */
int gf_model_node_update(gf_model *m, const gf_sched_node *node, gf_error *err);
void gf_model_node_delete(gf_model *m, const char *name);

/* Adds, replaces or removes (terminal phase, non-fractional) a pod by uid. */
int gf_model_pod_update(gf_model *m, const gf_sched_pod *pod, gf_error *err);
void gf_model_pod_delete(gf_model *m, const char *uid);

/* A full re-list (start, or after a 410): begin, update every listed object,
 * end. end drops the records of that kind not updated since begin (assumed,
 * unconfirmed pods are kept: their bind may not be in the list yet). */
void gf_model_resync_begin(gf_model *m, gf_model_kind kind);
void gf_model_resync_end(gf_model *m, gf_model_kind kind);

/* --- reader side (HTTP threads) --- */

/* Filter + prioritize of pod against nodes[0..n): out[i] for nodes[i]. A
 * non-fractional pod fits everywhere (score 0); an invalid one fits nowhere
 * (GF_FAIL_UNRESOLVABLE, reason = pod->error); a node unknown to the model
 * fails with "node ... is not in gpufrac's cache". Fails only on bad
 * arguments. */
int gf_model_evaluate(gf_model *m, const gf_sched_pod *pod, const char *const *nodes, size_t n,
                      gf_policy policy, gf_sched_verdict *out, gf_error *err);

/* --- bind --- */

/* Chooses the GPUs of node for pod and assumes the placement, atomically
 * (one write lock): call at bind, then POST the Binding with out->devices_key
 * = out->devices; on failure gf_model_forget(uid). Fails (GF_ESTATE, with the
 * filter's reason) when the pod no longer fits there. A pod already placed
 * (assumed or confirmed) on that node returns its placement again. */
int gf_model_reserve(gf_model *m, const gf_sched_pod *pod, const char *node, gf_policy policy,
                     gf_sched_placement *out, gf_error *err);
/* As gf_model_reserve for a pod the watch already delivered (pending);
 * GF_ENOTFOUND when the model has no fractional pod of that uid. */
int gf_model_reserve_uid(gf_model *m, const char *uid, const char *node, gf_policy policy,
                         gf_sched_placement *out, gf_error *err);

/* Filter's one-node answer: places pod on node as gf_model_reserve does, as
 * a hold, so the filters that come before its bind see the GPU taken (in a
 * burst kube-scheduler filters the next pods before the first binds reach
 * us). The bind's gf_model_reserve turns the hold into its assumption;
 * gf_model_expire_held drops holds no bind followed (a later plugin of
 * kube-scheduler failed the pod, or it waits in Permit). */
int gf_model_hold(gf_model *m, const gf_sched_pod *pod, const char *node, gf_policy policy,
                  gf_error *err);
/* Drops pod's hold, if it has one (filter again: a retry). */
void gf_model_unhold(gf_model *m, const char *uid);
size_t gf_model_expire_held(gf_model *m, uint64_t now_ms, uint64_t ttl_ms);

/* Counts pod on the GPUs of placement at once (placement from a previous
 * gf_model_reserve, or built by the caller: node, n, gpu_index). */
int gf_model_assume(gf_model *m, const gf_sched_pod *pod, const gf_sched_placement *placement,
                    gf_error *err);
/* Undoes an assumption not yet confirmed (the bind failed). */
void gf_model_forget(gf_model *m, const char *uid);
/* Drops assumptions older than ttl_ms at now_ms (gf_model_now_ms clock) that
 * the watch never confirmed; returns how many. */
size_t gf_model_expire_assumed(gf_model *m, uint64_t now_ms, uint64_t ttl_ms);
uint64_t gf_model_now_ms(void);

/* --- preemption (kube-scheduler's preemptVerb) --- */

/* For pod on node, with victims[0..n_victims) (uids kube-scheduler already
 * chose) gone: the fewest further lower-priority (spec.priority < pod's)
 * fractional pods on node whose removal lets pod fit. *extra (malloc'd array
 * of malloc'd uids, free with gf_model_uids_free) may be empty. Fails with
 * GF_ESTATE (reason in err) when no such set exists on node. */
int gf_model_preempt(gf_model *m, const gf_sched_pod *pod, const char *node,
                     const char *const *victims, size_t n_victims, char ***extra, size_t *n_extra,
                     gf_error *err);
void gf_model_uids_free(char **uids, size_t n);

/* --- GPU memory quota per namespace (model_quota.c) --- */

/* The Namespace annotation an operator sets: a quantity of bytes ("40Gi").
 * The sum of the GPU memory requests (as charged on their GPUs) of a
 * namespace's placed fractional pods stays within it; a namespace without
 * it has no limit; one whose value cannot be read gets no fractional pod
 * (fail closed), the reason naming the value. */
#define GF_SCHED_QUOTA_ANNOTATION "gpufrac.io/memory-quota"

typedef struct gf_sched_ns {
    char name[GF_SCHED_NAME_MAX];
    bool has_quota;
    uint64_t quota;
    char error[GF_ERROR_MSG_MAX]; /* non-empty: the annotation is unreadable */
} gf_sched_ns;

/* A v1.Namespace: metadata.name and the quota annotation. A bad value does
 * NOT fail (out->error says why); fails only when it is not a namespace. */
int gf_sched_ns_decode(const json_t *ns, gf_sched_ns *out, gf_error *err);

int gf_model_ns_update(gf_model *m, const gf_sched_ns *ns, gf_error *err);
void gf_model_ns_delete(gf_model *m, const char *name);
void gf_model_ns_resync_begin(gf_model *m);
void gf_model_ns_resync_end(gf_model *m);

typedef struct gf_model_quota {
    char name[GF_SCHED_NAME_MAX];
    bool valid; /* false: the annotation could not be read */
    uint64_t quota, used;
} gf_model_quota;

/* The namespaces with a quota annotation (valid or not), up to max; returns
 * how many there are. */
size_t gf_model_quotas(gf_model *m, gf_model_quota *out, size_t max);

/* --- whole GPUs (model_reserve.c) --- */

/* The GPUs of node that reservation pods hold for fractions (ids as in the
 * inventory: UUIDs); replaces the previous set. Ids the node does not have
 * open nothing. */
int gf_model_node_reserved(gf_model *m, const char *node, const char *const *ids, size_t n,
                           gf_error *err);
/* Closes GPU id of node to fractions when nothing is placed, assumed or held
 * on it, atomically (so a reservation can be given back): 0 when closed,
 * -1 when busy or unknown. */
int gf_model_gpu_close_idle(gf_model *m, const char *node, const char *id);
/* node's nvidia.com/gpu allocatable (0: unknown node or no device plugin). */
unsigned gf_model_node_dp_gpus(gf_model *m, const char *node);

/* Gives freed heap back to the system (after many deletions). */
void gf_model_trim(gf_model *m);

/* --- introspection --- */

void gf_model_stats_get(gf_model *m, gf_model_stats *out);
/* Copies the accounting of node's GPUs (up to max); *n = the node's count.
 * GF_ENOTFOUND when the node is unknown. */
int gf_model_node_gpus(gf_model *m, const char *node, gf_model_gpu_state *out, size_t max,
                       size_t *n, gf_error *err);

#endif
