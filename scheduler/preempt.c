/* SPDX-License-Identifier: Apache-2.0 */
/* Preemption: which lower-priority fractional pods must go so that a pod
 * fits a node (model.h, gf_model_preempt). Works on a scratch copy of the
 * node's GPU accounting; the model itself is only read. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "model_int.h"

/* The node with its own copy of the GPU accounting (ids borrowed). */
typedef struct scratch {
    mnode node;
    mgpu gpus[GF_SCHED_GPUS_MAX];
} scratch;

static void scratch_init(scratch *s, const mnode *n)
{
    s->node = *n;
    if (n->n_gpus > 0)
        memcpy(s->gpus, n->gpus, n->n_gpus * sizeof(mgpu));
    s->node.gpus = s->gpus;
}

static bool listed(const char *const *uids, size_t n, const char *uid)
{
    for (size_t i = 0; i < n; i++)
        if (uids[i] != NULL && strcmp(uids[i], uid) == 0)
            return true;
    return false;
}

static bool on_gpu(const mpod *p, size_t pos)
{
    for (size_t i = 0; i < p->n_gpus; i++)
        if (p->gpu[i] == pos)
            return true;
    return false;
}

/* A pod of n the preemptor may displace (not yet chosen). */
static bool eligible(const mpod *p, const gf_sched_pod *pod, const mpod *const *chosen,
                     size_t n_chosen)
{
    /* a held pod is pending: kube-scheduler has no such victim on the node */
    if (!p->resolved || p->held || p->priority >= pod->priority || strcmp(p->e.key, pod->uid) == 0)
        return false;
    for (size_t i = 0; i < n_chosen; i++)
        if (chosen[i] == p)
            return false;
    return true;
}

/* Picks victims on GPU pos of s (lowest priority first, the biggest charge
 * on that GPU among equals) until the pod fits there. Appends them to chosen;
 * false when even all eligible pods are not enough. */
static bool free_gpu(scratch *s, const mnode *n, size_t pos, const gf_sched_pod *pod,
                     const mpod **chosen, size_t *n_chosen, size_t max)
{
    while (!gf_sched_gpu_fits(&s->gpus[pos], pod)) {
        const mpod *best = NULL;
        uint64_t best_c = 0;

        for (const mpod *p = n->pods; p != NULL; p = p->nnext) {
            uint64_t c;

            if (!on_gpu(p, pos) || !eligible(p, pod, chosen, *n_chosen))
                continue;
            c = gf_sched_mpod_charge(p, s->gpus[pos].total);
            if (best == NULL || p->priority < best->priority ||
                (p->priority == best->priority && c > best_c)) {
                best = p;
                best_c = c;
            }
        }
        if (best == NULL || *n_chosen == max)
            return false;
        gf_model_charge(&s->node, best, -1);
        chosen[(*n_chosen)++] = best;
    }
    return true;
}

typedef struct gpu_cost {
    size_t pos;
    bool possible;
    size_t victims;
    int32_t top; /* highest priority among its victims */
} gpu_cost;

static int cost_cmp(const void *a, const void *b)
{
    const gpu_cost *x = a, *y = b;

    if (x->possible != y->possible)
        return x->possible ? -1 : 1;
    if (x->victims != y->victims)
        return x->victims < y->victims ? -1 : 1;
    if (x->top != y->top)
        return x->top < y->top ? -1 : 1;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

static size_t node_pods(const mnode *n)
{
    size_t count = 0;

    for (const mpod *p = n->pods; p != NULL; p = p->nnext)
        count++;
    return count;
}

static int copy_uids(const mpod *const *chosen, size_t n, char ***out, size_t *n_out, gf_error *err)
{
    char **uids = calloc(n ? n : 1, sizeof(*uids));

    if (uids == NULL)
        return gf_error_set(err, GF_ENOSPACE, "preempt: out of memory");
    for (size_t i = 0; i < n; i++) {
        if ((uids[i] = strdup(chosen[i]->e.key)) == NULL) {
            gf_model_uids_free(uids, i);
            return gf_error_set(err, GF_ENOSPACE, "preempt: out of memory");
        }
    }
    *out = uids;
    *n_out = n;
    return 0;
}

/* With the read lock held. */
static int preempt_locked(const gf_model *m, const gf_sched_pod *pod, const mnode *n,
                          const char *const *victims, size_t n_victims, char ***extra,
                          size_t *n_extra, gf_error *err)
{
    size_t max = node_pods(n), n_chosen = 0, i, k;
    const mpod **chosen = calloc(max ? max : 1, sizeof(*chosen));
    const mpod **trial = calloc(max ? max : 1, sizeof(*trial));
    gpu_cost cost[GF_SCHED_GPUS_MAX];
    uint8_t pos[GF_SCHED_GPUS_MAX];
    scratch *base = malloc(sizeof(*base)), *s = malloc(sizeof(*s));
    gf_sched_verdict v;
    int rc = -1;

    (void)m;
    if (chosen == NULL || trial == NULL || base == NULL || s == NULL) {
        gf_error_set(err, GF_ENOSPACE, "preempt: out of memory");
        goto out;
    }
    /* the pods kube-scheduler already chose are gone in every trial */
    scratch_init(base, n);
    for (const mpod *p = n->pods; p != NULL; p = p->nnext)
        if (p->resolved && listed(victims, n_victims, p->e.key))
            gf_model_charge(&base->node, p, -1);
    if (gf_sched_choose(&base->node, pod, GF_POLICY_BINPACK, pos, &v) == 0) {
        rc = copy_uids(chosen, 0, extra, n_extra, err);
        goto out;
    }
    if (v.status == GF_FAIL_UNRESOLVABLE || n->n_gpus < (size_t)pod->num_devices) {
        gf_error_set(err, GF_ESTATE, "%s", v.reason);
        goto out;
    }
    /* what freeing each GPU alone costs */
    for (i = 0; i < n->n_gpus; i++) {
        size_t t = 0;

        *s = *base;
        s->node.gpus = s->gpus;
        for (const mpod *p = n->pods; p != NULL; p = p->nnext)
            if (listed(victims, n_victims, p->e.key))
                trial[t++] = p; /* never picked again */
        cost[i].pos = i;
        cost[i].possible = free_gpu(s, n, i, pod, trial, &t, max);
        cost[i].victims = t;
        cost[i].top = INT32_MIN;
        for (k = 0; k < t; k++)
            if (!listed(victims, n_victims, trial[k]->e.key) && trial[k]->priority > cost[i].top)
                cost[i].top = trial[k]->priority;
    }
    qsort(cost, n->n_gpus, sizeof(cost[0]), cost_cmp);
    /* free the cheapest GPUs one after another on one scratch copy */
    *s = *base;
    s->node.gpus = s->gpus;
    for (const mpod *p = n->pods; p != NULL; p = p->nnext)
        if (listed(victims, n_victims, p->e.key))
            chosen[n_chosen++] = p;
    k = n_chosen;
    for (i = 0; i < (size_t)pod->num_devices; i++) {
        if (!cost[i].possible || !free_gpu(s, n, cost[i].pos, pod, chosen, &n_chosen, max)) {
            gf_error_set(err, GF_ESTATE,
                         "no set of lower-priority fractional pods on node %s "
                         "makes room: %s",
                         n->e.key, v.reason);
            goto out;
        }
    }
    if (gf_sched_choose(&s->node, pod, GF_POLICY_BINPACK, pos, &v) < 0) {
        gf_error_set(err, GF_ESTATE, "node %s: %s", n->e.key, v.reason);
        goto out;
    }
    rc = copy_uids(chosen + k, n_chosen - k, extra, n_extra, err);
out:
    free(s);
    free(base);
    free(trial);
    free(chosen);
    return rc;
}

int gf_model_preempt(gf_model *m, const gf_sched_pod *pod, const char *node,
                     const char *const *victims, size_t n_victims, char ***extra, size_t *n_extra,
                     gf_error *err)
{
    const mnode *n;
    int rc;

    *extra = NULL;
    *n_extra = 0;
    if (!pod->fractional || pod->invalid)
        return gf_error_set(err, GF_EINVAL, "pod %s/%s: %s", pod->ns, pod->name,
                            pod->invalid ? pod->error : "not a fractional pod");
    pthread_rwlock_rdlock(&m->lock);
    n = gf_model_node_find(m, node);
    if (n == NULL || !n->present || n->n_gpus > GF_SCHED_GPUS_MAX)
        rc = gf_error_set(err, GF_ENOTFOUND, "node %s is not in gpufrac's cache", node);
    else
        rc = preempt_locked(m, pod, n, victims, n_victims, extra, n_extra, err);
    pthread_rwlock_unlock(&m->lock);
    return rc;
}

void gf_model_uids_free(char **uids, size_t n)
{
    for (size_t i = 0; uids != NULL && i < n; i++)
        free(uids[i]);
    free(uids);
}
