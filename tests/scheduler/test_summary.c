/* SPDX-License-Identifier: Apache-2.0 */
/* The node summary filter reads instead of every GPU (model_int.h: order,
 * busy, sums), driven through random model updates of every kind (watch
 * events, reserve, hold, forget, re-inventory, reservations, deletes):
 * after each one, every node's summary equals the one recomputed here from
 * its GPUs, and filter's verdicts equal both a freshly summarized copy's and
 * the full scan of every GPU the summary replaced. Seeded: the same run
 * each time. */
#include "../unit/unit.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_int.h"
#include "quantity.h"

#define NODES 10
#define UIDS 120
#define STEPS 3000

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static uint32_t rnd(uint32_t n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 11) % n;
}

static void node_name(char *buf, size_t len, int i)
{
    snprintf(buf, len, "node-%d", i);
}

/* Node i with a random inventory: 1..8 GPUs, one size or two, a device
 * plugin on some. */
static void add_node(gf_model *m, int i)
{
    gf_sched_node *node = calloc(1, sizeof(*node));
    bool mixed = rnd(3) == 0;
    gf_error err;

    assert_non_null(node);
    node_name(node->name, sizeof(node->name), i);
    node->ready = true;
    node->source = GF_INV_AGENT;
    node->memory_known = true;
    node->n_gpus = 1 + rnd(8);
    node->dp_gpus = rnd(4) == 0 ? (unsigned)node->n_gpus : 0;
    for (size_t g = 0; g < node->n_gpus; g++) {
        snprintf(node->gpus[g].id, sizeof(node->gpus[g].id), "GPU-%d-%zu", i, g);
        node->gpus[g].has_uuid = true;
        node->gpus[g].index = (int)g;
        node->gpus[g].memory = mixed && g % 2 ? 40 * GF_GIB : 80 * GF_GIB;
    }
    if (gf_model_node_update(m, node, &err) < 0)
        fail_msg("%s", err.msg);
    free(node);
}

static gf_amount random_amount(bool limit)
{
    gf_amount a = {0};

    if (rnd(4) == 0) {
        a.is_portion = true;
        a.portion = (double)(5 + rnd(60)) / 100.0;
    } else {
        a.bytes = (1 + rnd(30)) * GF_GIB + (rnd(3) == 0 ? rnd(1000) * GF_MIB : 0);
        if (limit && rnd(10) == 0)
            a.bytes = 90 * GF_GIB; /* more than any GPU */
    }
    return a;
}

/* A random fractional pod uid u (one to three containers, a mode, maybe an
 * SM share, one to three devices). */
static void random_pod(gf_sched_pod *p, int u)
{
    memset(p, 0, sizeof(*p));
    snprintf(p->uid, sizeof(p->uid), "uid-%d", u);
    snprintf(p->ns, sizeof(p->ns), "%s", rnd(3) == 0 ? "team-q" : "default");
    snprintf(p->name, sizeof(p->name), "pod-%d", u);
    snprintf(p->container, sizeof(p->container), "main");
    p->fractional = true;
    p->phase = GF_PHASE_PENDING;
    p->request = random_amount(false);
    p->limit = rnd(2) ? p->request : random_amount(true);
    p->num_devices = rnd(6) == 0 ? 2 + (int)rnd(2) : 1;
    p->mode = rnd(3) == 0 ? GF_MODE_SM_SHARING : GF_MODE_TIME_SLICING;
    p->has_compute = p->mode == GF_MODE_SM_SHARING && rnd(2);
    p->compute = (double)(10 + rnd(40)) / 100.0;
    p->priority = (int32_t)rnd(3);
    p->n_more = rnd(4) == 0 ? 1 + rnd(2) : 0;
    for (size_t i = 0; i < p->n_more; i++) {
        snprintf(p->more[i].container, sizeof(p->more[i].container), "c%zu", i);
        p->more[i].init = rnd(2);
        p->more[i].request = p->request.is_portion ? p->request : random_amount(false);
        p->more[i].limit = p->more[i].request;
    }
}

/* As the watch delivers it: bound to random GPUs of node i (over-committed
 * at times, as pods bound by someone else can be). */
static void watch_placed(gf_model *m, int u, int i)
{
    gf_sched_pod *p = calloc(1, sizeof(*p));
    size_t len = 0;
    gf_error err;

    assert_non_null(p);
    random_pod(p, u);
    node_name(p->node, sizeof(p->node), i);
    p->phase = GF_PHASE_RUNNING;
    for (int d = 0; d < p->num_devices; d++)
        len += (size_t)snprintf(p->devices + len, sizeof(p->devices) - len, "%sGPU-%d-%u",
                                d ? "," : "", i, rnd(8)); /* may name no GPU of the node */
    if (gf_model_pod_update(m, p, &err) < 0)
        fail_msg("%s", err.msg);
    free(p);
}

/* --- the summary, recomputed --- */

static bool ref_idle(const mgpu *g)
{
    return g->pods[0] + g->pods[1] == 0;
}

static double ref_fullness(const mgpu *g)
{
    return g->total ? (double)g->requested / (double)g->total : 1.0;
}

/* The candidate order of the full scan: binpack the GPUs in use first, each
 * group fullest first; spread emptiest first; ties by position. */
static bool ref_before(const mgpu *a, const mgpu *b, gf_policy policy)
{
    if (policy == GF_POLICY_SPREAD)
        return ref_fullness(a) < ref_fullness(b);
    if (ref_idle(a) != ref_idle(b))
        return !ref_idle(a);
    return ref_fullness(a) > ref_fullness(b);
}

static void check_summary(const mnode *n)
{
    uint64_t total = 0, requested = 0;
    unsigned busy = 0;

    for (size_t i = 0; i < n->n_gpus; i++) {
        total += n->gpus[i].total;
        requested += n->gpus[i].requested;
        busy += !ref_idle(&n->gpus[i]);
    }
    assert_int_equal(n->sum_total, total);
    assert_int_equal(n->sum_requested, requested);
    assert_int_equal(n->busy, busy);
    for (int policy = 0; policy < 2; policy++) {
        const uint8_t *o = n->order[policy];
        bool seen[GF_SCHED_GPUS_MAX] = {false};

        for (size_t k = 0; k < n->n_gpus; k++) {
            assert_true(o[k] < n->n_gpus);
            assert_false(seen[o[k]]);
            seen[o[k]] = true;
            if (k > 0) { /* never out of order, ties by position */
                const mgpu *a = &n->gpus[o[k - 1]], *b = &n->gpus[o[k]];
                assert_false(ref_before(b, a, (gf_policy)policy));
                if (!ref_before(a, b, (gf_policy)policy))
                    assert_true(o[k - 1] < o[k]);
            }
        }
    }
}

static void check_summaries(gf_model *m)
{
    char name[32];

    pthread_rwlock_rdlock(&m->lock);
    for (int i = 0; i < NODES; i++) {
        const mnode *n;

        node_name(name, sizeof(name), i);
        if ((n = gf_model_node_find(m, name)) != NULL)
            check_summary(n);
    }
    pthread_rwlock_unlock(&m->lock);
}

/* --- the verdicts, recomputed --- */

/* The full scan: every open GPU that fits, stably sorted; how many fit. */
static size_t ref_candidates(const mnode *n, const gf_sched_pod *pod, gf_policy policy,
                             uint8_t *pos)
{
    size_t count = 0, k;

    for (size_t i = 0; i < n->n_gpus; i++) {
        if (n->gpus[i].closed || !gf_sched_gpu_fits(&n->gpus[i], pod))
            continue;
        for (k = count; k > 0 && ref_before(&n->gpus[i], &n->gpus[pos[k - 1]], policy); k--)
            pos[k] = pos[k - 1];
        pos[k] = (uint8_t)i;
        count++;
    }
    return count;
}

/* model.h's score, from every GPU. */
static double ref_rank(const mnode *n, const gf_sched_pod *pod, gf_policy policy,
                       const uint8_t *pos)
{
    double best = -1.0, emptiest = 1.0;
    uint64_t total = 0, requested = 0;
    unsigned used = 0;

    for (int i = 0; i < pod->num_devices; i++) {
        const mgpu *g = &n->gpus[pos[i]];
        double after = (double)(g->requested + gf_sched_pod_charge(pod, g->total)) /
                       (double)g->total;

        if (!ref_idle(g) && after > best)
            best = after;
        if (1.0 - after < emptiest)
            emptiest = 1.0 - after;
    }
    for (size_t i = 0; i < n->n_gpus; i++) {
        total += n->gpus[i].total;
        requested += n->gpus[i].requested;
        used += !ref_idle(&n->gpus[i]);
    }
    requested += (uint64_t)pod->num_devices * gf_sched_pod_charge(pod, n->gpus[0].total);
    if (policy == GF_POLICY_SPREAD)
        return 5.0 * emptiest +
               5.0 * (total > requested ? (double)(total - requested) / (double)total : 0.0);
    if (best >= 0.0)
        return 5.0 + 5.0 * best;
    return 4.0 * (double)used / (double)n->n_gpus;
}

/* n's verdict from a copy summarized afresh (the unchanged explanations
 * included). */
static void fresh_verdict(const gf_model *m, const mnode *n, const gf_sched_pod *pod,
                          gf_policy policy, gf_sched_verdict *v)
{
    mnode copy = *n;
    mgpu gpus[GF_SCHED_GPUS_MAX];
    uint8_t pos[GF_SCHED_GPUS_MAX];
    const mns *q = gf_model_quota_of(m, pod);

    if (n->n_gpus > 0)
        memcpy(gpus, n->gpus, n->n_gpus * sizeof(mgpu));
    copy.gpus = gpus;
    memset(copy.order, 0xee, sizeof(copy.order));
    copy.busy = 12345;
    copy.sum_total = copy.sum_requested = 1;
    gf_model_node_summarize(&copy);
    if (gf_sched_choose(&copy, pod, policy, pos, v) == 0)
        gf_model_quota_fits(q, gf_model_quota_already(m, q, pod), pod, &copy, pos, v);
}

static void check_node(const gf_model *m, const mnode *n, const gf_sched_pod *pod, gf_policy policy,
                       const gf_sched_verdict *got)
{
    gf_sched_verdict want, v;
    uint8_t pos[GF_SCHED_GPUS_MAX], ref[GF_SCHED_GPUS_MAX];
    size_t fit;

    fresh_verdict(m, n, pod, policy, &want);
    assert_int_equal(got->status, want.status);
    assert_int_equal(got->score, want.score);
    assert_true(got->rank == want.rank);
    assert_string_equal(got->reason, want.reason);
    assert_int_equal(got->reserve, want.reserve);
    fit = ref_candidates(n, pod, policy, ref);
    if (gf_sched_choose(n, pod, policy, pos, &v) == 0) {
        assert_true(fit >= (size_t)pod->num_devices);
        assert_memory_equal(pos, ref, (size_t)pod->num_devices);
        assert_true(v.rank == ref_rank(n, pod, policy, ref));
    } else if (n->present && n->n_gpus >= (size_t)pod->num_devices) {
        assert_true(fit < (size_t)pod->num_devices); /* ready, schedulable, known inventory */
    }
}

static void check_evaluate(gf_model *m, int u)
{
    const char *names[NODES + 1];
    char buf[NODES + 1][32];
    gf_sched_verdict *v = calloc(NODES + 1, sizeof(*v));
    gf_sched_pod *pod = calloc(1, sizeof(*pod));
    gf_error err;

    assert_non_null(v);
    assert_non_null(pod);
    random_pod(pod, u);
    for (int i = 0; i <= NODES; i++) { /* node-NODES is never added */
        node_name(buf[i], sizeof(buf[i]), (i * 7) % (NODES + 1));
        names[i] = buf[i];
    }
    for (int policy = 0; policy < 2; policy++) {
        assert_int_equal(gf_model_evaluate(m, pod, names, NODES + 1, (gf_policy)policy, v, &err),
                         0);
        pthread_rwlock_rdlock(&m->lock);
        for (int i = 0; i <= NODES; i++) {
            const mnode *n = gf_model_node_find(m, names[i]);

            if (n == NULL)
                assert_int_equal(v[i].status, GF_FAIL);
            else
                check_node(m, n, pod, (gf_policy)policy, &v[i]);
        }
        pthread_rwlock_unlock(&m->lock);
    }
    free(pod);
    free(v);
}

/* --- the updates --- */

static void set_quota(gf_model *m)
{
    gf_sched_ns ns = {0};
    gf_error err;

    snprintf(ns.name, sizeof(ns.name), "team-q");
    ns.has_quota = rnd(4) != 0;
    ns.quota = (20 + rnd(200)) * GF_GIB;
    if (gf_model_ns_update(m, &ns, &err) < 0)
        fail_msg("%s", err.msg);
}

static void reserve_some(gf_model *m, int i)
{
    const char *ids[GF_SCHED_GPUS_MAX];
    char buf[GF_SCHED_GPUS_MAX][32], name[32];
    size_t n = 0;
    gf_error err;

    node_name(name, sizeof(name), i);
    for (unsigned g = 0; g < 8; g++) {
        if (rnd(2) == 0)
            continue;
        snprintf(buf[n], sizeof(buf[n]), "GPU-%d-%u", i, g);
        ids[n] = buf[n];
        n++;
    }
    (void)gf_model_node_reserved(m, name, ids, n, &err); /* unknown node: refused */
}

static void scheduler_place(gf_model *m, int u, int i, int how)
{
    gf_sched_pod *p = calloc(1, sizeof(*p));
    gf_sched_placement *pl = calloc(1, sizeof(*pl));
    char name[32];
    gf_error err;

    assert_non_null(p);
    assert_non_null(pl);
    random_pod(p, u);
    node_name(name, sizeof(name), i);
    if (how == 0)
        (void)gf_model_reserve(m, p, name, rnd(2) ? GF_POLICY_SPREAD : GF_POLICY_BINPACK, pl,
                               &err); /* no room: refused */
    else
        (void)gf_model_hold(m, p, name, rnd(2) ? GF_POLICY_SPREAD : GF_POLICY_BINPACK, &err);
    free(pl);
    free(p);
}

static void step(gf_model *m)
{
    int u = (int)rnd(UIDS), i = (int)rnd(NODES);
    char name[32], uid[32];

    node_name(name, sizeof(name), i);
    snprintf(uid, sizeof(uid), "uid-%d", u);
    switch (rnd(12)) {
    case 0:
    case 1:
    case 2: watch_placed(m, u, i); break;
    case 3: scheduler_place(m, u, i, 0); break;
    case 4: scheduler_place(m, u, i, 1); break;
    case 5:
        gf_model_forget(m, uid);
        gf_model_unhold(m, uid);
        break;
    case 6: gf_model_pod_delete(m, uid); break;
    case 7:
        if (rnd(8) == 0)
            gf_model_node_delete(m, name); /* its pods stay, unresolved */
        else if (rnd(3) == 0)
            add_node(m, i); /* a new inventory: every pod re-resolved */
        break;
    case 8: reserve_some(m, i); break;
    case 9: {
        char id[32];

        snprintf(id, sizeof(id), "GPU-%d-%u", i, rnd(8));
        (void)gf_model_gpu_close_idle(m, name, id);
        break;
    }
    case 10:
        if (rnd(20) == 0)
            (void)gf_model_expire_assumed(m, gf_model_now_ms() + 1000000, 0);
        break;
    default: set_quota(m); break;
    }
}

static void test_summary_follows_updates(void **state)
{
    gf_model *m = NULL;
    gf_model_stats st;
    gf_error err;

    (void)state;
    assert_int_equal(gf_model_new(NULL, &m, &err), 0);
    for (int i = 0; i < NODES; i++)
        add_node(m, i);
    for (int s = 0; s < STEPS; s++) {
        step(m);
        check_summaries(m);
        if (s % 5 == 0)
            check_evaluate(m, UIDS + s);
    }
    gf_model_stats_get(m, &st);
    assert_true(st.pods > 0); /* the run placed pods, not only refused them */
    gf_model_free(m);
}

/* A node without GPUs (deleted, or its inventory unreadable) summarizes
 * to nothing. */
static void test_summary_of_empty_node(void **state)
{
    mnode n;

    (void)state;
    memset(&n, 0, sizeof(n));
    n.busy = 3;
    n.sum_total = 7;
    gf_model_node_summarize(&n);
    assert_int_equal(n.busy, 0);
    assert_int_equal(n.sum_total, 0);
    assert_int_equal(n.sum_requested, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_summary_follows_updates),
        cmocka_unit_test(test_summary_of_empty_node),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
