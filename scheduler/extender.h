/* SPDX-License-Identifier: Apache-2.0 */
/* The kube-scheduler extender's verbs as plain
 * functions over request bodies, independent of the HTTP server: filter,
 * prioritize, bind, the metrics page and health. */
#ifndef GPUFRAC_SCHED_EXTENDER_H
#define GPUFRAC_SCHED_EXTENDER_H

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "model.h"
#include "reserve.h"

#define GF_EXT_BODY_MAX (16u << 20)
#define GF_EXT_NODES_MAX 100000
#define GF_CDI_GPU_PREFIX "k8s.device-plugin.nvidia.com/gpu="

/* What the extender needs from the API server (kube.c in production, a
 * test double in tests). */
typedef struct gf_ext_kube {
    /* POST the Binding of ns/name (uid precondition when non-empty) to node
     * with annotations (object of strings, may be NULL). */
    int (*bind)(void *cls, const char *ns, const char *name, const char *uid, const char *node,
                json_t *annotations, gf_error *err);
    /* The same, returning at once (NULL: bind is used): 0, and done(done_cls,
     * rc, err) runs exactly once with the outcome, on any thread, maybe
     * before the return; -1: not started, done never runs. The annotations
     * are read before the return. */
    int (*bind_async)(void *cls, const char *ns, const char *name, const char *uid,
                      const char *node, json_t *annotations,
                      void (*done)(void *done_cls, int rc, gf_error *err), void *done_cls,
                      gf_error *err);
    /* GET the v1.Pod ns/name (new reference in *pod). */
    int (*get_pod)(void *cls, const char *ns, const char *name, json_t **pod, gf_error *err);
    /* connections opened to the API server so far (NULL: not counted) */
    uint64_t (*connections)(void *cls);
    void *cls;
} gf_ext_kube;

/* The verbs kube-scheduler calls, as counted. */
typedef enum gf_ext_verb {
    GF_EXT_FILTER,
    GF_EXT_PRIORITIZE,
    GF_EXT_BIND,
    GF_EXT_PREEMPT,
    GF_EXT_VERBS
} gf_ext_verb;

typedef struct gf_ext_metrics {
    atomic_uint_least64_t placements;      /* fractional pods bound */
    atomic_uint_least64_t binds;           /* all pods bound */
    atomic_uint_least64_t filter_failures; /* filters that left a fractional pod no node */
    atomic_uint_least64_t bind_errors;
    atomic_uint_least64_t bad_requests;
    atomic_uint_least64_t requests[GF_EXT_VERBS]; /* by gf_ext_verb */
} gf_ext_metrics;

#define GF_EXT_POD_CACHE 256

/* Pods seen by filter recently, so bind (which carries only names) has the
 * decoded record without asking the API server. */
typedef struct gf_ext_pod_cache {
    pthread_mutex_t lock;
    gf_sched_pod **pods; /* GF_EXT_POD_CACHE slots, round robin; NULL = free */
    size_t next;
} gf_ext_pod_cache;

typedef struct gf_extender {
    gf_model *model;
    gf_policy policy;
    bool cdi;                      /* write CDI device names in gpus.devices */
    bool filter_best;              /* filter passes only the node gpufrac chooses */
    char prefix[GF_SCHED_KEY_MAX]; /* NvFractions prefix */
    gf_ext_kube kube;
    /* the model holds a full list of nodes and pods; until then no verb
     * judges capacity (an empty model would over-pack the GPUs the pods
     * already bound hold): each waits up to sync_wait_ms, then refuses with
     * an error kube-scheduler retries */
    atomic_bool synced;
    unsigned sync_wait_ms;
    gf_ext_metrics metrics;
    gf_ext_pod_cache cache;
    /* node names for the per-GPU metrics (informer.c keeps them) */
    int (*node_names)(void *cls, char ***names, size_t *n);
    void *node_names_cls;
    /* reservation pods of device-plugin nodes (NULL: none made) */
    gf_reserver *reserver;
} gf_extender;

int gf_extender_init(gf_extender *x, gf_model *model, gf_policy policy, bool cdi,
                     const char *prefix, const gf_ext_kube *kube, gf_error *err);
void gf_extender_fini(gf_extender *x);

#define GF_EXT_SYNC_WAIT_MS 2000 /* well inside kube-scheduler's httpTimeout */
#define GF_EXT_NOT_SYNCED                                                                        \
    "gpufrac-scheduler is not synced yet: the node and pod lists are still loading (retried by " \
    "kube-scheduler)"

/* Whether x is synced, waiting up to x->sync_wait_ms (or wait_ms) for it. */
bool gf_ext_await_synced(gf_extender *x);
bool gf_ext_await_synced_ms(gf_extender *x, unsigned wait_ms);

/* An answer: HTTP status, body (malloc'd) and its content type. */
typedef struct gf_ext_reply {
    unsigned status;
    char *body;
    size_t len;
    const char *content_type;
} gf_ext_reply;

void gf_ext_reply_free(gf_ext_reply *r);

/* The verbs. Each fills *r (200 with the extender's JSON answer; 400 with
 * {"Error": "..."} for a malformed request) and returns 0, or -1 when not
 * even an answer could be built (out of memory). */
int gf_ext_filter(gf_extender *x, const char *body, size_t len, gf_ext_reply *r);
int gf_ext_prioritize(gf_extender *x, const char *body, size_t len, gf_ext_reply *r);
int gf_ext_bind(gf_extender *x, const char *body, size_t len, gf_ext_reply *r);
int gf_ext_preempt(gf_extender *x, const char *body, size_t len, gf_ext_reply *r);
/* bind without waiting for the API server (kube.bind_async where set):
 * done(cls, rc, r) runs exactly once with what gf_ext_bind would have
 * returned and filled (r's body is done's), on any thread, maybe before the
 * return. */
typedef void (*gf_ext_bind_fn)(void *cls, int rc, gf_ext_reply *r);
void gf_ext_bind_async(gf_extender *x, const char *body, size_t len, gf_ext_bind_fn done,
                       void *cls);
int gf_ext_metrics_page(gf_extender *x, gf_ext_reply *r);
int gf_ext_healthz(gf_extender *x, gf_ext_reply *r);

/* --- request decoding (ext_decode.c; fuzzed) --- */

/* ExtenderArgs: {"Pod": v1.Pod, "NodeNames": [..]} or {"Pod", "Nodes":
 * v1.NodeList}. *root owns everything; pod and names borrow from it;
 * names is malloc'd (free it). from_nodes: the names came from "Nodes". */
typedef struct gf_ext_args {
    json_t *root;
    json_t *pod;
    const char **names;
    size_t n;
    bool from_nodes;
    json_t *items;  /* the NodeList's items when from_nodes (borrowed) */
    char *name_buf; /* the names, when the fast path found them */
} gf_ext_args;
/* Takes the fast path (ext_names.c) where it applies, else the full parse;
 * the two accept the same bodies and give the same pod and names. */
int gf_ext_args_parse(const char *body, size_t len, gf_ext_args *out, gf_error *err);
int gf_ext_args_parse_full(const char *body, size_t len, gf_ext_args *out, gf_error *err);

/* ext_names.c: where a body's top-level "NodeNames" array of n plain names
 * lies ([start, end)), or false: the full parser decides. */
typedef struct gf_ext_names_span {
    const char *start, *end;
    size_t n;
} gf_ext_names_span;
bool gf_ext_names_scan(const char *body, size_t len, gf_ext_names_span *out);
void gf_ext_args_free(gf_ext_args *a);

/* ExtenderBindingArgs: {"PodName", "PodNamespace", "PodUID", "Node"}. */
typedef struct gf_ext_bind_args {
    char name[GF_SCHED_NAME_MAX];
    char ns[GF_SCHED_NAME_MAX];
    char uid[GF_SCHED_UID_MAX];
    char node[GF_SCHED_NAME_MAX];
} gf_ext_bind_args;
int gf_ext_bind_args_parse(const char *body, size_t len, gf_ext_bind_args *out, gf_error *err);

/* The annotations written with the Binding for pod placed at p (gpus of
 * the node for the limit's resolution). */
json_t *gf_ext_bind_annotations(const gf_extender *x, const gf_sched_pod *pod,
                                const gf_sched_placement *p, const gf_model_gpu_state *gpus,
                                size_t n_gpus, gf_error *err);

/* pod cache (ext_cache.c) */
int gf_ext_cache_init(gf_ext_pod_cache *c, gf_error *err);
void gf_ext_cache_fini(gf_ext_pod_cache *c);
void gf_ext_cache_put(gf_ext_pod_cache *c, const gf_sched_pod *pod);
/* A copy of the pod of that namespace and name (uid must match when given). */
bool gf_ext_cache_get(gf_ext_pod_cache *c, const char *ns, const char *name, const char *uid,
                      gf_sched_pod *out);
/* Frees its record (once it is bound, or deleted). */
void gf_ext_cache_drop(gf_ext_pod_cache *c, const char *ns, const char *name);
/* Records held (for /metrics). */
size_t gf_ext_cache_count(gf_ext_pod_cache *c);

/* Reply helpers (ext_reply.c). kube-scheduler 1.20 prints an extender's
 * error text and filter reasons as a format string (Eventf): every text
 * sent passes gf_ext_reason, which writes "%" as " percent". */
json_t *gf_ext_reason(const char *msg);
int gf_ext_reply_json(gf_ext_reply *r, unsigned status, json_t *doc); /* steals doc */
int gf_ext_reply_error(gf_ext_reply *r, unsigned status, const char *msg);
int gf_ext_reply_text(gf_ext_reply *r, unsigned status, const char *type, const char *text);

#endif
