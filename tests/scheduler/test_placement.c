/* SPDX-License-Identifier: Apache-2.0 */
/* The extender's cluster model: placement policies, modes, multi-device,
 * portions, reasons, and the assume / confirm / delete bookkeeping. */
#include "../unit/unit.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "quantity.h"

#define GIB GF_GIB
#define MIB GF_MIB

static gf_model *model_new(void)
{
    gf_model *m = NULL;
    gf_error err;

    if (gf_model_new(NULL, &m, &err) < 0)
        fail_msg("%s", err.msg);
    return m;
}

/* A node of n GPUs "GPU-<name>-<i>" of mem bytes each (agent annotation). */
static void add_node(gf_model *m, const char *name, size_t n, uint64_t mem)
{
    gf_sched_node *node = calloc(1, sizeof(*node));
    gf_error err;
    size_t i;

    assert_non_null(node);
    snprintf(node->name, sizeof(node->name), "%s", name);
    node->ready = true;
    node->source = GF_INV_AGENT;
    node->memory_known = true;
    node->n_gpus = n;
    for (i = 0; i < n; i++) {
        snprintf(node->gpus[i].id, sizeof(node->gpus[i].id), "GPU-%s-%zu", name, i);
        node->gpus[i].has_uuid = true;
        node->gpus[i].index = (int)i;
        node->gpus[i].memory = mem;
    }
    if (gf_model_node_update(m, node, &err) < 0)
        fail_msg("%s", err.msg);
    free(node);
}

static gf_sched_pod *pod_new(const char *uid, uint64_t bytes, int ndev, gf_mode mode)
{
    gf_sched_pod *p = calloc(1, sizeof(*p));

    assert_non_null(p);
    snprintf(p->uid, sizeof(p->uid), "%s", uid);
    snprintf(p->ns, sizeof(p->ns), "default");
    snprintf(p->name, sizeof(p->name), "pod-%s", uid);
    snprintf(p->container, sizeof(p->container), "main");
    p->fractional = true;
    p->request.bytes = bytes;
    p->limit = p->request;
    p->num_devices = ndev;
    p->mode = mode;
    return p;
}

static gf_sched_pod *pod_portion(const char *uid, double portion)
{
    gf_sched_pod *p = pod_new(uid, 0, 1, GF_MODE_TIME_SLICING);

    p->request.is_portion = true;
    p->request.portion = portion;
    p->limit = p->request;
    return p;
}

/* Reserves pod on node; returns the first GPU index chosen. */
static int reserve(gf_model *m, const gf_sched_pod *pod, const char *node, gf_policy policy,
                   gf_sched_placement *pl)
{
    gf_error err;

    if (gf_model_reserve(m, pod, node, policy, pl, &err) < 0)
        fail_msg("reserve %s on %s: %s", pod->uid, node, err.msg);
    return pl->gpu_index[0];
}

static int place1(gf_model *m, const gf_sched_pod *pod, const char *node, gf_policy policy)
{
    gf_sched_placement pl;

    return reserve(m, pod, node, policy, &pl);
}

static gf_model_gpu_state gpu_state(gf_model *m, const char *node, size_t i)
{
    gf_model_gpu_state s[GF_SCHED_GPUS_MAX];
    gf_error err;
    size_t n = 0;

    if (gf_model_node_gpus(m, node, s, GF_SCHED_GPUS_MAX, &n, &err) < 0)
        fail_msg("%s", err.msg);
    assert_true(i < n);
    return s[i];
}

static gf_sched_verdict verdict(gf_model *m, const gf_sched_pod *pod, const char *node,
                                gf_policy policy)
{
    const char *names[1] = {node};
    gf_sched_verdict v;
    gf_error err;

    if (gf_model_evaluate(m, pod, names, 1, policy, &v, &err) < 0)
        fail_msg("%s", err.msg);
    return v;
}

static void test_binpack(void **state)
{
    gf_model *m = model_new();
    gf_sched_pod *a = pod_new("a", 10 * GIB, 1, GF_MODE_TIME_SLICING);
    gf_sched_pod *b = pod_new("b", 10 * GIB, 1, GF_MODE_TIME_SLICING);
    gf_sched_pod *c = pod_new("c", 70 * GIB, 1, GF_MODE_TIME_SLICING);
    gf_sched_pod *d = pod_new("d", 50 * GIB, 1, GF_MODE_TIME_SLICING);

    (void)state;
    add_node(m, "n1", 2, 80 * GIB);
    assert_int_equal(place1(m, a, "n1", GF_POLICY_BINPACK), 0);
    assert_int_equal(place1(m, b, "n1", GF_POLICY_BINPACK), 0); /* fullest that fits */
    assert_int_equal(place1(m, c, "n1", GF_POLICY_BINPACK), 1); /* 60 GiB left on GPU 0 */
    assert_int_equal(place1(m, d, "n1", GF_POLICY_BINPACK), 0); /* GPU 1 has 10 left */
    assert_int_equal(gpu_state(m, "n1", 0).requested, 70 * GIB);
    assert_int_equal(gpu_state(m, "n1", 0).pods, 3);
    assert_int_equal(gpu_state(m, "n1", 1).requested, 70 * GIB);
    free(a), free(b), free(c), free(d);
    gf_model_free(m);
}

static void test_binpack_node_scores(void **state)
{
    gf_model *m = model_new();
    gf_sched_pod *a = pod_new("a", 40 * GIB, 1, GF_MODE_TIME_SLICING);
    gf_sched_pod *q = pod_new("q", 20 * GIB, 1, GF_MODE_TIME_SLICING);
    gf_sched_verdict used, idle;

    (void)state;
    add_node(m, "used", 2, 80 * GIB);
    add_node(m, "idle", 2, 80 * GIB);
    place1(m, a, "used", GF_POLICY_BINPACK);
    used = verdict(m, q, "used", GF_POLICY_BINPACK);
    idle = verdict(m, q, "idle", GF_POLICY_BINPACK);
    assert_int_equal(used.status, GF_FIT);
    assert_int_equal(idle.status, GF_FIT);
    assert_true(used.score >= 5 && used.score <= 10);
    assert_true(idle.score < 5);
    assert_true(used.score > idle.score);
    /* filling a GPU exactly scores 10 */
    q->request.bytes = 40 * GIB;
    assert_int_equal(verdict(m, q, "used", GF_POLICY_BINPACK).score, 10);
    /* spread prefers the idle node */
    q->request.bytes = 20 * GIB;
    assert_true(verdict(m, q, "idle", GF_POLICY_SPREAD).score >
                verdict(m, q, "used", GF_POLICY_SPREAD).score);
    free(a), free(q);
    gf_model_free(m);
}

static void test_spread(void **state)
{
    gf_model *m = model_new();
    gf_sched_pod *p[4];
    char uid[8];
    int i, seen = 0;

    (void)state;
    add_node(m, "n1", 4, 80 * GIB);
    for (i = 0; i < 4; i++) {
        snprintf(uid, sizeof(uid), "s%d", i);
        p[i] = pod_new(uid, 10 * GIB, 1, GF_MODE_TIME_SLICING);
        seen |= 1 << place1(m, p[i], "n1", GF_POLICY_SPREAD);
    }
    assert_int_equal(seen, 0xf); /* one per GPU */
    for (i = 0; i < 4; i++)
        free(p[i]);
    gf_model_free(m);
}

static void test_multi_device(void **state)
{
    gf_model *m = model_new();
    gf_sched_pod *big = pod_new("big", 70 * GIB, 1, GF_MODE_TIME_SLICING);
    gf_sched_pod *two = pod_new("two", 20 * GIB, 2, GF_MODE_TIME_SLICING);
    gf_sched_placement pl;
    gf_sched_verdict v;

    (void)state;
    add_node(m, "n1", 2, 80 * GIB);
    add_node(m, "one", 1, 80 * GIB);
    place1(m, big, "n1", GF_POLICY_BINPACK);
    v = verdict(m, two, "n1", GF_POLICY_BINPACK);
    assert_int_equal(v.status, GF_FAIL);
    assert_string_equal(v.reason, "needs 2 GPUs that fit, node has 1");
    v = verdict(m, two, "one", GF_POLICY_BINPACK);
    assert_int_equal(v.status, GF_FAIL_UNRESOLVABLE);
    assert_string_equal(v.reason, "needs 2 GPUs that fit, node has 1");

    add_node(m, "n4", 4, 80 * GIB);
    reserve(m, two, "n4", GF_POLICY_BINPACK, &pl);
    assert_int_equal(pl.n, 2);
    assert_int_not_equal(pl.gpu_index[0], pl.gpu_index[1]);
    assert_string_equal(pl.devices, "GPU-n4-0,GPU-n4-1");
    assert_string_equal(pl.devices_key, "nvidia.com/container.main.gpus.devices");
    assert_int_equal(pl.request[0], 20 * GIB);
    assert_int_equal(gpu_state(m, "n4", 0).requested, 20 * GIB);
    assert_int_equal(gpu_state(m, "n4", 1).requested, 20 * GIB);
    assert_int_equal(gpu_state(m, "n4", 2).requested, 0);
    free(big), free(two);
    gf_model_free(m);
}

static void test_modes_never_mixed(void **state)
{
    gf_model *m = model_new();
    gf_sched_pod *sm = pod_new("sm", 10 * GIB, 1, GF_MODE_SM_SHARING);
    gf_sched_pod *ts = pod_new("ts", 10 * GIB, 1, GF_MODE_TIME_SLICING);
    gf_sched_verdict v;

    (void)state;
    add_node(m, "n1", 2, 80 * GIB);
    add_node(m, "solo", 1, 80 * GIB);
    assert_int_equal(place1(m, sm, "n1", GF_POLICY_BINPACK), 0);
    assert_int_equal(place1(m, ts, "n1", GF_POLICY_BINPACK), 1); /* not the fuller sm GPU */
    assert_true(gpu_state(m, "n1", 0).has_mode);
    assert_int_equal(gpu_state(m, "n1", 0).mode, GF_MODE_SM_SHARING);
    assert_int_equal(gpu_state(m, "n1", 1).mode, GF_MODE_TIME_SLICING);

    snprintf(sm->uid, sizeof(sm->uid), "sm2");
    place1(m, sm, "solo", GF_POLICY_BINPACK);
    snprintf(ts->uid, sizeof(ts->uid), "ts2");
    v = verdict(m, ts, "solo", GF_POLICY_BINPACK);
    assert_int_equal(v.status, GF_FAIL);
    assert_string_equal(v.reason, "GPUs run sm-sharing fractions, pod asks time-slicing");
    free(sm), free(ts);
    gf_model_free(m);
}

static void test_portions(void **state)
{
    gf_model *m = model_new();
    gf_sched_pod *h1 = pod_portion("h1", 0.5), *h2 = pod_portion("h2", 0.5);
    gf_sched_pod *h3 = pod_portion("h3", 0.5), *e = pod_portion("e", 0.125);
    gf_sched_placement pl;

    (void)state;
    add_node(m, "n1", 2, 80 * GIB);
    add_node(m, "odd", 1, 81559 * MIB);
    assert_int_equal(place1(m, h1, "n1", GF_POLICY_BINPACK), 0);
    assert_int_equal(place1(m, h2, "n1", GF_POLICY_BINPACK), 0);
    assert_int_equal(place1(m, h3, "n1", GF_POLICY_BINPACK), 1);
    assert_int_equal(gpu_state(m, "n1", 0).requested, 80 * GIB);
    /* exact, not KAI's 0.12: floor(81559 MiB x 0.125) in whole MiB */
    reserve(m, e, "odd", GF_POLICY_BINPACK, &pl);
    assert_int_equal(pl.request[0], 10194 * MIB);
    assert_int_equal(gpu_state(m, "odd", 0).requested, 10194 * MIB);
    free(h1), free(h2), free(h3), free(e);
    gf_model_free(m);
}

static void test_full_gpu_reason(void **state)
{
    gf_model *m = model_new();
    gf_sched_pod *a = pod_new("a", 80 * GIB - 3072 * MIB, 1, GF_MODE_TIME_SLICING);
    gf_sched_pod *q = pod_new("q", 4096 * MIB, 1, GF_MODE_TIME_SLICING);
    gf_sched_pod *huge = pod_new("huge", 100 * GIB, 1, GF_MODE_TIME_SLICING);
    gf_sched_placement pl;
    gf_sched_verdict v;
    gf_error err;

    (void)state;
    add_node(m, "n1", 1, 80 * GIB);
    place1(m, a, "n1", GF_POLICY_BINPACK);
    v = verdict(m, q, "n1", GF_POLICY_BINPACK);
    assert_int_equal(v.status, GF_FAIL);
    assert_string_equal(
        v.reason, "GPU-n1-0 has 3072 MiB unrequested, pod requests 4096 MiB (the node's only GPU)");
    assert_int_equal(gf_model_reserve(m, q, "n1", GF_POLICY_BINPACK, &pl, &err), -1);
    assert_int_equal(err.code, GF_ESTATE);
    assert_msg_has(err.msg, "no longer fits", "3072 MiB unrequested");
    v = verdict(m, huge, "n1", GF_POLICY_BINPACK);
    assert_int_equal(v.status, GF_FAIL_UNRESOLVABLE);
    assert_msg_has(v.reason, "102400 MiB", "more than any GPU");
    free(a), free(q), free(huge);
    gf_model_free(m);
}

/* The reason names the node's best GPU (most unrequested) and how many it
 * has, not the first one. */
static void test_reason_names_the_best_gpu(void **state)
{
    gf_model *m = model_new();
    gf_sched_pod *a = pod_new("a", 80 * GIB, 1, GF_MODE_TIME_SLICING);
    gf_sched_pod *b = pod_new("b", 79 * GIB, 1, GF_MODE_TIME_SLICING);
    gf_sched_pod *c = pod_new("c", 78 * GIB, 1, GF_MODE_TIME_SLICING);
    gf_sched_pod *q = pod_new("q", 4096 * MIB, 1, GF_MODE_TIME_SLICING);
    gf_sched_verdict v;

    (void)state;
    add_node(m, "n1", 3, 80 * GIB);
    place1(m, a, "n1", GF_POLICY_BINPACK);
    place1(m, b, "n1", GF_POLICY_BINPACK);
    place1(m, c, "n1", GF_POLICY_BINPACK);
    v = verdict(m, q, "n1", GF_POLICY_BINPACK);
    assert_int_equal(v.status, GF_FAIL);
    assert_string_equal(v.reason, "GPU-n1-2 has 2048 MiB unrequested, pod requests 4096 MiB "
                                  "(the most unrequested of the node's 3 GPUs)");
    free(a), free(b), free(c), free(q);
    gf_model_free(m);
}

static void test_unknown_memory_and_nodes(void **state)
{
    gf_model *m = model_new();
    gf_sched_pod *q = pod_new("q", GIB, 1, GF_MODE_TIME_SLICING);
    gf_sched_node *n = calloc(1, sizeof(*n));
    gf_sched_verdict v;
    gf_error err;

    (void)state;
    snprintf(n->name, sizeof(n->name), "gfd");
    n->ready = true;
    n->source = GF_INV_GFD;
    n->n_gpus = 2;
    snprintf(n->gpus[0].id, sizeof(n->gpus[0].id), "gfd/gpu0");
    snprintf(n->gpus[1].id, sizeof(n->gpus[1].id), "gfd/gpu1");
    n->gpus[1].index = 1;
    assert_int_equal(gf_model_node_update(m, n, &err), 0);
    v = verdict(m, q, "gfd", GF_POLICY_BINPACK);
    assert_int_equal(v.status, GF_FAIL_UNRESOLVABLE);
    assert_msg_has(v.reason, "unknown", "nvidia.com/gpu.memory", "cannot host");

    snprintf(n->name, sizeof(n->name), "cpu");
    n->source = GF_INV_NONE;
    n->n_gpus = 0;
    assert_int_equal(gf_model_node_update(m, n, &err), 0);
    v = verdict(m, q, "cpu", GF_POLICY_BINPACK);
    assert_string_equal(v.reason, "node has no GPU inventory (no gpufrac.io/gpus annotation, "
                                  "no nvidia.com/gpu.* labels)");
    v = verdict(m, q, "nowhere", GF_POLICY_BINPACK);
    assert_int_equal(v.status, GF_FAIL);
    assert_msg_has(v.reason, "nowhere", "not in gpufrac's cache");

    snprintf(n->name, sizeof(n->name), "bad");
    n->source = GF_INV_AGENT;
    snprintf(n->inventory_error, sizeof(n->inventory_error), "node annotation gpufrac.io/gpus: x");
    assert_int_equal(gf_model_node_update(m, n, &err), 0);
    v = verdict(m, q, "bad", GF_POLICY_BINPACK);
    assert_int_equal(v.status, GF_FAIL_UNRESOLVABLE);
    assert_string_equal(v.reason, "node annotation gpufrac.io/gpus: x");
    free(q), free(n);
    gf_model_free(m);
}

static void test_not_fractional_and_invalid(void **state)
{
    gf_model *m = model_new();
    gf_sched_pod *p = pod_new("p", GIB, 1, GF_MODE_TIME_SLICING);
    const char *names[2] = {"n1", "unknown"};
    gf_sched_verdict v[2];
    gf_error err;

    (void)state;
    add_node(m, "n1", 1, 80 * GIB);
    p->fractional = false;
    assert_int_equal(gf_model_evaluate(m, p, names, 2, GF_POLICY_BINPACK, v, &err), 0);
    assert_int_equal(v[0].status, GF_FIT);
    assert_int_equal(v[1].status, GF_FIT);
    p->fractional = true;
    p->invalid = true;
    snprintf(p->error, sizeof(p->error), "pod default/p: bad value");
    assert_int_equal(gf_model_evaluate(m, p, names, 2, GF_POLICY_BINPACK, v, &err), 0);
    assert_int_equal(v[0].status, GF_FAIL_UNRESOLVABLE);
    assert_string_equal(v[1].reason, "pod default/p: bad value");
    free(p);
    gf_model_free(m);
}

static void test_assume_then_confirm(void **state)
{
    gf_model *m = model_new();
    gf_sched_pod *p = pod_new("p", 10 * GIB, 1, GF_MODE_TIME_SLICING);
    gf_sched_placement pl;
    gf_model_stats st;

    (void)state;
    add_node(m, "n1", 2, 80 * GIB);
    /* the watch first shows it pending */
    assert_int_equal(gf_model_pod_update(m, p, NULL), 0);
    gf_model_stats_get(m, &st);
    assert_int_equal(st.pending, 1);
    reserve(m, p, "n1", GF_POLICY_BINPACK, &pl);
    gf_model_stats_get(m, &st);
    assert_int_equal(st.pods, 1);
    assert_int_equal(st.assumed, 1);
    assert_int_equal(gpu_state(m, "n1", 0).requested, 10 * GIB);
    /* a late pending echo keeps the assumption */
    assert_int_equal(gf_model_pod_update(m, p, NULL), 0);
    assert_int_equal(gpu_state(m, "n1", 0).requested, 10 * GIB);
    /* reserve again (bind retried): same placement, nothing added */
    reserve(m, p, "n1", GF_POLICY_BINPACK, &pl);
    assert_int_equal(gpu_state(m, "n1", 0).requested, 10 * GIB);
    /* confirmed by the watch, twice: still counted once */
    snprintf(p->node, sizeof(p->node), "n1");
    snprintf(p->devices, sizeof(p->devices), "%s", pl.devices);
    p->phase = GF_PHASE_RUNNING;
    assert_int_equal(gf_model_pod_update(m, p, NULL), 0);
    assert_int_equal(gf_model_pod_update(m, p, NULL), 0);
    gf_model_stats_get(m, &st);
    assert_int_equal(st.assumed, 0);
    assert_int_equal(st.pods, 1);
    assert_int_equal(gpu_state(m, "n1", 0).requested, 10 * GIB);
    assert_int_equal(gpu_state(m, "n1", 0).pods, 1);
    /* confirmed pods never expire */
    assert_int_equal(gf_model_expire_assumed(m, gf_model_now_ms() + 100000, 1000), 0);
    free(p);
    gf_model_free(m);
}

static void test_forget_and_expire(void **state)
{
    gf_model *m = model_new();
    gf_sched_pod *a = pod_new("a", 10 * GIB, 1, GF_MODE_TIME_SLICING);
    gf_sched_pod *b = pod_new("b", 10 * GIB, 1, GF_MODE_TIME_SLICING);

    (void)state;
    add_node(m, "n1", 1, 80 * GIB);
    place1(m, a, "n1", GF_POLICY_BINPACK);
    place1(m, b, "n1", GF_POLICY_BINPACK);
    gf_model_forget(m, "a");
    assert_int_equal(gpu_state(m, "n1", 0).requested, 10 * GIB);
    assert_int_equal(gf_model_expire_assumed(m, gf_model_now_ms(), 60000), 0);
    assert_int_equal(gf_model_expire_assumed(m, gf_model_now_ms() + 120000, 60000), 1);
    assert_int_equal(gpu_state(m, "n1", 0).requested, 0);
    assert_int_equal(gpu_state(m, "n1", 0).pods, 0);
    free(a), free(b);
    gf_model_free(m);
}

static bool has_uid(char **uids, size_t n, const char *uid)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(uids[i], uid) == 0)
            return true;
    return false;
}

/* Filter's hold: later filters see it, the bind takes it over, an unbound
 * one expires, a retry drops it, preemption never names it. */
static void test_hold(void **state)
{
    gf_model *m = model_new();
    gf_sched_pod *a = pod_new("a", 60 * GIB, 1, GF_MODE_TIME_SLICING);
    gf_sched_pod *b = pod_new("b", 60 * GIB, 1, GF_MODE_TIME_SLICING);
    gf_sched_pod *hi = pod_new("hi", 60 * GIB, 1, GF_MODE_TIME_SLICING);
    gf_sched_placement pl;
    char **extra = NULL;
    size_t n = 0;
    gf_error err;

    (void)state;
    add_node(m, "n1", 1, 80 * GIB);
    assert_int_equal(gf_model_hold(m, a, "n1", GF_POLICY_BINPACK, &err), 0);
    assert_int_equal(gpu_state(m, "n1", 0).requested, 60 * GIB);
    assert_int_equal(verdict(m, b, "n1", GF_POLICY_BINPACK).status, GF_FAIL);
    assert_int_equal(gf_model_hold(m, b, "n1", GF_POLICY_BINPACK, &err), -1);
    assert_int_equal(err.code, GF_ESTATE);
    hi->priority = 100;
    assert_int_equal(gf_model_preempt(m, hi, "n1", NULL, 0, &extra, &n, &err), -1);
    /* a retry of a: judged without its hold */
    gf_model_unhold(m, "a");
    assert_int_equal(gpu_state(m, "n1", 0).requested, 0);
    assert_int_equal(gf_model_hold(m, a, "n1", GF_POLICY_BINPACK, &err), 0);
    assert_int_equal(gf_model_expire_held(m, gf_model_now_ms(), 30000), 0);
    assert_int_equal(gf_model_expire_held(m, gf_model_now_ms() + 60000, 30000), 1);
    assert_int_equal(gpu_state(m, "n1", 0).requested, 0);
    /* held, then bound: the bind keeps the hold's GPU, no longer a hold */
    assert_int_equal(gf_model_hold(m, a, "n1", GF_POLICY_BINPACK, &err), 0);
    assert_int_equal(reserve(m, a, "n1", GF_POLICY_BINPACK, &pl), 0);
    assert_string_equal(pl.devices, "GPU-n1-0");
    assert_int_equal(gf_model_expire_held(m, gf_model_now_ms() + 60000, 30000), 0);
    gf_model_unhold(m, "a");
    assert_int_equal(gpu_state(m, "n1", 0).requested, 60 * GIB);
    assert_int_equal(gf_model_preempt(m, hi, "n1", NULL, 0, &extra, &n, &err), 0);
    assert_true(has_uid(extra, n, "a"));
    gf_model_uids_free(extra, n);
    free(a), free(b), free(hi);
    gf_model_free(m);
}

static void test_burst_never_overpacks(void **state)
{
    gf_model *m = model_new();
    char uid[16];
    int i, per[8] = {0};

    (void)state;
    add_node(m, "n8", 8, 80 * GIB);
    for (i = 0; i < 16; i++) {
        gf_sched_pod *p;

        snprintf(uid, sizeof(uid), "b%d", i);
        p = pod_portion(uid, 0.5);
        per[place1(m, p, "n8", GF_POLICY_BINPACK)]++;
        free(p);
    }
    for (i = 0; i < 8; i++) {
        assert_int_equal(per[i], 2);
        assert_int_equal(gpu_state(m, "n8", (size_t)i).requested, 80 * GIB);
    }
    gf_model_free(m);
}

static void test_watch_events(void **state)
{
    gf_model *m = model_new();
    gf_sched_pod *p = pod_new("w", 8 * GIB, 1, GF_MODE_TIME_SLICING);
    gf_model_stats st;

    (void)state;
    /* a pod bound elsewhere, seen before its node: counted once the node comes */
    snprintf(p->node, sizeof(p->node), "late");
    snprintf(p->devices, sizeof(p->devices), "k8s.device-plugin.nvidia.com/gpu=GPU-late-1");
    p->phase = GF_PHASE_RUNNING;
    assert_int_equal(gf_model_pod_update(m, p, NULL), 0);
    gf_model_stats_get(m, &st);
    assert_int_equal(st.unresolved, 1);
    assert_int_equal(st.nodes, 0);
    add_node(m, "late", 2, 80 * GIB);
    assert_int_equal(gpu_state(m, "late", 1).requested, 8 * GIB);
    /* devices by index */
    snprintf(p->devices, sizeof(p->devices), "0");
    assert_int_equal(gf_model_pod_update(m, p, NULL), 0);
    assert_int_equal(gpu_state(m, "late", 0).requested, 8 * GIB);
    assert_int_equal(gpu_state(m, "late", 1).requested, 0);
    /* deletion timestamp: still counted; terminal phase frees */
    p->deleting = true;
    assert_int_equal(gf_model_pod_update(m, p, NULL), 0);
    assert_int_equal(gpu_state(m, "late", 0).requested, 8 * GIB);
    p->phase = GF_PHASE_SUCCEEDED;
    assert_int_equal(gf_model_pod_update(m, p, NULL), 0);
    assert_int_equal(gpu_state(m, "late", 0).requested, 0);
    /* delete frees, twice is harmless */
    p->phase = GF_PHASE_RUNNING;
    assert_int_equal(gf_model_pod_update(m, p, NULL), 0);
    gf_model_pod_delete(m, "w");
    gf_model_pod_delete(m, "w");
    assert_int_equal(gpu_state(m, "late", 0).requested, 0);
    gf_model_stats_get(m, &st);
    assert_int_equal(st.pods + st.pending, 0);
    free(p);
    gf_model_free(m);
}

static void test_resync_and_node_delete(void **state)
{
    gf_model *m = model_new();
    gf_sched_pod *kept = pod_new("kept", GIB, 1, GF_MODE_TIME_SLICING);
    gf_sched_pod *gone = pod_new("gone", GIB, 1, GF_MODE_TIME_SLICING);
    gf_sched_pod *ours = pod_new("ours", GIB, 1, GF_MODE_TIME_SLICING);
    gf_model_stats st;
    gf_error err;
    size_t n;

    (void)state;
    add_node(m, "n1", 1, 80 * GIB);
    add_node(m, "n2", 1, 80 * GIB);
    snprintf(kept->node, sizeof(kept->node), "n1");
    snprintf(kept->devices, sizeof(kept->devices), "GPU-n1-0");
    snprintf(gone->node, sizeof(gone->node), "n1");
    snprintf(gone->devices, sizeof(gone->devices), "GPU-n1-0");
    gf_model_pod_update(m, kept, NULL);
    gf_model_pod_update(m, gone, NULL);
    place1(m, ours, "n1", GF_POLICY_BINPACK);
    assert_int_equal(gpu_state(m, "n1", 0).requested, 3 * GIB);

    gf_model_resync_begin(m, GF_MODEL_PODS);
    gf_model_pod_update(m, kept, NULL);
    gf_model_resync_end(m, GF_MODEL_PODS);
    assert_int_equal(gpu_state(m, "n1", 0).requested, 2 * GIB); /* ours is assumed: kept */

    gf_model_resync_begin(m, GF_MODEL_NODES);
    add_node(m, "n1", 1, 80 * GIB);
    gf_model_resync_end(m, GF_MODEL_NODES);
    assert_int_equal(gf_model_node_gpus(m, "n2", NULL, 0, &n, &err), -1);
    assert_int_equal(gpu_state(m, "n1", 0).requested, 2 * GIB);

    gf_model_node_delete(m, "n1");
    gf_model_stats_get(m, &st);
    assert_int_equal(st.nodes, 0);
    assert_int_equal(st.unresolved, 2);
    add_node(m, "n1", 1, 80 * GIB);
    assert_int_equal(gpu_state(m, "n1", 0).requested, 2 * GIB);
    free(kept), free(gone), free(ours);
    gf_model_free(m);
}

static void test_reserve_uid_and_assume(void **state)
{
    gf_model *m = model_new();
    gf_sched_pod *p = pod_new("u", 4 * GIB, 1, GF_MODE_SM_SHARING);
    gf_sched_placement pl;
    gf_error err;

    (void)state;
    add_node(m, "n1", 2, 80 * GIB);
    assert_int_equal(gf_model_reserve_uid(m, "u", "n1", GF_POLICY_BINPACK, &pl, &err), -1);
    assert_int_equal(err.code, GF_ENOTFOUND);
    gf_model_pod_update(m, p, NULL);
    assert_int_equal(gf_model_reserve_uid(m, "u", "n1", GF_POLICY_SPREAD, &pl, &err), 0);
    assert_int_equal(gpu_state(m, "n1", pl.gpu_index[0]).mode, GF_MODE_SM_SHARING);
    gf_model_forget(m, "u");
    memset(&pl, 0, sizeof(pl));
    snprintf(pl.node, sizeof(pl.node), "n1");
    pl.n = 1;
    pl.gpu_index[0] = 1;
    assert_int_equal(gf_model_assume(m, p, &pl, &err), 0);
    assert_int_equal(gpu_state(m, "n1", 1).requested, 4 * GIB);
    assert_int_equal(gpu_state(m, "n1", 0).requested, 0);
    pl.gpu_index[0] = 7;
    assert_int_equal(gf_model_assume(m, p, &pl, &err), -1);
    free(p);
    gf_model_free(m);
}

static void test_policy_parse(void **state)
{
    gf_policy p;
    gf_error err;

    (void)state;
    assert_int_equal(gf_policy_parse("spread", &p, &err), 0);
    assert_int_equal(p, GF_POLICY_SPREAD);
    assert_string_equal(gf_policy_name(p), "spread");
    assert_int_equal(gf_policy_parse("pack", &p, &err), -1);
    assert_msg_has(err.msg, "binpack", "spread", "pack");
}

/* One writer, readers at the same time: the totals stay consistent. */
static void *reader(void *arg)
{
    gf_model *m = arg;
    gf_sched_pod *q = pod_new("reader", GIB, 1, GF_MODE_TIME_SLICING);
    const char *names[1] = {"n1"};
    gf_sched_verdict v;
    int i;

    for (i = 0; i < 2000; i++)
        gf_model_evaluate(m, q, names, 1, GF_POLICY_BINPACK, &v, NULL);
    free(q);
    return NULL;
}

static void test_threads(void **state)
{
    gf_model *m = model_new();
    pthread_t t[3];
    char uid[16];
    int i;

    (void)state;
    add_node(m, "n1", 8, 80 * GIB);
    for (i = 0; i < 3; i++)
        assert_int_equal(pthread_create(&t[i], NULL, reader, m), 0);
    for (i = 0; i < 2000; i++) {
        gf_sched_pod *p;

        snprintf(uid, sizeof(uid), "t%d", i % 50);
        p = pod_new(uid, GIB, 1, GF_MODE_TIME_SLICING);
        if (i % 2 == 0)
            place1(m, p, "n1", GF_POLICY_SPREAD);
        else
            gf_model_pod_delete(m, uid);
        free(p);
    }
    for (i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    gf_model_free(m);
}

/* Filter refuses what bind would refuse: a limit larger than the GPU, with
 * bind's own message (gf_amount_resolve's). */
static void test_limit_larger_than_gpu(void **state)
{
    gf_model *m = model_new();
    gf_sched_pod *p = pod_new("p", 8 * GIB, 1, GF_MODE_TIME_SLICING);
    gf_sched_placement pl;
    gf_sched_verdict v;
    gf_error err, want;
    uint64_t b;

    (void)state;
    add_node(m, "n1", 2, 80 * GIB);
    p->limit.bytes = 100 * GIB;
    assert_int_equal(gf_amount_resolve(&p->limit, 80 * GIB, "gpu-memory.limit", &b, &want), -1);
    v = verdict(m, p, "n1", GF_POLICY_BINPACK);
    assert_int_equal(v.status, GF_FAIL_UNRESOLVABLE);
    assert_string_equal(v.reason, want.msg);
    assert_msg_has(v.reason, "gpu-memory.limit", "100.00 GiB", "80.00 GiB");
    assert_int_equal(gf_model_reserve(m, p, "n1", GF_POLICY_BINPACK, &pl, &err), -1);
    assert_msg_has(err.msg, want.msg);
    /* a limit the GPU holds is fine */
    p->limit.bytes = 80 * GIB;
    assert_int_equal(verdict(m, p, "n1", GF_POLICY_BINPACK).status, GF_FIT);
    free(p);
    gf_model_free(m);
}

static gf_sched_pod *sm_pod(const char *uid, uint64_t bytes, double compute)
{
    gf_sched_pod *p = pod_new(uid, bytes, 1, GF_MODE_SM_SHARING);

    p->has_compute = compute > 0;
    p->compute = compute;
    return p;
}

/* sm-sharing portions are admitted per GPU up to 1 (as percents). */
static void test_compute_portions_summed(void **state)
{
    gf_model *m = model_new();
    gf_sched_pod *a = sm_pod("a", GIB, 0.5), *b = sm_pod("b", GIB, 0.25);
    gf_sched_pod *c = sm_pod("c", GIB, 0.5), *d = sm_pod("d", GIB, 0.25);
    gf_sched_pod *e = sm_pod("e", GIB, 0); /* no portion: promises no share */
    gf_sched_verdict v;

    (void)state;
    add_node(m, "n1", 1, 80 * GIB);
    place1(m, a, "n1", GF_POLICY_BINPACK);
    place1(m, b, "n1", GF_POLICY_BINPACK);
    assert_int_equal(gpu_state(m, "n1", 0).compute_pct, 75);
    v = verdict(m, c, "n1", GF_POLICY_BINPACK);
    assert_int_equal(v.status, GF_FAIL);
    assert_string_equal(v.reason, "GPU-n1-0 has 75/100 of its SMs promised to sm-sharing pods, "
                                  "pod asks 50/100 (gpu-compute.portion)");
    assert_int_equal(verdict(m, d, "n1", GF_POLICY_BINPACK).status, GF_FIT);
    place1(m, d, "n1", GF_POLICY_BINPACK);
    assert_int_equal(gpu_state(m, "n1", 0).compute_pct, 100);
    assert_int_equal(verdict(m, e, "n1", GF_POLICY_BINPACK).status, GF_FIT);
    /* freed when a pod goes */
    gf_model_pod_delete(m, "a");
    assert_int_equal(gpu_state(m, "n1", 0).compute_pct, 50);
    assert_int_equal(verdict(m, c, "n1", GF_POLICY_BINPACK).status, GF_FIT);
    free(a), free(b), free(c), free(d), free(e);
    gf_model_free(m);
}

/* Preemption: the fewest lower-priority pods that make room. */
static void test_preempt_victims(void **state)
{
    gf_model *m = model_new();
    gf_sched_pod *lo1 = pod_new("lo1", 40 * GIB, 1, GF_MODE_TIME_SLICING);
    gf_sched_pod *lo2 = pod_new("lo2", 40 * GIB, 1, GF_MODE_TIME_SLICING);
    gf_sched_pod *mid = pod_new("mid", 60 * GIB, 1, GF_MODE_TIME_SLICING);
    gf_sched_pod *hi = pod_new("hi", 40 * GIB, 1, GF_MODE_TIME_SLICING);
    gf_sched_pod *top = pod_new("top", 80 * GIB, 1, GF_MODE_TIME_SLICING);
    const char *given[1] = {"lo1"};
    char **extra = NULL;
    size_t n = 0;
    gf_error err;

    (void)state;
    add_node(m, "n1", 2, 80 * GIB);
    lo1->priority = lo2->priority = 10;
    mid->priority = 100;
    hi->priority = 50;
    top->priority = 1000;
    place1(m, lo1, "n1", GF_POLICY_BINPACK);
    place1(m, lo2, "n1", GF_POLICY_BINPACK); /* GPU 0: lo1 + lo2 */
    place1(m, mid, "n1", GF_POLICY_BINPACK); /* GPU 1: mid */
    assert_int_equal(verdict(m, hi, "n1", GF_POLICY_BINPACK).status, GF_FAIL);
    /* hi (50) may take lo1 or lo2's place, never mid's (100) */
    assert_int_equal(gf_model_preempt(m, hi, "n1", NULL, 0, &extra, &n, &err), 0);
    assert_int_equal(n, 1);
    assert_true(has_uid(extra, n, "lo1") || has_uid(extra, n, "lo2"));
    gf_model_uids_free(extra, n);
    /* with lo1 already chosen by kube-scheduler nothing more is needed */
    assert_int_equal(gf_model_preempt(m, hi, "n1", given, 1, &extra, &n, &err), 0);
    assert_int_equal(n, 0);
    gf_model_uids_free(extra, n);
    /* a whole GPU for top: GPU 1 costs one victim, GPU 0 two */
    assert_int_equal(gf_model_preempt(m, top, "n1", NULL, 0, &extra, &n, &err), 0);
    assert_int_equal(n, 1);
    assert_string_equal(extra[0], "mid");
    gf_model_uids_free(extra, n);
    /* nothing of lower priority than lo2 (10): no room */
    lo2->uid[0] = 'x';
    lo2->priority = 10;
    lo2->request.bytes = 60 * GIB;
    assert_int_equal(gf_model_preempt(m, lo2, "n1", NULL, 0, &extra, &n, &err), -1);
    assert_int_equal(err.code, GF_ESTATE);
    assert_null(extra);
    /* a request no GPU can hold is not helped by preemption */
    top->request.bytes = top->limit.bytes = 100 * GIB;
    assert_int_equal(gf_model_preempt(m, top, "n1", NULL, 0, &extra, &n, &err), -1);
    assert_msg_has(err.msg, "more than any GPU");
    free(lo1), free(lo2), free(mid), free(hi), free(top);
    gf_model_free(m);
}

/* Memory goes back after many deletions (tables shrink, heap trimmed). */
static void test_trim_after_deletions(void **state)
{
    gf_model *m = model_new();
    gf_model_stats before, peak, after;
    char uid[32] = "";
    int i;

    (void)state;
    add_node(m, "n1", 8, 80 * GIB);
    gf_model_stats_get(m, &before);
    for (i = 0; i < 20000; i++) {
        gf_sched_pod *p = pod_new(uid, GIB, 1, GF_MODE_TIME_SLICING);

        snprintf(p->uid, sizeof(p->uid), "u%d", i);
        p->fractional = true;
        if (gf_model_pod_update(m, p, NULL) < 0)
            fail_msg("update");
        free(p);
    }
    gf_model_stats_get(m, &peak);
    assert_int_equal(peak.pending, 20000);
    for (i = 0; i < 20000; i++) {
        snprintf(uid, sizeof(uid), "u%d", i);
        gf_model_pod_delete(m, uid);
    }
    gf_model_trim(m);
    gf_model_stats_get(m, &after);
    assert_true(peak.memory_bytes > 4 * before.memory_bytes);
    assert_int_equal(after.memory_bytes, before.memory_bytes);
    gf_model_free(m);
}

/* A device plugin hands this node's GPUs out: closed until reserved. */
static void test_device_plugin_gpus_closed_until_reserved(void **state)
{
    gf_model *m = model_new();
    gf_sched_pod *p = pod_new("r1", 1 * GIB, 1, GF_MODE_TIME_SLICING);
    gf_sched_node *node = calloc(1, sizeof(*node));
    const char *reserved[] = {"GPU-dp-1"};
    gf_sched_verdict v;
    gf_error err;

    (void)state;
    assert_non_null(node);
    snprintf(node->name, sizeof(node->name), "dp");
    node->ready = node->memory_known = true;
    node->source = GF_INV_AGENT;
    node->dp_gpus = 2;
    node->n_gpus = 2;
    for (int i = 0; i < 2; i++) {
        snprintf(node->gpus[i].id, sizeof(node->gpus[i].id), "GPU-dp-%d", i);
        node->gpus[i].has_uuid = true;
        node->gpus[i].index = i;
        node->gpus[i].memory = 16 * GIB;
    }
    assert_int_equal(gf_model_node_update(m, node, &err), 0);
    v = verdict(m, p, "dp", GF_POLICY_BINPACK);
    assert_int_equal(v.status, GF_FAIL);
    assert_int_equal(v.reserve, 1);
    assert_non_null(strstr(v.reason, "0 of the node's 2 GPUs are reserved"));
    assert_true(gpu_state(m, "dp", 0).closed && gpu_state(m, "dp", 1).closed);
    /* a reservation opens exactly its GPU, and a node update keeps it open */
    assert_int_equal(gf_model_node_reserved(m, "dp", reserved, 1, &err), 0);
    assert_int_equal(gf_model_node_update(m, node, &err), 0);
    assert_int_equal(place1(m, p, "dp", GF_POLICY_BINPACK), 1);
    /* never given back under a fraction; the other, idle one closes */
    assert_int_equal(gf_model_gpu_close_idle(m, "dp", "GPU-dp-1"), -1);
    assert_int_equal(gf_model_gpu_close_idle(m, "dp", "GPU-dp-0"), 0);
    gf_model_pod_delete(m, "r1");
    assert_int_equal(gf_model_gpu_close_idle(m, "dp", "GPU-dp-1"), 0);
    assert_int_equal(verdict(m, p, "dp", GF_POLICY_BINPACK).status, GF_FAIL);
    /* no device plugin: every GPU open */
    node->dp_gpus = 0;
    assert_int_equal(gf_model_node_update(m, node, &err), 0);
    assert_int_equal(verdict(m, p, "dp", GF_POLICY_BINPACK).status, GF_FIT);
    free(node);
    free(p);
    gf_model_free(m);
}

static gf_sched_pod *pod_in(const char *ns, const char *uid, uint64_t bytes)
{
    gf_sched_pod *p = pod_new(uid, bytes, 1, GF_MODE_TIME_SLICING);

    snprintf(p->ns, sizeof(p->ns), "%s", ns);
    return p;
}

static void test_namespace_quota(void **state)
{
    gf_model *m = model_new();
    gf_sched_ns ns = {.name = "team-a", .has_quota = true, .quota = 10 * GIB};
    gf_sched_ns bad = {.name = "team-x", .has_quota = true};
    gf_sched_pod *a = pod_in("team-a", "q1", 8 * GIB), *b = pod_in("team-a", "q2", 4 * GIB);
    gf_sched_pod *c = pod_in("team-b", "q3", 40 * GIB), *x = pod_in("team-x", "q4", GIB);
    gf_sched_placement pl;
    gf_model_quota q[4];
    gf_sched_verdict v;
    gf_error err;

    (void)state;
    snprintf(bad.error, sizeof(bad.error), "annotation gpufrac.io/memory-quota: \"10GB\" ...");
    add_node(m, "n", 2, 80 * GIB);
    assert_int_equal(gf_model_ns_update(m, &ns, &err), 0);
    assert_int_equal(gf_model_ns_update(m, &bad, &err), 0);
    place1(m, a, "n", GF_POLICY_BINPACK);
    v = verdict(m, b, "n", GF_POLICY_BINPACK);
    assert_int_equal(v.status, GF_FAIL);
    assert_non_null(strstr(v.reason, "quota (gpufrac.io/memory-quota) is 10.00 GiB"));
    assert_non_null(strstr(v.reason, "request 8.00 GiB, this pod 4.00 GiB more"));
    assert_int_equal(gf_model_reserve(m, b, "n", GF_POLICY_BINPACK, &pl, &err), -1);
    place1(m, c, "n", GF_POLICY_BINPACK); /* no quota: no limit */
    v = verdict(m, x, "n", GF_POLICY_BINPACK);
    assert_int_equal(v.status, GF_FAIL);
    assert_non_null(strstr(v.reason, "10GB"));
    assert_int_equal(gf_model_quotas(m, q, 4), 2);
    for (int i = 0; i < 2; i++)
        if (strcmp(q[i].name, "team-a") == 0)
            assert_true(q[i].valid && q[i].used == 8 * GIB && q[i].quota == 10 * GIB);
    /* a deleted pod gives its share back */
    gf_model_pod_delete(m, "q1");
    assert_int_equal(verdict(m, b, "n", GF_POLICY_BINPACK).status, GF_FIT);
    free(a);
    free(b);
    free(c);
    free(x);
    gf_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_binpack),
        cmocka_unit_test(test_binpack_node_scores),
        cmocka_unit_test(test_spread),
        cmocka_unit_test(test_multi_device),
        cmocka_unit_test(test_modes_never_mixed),
        cmocka_unit_test(test_portions),
        cmocka_unit_test(test_full_gpu_reason),
        cmocka_unit_test(test_reason_names_the_best_gpu),
        cmocka_unit_test(test_unknown_memory_and_nodes),
        cmocka_unit_test(test_not_fractional_and_invalid),
        cmocka_unit_test(test_assume_then_confirm),
        cmocka_unit_test(test_forget_and_expire),
        cmocka_unit_test(test_burst_never_overpacks),
        cmocka_unit_test(test_watch_events),
        cmocka_unit_test(test_resync_and_node_delete),
        cmocka_unit_test(test_reserve_uid_and_assume),
        cmocka_unit_test(test_policy_parse),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_limit_larger_than_gpu),
        cmocka_unit_test(test_compute_portions_summed),
        cmocka_unit_test(test_preempt_victims),
        cmocka_unit_test(test_hold),
        cmocka_unit_test(test_trim_after_deletions),
        cmocka_unit_test(test_device_plugin_gpus_closed_until_reserved),
        cmocka_unit_test(test_namespace_quota),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
