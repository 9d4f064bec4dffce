/* SPDX-License-Identifier: Apache-2.0 */
/* The reserver's thread (reserve.h): every tick it decides under the lock
 * what to create, delete and label, then makes those API calls without it.
 * A reservation is created only while none of the node's is starting, so a
 * node never gets more reservations than filter asked for. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "reserve_int.h"
#include "slog.h"

typedef struct action {
    char node[GF_SCHED_NAME_MAX];
    char name[GF_SCHED_NAME_MAX]; /* delete: the pod */
    char uid[GF_SCHED_UID_MAX];
    int count; /* label: reserved GPUs */
    bool bad;  /* delete: it held no usable GPU (else: given back unused) */
} action;

typedef struct plan {
    action create[ACTIONS_MAX], del[ACTIONS_MAX], label[ACTIONS_MAX];
    size_t n_create, n_del, n_label;
} plan;

static json_t *limits_one(void)
{
    return json_pack("{s:{s:s}}", "limits", GF_SCHED_WHOLE_GPU_RESOURCE, "1");
}

static json_t *reservation_pod(const gf_reserver *r, const char *node)
{
    static const char report[] = "printf %s \"$NVIDIA_VISIBLE_DEVICES\" > /dev/termination-log";
    static const char hold[] = "trap 'exit 0' TERM; while :; do sleep 3600 & wait $!; done";

    return json_pack("{s:s,s:s,s:{s:s,s:s,s:{s:s}},s:{s:s,s:b,s:s,s:s,s:b,s:b,s:i,s:[{s:s}],s:[{s:"
                     "s,s:s,s:s,s:[s,s,"
                     "s],s:o}],s:[{s:s,s:s,s:s,s:[s,s,s],s:o}]}}",
                     "apiVersion", "v1", "kind", "Pod", "metadata", "generateName",
                     "gpufrac-reserve-", "namespace", r->ns, "labels", GF_RESERVE_LABEL, "true",
                     "spec", "nodeName", node, "hostNetwork", 1, "restartPolicy", "Always",
                     "priorityClassName", "system-node-critical", "automountServiceAccountToken", 0,
                     "enableServiceLinks", 0, "terminationGracePeriodSeconds", 1, "tolerations",
                     "operator", "Exists", "initContainers", "name", "report", "image", r->image,
                     "imagePullPolicy", "IfNotPresent", "command", "/bin/sh", "-c", report,
                     "resources", limits_one(), "containers", "name", "hold", "image", r->image,
                     "imagePullPolicy", "IfNotPresent", "command", "/bin/sh", "-c", hold,
                     "resources", limits_one());
}

/* --- deciding (lock held) --- */

static void plan_creates(gf_reserver *r, plan *p, uint64_t now)
{
    const char *starting;

    for (size_t i = 0; i < r->n_nodes && p->n_create < ACTIONS_MAX; i++) {
        rnode *n = &r->nodes[i];
        if (!n->want || n->creating || now < n->retry_at || now < n->starting_until ||
            gf_rsv_pending_on(r, n->name, &starting) > 0)
            continue;
        n->want--;
        if (gf_rsv_used_on(r, n->name) >= gf_model_node_dp_gpus(r->model, n->name))
            continue; /* filter says why the next time */
        n->creating = true;
        n->arrived = false;
        snprintf(p->create[p->n_create++].node, GF_SCHED_NAME_MAX, "%s", n->name);
    }
}

static void plan_delete(gf_reserver *r, plan *p, rres *x)
{
    action *a;

    if (p->n_del == ACTIONS_MAX)
        return;
    x->deleting = true;
    a = &p->del[p->n_del++];
    snprintf(a->node, sizeof(a->node), "%s", x->node);
    snprintf(a->name, sizeof(a->name), "%s", x->name);
    snprintf(a->uid, sizeof(a->uid), "%s", x->uid);
    a->bad = x->bad;
    gf_rsv_node_sync(r, x->node);
}

/* Whether nothing is placed on x's GPU. */
static bool gpu_idle(gf_reserver *r, const rres *x)
{
    gf_model_gpu_state g[GF_SCHED_GPUS_MAX];
    size_t n = 0;
    gf_error err;

    if (gf_model_node_gpus(r->model, x->node, g, GF_SCHED_GPUS_MAX, &n, &err) < 0)
        return true;
    for (size_t i = 0; i < n && i < GF_SCHED_GPUS_MAX; i++)
        if (strcmp(g[i].id, x->gpu) == 0)
            return g[i].pods == 0;
    return true;
}

/* How long x may stay unused: idle_s after its last fraction; a fresh one
 * at least GF_RESERVE_FRESH_S, so the pod it was made for (waiting out
 * kube-scheduler's back-off, at most 10 s by default) finds it. */
static uint64_t idle_ms(const gf_reserver *r, const rres *x)
{
    unsigned s = r->idle_s;

    if (!x->used && s < GF_RESERVE_FRESH_S)
        s = GF_RESERVE_FRESH_S;
    return (uint64_t)s * 1000u;
}

static void plan_deletes(gf_reserver *r, plan *p, uint64_t now)
{
    for (size_t i = 0; i < r->n_res; i++) {
        rres *x = &r->res[i];
        if (x->deleting)
            continue;
        if (x->bad) {
            rnode *n = gf_rsv_node_get(r, x->node);
            if (n) {
                n->retry_at = now + GF_RESERVE_RETRY_MS;
                snprintf(n->error, sizeof(n->error), "reservation %.100s held no usable GPU",
                         x->name);
            }
            plan_delete(r, p, x);
            continue;
        }
        if (!x->gpu[0] || !gpu_idle(r, x)) {
            x->idle_since = 0;
            x->used |= x->gpu[0] != '\0';
            continue;
        }
        if (!x->idle_since)
            x->idle_since = now;
        if (now - x->idle_since >= idle_ms(r, x) &&
            gf_model_gpu_close_idle(r->model, x->node, x->gpu) == 0)
            plan_delete(r, p, x);
    }
}

static void plan_labels(gf_reserver *r, plan *p)
{
    for (size_t i = 0; i < r->n_nodes && p->n_label < ACTIONS_MAX; i++) {
        rnode *n = &r->nodes[i];
        int count = (int)gf_rsv_open_on(r, n->name);
        if (count == n->labelled || (n->labelled < 0 && count == 0))
            continue;
        n->labelled = count;
        snprintf(p->label[p->n_label].node, GF_SCHED_NAME_MAX, "%s", n->name);
        p->label[p->n_label++].count = count;
    }
}

/* --- doing (no lock) --- */

static int call(gf_reserver *r, const char *method, const char *path, json_t *body,
                const char *ctype, gf_error *err)
{
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL, *resp = NULL, msg[200];
    long status = 0;
    int rc = 0;

    json_decref(body);
    if (body == NULL || text == NULL)
        rc = gf_error_set(err, GF_ENOSPACE, "out of memory");
    else if (gf_kube_request(r->kube, method, path, text, ctype, &status, &resp, err) < 0)
        rc = -1;
    else if (status < 200 || status > 299) {
        snprintf(msg, sizeof(msg), "%.160s", resp ? resp : "");
        rc = gf_error_set(err, GF_ESTATE, "%s %s: HTTP %ld: %s", method, path, status, msg);
    }
    free(text);
    free(resp);
    return rc;
}

static void do_create(gf_reserver *r, const char *node)
{
    char path[GF_SCHED_NAME_MAX + 64];
    gf_error err = {0};
    int rc;
    rnode *n;

    snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods", r->ns);
    rc = call(r, "POST", path, reservation_pod(r, node), "application/json", &err);
    if (rc == 0)
        gf_slog(GF_LOG_INFO, "reserving a GPU of node %s for fractions (a pod in %s)", node, r->ns);
    else
        gf_slog(GF_LOG_WARN, "cannot reserve a GPU of node %s: %s", node, err.msg);
    pthread_mutex_lock(&r->lock);
    if ((n = gf_rsv_node_get(r, node))) {
        n->creating = false;
        if (rc < 0) {
            n->retry_at = gf_model_now_ms() + GF_RESERVE_RETRY_MS;
            snprintf(n->error, sizeof(n->error), "%.150s", err.msg);
        } else if (!n->arrived) { /* the watch can bring it before the POST returns */
            n->starting_until = gf_model_now_ms() + 5000; /* until the watch brings it */
        }
    }
    pthread_mutex_unlock(&r->lock);
}

static void do_delete(gf_reserver *r, const action *a)
{
    char path[2 * GF_SCHED_NAME_MAX + 64];
    gf_error err = {0};

    snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s", r->ns, a->name);
    if (call(r, "DELETE", path, json_pack("{s:{s:s}}", "preconditions", "uid", a->uid),
             "application/json", &err) < 0)
        gf_slog(GF_LOG_WARN, "cannot delete reservation %s/%s: %s", r->ns, a->name, err.msg);
    else if (a->bad)
        gf_slog(GF_LOG_INFO, "deleted reservation %s/%s of node %s", r->ns, a->name, a->node);
    else
        gf_slog(GF_LOG_INFO, "gave back reservation %s/%s of node %s to the device plugin", r->ns,
                a->name, a->node);
}

static void do_label(gf_reserver *r, const action *a)
{
    char path[GF_SCHED_NAME_MAX + 32], v[16];
    gf_error err = {0};
    json_t *val;

    snprintf(v, sizeof(v), "%d", a->count);
    val = a->count ? json_string(v) : json_null();
    snprintf(path, sizeof(path), "/api/v1/nodes/%s", a->node);
    if (call(r, "PATCH", path,
             json_pack("{s:{s:{s:o}}}", "metadata", "labels", GF_RESERVE_NODE_LABEL, val),
             "application/merge-patch+json", &err) < 0)
        gf_slog(GF_LOG_WARN, "cannot label node %s with its reserved GPUs: %s", a->node, err.msg);
}

static void tick(gf_reserver *r)
{
    plan p;
    uint64_t now = gf_model_now_ms();

    memset(&p, 0, sizeof(p));
    pthread_mutex_lock(&r->lock);
    plan_creates(r, &p, now);
    plan_deletes(r, &p, now);
    plan_labels(r, &p);
    pthread_mutex_unlock(&r->lock);
    for (size_t i = 0; i < p.n_create; i++)
        do_create(r, p.create[i].node);
    for (size_t i = 0; i < p.n_del; i++)
        do_delete(r, &p.del[i]);
    for (size_t i = 0; i < p.n_label; i++)
        do_label(r, &p.label[i]);
}

static void *loop(void *cls)
{
    gf_reserver *r = cls;
    struct timespec until;

    pthread_setname_np(pthread_self(), "gf-reserve");
    while (!atomic_load(&r->stop)) {
        tick(r);
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += TICK_MS * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_mutex_lock(&r->lock);
        if (!atomic_load(&r->stop))
            pthread_cond_timedwait(&r->cond, &r->lock, &until);
        pthread_mutex_unlock(&r->lock);
    }
    return NULL;
}

int gf_reserver_start(gf_reserver **out, gf_kube *kube, gf_model *model, const gf_reserve_opts *o,
                      gf_error *err)
{
    gf_reserver *r = calloc(1, sizeof(*r));

    *out = NULL;
    if (!r)
        return gf_error_set(err, GF_ENOSPACE, "out of memory");
    r->kube = kube;
    r->model = model;
    snprintf(r->ns, sizeof(r->ns), "%s", o->ns ? o->ns : GF_RESERVE_NS_DEFAULT);
    snprintf(r->image, sizeof(r->image), "%s", o->image ? o->image : "");
    r->idle_s = o->idle_s;
    pthread_mutex_init(&r->lock, NULL);
    pthread_cond_init(&r->cond, NULL);
    if (kube && pthread_create(&r->thread, NULL, loop, r) != 0) {
        gf_reserver_stop(r);
        return gf_error_set(err, GF_ESYS, "cannot start the reservation thread");
    }
    r->started = kube != NULL;
    *out = r;
    return 0;
}

void gf_reserver_stop(gf_reserver *r)
{
    if (!r)
        return;
    pthread_mutex_lock(&r->lock);
    atomic_store(&r->stop, true);
    pthread_cond_signal(&r->cond);
    pthread_mutex_unlock(&r->lock);
    if (r->started)
        pthread_join(r->thread, NULL);
    pthread_mutex_destroy(&r->lock);
    pthread_cond_destroy(&r->cond);
    free(r->res);
    free(r->whole);
    free(r->nodes);
    free(r);
}
