/* SPDX-License-Identifier: Apache-2.0 */
/* v1.Pod / v1.Node JSON -> model records: annotations, inventory
 * annotation, GFD labels and their quirks, and what reaches the filter. */
#include "../unit/unit.h"

#include <stdio.h>
#include <stdlib.h>

#include "decode.h"
#include "model.h"
#include "quantity.h"

static json_t *load(const char *text)
{
    json_error_t je;
    json_t *j = json_loads(text, JSON_DECODE_ANY, &je);

    if (j == NULL)
        fail_msg("test JSON: %s (%s)", je.text, text);
    return j;
}

/* A pod with containers "trainer","trainer-2" and the given annotations
 * object text (or "null"), node and phase. */
static gf_sched_pod *pod_json(const char *annotations, const char *node, const char *extra)
{
    char text[4096];
    gf_sched_pod *p = calloc(1, sizeof(*p));
    gf_error err;
    json_t *j;

    assert_non_null(p);
    snprintf(text, sizeof(text),
             "{\"metadata\":{\"name\":\"web\",\"namespace\":\"ml\",\"uid\":\"u-1\","
             "\"annotations\":%s%s},\"spec\":{\"nodeName\":\"%s\",\"containers\":"
             "[{\"name\":\"trainer\"},{\"name\":\"trainer-2\"}]},"
             "\"status\":{\"phase\":\"Running\"}}",
             annotations, extra, node);
    j = load(text);
    if (gf_sched_pod_decode(j, NULL, p, &err) < 0)
        fail_msg("%s", err.msg);
    json_decref(j);
    return p;
}

static void test_pod_nvfractions(void **state)
{
    gf_sched_pod *p = pod_json("{\"nvidia.com/container.trainer-2.gpu-memory.request\":\"4Gi\","
                               "\"nvidia.com/container.trainer-2.gpu-memory.limit\":\"8Gi\","
                               "\"nvidia.com/container.trainer-2.gpu-compute.mode\":\"sm-sharing\","
                               "\"nvidia.com/container.trainer-2.gpus.devices\":\"GPU-a\"}",
                               "node-1", "");

    (void)state;
    assert_string_equal(p->ns, "ml");
    assert_string_equal(p->name, "web");
    assert_string_equal(p->uid, "u-1");
    assert_string_equal(p->node, "node-1");
    assert_int_equal(p->phase, GF_PHASE_RUNNING);
    assert_false(p->deleting);
    assert_true(p->fractional);
    assert_false(p->invalid);
    assert_string_equal(p->container, "trainer-2");
    assert_false(p->request.is_portion);
    assert_int_equal(p->request.bytes, 4 * GF_GIB);
    assert_int_equal(p->limit.bytes, 8 * GF_GIB);
    assert_int_equal(p->mode, GF_MODE_SM_SHARING);
    assert_int_equal(p->num_devices, 1);
    assert_string_equal(p->devices, "GPU-a");
    free(p);
}

static void test_pod_legacy_forms(void **state)
{
    gf_sched_pod *p = pod_json("{\"gpu-fraction\":\"0.5\",\"gpu-fraction-num-devices\":\"2\"}", "",
                               ",\"deletionTimestamp\":\"2024-01-01T00:00:00Z\"");

    (void)state;
    assert_true(p->fractional);
    assert_string_equal(p->container, "trainer");
    assert_true(p->request.is_portion);
    assert_true(p->request.portion == 0.5);
    assert_int_equal(p->num_devices, 2);
    assert_int_equal(p->mode, GF_MODE_TIME_SLICING);
    assert_string_equal(p->node, "");
    assert_true(p->deleting);
    free(p);
}

static void test_pod_not_fractional(void **state)
{
    gf_sched_pod *p = pod_json("{\"other\":\"x\"}", "", "");

    (void)state;
    assert_false(p->fractional);
    assert_false(p->invalid);
    free(p);
    p = pod_json("null", "", "");
    assert_false(p->fractional);
    free(p);
}

static void test_pod_malformed_annotation(void **state)
{
    gf_sched_pod *p = pod_json("{\"nvidia.com/container.trainer.gpu-memory.request\":\"lots\"}", "",
                               "");
    gf_model *m = NULL;
    const char *names[1] = {"n1"};
    gf_sched_verdict v;
    gf_error err;

    (void)state;
    assert_true(p->fractional);
    assert_true(p->invalid);
    assert_msg_has(p->error, "ml/web", "nvidia.com/container.trainer.gpu-memory.request", "lots");
    assert_int_equal(gf_model_new(NULL, &m, &err), 0);
    assert_int_equal(gf_model_evaluate(m, p, names, 1, GF_POLICY_BINPACK, &v, &err), 0);
    assert_int_equal(v.status, GF_FAIL_UNRESOLVABLE);
    assert_string_equal(v.reason, p->error);
    gf_model_free(m);
    free(p);
    /* the whole segment: trainer's keys never match trainer-2 */
    p = pod_json("{\"nvidia.com/container.trainer-3.gpu-memory.request\":\"1Gi\"}", "", "");
    assert_true(p->invalid);
    assert_msg_has(p->error, "trainer-3");
    free(p);
    p = pod_json("{\"nvidia.com/container.trainer.gpu-compute.mode\":\"fast\","
                 "\"nvidia.com/container.trainer.gpu-memory.request\":\"1Gi\"}",
                 "", "");
    assert_true(p->invalid);
    assert_msg_has(p->error, "gpu-compute.mode", "fast");
    free(p);
}

static void test_pod_not_a_pod(void **state)
{
    const char *bad[] = {
        "[]",
        "{}",
        "{\"metadata\":{\"uid\":\"x\"}}",
        "{\"metadata\":{\"name\":\"x\"}}",
        "{\"metadata\":{\"name\":7,\"uid\":\"x\"}}",
        "{\"metadata\":{\"name\":\"x\",\"uid\":\"x\",\"annotations\":{\"a\":1}}}",
        "{\"metadata\":{\"name\":\"x\",\"uid\":\"x\"},\"spec\":{\"containers\":{}}}",
        "{\"metadata\":{\"name\":\"x\",\"uid\":\"x\"},\"spec\":{\"containers\":[{}]}}",
        "{\"metadata\":{\"name\":\"x\",\"uid\":\"x\"},\"status\":{\"phase\":3}}",
    };
    gf_sched_pod *p = calloc(1, sizeof(*p));
    gf_error err;
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        json_t *j = load(bad[i]);

        err.msg[0] = '\0';
        if (gf_sched_pod_decode(j, NULL, p, &err) == 0)
            fail_msg("accepted %s", bad[i]);
        assert_true(err.msg[0] != '\0');
        json_decref(j);
    }
    free(p);
}

static void test_pod_phases(void **state)
{
    const char *phases[] = {"Pending", "Running", "Succeeded", "Failed", "Weird"};
    gf_sched_pod *p = calloc(1, sizeof(*p));
    char buf[256];
    gf_error err;
    size_t i;

    (void)state;
    for (i = 0; i < 5; i++) {
        json_t *j;

        snprintf(buf, sizeof(buf),
                 "{\"metadata\":{\"name\":\"a\",\"uid\":\"u\"},\"status\":{\"phase\":\"%s\"}}",
                 phases[i]);
        j = load(buf);
        assert_int_equal(gf_sched_pod_decode(j, NULL, p, &err), 0);
        assert_int_equal(p->phase, (gf_pod_phase)i);
        assert_string_equal(p->ns, "default");
        json_decref(j);
    }
    free(p);
}

static gf_sched_node *node_json(const char *text)
{
    gf_sched_node *n = calloc(1, sizeof(*n));
    json_t *j = load(text);
    gf_error err;

    assert_non_null(n);
    if (gf_sched_node_decode(j, n, &err) < 0)
        fail_msg("%s", err.msg);
    json_decref(j);
    return n;
}

static void test_node_agent_annotation(void **state)
{
    gf_sched_node *n = node_json(
        "{\"metadata\":{\"name\":\"n1\",\"annotations\":{\"gpufrac.io/gpus\":"
        "\"[{\\\"uuid\\\":\\\"GPU-a\\\",\\\"index\\\":0,\\\"memory\\\":85899345920},"
        "{\\\"index\\\":1,\\\"memory\\\":42949672960}]\"},"
        "\"labels\":{\"nvidia.com/gpu.count\":\"8\",\"nvidia.com/gpu.memory\":\"81559\"}},"
        "\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}]}}");

    (void)state;
    assert_string_equal(n->name, "n1");
    assert_int_equal(n->source, GF_INV_AGENT);
    assert_true(n->memory_known);
    assert_true(n->ready);
    assert_false(n->unschedulable);
    assert_string_equal(n->inventory_error, "");
    assert_int_equal(n->n_gpus, 2);
    assert_string_equal(n->gpus[0].id, "GPU-a");
    assert_true(n->gpus[0].has_uuid);
    assert_int_equal(n->gpus[0].memory, 80 * GF_GIB);
    assert_string_equal(n->gpus[1].id, "n1/gpu1");
    assert_false(n->gpus[1].has_uuid);
    assert_int_equal(n->gpus[1].memory, 40 * GF_GIB);
    free(n);
}

static void test_node_annotation_errors(void **state)
{
    static const struct {
        const char *value, *frag;
    } bad[] = {
        {"[{", "not JSON"},
        {"{}", "must be a list"},
        {"[1]", "entry 0 is not an object"},
        {"[{\"index\":0}]", "\"memory\""},
        {"[{\"index\":0,\"memory\":0}]", "\"memory\""},
        {"[{\"index\":-1,\"memory\":1}]", "\"index\""},
        {"[{\"index\":0,\"memory\":1,\"uuid\":\"\"}]", "\"uuid\""},
        {"[{\"index\":0,\"memory\":1,\"uuid\":\"a,b\"}]", "\"uuid\""},
        {"[{\"index\":0,\"memory\":1},{\"index\":0,\"memory\":1}]", "same GPU"},
        {"[{\"index\":0,\"memory\":1,\"uuid\":\"G\"},{\"index\":1,\"memory\":1,\"uuid\":\"G\"}]",
         "same GPU"},
    };
    gf_sched_node *n = calloc(1, sizeof(*n));
    gf_error err;
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(gf_sched_gpus_annotation_parse(bad[i].value, "n", n, &err), -1);
        assert_msg_has(err.msg, "gpufrac.io/gpus", bad[i].frag);
        assert_int_equal(n->n_gpus, 0);
    }
    free(n);
    /* through the node decoder: the node keeps a reason, the filter reports it */
    n = node_json(
        "{\"metadata\":{\"name\":\"n2\",\"annotations\":{\"gpufrac.io/gpus\":\"oops\"},"
        "\"labels\":{\"nvidia.com/gpu.count\":\"1\",\"nvidia.com/gpu.memory\":\"1024\"}}}");
    assert_int_equal(n->source, GF_INV_AGENT);
    assert_msg_has(n->inventory_error, "node annotation gpufrac.io/gpus", "not JSON");
    assert_int_equal(n->n_gpus, 0);
    free(n);
}

static void test_node_gfd_labels(void **state)
{
    gf_sched_node *n;

    (void)state;
    n = node_json("{\"metadata\":{\"name\":\"g\",\"labels\":{\"nvidia.com/gpu.count\":\"2\","
                  "\"nvidia.com/gpu.memory\":\"81559\"}},\"spec\":{\"unschedulable\":true}}");
    assert_int_equal(n->source, GF_INV_GFD);
    assert_true(n->memory_known);
    assert_true(n->unschedulable);
    assert_int_equal(n->n_gpus, 2);
    assert_string_equal(n->gpus[1].id, "g/gpu1");
    assert_int_equal(n->gpus[1].index, 1);
    assert_int_equal(n->gpus[0].memory, 81559 * GF_MIB);
    free(n);
    /* GFD bug: a value >= 1048576 is bytes, not MiB */
    n = node_json("{\"metadata\":{\"name\":\"g\",\"labels\":{\"nvidia.com/gpu.count\":\"1\","
                  "\"nvidia.com/gpu.memory\":\"85520809984\"}}}");
    assert_int_equal(n->gpus[0].memory, 85520809984ULL);
    free(n);
    n = node_json("{\"metadata\":{\"name\":\"g\",\"labels\":{\"nvidia.com/gpu.count\":\"1\","
                  "\"nvidia.com/gpu.memory\":\"1048575\"}}}");
    assert_int_equal(n->gpus[0].memory, 1048575ULL * GF_MIB);
    free(n);
    /* memory missing: known count, unknown memory */
    n = node_json("{\"metadata\":{\"name\":\"g\",\"labels\":{\"nvidia.com/gpu.count\":\"4\"}},"
                  "\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"False\"}]}}");
    assert_int_equal(n->source, GF_INV_GFD);
    assert_false(n->memory_known);
    assert_false(n->ready);
    assert_int_equal(n->n_gpus, 4);
    free(n);
    /* bad labels */
    n = node_json("{\"metadata\":{\"name\":\"g\",\"labels\":{\"nvidia.com/gpu.count\":\"two\"}}}");
    assert_msg_has(n->inventory_error, "nvidia.com/gpu.count", "two");
    free(n);
    n = node_json("{\"metadata\":{\"name\":\"g\",\"labels\":{\"nvidia.com/gpu.count\":\"1\","
                  "\"nvidia.com/gpu.memory\":\"80Gi\"}}}");
    assert_msg_has(n->inventory_error, "nvidia.com/gpu.memory", "80Gi");
    free(n);
    /* nothing at all */
    n = node_json("{\"metadata\":{\"name\":\"cpu\"}}");
    assert_int_equal(n->source, GF_INV_NONE);
    assert_true(n->ready);
    free(n);
}

static void test_node_not_a_node(void **state)
{
    const char *bad[] = {"3", "{}", "{\"metadata\":{}}",
                         "{\"metadata\":{\"name\":\"a\"},\"spec\":[]}",
                         "{\"metadata\":{\"name\":\"a\",\"labels\":\"x\"}}"};
    gf_sched_node *n = calloc(1, sizeof(*n));
    gf_error err;
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        json_t *j = load(bad[i]);

        if (gf_sched_node_decode(j, n, &err) == 0)
            fail_msg("accepted %s", bad[i]);
        json_decref(j);
    }
    free(n);
}

/* Decoded JSON end to end: node + bound pod + a new pod's verdict. */
static void test_decoded_into_model(void **state)
{
    gf_sched_node *n = node_json(
        "{\"metadata\":{\"name\":\"n1\",\"annotations\":{\"gpufrac.io/gpus\":"
        "\"[{\\\"uuid\\\":\\\"GPU-a\\\",\\\"index\\\":0,\\\"memory\\\":8589934592}]\"}}}");
    gf_sched_pod *bound = pod_json("{\"nvidia.com/container.trainer.gpu-memory.request\":\"5Gi\","
                                   "\"nvidia.com/container.trainer.gpus.devices\":\"GPU-a\"}",
                                   "n1", "");
    gf_sched_pod *next = pod_json("{\"gpu-memory\":\"4096\"}", "", "");
    const char *names[1] = {"n1"};
    gf_sched_verdict v;
    gf_model *m = NULL;
    gf_error err;

    (void)state;
    snprintf(next->uid, sizeof(next->uid), "u-2");
    assert_int_equal(gf_model_new(NULL, &m, &err), 0);
    assert_int_equal(gf_model_node_update(m, n, &err), 0);
    assert_int_equal(gf_model_pod_update(m, bound, &err), 0);
    assert_int_equal(gf_model_evaluate(m, next, names, 1, GF_POLICY_BINPACK, &v, &err), 0);
    assert_int_equal(v.status, GF_FAIL);
    assert_string_equal(
        v.reason, "GPU-a has 3072 MiB unrequested, pod requests 4096 MiB (the node's only GPU)");
    gf_model_free(m);
    free(n), free(bound), free(next);
}

/* A pod of the given spec (its containers, initContainers) and annotations. */
static gf_sched_pod *pod_spec(const char *annotations, const char *spec)
{
    char text[4096];
    gf_sched_pod *p = calloc(1, sizeof(*p));
    gf_error err;
    json_t *j;

    assert_non_null(p);
    snprintf(text, sizeof(text),
             "{\"metadata\":{\"name\":\"multi\",\"namespace\":\"ml\",\"uid\":\"u-9\","
             "\"annotations\":%s},\"spec\":{%s},\"status\":{\"phase\":\"Pending\"}}",
             annotations, spec);
    j = load(text);
    if (gf_sched_pod_decode(j, NULL, p, &err) < 0)
        fail_msg("%s", err.msg);
    json_decref(j);
    return p;
}

#define TWO "\"containers\":[{\"name\":\"trainer\"},{\"name\":\"trainer-2\"}]"

static uint64_t requested_on(gf_model *m, const char *node)
{
    gf_model_gpu_state g;
    gf_error err;
    size_t n;

    assert_int_equal(gf_model_node_gpus(m, node, &g, 1, &n, &err), 0);
    return g.requested;
}

/* Every fractional container is charged, on the GPU all of them get, as the
 * node charges each (was: only the first; 5 GiB counted where 6 were held). */
static void test_pod_two_fractional_containers(void **state)
{
    gf_sched_node *n = node_json(
        "{\"metadata\":{\"name\":\"n1\",\"annotations\":{\"gpufrac.io/gpus\":"
        "\"[{\\\"uuid\\\":\\\"GPU-a\\\",\\\"index\\\":0,\\\"memory\\\":8589934592}]\"}}}");
    gf_sched_pod *p = pod_spec("{\"nvidia.com/container.trainer.gpu-memory.request\":\"5Gi\","
                               "\"nvidia.com/container.trainer-2.gpu-memory.request\":\"1Gi\","
                               "\"nvidia.com/container.trainer-2.gpu-memory.limit\":\"2Gi\"}",
                               TWO);
    gf_sched_pod *q = pod_spec("{\"nvidia.com/container.trainer.gpu-memory.request\":\"3Gi\"}",
                               TWO);
    const char *names[1] = {"n1"};
    gf_sched_placement pl;
    gf_sched_verdict v;
    gf_model *m = NULL;
    gf_error err;

    (void)state;
    assert_true(p->fractional);
    assert_false(p->invalid);
    assert_string_equal(p->container, "trainer");
    assert_int_equal(p->n_more, 1);
    assert_string_equal(p->more[0].container, "trainer-2");
    assert_false(p->more[0].init);
    assert_int_equal(p->more[0].request.bytes, 1 * GF_GIB);
    assert_int_equal(p->more[0].limit.bytes, 2 * GF_GIB);
    assert_int_equal(gf_sched_pod_charge(p, 8 * GF_GIB), 6 * GF_GIB);
    assert_int_equal(gf_model_new(NULL, &m, &err), 0);
    assert_int_equal(gf_model_node_update(m, n, &err), 0);
    assert_int_equal(gf_model_reserve(m, p, "n1", GF_POLICY_BINPACK, &pl, &err), 0);
    assert_int_equal(requested_on(m, "n1"), 6 * GF_GIB);
    snprintf(q->uid, sizeof(q->uid), "u-10");
    assert_int_equal(gf_model_evaluate(m, q, names, 1, GF_POLICY_BINPACK, &v, &err), 0);
    assert_int_equal(v.status, GF_FAIL);
    assert_string_equal(v.reason, "GPU-a has 2048 MiB unrequested, pod requests 3072 MiB "
                                  "(the node's only GPU)");
    gf_model_free(m);
    free(n), free(p), free(q);
}

/* Kubernetes' rule: the largest init container or the sum of the regular
 * ones, whichever is more (init containers run alone, first). */
static void test_pod_init_container_rule(void **state)
{
    gf_sched_pod *small =
        pod_spec("{\"nvidia.com/container.setup.gpu-memory.request\":\"2Gi\","
                 "\"nvidia.com/container.warm.gpu-memory.request\":\"1Gi\","
                 "\"nvidia.com/container.trainer.gpu-memory.request\":\"3Gi\","
                 "\"nvidia.com/container.trainer-2.gpu-memory.request\":\"1Gi\"}",
                 TWO ",\"initContainers\":[{\"name\":\"setup\"},{\"name\":\"warm\"}]");
    gf_sched_pod *big = pod_spec("{\"nvidia.com/container.setup.gpu-memory.request\":\"6Gi\","
                                 "\"nvidia.com/container.trainer.gpu-memory.request\":\"3Gi\"}",
                                 TWO ",\"initContainers\":[{\"name\":\"setup\"}]");
    gf_sched_pod *only = pod_spec("{\"nvidia.com/container.setup.gpu-memory.request\":\"25%\"}",
                                  TWO ",\"initContainers\":[{\"name\":\"setup\"}]");

    (void)state;
    assert_int_equal(small->n_more, 3);
    assert_false(small->init);
    assert_true(small->more[1].init && small->more[2].init);
    assert_int_equal(gf_sched_pod_charge(small, 8 * GF_GIB), 4 * GF_GIB); /* 3 + 1 > 2 */
    assert_int_equal(gf_sched_pod_charge(big, 8 * GF_GIB), 6 * GF_GIB);   /* 6 > 3 */
    assert_true(only->fractional);
    assert_false(only->invalid);
    assert_true(only->init);
    assert_string_equal(only->container, "setup");
    assert_int_equal(gf_sched_pod_charge(only, 8 * GF_GIB), 2 * GF_GIB);
    free(small), free(big), free(only);
}

/* What cannot share the pod's GPUs is refused, naming the containers. */
static void test_pod_containers_that_cannot_share(void **state)
{
    gf_sched_pod *p =
        pod_spec("{\"nvidia.com/container.trainer.gpu-memory.request\":\"1Gi\","
                 "\"nvidia.com/container.trainer-2.gpu-memory.request\":\"1Gi\","
                 "\"nvidia.com/container.trainer-2.gpu-compute.mode\":\"sm-sharing\"}",
                 TWO);

    (void)state;
    assert_true(p->fractional);
    assert_true(p->invalid);
    assert_msg_has(p->error, "containers trainer and trainer-2", "time-slicing", "sm-sharing",
                   "gpu-compute.mode");
    free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pod_nvfractions),
        cmocka_unit_test(test_pod_legacy_forms),
        cmocka_unit_test(test_pod_not_fractional),
        cmocka_unit_test(test_pod_malformed_annotation),
        cmocka_unit_test(test_pod_not_a_pod),
        cmocka_unit_test(test_pod_phases),
        cmocka_unit_test(test_node_agent_annotation),
        cmocka_unit_test(test_node_annotation_errors),
        cmocka_unit_test(test_node_gfd_labels),
        cmocka_unit_test(test_node_not_a_node),
        cmocka_unit_test(test_decoded_into_model),
        cmocka_unit_test(test_pod_two_fractional_containers),
        cmocka_unit_test(test_pod_init_container_rule),
        cmocka_unit_test(test_pod_containers_that_cannot_share),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
