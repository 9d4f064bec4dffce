/* SPDX-License-Identifier: Apache-2.0 */
/* Reservation pods (reserve.h): the records, kept from the pod watch, and
 * the thread that creates, gives back and announces them. Invariant: the
 * model's open GPUs of a node are exactly the GPUs its live, reporting,
 * well-formed reservation pods hold (node_sync after every change). */
#include "reserve.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "reserve_int.h"
#include "slog.h"

void *gf_rsv_grow(void *arr, size_t *cap, size_t n, size_t size)
{
    void *p;
    size_t c;

    if (n < *cap)
        return arr;
    c = *cap ? *cap * 2 : 16;
    if ((p = realloc(arr, c * size)) == NULL)
        return NULL;
    *cap = c;
    return p;
}

/* --- the message --- */

int gf_reserve_message_parse(const char *msg, char *gpu, size_t len, gf_error *err)
{
    size_t n = msg ? strlen(msg) : 0;

    for (size_t i = 0; i < n; i++) {
        char c = msg[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_'))
            n = 0;
    }
    if (n == 0 || n >= len || n >= GF_SCHED_GPU_ID_MAX)
        return gf_error_set(err, GF_EINVAL,
                            "termination message \"%.80s\" of init container report is not one "
                            "GPU UUID (letters, digits, '-', '_', at most %d bytes): the device "
                            "plugin must set NVIDIA_VISIBLE_DEVICES to the GPU's UUID",
                            msg ? msg : "", GF_SCHED_GPU_ID_MAX - 1);
    memcpy(gpu, msg, n + 1);
    return 0;
}

/* --- records (lock held) --- */

rnode *gf_rsv_node_get(gf_reserver *r, const char *name)
{
    rnode *n;

    for (size_t i = 0; i < r->n_nodes; i++)
        if (strcmp(r->nodes[i].name, name) == 0)
            return &r->nodes[i];
    if ((n = gf_rsv_grow(r->nodes, &r->cap_nodes, r->n_nodes, sizeof(*n))) == NULL)
        return NULL;
    r->nodes = n;
    n = &r->nodes[r->n_nodes++];
    memset(n, 0, sizeof(*n));
    snprintf(n->name, sizeof(n->name), "%s", name);
    n->labelled = -1;
    return n;
}

static rres *res_find(gf_reserver *r, const char *uid)
{
    for (size_t i = 0; i < r->n_res; i++)
        if (strcmp(r->res[i].uid, uid) == 0)
            return &r->res[i];
    return NULL;
}

static rwhole *whole_find(gf_reserver *r, const char *uid)
{
    for (size_t i = 0; i < r->n_whole; i++)
        if (strcmp(r->whole[i].uid, uid) == 0)
            return &r->whole[i];
    return NULL;
}

bool gf_rsv_res_open(const rres *x)
{
    return x->gpu[0] && !x->bad && !x->deleting;
}

size_t gf_rsv_open_on(const gf_reserver *r, const char *node)
{
    size_t n = 0;

    for (size_t i = 0; i < r->n_res; i++)
        n += gf_rsv_res_open(&r->res[i]) && strcmp(r->res[i].node, node) == 0;
    return n;
}

size_t gf_rsv_pending_on(const gf_reserver *r, const char *node, const char **name)
{
    size_t n = 0;

    for (size_t i = 0; i < r->n_res; i++) {
        const rres *x = &r->res[i];
        if (!x->gpu[0] && !x->bad && !x->deleting && strcmp(x->node, node) == 0) {
            *name = x->name;
            n++;
        }
    }
    return n;
}

unsigned gf_rsv_used_on(const gf_reserver *r, const char *node)
{
    unsigned n = 0;

    for (size_t i = 0; i < r->n_whole; i++)
        if (strcmp(r->whole[i].node, node) == 0)
            n += r->whole[i].gpus;
    return n;
}

/* The model's open GPUs of node := its reservations' GPUs. */
void gf_rsv_node_sync(gf_reserver *r, const char *node)
{
    const char *ids[GF_SCHED_GPUS_MAX];
    size_t n = 0;
    gf_error err;

    for (size_t i = 0; i < r->n_res && n < GF_SCHED_GPUS_MAX; i++)
        if (gf_rsv_res_open(&r->res[i]) && strcmp(r->res[i].node, node) == 0)
            ids[n++] = r->res[i].gpu;
    if (gf_model_node_reserved(r->model, node, ids, n, &err) < 0)
        gf_slog(GF_LOG_DEBUG, "reservations of node %s: %s", node, err.msg);
}

static void res_remove(gf_reserver *r, rres *x)
{
    char node[GF_SCHED_NAME_MAX];

    snprintf(node, sizeof(node), "%s", x->node);
    *x = r->res[--r->n_res];
    gf_rsv_node_sync(r, node);
}

/* --- pods from the watch --- */

typedef struct podinfo {
    const char *ns, *name, *uid, *node, *phase, *reserve_label, *message;
    bool reported;  /* "report" terminated */
    bool deleting;  /* metadata.deletionTimestamp: its GPU goes back to the device plugin */
    long long code; /* its exit code */
    unsigned gpus;  /* nvidia.com/gpu asked, as Kubernetes sums a pod */
} podinfo;

static const char *str_at(const json_t *o, const char *k)
{
    const json_t *v = json_is_object(o) ? json_object_get(o, k) : NULL;
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static unsigned container_gpus(const json_t *c)
{
    const json_t *res = json_object_get(c, "resources");
    const char *v = str_at(json_object_get(res, "limits"), GF_SCHED_WHOLE_GPU_RESOURCE);
    char *end;
    unsigned long n;

    if (!v)
        v = str_at(json_object_get(res, "requests"), GF_SCHED_WHOLE_GPU_RESOURCE);
    if (!v || *v < '0' || *v > '9')
        return 0;
    n = strtoul(v, &end, 10);
    return *end || n > 1024 ? 1024 : (unsigned)n; /* unreadable: as if it took them all */
}

static unsigned pod_gpus(const json_t *spec)
{
    unsigned sum = 0, init = 0, g;
    size_t i;
    const json_t *c;

    json_array_foreach(json_object_get(spec, "containers"), i, c) sum += container_gpus(c);
    json_array_foreach(json_object_get(spec, "initContainers"), i, c)
    {
        g = container_gpus(c);
        init = g > init ? g : init;
    }
    return sum > init ? sum : init;
}

static void report_of(const json_t *status, podinfo *p)
{
    size_t i;
    const json_t *cs, *t;

    json_array_foreach(json_object_get(status, "initContainerStatuses"), i, cs)
    {
        const char *name = str_at(cs, "name");
        if (!name || strcmp(name, "report") != 0)
            continue;
        t = json_object_get(json_object_get(cs, "state"), "terminated");
        if (!json_is_object(t))
            return;
        p->reported = true;
        p->code = json_integer_value(json_object_get(t, "exitCode"));
        p->message = str_at(t, "message");
    }
}

static bool podinfo_get(const json_t *pod, podinfo *p)
{
    const json_t *meta = json_object_get(pod, "metadata"), *spec = json_object_get(pod, "spec");
    const json_t *status = json_object_get(pod, "status");

    memset(p, 0, sizeof(*p));
    p->ns = str_at(meta, "namespace");
    p->name = str_at(meta, "name");
    p->uid = str_at(meta, "uid");
    p->node = str_at(spec, "nodeName");
    p->phase = str_at(status, "phase");
    p->reserve_label = str_at(json_object_get(meta, "labels"), GF_RESERVE_LABEL);
    p->deleting = json_object_get(meta, "deletionTimestamp") != NULL &&
                  !json_is_null(json_object_get(meta, "deletionTimestamp"));
    if (!p->ns || !p->name || !p->uid || strlen(p->uid) >= GF_SCHED_UID_MAX ||
        strlen(p->name) >= GF_SCHED_NAME_MAX || (p->node && strlen(p->node) >= GF_SCHED_NAME_MAX))
        return false;
    p->gpus = json_is_object(spec) ? pod_gpus(spec) : 0;
    report_of(status, p);
    return true;
}

static bool terminal(const podinfo *p)
{
    return p->phase && (strcmp(p->phase, "Succeeded") == 0 || strcmp(p->phase, "Failed") == 0);
}

static void whole_update(gf_reserver *r, const podinfo *p, bool gone)
{
    rwhole *w = whole_find(r, p->uid), *grown;

    if (gone || terminal(p) || !p->node || !p->node[0] || p->gpus == 0) {
        if (w)
            *w = r->whole[--r->n_whole];
        return;
    }
    if (!w) {
        if (!(grown = gf_rsv_grow(r->whole, &r->cap_whole, r->n_whole, sizeof(*grown))))
            return;
        r->whole = grown;
        w = &r->whole[r->n_whole++];
        snprintf(w->uid, sizeof(w->uid), "%s", p->uid);
    }
    snprintf(w->node, sizeof(w->node), "%s", p->node);
    w->gpus = p->gpus;
    w->seen = true;
}

/* Whether gpu is one of node's GPUs (as the agent published them). */
static bool node_has_gpu(gf_reserver *r, const char *node, const char *gpu)
{
    gf_model_gpu_state g[GF_SCHED_GPUS_MAX];
    size_t n = 0;
    gf_error err;

    if (gf_model_node_gpus(r->model, node, g, GF_SCHED_GPUS_MAX, &n, &err) < 0)
        return false;
    for (size_t i = 0; i < n && i < GF_SCHED_GPUS_MAX; i++)
        if (strcmp(g[i].id, gpu) == 0)
            return true;
    return false;
}

/* What the pod's report says, once. */
static void res_judge(gf_reserver *r, rres *x, const podinfo *p)
{
    gf_error err;

    if (x->bad || x->gpu[0])
        return;
    if (p->phase && strcmp(p->phase, "Failed") == 0)
        gf_error_set(&err, GF_ESTATE, "the pod failed (the kubelet refused it?)");
    else if (!p->reported)
        return;
    else if (p->code != 0)
        gf_error_set(&err, GF_ESTATE, "init container report exited %lld", p->code);
    else if (gf_reserve_message_parse(p->message, x->gpu, sizeof(x->gpu), &err) == 0 &&
             !node_has_gpu(r, x->node, x->gpu))
        gf_error_set(&err, GF_EINVAL, "GPU \"%s\" is not in node %s's inventory", x->gpu, x->node);
    else if (x->gpu[0]) {
        gf_slog(GF_LOG_INFO, "reservation %s/%s holds GPU %s of node %s for fractions", r->ns,
                x->name, x->gpu, x->node);
        return;
    }
    x->gpu[0] = '\0';
    x->bad = true;
    gf_slog(GF_LOG_WARN, "reservation %s/%s on node %s holds no usable GPU (%s): deleting it",
            r->ns, x->name, x->node, err.msg);
}

static void res_update(gf_reserver *r, const podinfo *p, bool gone)
{
    rres *x = res_find(r, p->uid), *grown;
    rnode *n;

    if (gone || (p->phase && strcmp(p->phase, "Succeeded") == 0) || !p->node || !p->node[0]) {
        if (x)
            res_remove(r, x);
        return;
    }
    if (!x) {
        if (!(grown = gf_rsv_grow(r->res, &r->cap_res, r->n_res, sizeof(*grown))))
            return;
        r->res = grown;
        x = &r->res[r->n_res++];
        memset(x, 0, sizeof(*x));
        snprintf(x->uid, sizeof(x->uid), "%s", p->uid);
        snprintf(x->name, sizeof(x->name), "%s", p->name);
        snprintf(x->node, sizeof(x->node), "%s", p->node);
        if ((n = gf_rsv_node_get(r, p->node))) {
            n->starting_until = 0; /* it is here now: pending_on counts it */
            n->arrived = true;
        }
    }
    x->seen = true;
    x->deleting |= p->deleting; /* being deleted (by anyone): closed at once */
    res_judge(r, x, p);
    gf_rsv_node_sync(r, x->node);
}

void gf_reserver_pod(gf_reserver *r, const json_t *pod, bool deleted)
{
    podinfo p;

    if (!r || !podinfo_get(pod, &p))
        return;
    pthread_mutex_lock(&r->lock);
    whole_update(r, &p, deleted);
    if (strcmp(p.ns, r->ns) == 0 && p.reserve_label && strcmp(p.reserve_label, "true") == 0)
        res_update(r, &p, deleted);
    pthread_mutex_unlock(&r->lock);
}

void gf_reserver_resync_begin(gf_reserver *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&r->lock);
    for (size_t i = 0; i < r->n_res; i++)
        r->res[i].seen = false;
    for (size_t i = 0; i < r->n_whole; i++)
        r->whole[i].seen = false;
    pthread_mutex_unlock(&r->lock);
}

void gf_reserver_resync_end(gf_reserver *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&r->lock);
    for (size_t i = r->n_res; i-- > 0;)
        if (!r->res[i].seen)
            res_remove(r, &r->res[i]);
    for (size_t i = r->n_whole; i-- > 0;)
        if (!r->whole[i].seen)
            r->whole[i] = r->whole[--r->n_whole];
    pthread_mutex_unlock(&r->lock);
}

/* --- filter --- */

void gf_reserver_want(gf_reserver *r, const char *node, unsigned need, char *why, size_t len)
{
    const char *starting = NULL;
    unsigned dp, used;
    rnode *n;

    if (!r || !len)
        return;
    why[0] = '\0';
    dp = gf_model_node_dp_gpus(r->model, node);
    pthread_mutex_lock(&r->lock);
    used = gf_rsv_used_on(r, node);
    n = gf_rsv_node_get(r, node);
    if (!n)
        snprintf(why, len, "out of memory");
    else if (gf_rsv_pending_on(r, node, &starting) > 0 || n->creating ||
             gf_model_now_ms() < n->starting_until)
        snprintf(why, len,
                 "reservation pod %s/%s is starting; the pod is tried again once it holds "
                 "a GPU",
                 r->ns, starting ? starting : "(being created)");
    else if (gf_model_now_ms() < n->retry_at)
        snprintf(why, len, "reserving a GPU failed (%s); tried again in %llu s", n->error,
                 (unsigned long long)((n->retry_at - gf_model_now_ms()) / 1000 + 1));
    else if (used >= dp)
        snprintf(why, len,
                 "the device plugin has given all %u GPUs of the node to pods (%u asked by "
                 "whole-GPU pods and reservations): none can be reserved",
                 dp, used);
    else {
        n->want = need > n->want ? need : n->want;
        pthread_cond_signal(&r->cond);
        snprintf(why, len,
                 "gpufrac-scheduler is reserving %u from the device plugin (a pod in %s); "
                 "the pod is tried again once it holds a GPU",
                 need, r->ns);
    }
    pthread_mutex_unlock(&r->lock);
}

void gf_reserver_counts(gf_reserver *r, size_t *holding, size_t *pending)
{
    *holding = *pending = 0;
    if (!r)
        return;
    pthread_mutex_lock(&r->lock);
    for (size_t i = 0; i < r->n_res; i++) {
        *holding += gf_rsv_res_open(&r->res[i]);
        *pending += !r->res[i].gpu[0] && !r->res[i].bad && !r->res[i].deleting;
    }
    pthread_mutex_unlock(&r->lock);
}
