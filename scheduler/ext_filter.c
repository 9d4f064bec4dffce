/* SPDX-License-Identifier: Apache-2.0 */
/* filter and prioritize: ExtenderArgs in, ExtenderFilterResult or
 * HostPriorityList out. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"
#include "extender.h"

/* Decodes the request and its pod; answers 400 itself when malformed
 * (returns 1 then). */
static int prepare(gf_extender *x, const char *body, size_t len, gf_ext_args *a, gf_sched_pod *pod,
                   gf_ext_reply *r)
{
    gf_error err = {0};

    if (gf_ext_args_parse(body, len, a, &err) < 0 ||
        gf_sched_pod_decode(a->pod, x->prefix, pod, &err) < 0) {
        atomic_fetch_add(&x->metrics.bad_requests, 1);
        gf_ext_args_free(a);
        return gf_ext_reply_error(r, 400, err.msg) < 0 ? -1 : 1;
    }
    gf_ext_cache_put(&x->cache, pod); /* bind carries only the names */
    return 0;
}

/* Verdicts for every node (NULL result when not even that was possible;
 * *msg says why). */
static gf_sched_verdict *evaluate(gf_extender *x, const gf_sched_pod *pod, const gf_ext_args *a,
                                  gf_error *err)
{
    gf_sched_verdict *v = calloc(a->n ? a->n : 1, sizeof(*v));

    if (!v) {
        gf_error_set(err, GF_ENOSPACE, "out of memory");
        return NULL;
    }
    if (gf_model_evaluate(x->model, pod, a->names, a->n, x->policy, v, err) < 0) {
        free(v);
        return NULL;
    }
    return v;
}

/* The fitting node gpufrac would choose (the first of the highest rank, in
 * kube-scheduler's order), or a->n when none fits. */
static size_t best_fit(const gf_ext_args *a, const gf_sched_verdict *v)
{
    size_t best = a->n;

    for (size_t i = 0; i < a->n; i++) {
        if (v[i].status == GF_FIT && (best == a->n || v[i].rank > v[best].rank))
            best = i;
    }
    return best;
}

/* Every fitting node, or only `only` (< a->n). */
static int set_passed(json_t *res, const gf_ext_args *a, const gf_sched_verdict *v, size_t only)
{
    json_t *list = json_array();

    for (size_t i = 0; list && i < a->n; i++) {
        if ((v && v[i].status != GF_FIT) || (only < a->n && i != only))
            continue;
        if (a->from_nodes)
            json_array_append(list, json_array_get(a->items, i));
        else
            json_array_append_new(list, json_string(a->names[i]));
    }
    if (!list)
        return -1;
    if (a->from_nodes) {
        json_object_set_new(res, "NodeNames", json_null());
        return json_object_set_new(res, "Nodes", json_pack("{s:o}", "items", list));
    }
    json_object_set_new(res, "Nodes", json_null());
    return json_object_set_new(res, "NodeNames", list);
}

static json_t *filter_result(const gf_ext_args *a, const gf_sched_verdict *v, size_t only,
                             const char *error)
{
    json_t *res = json_object(), *failed = json_object(), *unres = json_object();
    const char *why;

    if (!res || !failed || !unres || set_passed(res, a, v, only) < 0)
        goto fail;
    for (size_t i = 0; v && i < a->n; i++) {
        why = v[i].reason[0] ? v[i].reason : "does not fit";
        if (v[i].status == GF_FIT)
            continue;
        json_object_set_new(failed, a->names[i], gf_ext_reason(why));
        if (v[i].status == GF_FAIL_UNRESOLVABLE)
            json_object_set_new(unres, a->names[i], gf_ext_reason(why));
    }
    json_object_set_new(res, "FailedNodes", failed);
    json_object_set_new(res, "FailedAndUnresolvableNodes", unres);
    json_object_set_new(res, "Error", gf_ext_reason(error));
    return res;
fail:
    json_decref(res);
    json_decref(failed);
    json_decref(unres);
    return NULL;
}

/* The best node, held for the pod (so the filters before its bind see the
 * GPU taken); when another filter took the room meanwhile, evaluated again. */
static size_t choose_and_hold(gf_extender *x, const gf_sched_pod *pod, const gf_ext_args *a,
                              gf_sched_verdict *v)
{
    gf_error err = {0};
    size_t best = best_fit(a, v);

    for (int tries = 0; best < a->n && tries < 3; tries++) {
        if (gf_model_hold(x->model, pod, a->names[best], x->policy, &err) == 0)
            return best;
        if (gf_model_evaluate(x->model, pod, a->names, a->n, x->policy, v, &err) < 0)
            break;
        best = best_fit(a, v);
    }
    return best; /* unheld: bind decides */
}

/* No node fits: the first whose idle device-plugin GPUs would take the pod
 * gets a reservation (one node at a time, so a pod reserves one GPU). */
static void reserve_first(gf_extender *x, const gf_ext_args *a, gf_sched_verdict *v)
{
    char why[GF_SCHED_REASON_MAX];
    size_t len;

    for (size_t i = 0; x->reserver && i < a->n; i++) {
        if (v[i].status != GF_FAIL || v[i].reserve == 0)
            continue;
        gf_reserver_want(x->reserver, a->names[i], v[i].reserve, why, sizeof(why));
        len = strlen(v[i].reason);
        snprintf(v[i].reason + len, sizeof(v[i].reason) - len, ": %s", why);
        return;
    }
}

int gf_ext_filter(gf_extender *x, const char *body, size_t len, gf_ext_reply *r)
{
    gf_ext_args a;
    gf_sched_pod *pod = malloc(sizeof(*pod));
    gf_sched_verdict *v = NULL;
    gf_error err = {0};
    size_t fit = 0, only = SIZE_MAX; /* SIZE_MAX: every fitting node */
    int rc;

    atomic_fetch_add(&x->metrics.requests[GF_EXT_FILTER], 1);
    if (!gf_ext_await_synced(x)) { /* ExtenderFilterResult.Error: the pod is tried again */
        free(pod);
        return gf_ext_reply_error(r, 200, GF_EXT_NOT_SYNCED) < 0 ? -1 : 0;
    }
    if (!pod)
        return -1;
    if ((rc = prepare(x, body, len, &a, pod, r)) != 0)
        goto out;
    if (x->filter_best && pod->fractional && !pod->invalid)
        gf_model_unhold(x->model, pod->uid); /* a retry: judged without its last hold */
    if (pod->fractional && !(v = evaluate(x, pod, &a, &err))) {
        rc = gf_ext_reply_json(r, 200, filter_result(&a, NULL, only, err.msg));
        goto out_args;
    }
    if (v && x->filter_best && !pod->invalid)
        only = choose_and_hold(x, pod, &a, v);
    for (size_t i = 0; v && i < a.n; i++)
        fit += v[i].status == GF_FIT;
    if (v && fit == 0) {
        atomic_fetch_add(&x->metrics.filter_failures, 1);
        reserve_first(x, &a, v);
    }
    /* One node left: kube-scheduler skips its scoring and prioritize. */
    rc = gf_ext_reply_json(r, 200, filter_result(&a, v, only, ""));
out_args:
    gf_ext_args_free(&a);
out:
    free(v);
    free(pod);
    return rc < 0 ? -1 : 0;
}

static json_t *priorities(const gf_ext_args *a, const gf_sched_verdict *v)
{
    json_t *list = json_array();
    int score;

    for (size_t i = 0; list && i < a->n; i++) {
        score = v && v[i].status == GF_FIT ? v[i].score : 0;
        if (score < 0)
            score = 0;
        if (score > 10)
            score = 10;
        json_array_append_new(list, json_pack("{s:s,s:I}", "Host", a->names[i], "Score",
                                              (json_int_t)score));
    }
    return list;
}

int gf_ext_prioritize(gf_extender *x, const char *body, size_t len, gf_ext_reply *r)
{
    gf_ext_args a;
    gf_sched_pod *pod = malloc(sizeof(*pod));
    gf_sched_verdict *v = NULL;
    gf_error err = {0};
    int rc;

    atomic_fetch_add(&x->metrics.requests[GF_EXT_PRIORITIZE], 1);
    if (!gf_ext_await_synced(x)) { /* a HostPriorityList has no Error: non-200 is one */
        free(pod);
        return gf_ext_reply_error(r, 503, GF_EXT_NOT_SYNCED) < 0 ? -1 : 0;
    }
    if (!pod)
        return -1;
    if ((rc = prepare(x, body, len, &a, pod, r)) != 0)
        goto out;
    if (pod->fractional && !pod->invalid)
        v = evaluate(x, pod, &a, &err); /* on failure: every score 0 */
    rc = gf_ext_reply_json(r, 200, priorities(&a, v));
    gf_ext_args_free(&a);
out:
    free(v);
    free(pod);
    return rc < 0 ? -1 : 0;
}
