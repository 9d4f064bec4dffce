/* SPDX-License-Identifier: Apache-2.0 */
/* bind: choose the GPUs on the node under the model's write lock, count
 * them at once, POST one Binding carrying the annotations, roll back on an
 * API error. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"
#include "extender.h"
#include "quantity.h"

#define KEY_MAX (GF_SCHED_KEY_MAX + GF_SCHED_CONTAINER_MAX + 32)

/* One fractional container's fields, as written at bind. */
typedef struct part_view {
    const char *container;
    const gf_amount *request, *limit;
    bool has_compute;
    double compute;
} part_view;

static part_view part_of(const gf_sched_pod *pod, size_t i)
{
    const gf_sched_part *m = i > 0 ? &pod->more[i - 1] : NULL;

    if (m == NULL)
        return (part_view){pod->container, &pod->request, &pod->limit, pod->has_compute,
                           pod->compute};
    return (part_view){m->container, &m->request, &m->limit, m->has_compute, m->compute};
}

static int put(json_t *ann, const gf_extender *x, const part_view *c, const char *suffix,
               const char *value)
{
    char key[KEY_MAX];

    snprintf(key, sizeof(key), "%s%s.%s", x->prefix, c->container, suffix);
    return json_object_set_new(ann, key, json_string(value));
}

/* gpus.devices as the model chose them, as CDI names with --cdi. */
static int devices_value(const gf_extender *x, const gf_sched_placement *p, char *buf, size_t len)
{
    char copy[GF_DEVICES_MAX], *save = NULL, *tok;
    size_t used = 0;
    int n;

    if (!x->cdi) {
        snprintf(buf, len, "%s", p->devices);
        return 0;
    }
    snprintf(copy, sizeof(copy), "%s", p->devices);
    buf[0] = '\0';
    for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        bool uuid = strncmp(tok, "GPU-", 4) == 0 || strncmp(tok, "MIG-", 4) == 0;
        n = snprintf(buf + used, len - used, "%s%s%s", used ? "," : "",
                     uuid ? GF_CDI_GPU_PREFIX : "", tok);
        if (n < 0 || (size_t)n >= len - used)
            return -1;
        used += (size_t)n;
    }
    return 0;
}

static uint64_t gpu_total(const gf_sched_placement *p, const gf_model_gpu_state *gpus, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (gpus[i].index == p->gpu_index[0])
            return gpus[i].total;
    return 0;
}

static bool same_amount(const gf_amount *a, const gf_amount *b)
{
    return a->is_portion == b->is_portion &&
           (a->is_portion ? a->portion == b->portion : a->bytes == b->bytes);
}

static int put_mib(json_t *ann, const gf_extender *x, const part_view *c, const char *suffix,
                   uint64_t bytes)
{
    char v[32];

    snprintf(v, sizeof(v), "%" PRIu64 "Mi", gf_bytes_to_mib_ceil(bytes));
    return put(ann, x, c, suffix, v);
}

/* The container's own request and limit resolved on the chosen GPU. */
static int put_memory(json_t *ann, const gf_extender *x, const part_view *c,
                      const gf_sched_placement *p, const gf_model_gpu_state *gpus, size_t n,
                      gf_error *err)
{
    uint64_t total = gpu_total(p, gpus, n), request, limit;

    if (!c->request->is_portion)
        request = c->request->bytes;
    else if (gf_amount_resolve(c->request, total, "gpu-memory.request", &request, err) < 0)
        return -1;
    if (put_mib(ann, x, c, "gpu-memory.request", request) < 0)
        return gf_error_set(err, GF_ENOSPACE, "out of memory");
    /* a limit equal to the request is the default: not written, so pod-level
     * forms without a limit stay valid on the node */
    if (same_amount(c->limit, c->request))
        return 0;
    if (gf_amount_resolve(c->limit, total, "gpu-memory.limit", &limit, err) < 0)
        return -1;
    if (limit < request)
        limit = request;
    if (put_mib(ann, x, c, "gpu-memory.limit", limit) < 0)
        return gf_error_set(err, GF_ENOSPACE, "out of memory");
    return 0;
}

static int put_part(json_t *ann, const gf_extender *x, const gf_sched_pod *pod, size_t i,
                    const char *devices, const gf_sched_placement *p,
                    const gf_model_gpu_state *gpus, size_t n_gpus, gf_error *err)
{
    part_view c = part_of(pod, i);
    char v[32];

    if (put(ann, x, &c, "gpus.devices", devices) < 0)
        return gf_error_set(err, GF_ENOSPACE, "out of memory");
    if (put_memory(ann, x, &c, p, gpus, n_gpus, err) < 0)
        return -1;
    snprintf(v, sizeof(v), "%.15g", c.compute);
    if (pod->mode == GF_MODE_SM_SHARING && c.has_compute &&
        put(ann, x, &c, "gpu-compute.portion", v) < 0)
        return gf_error_set(err, GF_ENOSPACE, "out of memory");
    return 0;
}

json_t *gf_ext_bind_annotations(const gf_extender *x, const gf_sched_pod *pod,
                                const gf_sched_placement *p, const gf_model_gpu_state *gpus,
                                size_t n_gpus, gf_error *err)
{
    json_t *ann = json_object();
    char devices[GF_DEVICES_MAX * 2];

    if (!ann) {
        gf_error_set(err, GF_ENOSPACE, "out of memory");
        return NULL;
    }
    if (p->n == 0 || devices_value(x, p, devices, sizeof(devices)) < 0) {
        gf_error_set(err, GF_EINVAL, "placement on %s lists no usable devices", p->node);
        goto fail;
    }
    /* every fractional container on the same GPUs, each with its own request */
    for (size_t i = 0; i <= pod->n_more; i++)
        if (put_part(ann, x, pod, i, devices, p, gpus, n_gpus, err) < 0)
            goto fail;
    return ann;
fail:
    json_decref(ann);
    return NULL;
}

/* The pod's record: from the last filter, else from the API server. */
static int find_pod(gf_extender *x, const gf_ext_bind_args *b, gf_sched_pod *pod, gf_error *err)
{
    json_t *obj = NULL;
    int rc;

    if (gf_ext_cache_get(&x->cache, b->ns, b->name, b->uid, pod))
        return 0;
    if (!x->kube.get_pod)
        return gf_error_set(err, GF_ENOTFOUND, "pod %s/%s is unknown", b->ns, b->name);
    if (x->kube.get_pod(x->kube.cls, b->ns, b->name, &obj, err) < 0)
        return -1;
    rc = gf_sched_pod_decode(obj, x->prefix, pod, err);
    json_decref(obj);
    if (rc == 0 && b->uid[0] && strcmp(pod->uid, b->uid) != 0)
        rc = gf_error_set(err, GF_ESTATE, "pod %s/%s has uid %s, not %s (recreated?)", b->ns,
                          b->name, pod->uid, b->uid);
    return rc;
}

/* One bind from its request to its answer. */
typedef struct bind_job {
    gf_extender *x;
    gf_ext_bind_args b;
    char uid[GF_SCHED_UID_MAX];     /* the Binding's precondition ("" = none) */
    char pod_uid[GF_SCHED_UID_MAX]; /* the model's reservation, when fractional */
    bool fractional;                /* reserved: forgotten unless the Binding is made */
    gf_ext_bind_fn done;
    void *cls;
} bind_job;

/* The GPUs reserved in the model and the annotations naming them. */
static json_t *reserve(gf_extender *x, const gf_ext_bind_args *b, const gf_sched_pod *pod,
                       gf_error *err)
{
    gf_sched_placement *p = malloc(sizeof(*p));
    gf_model_gpu_state *gpus = malloc(GF_SCHED_GPUS_MAX * sizeof(*gpus));
    json_t *ann = NULL;
    size_t n = 0;

    if (!p || !gpus) {
        gf_error_set(err, GF_ENOSPACE, "out of memory");
        goto out;
    }
    if (gf_model_reserve(x->model, pod, b->node, x->policy, p, err) < 0)
        goto out;
    if (gf_model_node_gpus(x->model, b->node, gpus, GF_SCHED_GPUS_MAX, &n, err) < 0 ||
        !(ann = gf_ext_bind_annotations(x, pod, p, gpus,
                                        n < GF_SCHED_GPUS_MAX ? n : GF_SCHED_GPUS_MAX, err)))
        gf_model_forget(x->model, pod->uid);
out:
    free(gpus);
    free(p);
    return ann;
}

/* Everything before the Binding is posted: *ann is NULL for a pod without
 * fractions. */
static int prepare(bind_job *j, json_t **ann, gf_error *err)
{
    gf_sched_pod *pod = malloc(sizeof(*pod));
    int rc = -1;

    *ann = NULL;
    if (!pod)
        return gf_error_set(err, GF_ENOSPACE, "out of memory");
    if (find_pod(j->x, &j->b, pod, err) < 0)
        goto out;
    if (!pod->fractional) {
        snprintf(j->uid, sizeof(j->uid), "%s", j->b.uid);
        rc = 0;
    } else if (pod->invalid) {
        rc = gf_error_set(err, GF_EINVAL, "%s", pod->error);
    } else if ((*ann = reserve(j->x, &j->b, pod, err))) {
        j->fractional = true;
        snprintf(j->uid, sizeof(j->uid), "%s", j->b.uid[0] ? j->b.uid : pod->uid);
        snprintf(j->pod_uid, sizeof(j->pod_uid), "%s", pod->uid);
        rc = 0;
    }
out:
    free(pod);
    return rc;
}

/* The outcome: the reservation kept or forgotten, counted, answered. */
static void finish(bind_job *j, int rc, const gf_error *err)
{
    gf_extender *x = j->x;
    gf_ext_reply r = {0};
    char msg[GF_ERROR_MSG_MAX + 3 * GF_SCHED_NAME_MAX + 32];
    int answered;

    if (rc < 0 && j->fractional)
        gf_model_forget(x->model, j->pod_uid);
    if (rc == 0 && j->fractional)
        atomic_fetch_add(&x->metrics.placements, 1);
    if (rc == 0) /* a failed bind may be retried */
        gf_ext_cache_drop(&x->cache, j->b.ns, j->b.name);
    if (rc < 0) {
        atomic_fetch_add(&x->metrics.bind_errors, 1);
        snprintf(msg, sizeof(msg), "binding %s/%s to %s: %s", j->b.ns, j->b.name, j->b.node,
                 err->msg);
        answered = gf_ext_reply_error(&r, 200, msg);
    } else {
        atomic_fetch_add(&x->metrics.binds, 1);
        answered = gf_ext_reply_error(&r, 200, "");
    }
    j->done(j->cls, answered, &r);
    free(j);
}

static void posted(void *cls, int rc, gf_error *err)
{
    finish(cls, rc, err);
}

/* The Binding to the API server; j is finished (maybe freed) on return. */
static void post(bind_job *j, json_t *ann, bool async)
{
    gf_extender *x = j->x;
    gf_error err = {0};
    int rc;

    if (async && x->kube.bind_async) {
        if (x->kube.bind_async(x->kube.cls, j->b.ns, j->b.name, j->uid, j->b.node, ann, posted, j,
                               &err) == 0)
            return;
        rc = -1;
    } else {
        rc = x->kube.bind(x->kube.cls, j->b.ns, j->b.name, j->uid, j->b.node, ann, &err);
    }
    finish(j, rc, &err);
}

static void run(gf_extender *x, const char *body, size_t len, bool async, gf_ext_bind_fn done,
                void *cls)
{
    bind_job *j = calloc(1, sizeof(*j));
    gf_ext_reply r = {0};
    gf_error err = {0};
    json_t *ann = NULL;

    atomic_fetch_add(&x->metrics.requests[GF_EXT_BIND], 1);
    if (!j) {
        done(cls, -1, &r);
        return;
    }
    *j = (bind_job){.x = x, .done = done, .cls = cls};
    if (gf_ext_bind_args_parse(body, len, &j->b, &err) < 0) {
        atomic_fetch_add(&x->metrics.bad_requests, 1);
        free(j);
        done(cls, gf_ext_reply_error(&r, 400, err.msg), &r);
        return;
    }
    if (!gf_ext_await_synced(x)) { /* ExtenderBindingResult.Error: the pod is tried again */
        gf_error_set(&err, GF_ESTATE, GF_EXT_NOT_SYNCED);
        finish(j, -1, &err);
    } else if (prepare(j, &ann, &err) < 0) {
        finish(j, -1, &err);
    } else {
        post(j, ann, async);
    }
    json_decref(ann);
}

static void copy_reply(void *cls, int rc, gf_ext_reply *r)
{
    gf_ext_reply *out = cls;

    if (rc < 0) /* status 0: no answer */
        gf_ext_reply_free(r);
    else
        *out = *r;
}

int gf_ext_bind(gf_extender *x, const char *body, size_t len, gf_ext_reply *r)
{
    *r = (gf_ext_reply){0};
    run(x, body, len, false, copy_reply, r);
    return r->status ? 0 : -1;
}

void gf_ext_bind_async(gf_extender *x, const char *body, size_t len, gf_ext_bind_fn done, void *cls)
{
    run(x, body, len, true, done, cls);
}
