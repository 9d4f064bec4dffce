/* SPDX-License-Identifier: Apache-2.0 */
/* Placement: which GPUs of a node take a fractional pod, the node's filter
 * verdict and score, and the bind-time reservation (model.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fit.h"
#include "model.h"
#include "model_int.h"
#include "quantity.h"

int gf_policy_parse(const char *s, gf_policy *out, gf_error *err)
{
    if (s != NULL && strcmp(s, "binpack") == 0)
        *out = GF_POLICY_BINPACK;
    else if (s != NULL && strcmp(s, "spread") == 0)
        *out = GF_POLICY_SPREAD;
    else
        return gf_error_set(err, GF_EINVAL, "placement policy \"%s\": use binpack or spread",
                            s != NULL ? s : "");
    return 0;
}

const char *gf_policy_name(gf_policy p)
{
    return p == GF_POLICY_SPREAD ? "spread" : "binpack";
}

/* "4096 MiB", or "4096.5 MiB" when not whole. */
static const char *mib(uint64_t bytes, char *buf, size_t len)
{
    if (bytes % GF_MIB == 0)
        snprintf(buf, len, "%llu MiB", (unsigned long long)(bytes / GF_MIB));
    else
        snprintf(buf, len, "%.1f MiB", (double)bytes / (double)GF_MIB);
    return buf;
}

__attribute__((format(printf, 3, 4))) static int fail(gf_sched_verdict *v, gf_verdict_status status,
                                                      const char *fmt, ...)
{
    va_list ap;

    v->status = status;
    v->score = 0;
    v->rank = 0.0;
    va_start(ap, fmt);
    vsnprintf(v->reason, sizeof(v->reason), fmt, ap);
    va_end(ap);
    return -1;
}

static uint64_t gpu_free(const mgpu *g)
{
    return g->total > g->requested ? g->total - g->requested : 0;
}

static double fullness(const mgpu *g)
{
    return g->total ? (double)g->requested / (double)g->total : 1.0;
}

static bool idle(const mgpu *g)
{
    return g->pods[0] + g->pods[1] == 0;
}

/* Can the node take the pod at all (inventory, state)? */
static int precheck(const mnode *n, const gf_sched_pod *pod, gf_sched_verdict *v)
{
    if (!n->present)
        return fail(v, GF_FAIL, "node %s is not in gpufrac's cache (no Node object seen yet)",
                    n->e.key);
    if (n->unschedulable)
        return fail(v, GF_FAIL, "node is unschedulable");
    if (!n->ready)
        return fail(v, GF_FAIL, "node is not Ready");
    if (n->inventory_error != NULL)
        return fail(v, GF_FAIL_UNRESOLVABLE, "%s", n->inventory_error);
    if (n->source == GF_INV_NONE)
        return fail(v, GF_FAIL_UNRESOLVABLE,
                    "node has no GPU inventory (no " GF_SCHED_GPUS_ANNOTATION
                    " annotation, no nvidia.com/gpu.* labels)");
    if (!n->memory_known)
        return fail(v, GF_FAIL_UNRESOLVABLE,
                    "node's GPU memory is unknown (label " GF_SCHED_GFD_MEMORY_LABEL
                    " missing): it cannot host GPU memory requests");
    if (pod->num_devices < 1 || pod->num_devices > GF_SCHED_GPUS_MAX ||
        n->n_gpus < (size_t)pod->num_devices)
        return fail(v, GF_FAIL_UNRESOLVABLE, "needs %d GPUs that fit, node has %zu",
                    pod->num_devices, n->n_gpus);
    return 0;
}

static unsigned part_pct(const gf_sched_pod *pod, bool has_compute, double compute)
{
    return pod->mode == GF_MODE_SM_SHARING && has_compute ? (unsigned)gf_compute_percent(compute)
                                                          : 0;
}

/* As the memory: the largest init container's share or the sum of the others'. */
unsigned gf_sched_pod_compute_pct(const gf_sched_pod *pod)
{
    unsigned c = part_pct(pod, pod->has_compute, pod->compute);
    unsigned run = pod->init ? 0 : c, init = pod->init ? c : 0;

    for (size_t i = 0; i < pod->n_more; i++) {
        c = part_pct(pod, pod->more[i].has_compute, pod->more[i].compute);
        if (pod->more[i].init)
            init = c > init ? c : init;
        else
            run += c;
    }
    return run > init ? run : init;
}

/* The limit of the pod's container i (0: the first, then pod->more). */
static const gf_amount *part_limit(const gf_sched_pod *pod, size_t i)
{
    return i == 0 ? &pod->limit : &pod->more[i - 1].limit;
}

/* Does g's memory hold container i's limit (bind resolves and writes it)? */
static bool limit_fits_one(const mgpu *g, const gf_amount *l, gf_error *why)
{
    uint64_t b;

    /* gf_amount_resolve's answer without its messages (filter asks for every
     * GPU of every node); the message only when asked why */
    if (why == NULL)
        return l->is_portion ? l->portion > 0.0 && l->portion <= 1.0 && g->total >= GF_MIB
                             : l->bytes > 0 && l->bytes <= g->total;
    return gf_amount_resolve(l, g->total, "gpu-memory.limit", &b, why) == 0;
}

/* Every container's limit (why: the first that does not fit). */
static bool limit_fits(const mgpu *g, const gf_sched_pod *pod, gf_error *why)
{
    for (size_t i = 0; i <= pod->n_more; i++)
        if (!limit_fits_one(g, part_limit(pod, i), why))
            return false;
    return true;
}

static bool compute_fits(const mgpu *g, const gf_sched_pod *pod)
{
    return g->compute_pct + gf_sched_pod_compute_pct(pod) <= 100;
}

/* The pod's limit for the fit rule: its bytes, or (a portion, which never
 * resolves to more than the GPU) 0 when it resolves, else unresolved. */
static uint64_t fit_limit_one(const mgpu *g, const gf_amount *l)
{
    if (l->is_portion)
        return limit_fits_one(g, l, NULL) ? 0 : GF_FIT_UNRESOLVED;
    return l->bytes > 0 ? l->bytes : GF_FIT_UNRESOLVED;
}

/* The largest of the containers' limits (each runs alone within its own). */
static uint64_t fit_limit(const mgpu *g, const gf_sched_pod *pod)
{
    uint64_t max = 0, l;

    for (size_t i = 0; i <= pod->n_more; i++)
        if ((l = fit_limit_one(g, part_limit(pod, i))) > max)
            max = l;
    return max;
}

/* What the pod asks of a GPU of one size (request, limit, compute): the same
 * for every GPU of that size, so filter works it out once per request and
 * size (the few sizes of a cluster), not once per node or GPU. */
#define ASK_SIZES 4

typedef struct pod_ask {
    size_t n, next;            /* sizes known; the slot to reuse next */
    uint64_t total[ASK_SIZES]; /* the GPU sizes they were worked out for */
    gf_fit_ask ask[ASK_SIZES];
} pod_ask;

static const gf_fit_ask *ask_again(pod_ask *a, const mgpu *g, const gf_sched_pod *pod)
{
    size_t i = a->next;

    a->ask[i] = (gf_fit_ask){.request = gf_sched_pod_charge(pod, g->total),
                             .limit = fit_limit(g, pod),
                             .mode = pod->mode,
                             .compute_pct = gf_sched_pod_compute_pct(pod)};
    a->total[i] = g->total;
    a->next = (i + 1) % ASK_SIZES;
    a->n += a->n < ASK_SIZES;
    return &a->ask[i];
}

static inline const gf_fit_ask *ask_for(pod_ask *a, const mgpu *g, const gf_sched_pod *pod)
{
    for (size_t i = 0; i < a->n; i++)
        if (__builtin_expect(a->total[i] == g->total, 1))
            return &a->ask[i];
    return ask_again(a, g, pod);
}

/* Would g take the pod now (ask: ask_for's answer for g)? */
static inline __attribute__((always_inline)) bool gpu_fits(const mgpu *g, const gf_sched_pod *pod,
                                                           const gf_fit_ask *ask)
{
    gf_mode other = pod->mode == GF_MODE_SM_SHARING ? GF_MODE_TIME_SLICING : GF_MODE_SM_SHARING;
    gf_fit_gpu state = {.total = g->total,
                        .guaranteed = g->requested,
                        .has_fractions = g->pods[other] + g->pods[pod->mode] > 0,
                        .mode = g->pods[other] > 0 ? other : pod->mode,
                        .compute_pct = g->compute_pct};

    return gf_fit_check(&state, ask, NULL) == GF_FIT_OK;
}

bool gf_sched_gpu_fits(const mgpu *g, const gf_sched_pod *pod)
{
    pod_ask a = {0};

    return gpu_fits(g, pod, ask_for(&a, g, pod));
}

/* A GPU's place in the order of candidates, worked out once per GPU. */
typedef struct rank_key {
    bool idle;
    double fullness;
} rank_key;

/* true when a goes before b. */
static bool before(const rank_key *a, const rank_key *b, gf_policy policy)
{
    if (policy == GF_POLICY_SPREAD)
        return a->fullness < b->fullness;
    if (a->idle != b->idle)
        return !a->idle;
    return a->fullness > b->fullness;
}

static const uint8_t *order_of(const mnode *n, gf_policy policy)
{
    return n->order[policy == GF_POLICY_SPREAD];
}

void gf_model_node_summarize(mnode *n)
{
    rank_key key[GF_SCHED_GPUS_MAX];
    size_t i, k, count = n->n_gpus < GF_SCHED_GPUS_MAX ? n->n_gpus : GF_SCHED_GPUS_MAX;

    n->busy = 0;
    n->sum_total = n->sum_requested = 0;
    for (i = 0; i < n->n_gpus; i++) {
        n->busy += !idle(&n->gpus[i]);
        n->sum_total += n->gpus[i].total;
        n->sum_requested += n->gpus[i].requested;
    }
    for (i = 0; i < count; i++)
        key[i] = (rank_key){.idle = idle(&n->gpus[i]), .fullness = fullness(&n->gpus[i])};
    for (int policy = GF_POLICY_BINPACK; policy <= GF_POLICY_SPREAD; policy++) {
        uint8_t *o = n->order[policy == GF_POLICY_SPREAD];

        for (i = 0; i < count; i++) { /* stable insertion: ties keep position order */
            for (k = i; k > 0 && before(&key[i], &key[o[k - 1]], (gf_policy)policy); k--)
                o[k] = o[k - 1];
            o[k] = (uint8_t)i;
        }
    }
}

/* The GPUs of n that take the pod, best first, into pos[0..num_devices):
 * the first that fit in n's candidate order. Returns how many were found:
 * num_devices, or fewer when that is all of them. */
static size_t candidates(const mnode *n, const gf_sched_pod *pod, gf_policy policy, uint8_t *pos,
                         pod_ask *a)
{
    const uint8_t *order = order_of(n, policy);
    size_t i, count = 0, need = (size_t)pod->num_devices;
    size_t n_gpus = n->n_gpus < GF_SCHED_GPUS_MAX ? n->n_gpus : GF_SCHED_GPUS_MAX;

    for (i = 0; i < n_gpus && count < need; i++) {
        const mgpu *g = &n->gpus[order[i]];

        if (!g->closed && gpu_fits(g, pod, ask_for(a, g, pod)))
            pos[count++] = order[i];
    }
    return count;
}

static int clamp10(double x)
{
    int s = (int)(x + 0.5);

    return s < 0 ? 0 : s > 10 ? 10 : s;
}

/* The node's unrequested share once pod is placed (num_devices GPUs). */
static double node_free_after(const mnode *n, const gf_sched_pod *pod, pod_ask *a)
{
    uint64_t total = n->sum_total, requested = n->sum_requested;

    requested += (uint64_t)pod->num_devices * ask_for(a, &n->gpus[0], pod)->request;
    return total > requested ? (double)(total - requested) / (double)total : 0.0;
}

/* 0..10, unrounded (the verdict's rank; its score is this rounded). */
static double score(const mnode *n, const gf_sched_pod *pod, gf_policy policy, const uint8_t *pos,
                    pod_ask *a)
{
    double best = -1.0, emptiest = 1.0;
    size_t i;

    for (i = 0; i < (size_t)pod->num_devices; i++) {
        const mgpu *g = &n->gpus[pos[i]];
        double after = (double)(g->requested + ask_for(a, g, pod)->request) / (double)g->total;

        if (!idle(g) && after > best)
            best = after;
        if (1.0 - after < emptiest)
            emptiest = 1.0 - after;
    }
    if (policy == GF_POLICY_SPREAD)
        return 5.0 * emptiest + 5.0 * node_free_after(n, pod, a);
    if (best >= 0.0)
        return 5.0 + 5.0 * best;
    return 4.0 * (double)n->busy / (double)n->n_gpus;
}

/* The limit fits no GPU of n: bind's own message (the largest GPU's). */
static int explain_limit(const mnode *n, const gf_sched_pod *pod, gf_sched_verdict *v)
{
    const mgpu *big = NULL;
    gf_error why = {0};
    size_t i;

    for (i = 0; i < n->n_gpus; i++) {
        if (limit_fits(&n->gpus[i], pod, NULL))
            return 0;
        if (big == NULL || n->gpus[i].total > big->total)
            big = &n->gpus[i];
    }
    if (big == NULL)
        return 0;
    limit_fits(big, pod, &why);
    return fail(v, GF_FAIL_UNRESOLVABLE, "%s", why.msg);
}

/* No GPU of n has room for pod's SM share: the fullest promise. */
static int explain_compute(const mnode *n, const gf_sched_pod *pod, gf_sched_verdict *v)
{
    unsigned want = gf_sched_pod_compute_pct(pod);
    const mgpu *least = NULL;
    size_t i;

    if (want == 0)
        return 0;
    for (i = 0; i < n->n_gpus; i++) {
        if (compute_fits(&n->gpus[i], pod))
            return 0;
        if (least == NULL || n->gpus[i].compute_pct < least->compute_pct)
            least = &n->gpus[i];
    }
    if (least == NULL)
        return 0;
    return fail(v, GF_FAIL,
                "%s has %u/100 of its SMs promised to sm-sharing pods, pod asks "
                "%u/100 (gpu-compute.portion)",
                least->id, least->compute_pct, want);
}

/* Why no GPU (or too few) of n takes pod. */
static int explain(const mnode *n, const gf_sched_pod *pod, size_t fitting, gf_sched_verdict *v)
{
    const mgpu *best = NULL, *other_mode = NULL;
    char a[48], b[48];
    uint64_t r, big = 0;
    size_t i;

    for (i = 0; i < n->n_gpus; i++) {
        const mgpu *g = &n->gpus[i];

        r = gf_sched_pod_charge(pod, g->total);
        if (r > 0 && r <= g->total && g->total > big)
            big = g->total;
        if (!gf_sched_gpu_mode_ok(g, pod->mode)) {
            if (gpu_free(g) >= r)
                other_mode = g;
        } else if (best == NULL || gpu_free(g) > gpu_free(best)) {
            best = g;
        }
    }
    r = gf_sched_pod_charge(pod, n->gpus[0].total);
    if (big == 0)
        return fail(v, GF_FAIL_UNRESOLVABLE,
                    "pod requests %s per GPU, more than any GPU of "
                    "the node has (%s)",
                    mib(r, a, sizeof(a)), mib(n->gpus[0].total, b, sizeof(b)));
    if (explain_limit(n, pod, v) < 0 || explain_compute(n, pod, v) < 0)
        return -1;
    if (pod->num_devices > 1 && fitting > 0)
        return fail(v, GF_FAIL, "needs %d GPUs that fit, node has %zu", pod->num_devices, fitting);
    if (other_mode != NULL || best == NULL)
        return fail(v, GF_FAIL, "GPUs run %s fractions, pod asks %s",
                    gf_mode_name(pod->mode == GF_MODE_SM_SHARING ? GF_MODE_TIME_SLICING
                                                                 : GF_MODE_SM_SHARING),
                    gf_mode_name(pod->mode));
    r = gf_sched_pod_charge(pod, best->total);
    if (pod->num_devices > 1)
        return fail(v, GF_FAIL,
                    "needs %d GPUs that fit, node has 0: %s has %s unrequested, "
                    "pod requests %s",
                    pod->num_devices, best->id, mib(gpu_free(best), a, sizeof(a)),
                    mib(r, b, sizeof(b)));
    if (n->n_gpus == 1)
        return fail(v, GF_FAIL, "%s has %s unrequested, pod requests %s (the node's only GPU)",
                    best->id, mib(gpu_free(best), a, sizeof(a)), mib(r, b, sizeof(b)));
    return fail(v, GF_FAIL,
                "%s has %s unrequested, pod requests %s (the most unrequested of the "
                "node's %zu GPUs)",
                best->id, mib(gpu_free(best), a, sizeof(a)), mib(r, b, sizeof(b)), n->n_gpus);
}

/* The closed GPUs of n (the device plugin's) that would take pod if a
 * reservation held them; only idle ones: a closed GPU with fractions is one
 * whose reservation went away. */
static size_t closed_fitting(const mnode *n, const gf_sched_pod *pod, pod_ask *a, size_t *closed)
{
    size_t count = 0;

    *closed = 0;
    for (size_t i = 0; i < n->n_gpus; i++) {
        const mgpu *g = &n->gpus[i];
        if (!g->closed)
            continue;
        ++*closed;
        count += idle(g) && gpu_fits(g, pod, ask_for(a, g, pod));
    }
    return count;
}

/* Why a device-plugin node does not take pod now, and how many reservations
 * would let it (verdict->reserve). */
static int explain_reserved(const mnode *n, const gf_sched_pod *pod, pod_ask *a, size_t fitting,
                            gf_sched_verdict *v)
{
    size_t closed, more = closed_fitting(n, pod, a, &closed);
    size_t need = (size_t)pod->num_devices - fitting;

    if (closed == 0 || more < need)
        return explain(n, pod, fitting, v);
    fail(v, GF_FAIL,
         "no GPU reserved for fractions has room (%zu of the node's %zu GPUs are reserved; the "
         "device plugin gives the others to whole-GPU pods)",
         n->n_gpus - closed, n->n_gpus);
    v->reserve = (unsigned)need;
    return -1;
}

/* gf_sched_choose with what the pod asks worked out already (a). */
static int choose(const mnode *node, const gf_sched_pod *pod, gf_policy policy, uint8_t *pos,
                  gf_sched_verdict *verdict, pod_ask *a)
{
    size_t count;

    verdict->reserve = 0;
    if (precheck(node, pod, verdict) < 0)
        return -1;
    count = candidates(node, pod, policy, pos, a);
    if (count < (size_t)pod->num_devices)
        return node->dp_gpus > 0 ? explain_reserved(node, pod, a, count, verdict)
                                 : explain(node, pod, count, verdict);
    verdict->status = GF_FIT;
    verdict->reason[0] = '\0';
    verdict->rank = score(node, pod, policy, pos, a);
    verdict->score = clamp10(verdict->rank);
    return 0;
}

int gf_sched_choose(const mnode *node, const gf_sched_pod *pod, gf_policy policy, uint8_t *pos,
                    gf_sched_verdict *verdict)
{
    pod_ask a = {0};

    return choose(node, pod, policy, pos, verdict, &a);
}

/* --- filter + prioritize --- */

/* What one request works out once, for every node. */
typedef struct request {
    const gf_sched_pod *pod;
    gf_policy policy;
    const mns *quota;
    uint64_t already; /* gf_model_quota_already */
    pod_ask ask;
} request;

static void verdict_one(request *rq, const mnode *n, const char *name, gf_sched_verdict *v)
{
    uint8_t pos[GF_SCHED_GPUS_MAX];

    if (n == NULL) {
        fail(v, GF_FAIL, "node %s is not in gpufrac's cache (no Node object seen yet)", name);
        return;
    }
    if (choose(n, rq->pod, rq->policy, pos, v, &rq->ask) == 0)
        gf_model_quota_fits(rq->quota, rq->already, rq->pod, n, pos, v);
}

/* The lookups of the nodes after the one being evaluated (names[i]), in
 * stages (see gf_model_bucket_prefetch): names[i + BUCKET_AHEAD]'s bucket,
 * names[i + NODE_AHEAD]'s node, names[i + FIND_AHEAD] found and its first
 * candidate GPU. Each stage runs a few nodes after the one before it, so
 * what it reads has had time to arrive. */
#define BUCKET_AHEAD 6
#define NODE_AHEAD 4
#define FIND_AHEAD 2
#define RING 8 /* > BUCKET_AHEAD, a power of two */

typedef struct lookahead {
    const gf_model *m;
    const char *const *names;
    size_t n;
    gf_policy policy;
    size_t hash[RING];        /* of names[j] at j % RING */
    const mnode *found[RING]; /* names[j]'s node at j % RING, once found */
} lookahead;

static const char *name_at(const lookahead *w, size_t j)
{
    return w->names[j] != NULL ? w->names[j] : "";
}

static void ahead_hash(lookahead *w, size_t j)
{
    if (j >= w->n)
        return;
    w->hash[j % RING] = gf_model_hash(name_at(w, j));
    gf_model_bucket_prefetch(w->m, w->hash[j % RING]);
}

static void ahead_node(lookahead *w, size_t j)
{
    if (j < w->n)
        gf_model_node_prefetch(w->m, w->hash[j % RING]);
}

static void ahead_find(lookahead *w, size_t j)
{
    const mnode *node;
    const mgpu *g;

    if (j >= w->n)
        return;
    node = gf_model_node_find_hashed(w->m, name_at(w, j), w->hash[j % RING]);
    if (node != NULL && node->n_gpus > 0) {
        g = &node->gpus[order_of(node, w->policy)[0]];
        __builtin_prefetch(g);
        __builtin_prefetch((const char *)(g + 1) - 1);
    }
    w->found[j % RING] = node;
}

static void ahead_begin(lookahead *w)
{
    size_t j;

    for (j = 0; j < BUCKET_AHEAD; j++)
        ahead_hash(w, j);
    for (j = 0; j < NODE_AHEAD; j++)
        ahead_node(w, j);
    for (j = 0; j < FIND_AHEAD; j++)
        ahead_find(w, j);
}

/* names[i]'s node (NULL: not in the model), for i = 0, 1, ... in turn. */
static const mnode *ahead_next(lookahead *w, size_t i)
{
    ahead_hash(w, i + BUCKET_AHEAD);
    ahead_node(w, i + NODE_AHEAD);
    ahead_find(w, i + FIND_AHEAD);
    return w->found[i % RING];
}

int gf_model_evaluate(gf_model *m, const gf_sched_pod *pod, const char *const *nodes, size_t n,
                      gf_policy policy, gf_sched_verdict *out, gf_error *err)
{
    request rq = {.pod = pod, .policy = policy};
    lookahead w = {.m = m, .names = nodes, .n = n, .policy = policy};
    size_t i;

    if (pod == NULL || (n > 0 && (nodes == NULL || out == NULL)))
        return gf_error_set(err, GF_EINVAL, "evaluate: missing pod, nodes or result array");
    for (i = 0; i < n; i++) {
        if (!pod->fractional) {
            out[i].status = GF_FIT;
            out[i].score = 0;
            out[i].reason[0] = '\0';
        } else if (pod->invalid) {
            fail(&out[i], GF_FAIL_UNRESOLVABLE, "%s", pod->error);
        }
    }
    if (!pod->fractional || pod->invalid)
        return 0;
    pthread_rwlock_rdlock(&m->lock);
    rq.quota = gf_model_quota_of(m, pod); /* once per pod, not per node */
    rq.already = gf_model_quota_already(m, rq.quota, pod);
    ahead_begin(&w);
    for (i = 0; i < n; i++)
        verdict_one(&rq, ahead_next(&w, i), name_at(&w, i), &out[i]);
    pthread_rwlock_unlock(&m->lock);
    return 0;
}

/* --- bind --- */

void gf_sched_placement_fill(const gf_model *m, const mpod *p, gf_sched_placement *out)
{
    const mnode *n = p->node;
    size_t i;

    memset(out, 0, sizeof(*out));
    snprintf(out->node, sizeof(out->node), "%s", n->e.key);
    out->n = p->n_gpus;
    for (i = 0; i < p->n_gpus; i++) {
        const mgpu *g = &n->gpus[p->gpu[i]];

        out->gpu_index[i] = g->index;
        snprintf(out->gpu_id[i], sizeof(out->gpu_id[i]), "%s", g->id);
        out->request[i] = gf_sched_mpod_charge(p, g->total);
    }
    snprintf(out->devices_key, sizeof(out->devices_key), "%s%s.gpus.devices", m->prefix,
             p->container != NULL ? p->container : "");
    snprintf(out->devices, sizeof(out->devices), "%s", p->devices != NULL ? p->devices : "");
}

/* out may be NULL (a hold has no placement to report). */
static int reserve_locked(gf_model *m, const gf_sched_pod *pod, const char *node, gf_policy policy,
                          bool hold, gf_sched_placement *out, gf_error *err)
{
    uint8_t pos[GF_SCHED_GPUS_MAX];
    gf_sched_verdict v;
    mnode *n = gf_model_node_find(m, node);
    mpod *p = gf_model_pod_find(m, pod->uid);
    const mns *quota;

    if (!pod->fractional || pod->invalid)
        return gf_error_set(err, GF_EINVAL, "pod %s/%s: %s", pod->ns, pod->name,
                            pod->invalid ? pod->error : "not a fractional pod");
    if (n == NULL || !n->present)
        return gf_error_set(err, GF_ENOTFOUND, "node %s is not in gpufrac's cache", node);
    if (p != NULL && p->node == n && p->resolved) {
        if (p->held && !hold) { /* the bind of a hold: from now on its assumption */
            p->held = false;
            p->assumed_at = gf_model_now_ms();
        }
        if (out != NULL)
            gf_sched_placement_fill(m, p, out);
        return 0;
    }
    if (p != NULL && p->node != NULL && !p->assumed)
        return gf_error_set(err, GF_ESTATE, "pod %s/%s is already bound to node %s", pod->ns,
                            pod->name, p->node->e.key);
    if (p != NULL && p->node != NULL)
        gf_model_forget_locked(p);
    quota = gf_model_quota_of(m, pod);
    if (gf_sched_choose(n, pod, policy, pos, &v) < 0 ||
        !gf_model_quota_fits(quota, gf_model_quota_already(m, quota, pod), pod, n, pos, &v))
        return gf_error_set(err, GF_ESTATE, "pod %s/%s no longer fits node %s: %s", pod->ns,
                            pod->name, node, v.reason);
    if (gf_model_assume_locked(m, pod, n, pos, (size_t)pod->num_devices, err) < 0)
        return -1;
    p = gf_model_pod_find(m, pod->uid);
    p->held = hold;
    if (out != NULL)
        gf_sched_placement_fill(m, p, out);
    return 0;
}

int gf_model_reserve(gf_model *m, const gf_sched_pod *pod, const char *node, gf_policy policy,
                     gf_sched_placement *out, gf_error *err)
{
    int rc;

    pthread_rwlock_wrlock(&m->lock);
    rc = reserve_locked(m, pod, node, policy, false, out, err);
    pthread_rwlock_unlock(&m->lock);
    return rc;
}

int gf_model_hold(gf_model *m, const gf_sched_pod *pod, const char *node, gf_policy policy,
                  gf_error *err)
{
    int rc;

    pthread_rwlock_wrlock(&m->lock);
    rc = reserve_locked(m, pod, node, policy, true, NULL, err); /* no placement to fill */
    pthread_rwlock_unlock(&m->lock);
    return rc;
}

void gf_model_unhold(gf_model *m, const char *uid)
{
    mpod *p;

    pthread_rwlock_wrlock(&m->lock);
    p = gf_model_pod_find(m, uid);
    if (p != NULL && p->held)
        gf_model_forget_locked(p);
    pthread_rwlock_unlock(&m->lock);
}

/* The request fields of record p as a pod (for reserve by uid). */
static void pod_from_record(const mpod *p, gf_sched_pod *out)
{
    memset(out, 0, sizeof(*out));
    snprintf(out->uid, sizeof(out->uid), "%s", p->e.key);
    snprintf(out->name, sizeof(out->name), "uid %s", p->e.key);
    snprintf(out->container, sizeof(out->container), "%s", p->container ? p->container : "");
    out->fractional = true;
    out->request = p->request;
    out->limit = p->limit;
    out->num_devices = p->num_devices;
    out->mode = p->mode;
    out->priority = p->priority;
    /* floor((pct + 0.5) / 100 x 100) = pct, whatever the double rounding */
    out->has_compute = p->compute_pct > 0;
    out->compute = ((double)p->compute_pct + 0.5) / 100.0;
    /* compute_pct is the pod's whole share: the others carry none */
    out->init = p->init;
    out->n_more = p->n_more;
    for (size_t i = 0; i < p->n_more; i++) {
        out->more[i] = p->more[i];
        out->more[i].has_compute = false;
    }
}

int gf_model_reserve_uid(gf_model *m, const char *uid, const char *node, gf_policy policy,
                         gf_sched_placement *out, gf_error *err)
{
    gf_sched_pod *pod = malloc(sizeof(*pod));
    const mpod *p;
    int rc;

    if (pod == NULL)
        return gf_error_set(err, GF_ENOSPACE, "reserve: out of memory");
    pthread_rwlock_wrlock(&m->lock);
    p = gf_model_pod_find(m, uid);
    if (p == NULL) {
        rc = gf_error_set(err, GF_ENOTFOUND, "pod uid %s is not in gpufrac's cache", uid);
    } else {
        pod_from_record(p, pod);
        rc = reserve_locked(m, pod, node, policy, false, out, err);
    }
    pthread_rwlock_unlock(&m->lock);
    free(pod);
    return rc;
}
