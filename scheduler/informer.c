/* SPDX-License-Identifier: Apache-2.0 */
/* Nodes and pods from the API server into the model. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "decode.h"
#include "informer.h"
#include "slog.h"

typedef struct kind_desc {
    gf_model_kind kind; /* GF_INFORMER_NAMESPACES for the third */
    const char *path;
    const char *what;
    const char *thread_name; /* at most 15 characters */
} kind_desc;

static const kind_desc kinds[GF_INFORMER_KINDS] = {
    {GF_MODEL_NODES, "/api/v1/nodes", "nodes", "gf-watch-nodes"},
    {GF_MODEL_PODS, "/api/v1/pods", "pods", "gf-watch-pods"},
    {GF_INFORMER_NAMESPACES, "/api/v1/namespaces", "namespaces", "gf-watch-ns"},
};

typedef struct thread_arg {
    gf_informer *in;
    const kind_desc *kd;
} thread_arg;

static thread_arg args_[GF_INFORMER_KINDS];

/* --- node names --- */

static void names_clear(gf_informer *in)
{
    pthread_mutex_lock(&in->names_lock);
    for (size_t i = 0; i < in->n_names; i++)
        free(in->names[i]);
    in->n_names = 0;
    pthread_mutex_unlock(&in->names_lock);
}

static ssize_t names_find(const gf_informer *in, const char *name)
{
    for (size_t i = 0; i < in->n_names; i++)
        if (strcmp(in->names[i], name) == 0)
            return (ssize_t)i;
    return -1;
}

static void names_add(gf_informer *in, const char *name)
{
    char **grown, *copy;

    pthread_mutex_lock(&in->names_lock);
    if (names_find(in, name) >= 0)
        goto out;
    if (in->n_names == in->cap_names) {
        size_t cap = in->cap_names ? in->cap_names * 2 : 64;
        if (!(grown = realloc(in->names, cap * sizeof(*grown))))
            goto out;
        in->names = grown;
        in->cap_names = cap;
    }
    if ((copy = strdup(name)))
        in->names[in->n_names++] = copy;
out:
    pthread_mutex_unlock(&in->names_lock);
}

static void names_remove(gf_informer *in, const char *name)
{
    ssize_t i;

    pthread_mutex_lock(&in->names_lock);
    if ((i = names_find(in, name)) >= 0) {
        free(in->names[i]);
        in->names[i] = in->names[--in->n_names];
    }
    pthread_mutex_unlock(&in->names_lock);
}

int gf_informer_node_names(void *cls, char ***names, size_t *n)
{
    gf_informer *in = cls;
    char **out;
    size_t i;

    pthread_mutex_lock(&in->names_lock);
    out = calloc(in->n_names ? in->n_names : 1, sizeof(*out));
    for (i = 0; out && i < in->n_names; i++)
        out[i] = strdup(in->names[i]);
    *n = out ? in->n_names : 0;
    pthread_mutex_unlock(&in->names_lock);
    *names = out;
    return out ? 0 : -1;
}

/* --- objects into the model --- */

static int apply_node(gf_informer *in, json_t *obj, bool deleted, gf_error *err)
{
    gf_sched_node *node = malloc(sizeof(*node));
    int rc = 0;

    if (!node)
        return gf_error_set(err, GF_ENOSPACE, "out of memory");
    if (gf_sched_node_decode(obj, node, err) < 0) {
        gf_slog(GF_LOG_WARN, "ignoring a node: %s", err->msg);
    } else if (deleted) {
        gf_model_node_delete(in->model, node->name);
        names_remove(in, node->name);
        atomic_fetch_add(&in->deletions, 1);
    } else {
        if (node->inventory_error[0])
            gf_slog(GF_LOG_WARN, "node %s: %s", node->name, node->inventory_error);
        if ((rc = gf_model_node_update(in->model, node, err)) == 0)
            names_add(in, node->name);
    }
    free(node);
    return rc;
}

/* A deleted pod leaves nothing behind: its model record, and filter's copy
 * for bind (a pod filtered but never bound, e.g. unschedulable until it was
 * deleted, kept its slot, 3.4 KiB, until 256 newer pods pushed it
 * out). */
static void pod_gone(gf_informer *in, const gf_sched_pod *pod)
{
    gf_model_pod_delete(in->model, pod->uid);
    if (in->ext)
        gf_ext_cache_drop(&in->ext->cache, pod->ns, pod->name);
    atomic_fetch_add(&in->deletions, 1);
}

static int apply_pod(gf_informer *in, json_t *obj, bool deleted, gf_error *err)
{
    gf_sched_pod *pod = malloc(sizeof(*pod));
    int rc = 0;

    if (!pod)
        return gf_error_set(err, GF_ENOSPACE, "out of memory");
    if (in->ext)
        gf_reserver_pod(in->ext->reserver, obj, deleted);
    if (gf_sched_pod_decode(obj, in->prefix, pod, err) < 0)
        gf_slog(GF_LOG_WARN, "ignoring a pod: %s", err->msg);
    else if (deleted)
        pod_gone(in, pod);
    else
        rc = gf_model_pod_update(in->model, pod, err);
    free(pod);
    return rc;
}

static int apply_ns(gf_informer *in, json_t *obj, bool deleted, gf_error *err)
{
    gf_sched_ns ns;

    if (gf_sched_ns_decode(obj, &ns, err) < 0) {
        gf_slog(GF_LOG_WARN, "ignoring a namespace: %s", err->msg);
        return 0;
    }
    if (deleted) {
        gf_model_ns_delete(in->model, ns.name);
        return 0;
    }
    if (ns.error[0])
        gf_slog(GF_LOG_WARN, "namespace %s: %s: its fractional pods are refused", ns.name,
                ns.error);
    return gf_model_ns_update(in->model, &ns, err);
}

static int apply(thread_arg *a, json_t *obj, bool deleted, gf_error *err)
{
    switch ((int)a->kd->kind) {
    case GF_MODEL_NODES: return apply_node(a->in, obj, deleted, err);
    case GF_MODEL_PODS: return apply_pod(a->in, obj, deleted, err);
    default: return apply_ns(a->in, obj, deleted, err);
    }
}

static int on_item(void *cls, json_t *item, gf_error *err)
{
    thread_arg *a = cls;
    int rc = apply(a, item, false, err);

    if (rc < 0) /* one bad object never stops the list */
        gf_slog(GF_LOG_WARN, "%s: %s", a->kd->what, err->msg);
    return 0;
}

static int on_event(void *cls, const char *type, json_t *obj, gf_error *err)
{
    thread_arg *a = cls;
    bool deleted = strcmp(type, "DELETED") == 0;
    int rc;

    if (!deleted && strcmp(type, "ADDED") != 0 && strcmp(type, "MODIFIED") != 0)
        return 0;
    rc = apply(a, obj, deleted, err);
    if (rc < 0)
        gf_slog(GF_LOG_WARN, "%s %s: %s", a->kd->what, type, err->msg);
    return 0;
}

/* --- the loops --- */

static void pause_s(gf_informer *in, unsigned s)
{
    struct timespec ts = {0, 100 * 1000 * 1000};

    for (unsigned i = 0; i < s * 10 && !atomic_load(&in->stop); i++)
        nanosleep(&ts, NULL);
}

static void mark_synced(gf_informer *in, int kind)
{
    atomic_store(&in->synced[kind], true);
    for (int k = 0; k < GF_INFORMER_KINDS; k++)
        if (!atomic_load(&in->synced[k]))
            return;
    if (in->ext) /* quotas too: a namespace's pods are never judged without its quota */
        atomic_store(&in->ext->synced, true);
}

static void resync(thread_arg *a, bool begin)
{
    if (a->kd->kind == GF_INFORMER_NAMESPACES) {
        if (begin)
            gf_model_ns_resync_begin(a->in->model);
        else
            gf_model_ns_resync_end(a->in->model);
        return;
    }
    if (begin)
        gf_model_resync_begin(a->in->model, a->kd->kind);
    else
        gf_model_resync_end(a->in->model, a->kd->kind);
    if (a->kd->kind == GF_MODEL_PODS && a->in->ext && begin)
        gf_reserver_resync_begin(a->in->ext->reserver);
    else if (a->kd->kind == GF_MODEL_PODS && a->in->ext)
        gf_reserver_resync_end(a->in->ext->reserver);
}

static int relist(thread_arg *a, char *rv, size_t rv_len)
{
    gf_error err = {0};
    int rc;

    if (a->kd->kind == GF_MODEL_NODES)
        names_clear(a->in);
    resync(a, true);
    rc = gf_kube_list(a->in->kube, a->kd->path, on_item, a, rv, rv_len, &err);
    if (rc != 0) {
        gf_slog(GF_LOG_ERROR, "listing %s: %s", a->kd->what,
                rc == GF_KUBE_GONE ? "the list expired (410); listing again" : err.msg);
        return -1;
    }
    resync(a, false);
    mark_synced(a->in, (int)a->kd->kind);
    gf_slog(GF_LOG_INFO, "listed %s at resourceVersion %s", a->kd->what, rv);
    return 0;
}

static void *kind_loop(void *cls)
{
    thread_arg *a = cls;
    gf_informer *in = a->in;
    char rv[GF_KUBE_RV_MAX];
    gf_error err = {0};
    unsigned backoff = 1;
    int rc;

    pthread_setname_np(pthread_self(), a->kd->thread_name);
    while (!atomic_load(&in->stop)) {
        if (relist(a, rv, sizeof(rv)) < 0) {
            pause_s(in, backoff);
            backoff = backoff < 30 ? backoff * 2 : 30;
            continue;
        }
        backoff = 1;
        do {
            rc = gf_kube_watch(in->kube, a->kd->path, rv, sizeof(rv), on_event, a, &in->stop, &err);
        } while (rc == 0 && !atomic_load(&in->stop));
        if (rc < 0) {
            gf_slog(GF_LOG_WARN, "watching %s: %s; listing again", a->kd->what, err.msg);
            pause_s(in, 1);
        } else if (rc == GF_KUBE_GONE) {
            gf_slog(GF_LOG_INFO, "watching %s: resourceVersion %s is gone; listing again",
                    a->kd->what, rv);
        }
    }
    return NULL;
}

static void *janitor(void *cls)
{
    gf_informer *in = cls;
    unsigned tick = 0;
    size_t n, closed;

    pthread_setname_np(pthread_self(), "gf-janitor");
    while (!atomic_load(&in->stop)) {
        pause_s(in, GF_INFORMER_TRIM_S);
        /* the memory of deleted objects and of connections a burst of
         * binds opened back to the system */
        closed = gf_kube_idle_close(in->kube, GF_INFORMER_IDLE_CONN_S);
        if (atomic_exchange(&in->deletions, 0) > 0 || closed > 0)
            gf_model_trim(in->model);
        n = gf_model_expire_held(in->model, gf_model_now_ms(), GF_INFORMER_HOLD_TTL_MS);
        if (n)
            gf_slog(GF_LOG_INFO, "released %zu filter holds no bind followed", n);
        if (++tick * GF_INFORMER_TRIM_S < 30)
            continue;
        tick = 0;
        n = gf_model_expire_assumed(in->model, gf_model_now_ms(), GF_INFORMER_ASSUME_TTL_MS);
        if (n)
            gf_slog(GF_LOG_WARN, "dropped %zu binds the watch never confirmed", n);
    }
    return NULL;
}

int gf_informer_start(gf_informer *in, gf_kube *kube, gf_model *model, gf_extender *ext,
                      gf_error *err)
{
    memset(in, 0, sizeof(*in));
    in->kube = kube;
    in->model = model;
    in->ext = ext;
    snprintf(in->prefix, sizeof(in->prefix), "%s", ext ? ext->prefix : "");
    pthread_mutex_init(&in->names_lock, NULL);
    for (int i = 0; i < GF_INFORMER_KINDS; i++) {
        args_[i] = (thread_arg){in, &kinds[i]};
        if (pthread_create(&in->threads[i], NULL, kind_loop, &args_[i]) != 0)
            goto fail;
        in->started++;
    }
    if (pthread_create(&in->threads[GF_INFORMER_KINDS], NULL, janitor, in) != 0)
        goto fail;
    in->started++;
    return 0;
fail:
    gf_informer_stop(in);
    return gf_error_set(err, GF_ESYS, "cannot start the watch threads");
}

void gf_informer_stop(gf_informer *in)
{
    atomic_store(&in->stop, true);
    for (int i = 0; i < in->started; i++)
        pthread_join(in->threads[i], NULL);
    in->started = 0;
    names_clear(in);
    free(in->names);
    in->names = NULL;
    in->cap_names = 0;
    pthread_mutex_destroy(&in->names_lock);
}
