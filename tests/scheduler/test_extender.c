/* SPDX-License-Identifier: Apache-2.0 */
/* The extender's verbs driven with the JSON kube-scheduler sends (v1.Pod in
 * ExtenderArgs, ExtenderBindingArgs), against a real model and a fake API
 * server (function pointers); the HTTP server over a real socket; the watch
 * stream framing and the Binding body. */
#include "../unit/unit.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "decode.h"
#include "extender.h"
#include "kube.h"
#include "model.h"
#include "quantity.h"
#include "server.h"

#define GIB GF_GIB

/* --- the fake API server --- */

typedef struct fake_kube {
    pthread_mutex_t lock;
    int binds, fail_next;
    char ns[64], name[64], uid[64], node[64];
    json_t *annotations; /* of the last bind */
} fake_kube;

static int fake_bind(void *cls, const char *ns, const char *name, const char *uid, const char *node,
                     json_t *annotations, gf_error *err)
{
    fake_kube *f = cls;
    int rc = 0;

    pthread_mutex_lock(&f->lock);
    if (f->fail_next) {
        f->fail_next--;
        rc = gf_error_set(err, GF_ESTATE,
                          "the API server refused the binding (HTTP 409): pod is being deleted");
        goto out;
    }
    f->binds++;
    snprintf(f->ns, sizeof(f->ns), "%s", ns);
    snprintf(f->name, sizeof(f->name), "%s", name);
    snprintf(f->uid, sizeof(f->uid), "%s", uid ? uid : "");
    snprintf(f->node, sizeof(f->node), "%s", node);
    json_decref(f->annotations);
    f->annotations = annotations ? json_deep_copy(annotations) : NULL;
out:
    pthread_mutex_unlock(&f->lock);
    return rc;
}

static int fake_get_pod(void *cls, const char *ns, const char *name, json_t **pod, gf_error *err)
{
    (void)cls;
    (void)pod;
    return gf_error_set(err, GF_ENOTFOUND, "pods \"%s\" not found in %s", name, ns);
}

/* --- fixtures --- */

typedef struct fixture {
    gf_model *model;
    gf_extender x;
    fake_kube kube;
} fixture;

static json_t *load(const char *text)
{
    json_error_t je;
    json_t *j = json_loads(text, 0, &je);

    if (!j)
        fail_msg("test JSON: %s (%s)", je.text, text);
    return j;
}

/* A v1.Node as the API server serves it, with the agent's inventory. */
static void add_node(gf_model *m, const char *name, const char *gpus_json)
{
    char text[4096];
    gf_sched_node *node = calloc(1, sizeof(*node));
    json_t *j, *ann;
    gf_error err;

    assert_non_null(node);
    snprintf(text, sizeof(text),
             "{\"kind\":\"Node\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"%s\","
             "\"uid\":\"n-%s\",\"resourceVersion\":\"100\",\"labels\":"
             "{\"kubernetes.io/hostname\":\"%s\"},\"annotations\":{}},"
             "\"spec\":{\"podCIDR\":\"10.244.1.0/24\"},\"status\":{\"conditions\":[{\"type\":"
             "\"Ready\",\"status\":\"True\"}],\"allocatable\":{\"cpu\":\"64\"}}}",
             name, name, name);
    j = load(text);
    if (gpus_json) {
        ann = json_object_get(json_object_get(j, "metadata"), "annotations");
        json_object_set_new(ann, GF_SCHED_GPUS_ANNOTATION, json_string(gpus_json));
    }
    if (gf_sched_node_decode(j, node, &err) < 0 || gf_model_node_update(m, node, &err) < 0)
        fail_msg("%s", err.msg);
    json_decref(j);
    free(node);
}

static int setup_with(void **state, bool cdi)
{
    fixture *f = calloc(1, sizeof(*f));
    gf_ext_kube k;
    gf_error err;

    assert_non_null(f);
    pthread_mutex_init(&f->kube.lock, NULL);
    if (gf_model_new(NULL, &f->model, &err) < 0)
        fail_msg("%s", err.msg);
    k = (gf_ext_kube){.bind = fake_bind, .get_pod = fake_get_pod, .cls = &f->kube};
    if (gf_extender_init(&f->x, f->model, GF_POLICY_BINPACK, cdi, NULL, &k, &err) < 0)
        fail_msg("%s", err.msg);
    atomic_store(&f->x.synced, true); /* the informer's first lists (not run here) */
    add_node(f->model, "gpu-node-1",
             "[{\"uuid\":\"GPU-aaaaaaaa-0000-0000-0000-000000000001\",\"index\":0,"
             "\"memory\":85899345920},{\"uuid\":\"GPU-aaaaaaaa-0000-0000-0000-000000000002\","
             "\"index\":1,\"memory\":85899345920}]");
    add_node(f->model, "cpu-node-1", NULL);
    *state = f;
    return 0;
}

static int setup(void **state)
{
    return setup_with(state, false);
}

static int setup_cdi(void **state)
{
    return setup_with(state, true);
}

static int teardown(void **state)
{
    fixture *f = *state;

    gf_extender_fini(&f->x);
    gf_model_free(f->model);
    json_decref(f->kube.annotations);
    pthread_mutex_destroy(&f->kube.lock);
    free(f);
    return 0;
}

/* A v1.Pod as kube-scheduler serialises it into ExtenderArgs. */
static char *pod_json(const char *name, const char *uid, const char *annotations)
{
    char *s;

    if (asprintf(&s,
                 "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"ml\",\"uid\":\"%s\","
                 "\"resourceVersion\":\"4711\",\"creationTimestamp\":\"2026-12-01T03:00:00Z\","
                 "\"labels\":{\"app\":\"trainer\"},\"annotations\":%s,"
                 "\"managedFields\":[{\"manager\":\"kubectl-create\",\"operation\":\"Update\","
                 "\"apiVersion\":\"v1\",\"fieldsType\":\"FieldsV1\",\"fieldsV1\":{}}]},"
                 "\"spec\":{\"volumes\":[{\"name\":\"kube-api-access-x\",\"projected\":"
                 "{\"sources\":[{\"serviceAccountToken\":{\"expirationSeconds\":3607,"
                 "\"path\":\"token\"}}]}}],\"containers\":[{\"name\":\"main\",\"image\":"
                 "\"pytorch:2.4\",\"resources\":{\"requests\":{\"cpu\":\"1\"}},"
                 "\"terminationMessagePath\":\"/dev/termination-log\",\"imagePullPolicy\":"
                 "\"IfNotPresent\"},{\"name\":\"main-sidecar\",\"image\":\"busybox\","
                 "\"resources\":{}}],\"restartPolicy\":\"Always\",\"schedulerName\":"
                 "\"default-scheduler\",\"serviceAccountName\":\"default\",\"priority\":0,"
                 "\"tolerations\":[{\"key\":\"node.kubernetes.io/not-ready\",\"operator\":"
                 "\"Exists\",\"effect\":\"NoExecute\",\"tolerationSeconds\":300}]},"
                 "\"status\":{\"phase\":\"Pending\",\"conditions\":[{\"type\":\"PodScheduled\","
                 "\"status\":\"False\",\"lastProbeTime\":null,\"lastTransitionTime\":"
                 "\"2026-12-01T03:00:01Z\",\"reason\":\"Unschedulable\"}],\"qosClass\":"
                 "\"BestEffort\"}}",
                 name, uid, annotations) < 0)
        fail();
    return s;
}

static char *args_json(const char *pod, const char *node_names)
{
    char *s;

    if (asprintf(&s, "{\"Pod\":%s,\"Nodes\":null,\"NodeNames\":%s}", pod, node_names) < 0)
        fail();
    return s;
}

#define FRACTION_40G "{\"nvidia.com/container.main.gpu-memory.request\":\"40Gi\"}"
#define NODES "[\"gpu-node-1\",\"cpu-node-1\",\"ghost-node\"]"

/* Calls a verb and returns the parsed JSON answer (status checked). */
static json_t *call(int (*verb)(gf_extender *, const char *, size_t, gf_ext_reply *), fixture *f,
                    const char *body, unsigned want_status)
{
    gf_ext_reply r = {0};
    json_t *j;

    assert_int_equal(verb(&f->x, body, strlen(body), &r), 0);
    if (r.status != want_status)
        fail_msg("status %u, expected %u: %s", r.status, want_status, r.body);
    assert_string_equal(r.content_type, "application/json");
    j = load(r.body);
    gf_ext_reply_free(&r);
    return j;
}

static json_t *filter(fixture *f, const char *name, const char *uid, const char *ann,
                      const char *nodes)
{
    char *pod = pod_json(name, uid, ann), *body = args_json(pod, nodes);
    json_t *j = call(gf_ext_filter, f, body, 200);

    free(pod);
    free(body);
    return j;
}

static const char *reason(json_t *res, const char *map, const char *node)
{
    return json_string_value(json_object_get(json_object_get(res, map), node));
}

static void assert_names(json_t *res, const char *first, size_t n)
{
    json_t *names = json_object_get(res, "NodeNames");

    assert_true(json_is_array(names));
    assert_int_equal(json_array_size(names), n);
    if (n)
        assert_string_equal(json_string_value(json_array_get(names, 0)), first);
}

/* --- filter --- */

static void test_filter_non_fractional_passes_all(void **state)
{
    fixture *f = *state;
    json_t *res = filter(f, "web", "u-web", "{\"team\":\"a\"}", NODES);

    assert_names(res, "gpu-node-1", 3);
    assert_int_equal(json_object_size(json_object_get(res, "FailedNodes")), 0);
    assert_string_equal(json_string_value(json_object_get(res, "Error")), "");
    json_decref(res);
}

static void test_filter_fractional(void **state)
{
    fixture *f = *state;
    json_t *res = filter(f, "train", "u-1", FRACTION_40G, NODES);

    assert_names(res, "gpu-node-1", 1);
    assert_non_null(reason(res, "FailedNodes", "cpu-node-1"));
    assert_msg_has(reason(res, "FailedNodes", "ghost-node"), "ghost-node");
    assert_string_equal(json_string_value(json_object_get(res, "Error")), "");
    assert_int_equal(atomic_load(&f->x.metrics.filter_failures), 0);
    json_decref(res);

    /* bigger than any GPU: fits nowhere, counted */
    res = filter(f, "huge", "u-2", "{\"nvidia.com/container.main.gpu-memory.request\":\"100Gi\"}",
                 NODES);
    assert_names(res, NULL, 0);
    assert_non_null(reason(res, "FailedNodes", "gpu-node-1"));
    assert_int_equal(atomic_load(&f->x.metrics.filter_failures), 1);
    json_decref(res);
}

static json_t *do_bind(fixture *f, const char *name, const char *uid, const char *node);

/* The default answer is the one node gpufrac would choose (kube-scheduler then
 * neither scores nor calls prioritize); "fitting" answers every fitting node.
 * Nodes left out for being second best are not failures. */
static void test_filter_answers_best_or_fitting(void **state)
{
    fixture *f = *state;
    const char *both = "[\"gpu-node-2\",\"gpu-node-1\",\"cpu-node-1\"]";
    json_t *res;

    add_node(f->model, "gpu-node-2",
             "[{\"uuid\":\"GPU-bbbbbbbb-0000-0000-0000-000000000001\",\"index\":0,"
             "\"memory\":85899345920}]");
    json_decref(filter(f, "first", "u-f", FRACTION_40G, NODES));
    json_decref(do_bind(f, "first", "u-f", "gpu-node-1"));

    assert_true(f->x.filter_best);
    res = filter(f, "second", "u-s", "{\"nvidia.com/container.main.gpu-memory.request\":\"20Gi\"}",
                 both);
    assert_names(res, "gpu-node-1", 1); /* binpack: the GPU already in use */
    assert_non_null(reason(res, "FailedNodes", "cpu-node-1"));
    assert_null(reason(res, "FailedNodes", "gpu-node-2"));
    assert_int_equal(json_object_size(json_object_get(res, "FailedNodes")), 1);
    json_decref(res);

    f->x.filter_best = false;
    res = filter(f, "second", "u-s", "{\"nvidia.com/container.main.gpu-memory.request\":\"20Gi\"}",
                 both);
    assert_names(res, "gpu-node-2", 2);
    assert_string_equal(json_string_value(json_array_get(json_object_get(res, "NodeNames"), 1)),
                        "gpu-node-1");
    json_decref(res);
}

/* Pods filtered back to back before any bind (a burst): the first one's node
 * is held, so the second is sent elsewhere instead of to a bind that fails. */
static void test_filter_burst_holds(void **state)
{
    fixture *f = *state;
    const char *order = "[\"gpu-node-2\",\"gpu-node-1\"]";
    const char *half = "{\"nvidia.com/container.main.gpu-memory.request\":\"50Gi\"}";
    json_t *a, *b;

    add_node(f->model, "gpu-node-2",
             "[{\"uuid\":\"GPU-bbbbbbbb-0000-0000-0000-000000000001\",\"index\":0,"
             "\"memory\":85899345920}]");
    a = filter(f, "a", "u-a", half, order);
    b = filter(f, "b", "u-b", half, order);
    assert_names(a, "gpu-node-2", 1);
    assert_names(b, "gpu-node-1", 1);
    json_decref(a);
    json_decref(b);
    /* a filtered again (a retry) is judged anew, without its own hold:
     * binpack now prefers the node b made busy */
    a = filter(f, "a", "u-a", half, order);
    assert_names(a, "gpu-node-1", 1);
    json_decref(a);
    json_decref(do_bind(f, "a", "u-a", "gpu-node-1"));
    json_decref(do_bind(f, "b", "u-b", "gpu-node-1"));
    assert_int_equal(atomic_load(&f->x.metrics.bind_errors), 0);
    assert_int_equal(atomic_load(&f->x.metrics.placements), 2);
}

static void test_filter_malformed_annotation(void **state)
{
    fixture *f = *state;
    json_t *res = filter(f, "bad", "u-bad",
                         "{\"nvidia.com/container.main.gpu-memory.request\":\"lots\"}", NODES);
    const char *nodes[] = {"gpu-node-1", "cpu-node-1", "ghost-node"};

    assert_names(res, NULL, 0);
    for (size_t i = 0; i < 3; i++) {
        assert_msg_has(reason(res, "FailedNodes", nodes[i]),
                       "nvidia.com/container.main.gpu-memory.request", "lots");
        assert_msg_has(reason(res, "FailedAndUnresolvableNodes", nodes[i]), "lots");
    }
    json_decref(res);
}

static void test_filter_node_list_form(void **state)
{
    fixture *f = *state;
    char *pod = pod_json("train", "u-1", FRACTION_40G), *body;
    json_t *res, *items;

    if (asprintf(&body,
                 "{\"Pod\":%s,\"Nodes\":{\"kind\":\"NodeList\",\"items\":[{\"metadata\":{\"name\":"
                 "\"gpu-node-1\"}},{\"metadata\":{\"name\":\"cpu-node-1\"}}]}}",
                 pod) < 0)
        fail();
    res = call(gf_ext_filter, f, body, 200);
    items = json_object_get(json_object_get(res, "Nodes"), "items");
    assert_int_equal(json_array_size(items), 1);
    assert_string_equal(json_string_value(json_object_get(
                            json_object_get(json_array_get(items, 0), "metadata"), "name")),
                        "gpu-node-1");
    json_decref(res);
    free(body);
    free(pod);
}

static void test_malformed_requests(void **state)
{
    fixture *f = *state;
    const char *bodies[] = {"",
                            "{",
                            "[]",
                            "{\"NodeNames\":[\"a\"]}",
                            ("{\"Pod\":{\"metadata\":{\"name\":\"x\",\"uid\":\"u\"}},"
                             "\"NodeNames\":[1]}"),
                            "{\"Pod\":{\"metadata\":{\"name\":\"x\",\"uid\":\"u\"}}}",
                            "{\"Pod\":\"x\",\"NodeNames\":[]}"};
    json_t *res;

    for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
        res = call(gf_ext_filter, f, bodies[i], 400);
        assert_true(strlen(json_string_value(json_object_get(res, "Error"))) > 0);
        json_decref(res);
        res = call(gf_ext_prioritize, f, bodies[i], 400);
        json_decref(res);
    }
    res = call(gf_ext_bind, f, "{\"PodNamespace\":\"ml\",\"Node\":\"n\"}", 400);
    assert_msg_has(json_string_value(json_object_get(res, "Error")), "PodName");
    json_decref(res);
    res = call(gf_ext_bind, f, "{\"PodName\":7,\"PodNamespace\":\"ml\",\"Node\":\"n\"}", 400);
    json_decref(res);
    assert_true(atomic_load(&f->x.metrics.bad_requests) >= 16);
}

/* --- prioritize --- */

static void test_prioritize(void **state)
{
    fixture *f = *state;
    char *pod = pod_json("train", "u-1", FRACTION_40G), *body = args_json(pod, NODES);
    json_t *res = call(gf_ext_prioritize, f, body, 200), *e;
    size_t i;

    assert_true(json_is_array(res));
    assert_int_equal(json_array_size(res), 3);
    json_array_foreach(res, i, e)
    {
        json_int_t s = json_integer_value(json_object_get(e, "Score"));
        assert_true(json_is_string(json_object_get(e, "Host")));
        assert_true(s >= 0 && s <= 10);
        if (i > 0)
            assert_int_equal(s, 0);
    }
    assert_string_equal(json_string_value(json_object_get(json_array_get(res, 0), "Host")),
                        "gpu-node-1");
    json_decref(res);
    free(body);
    free(pod);
}

/* --- bind --- */

static json_t *do_bind(fixture *f, const char *name, const char *uid, const char *node)
{
    char *body;
    json_t *res;

    if (asprintf(&body,
                 "{\"PodName\":\"%s\",\"PodNamespace\":\"ml\",\"PodUID\":\"%s\",\"Node\":"
                 "\"%s\"}",
                 name, uid, node) < 0)
        fail();
    res = call(gf_ext_bind, f, body, 200);
    free(body);
    return res;
}

static uint64_t requested(fixture *f, int gpu)
{
    gf_model_gpu_state g[GF_SCHED_GPUS_MAX];
    gf_error err;
    size_t n;

    if (gf_model_node_gpus(f->model, "gpu-node-1", g, GF_SCHED_GPUS_MAX, &n, &err) < 0)
        fail_msg("%s", err.msg);
    return g[gpu].requested;
}

static const char *ann(fixture *f, const char *key)
{
    return json_string_value(json_object_get(f->kube.annotations, key));
}

static void test_bind_fraction(void **state)
{
    fixture *f = *state;
    json_t *res = filter(f, "train", "u-1", FRACTION_40G, NODES);

    json_decref(res);
    res = do_bind(f, "train", "u-1", "gpu-node-1");
    assert_string_equal(json_string_value(json_object_get(res, "Error")), "");
    json_decref(res);
    assert_int_equal(f->kube.binds, 1);
    assert_string_equal(f->kube.ns, "ml");
    assert_string_equal(f->kube.name, "train");
    assert_string_equal(f->kube.uid, "u-1");
    assert_string_equal(f->kube.node, "gpu-node-1");
    assert_string_equal(ann(f, "nvidia.com/container.main.gpus.devices"),
                        "GPU-aaaaaaaa-0000-0000-0000-000000000001");
    assert_string_equal(ann(f, "nvidia.com/container.main.gpu-memory.request"), "40960Mi");
    assert_null(ann(f, "nvidia.com/container.main.gpu-memory.limit"));
    assert_int_equal(requested(f, 0) + requested(f, 1), 40 * GIB);
    assert_int_equal(atomic_load(&f->x.metrics.placements), 1);
}

static void test_bind_portion_limit_sm_sharing(void **state)
{
    fixture *f = *state;
    json_t *res = filter(f, "mps", "u-3",
                         "{\"nvidia.com/container.main.gpu-memory.request\":\"0.25\","
                         "\"nvidia.com/container.main.gpu-memory.limit\":\"0.5\","
                         "\"nvidia.com/container.main.gpu-compute.mode\":\"sm-sharing\","
                         "\"nvidia.com/container.main.gpu-compute.portion\":\"0.3\"}",
                         NODES);

    assert_names(res, "gpu-node-1", 1);
    json_decref(res);
    res = do_bind(f, "mps", "u-3", "gpu-node-1");
    assert_string_equal(json_string_value(json_object_get(res, "Error")), "");
    json_decref(res);
    assert_string_equal(ann(f, "nvidia.com/container.main.gpu-memory.request"), "20480Mi");
    assert_string_equal(ann(f, "nvidia.com/container.main.gpu-memory.limit"), "40960Mi");
    assert_string_equal(ann(f, "nvidia.com/container.main.gpu-compute.portion"), "0.3");
}

static void test_bind_cdi(void **state)
{
    fixture *f = *state;
    json_t *res = filter(f, "train", "u-1", FRACTION_40G, NODES);

    json_decref(res);
    res = do_bind(f, "train", "u-1", "gpu-node-1");
    json_decref(res);
    assert_string_equal(
        ann(f, "nvidia.com/container.main.gpus.devices"),
        "k8s.device-plugin.nvidia.com/gpu=GPU-aaaaaaaa-0000-0000-0000-000000000001");
}

static void test_bind_non_fractional(void **state)
{
    fixture *f = *state;
    json_t *res = filter(f, "web", "u-web", "{}", NODES);

    json_decref(res);
    res = do_bind(f, "web", "u-web", "cpu-node-1");
    assert_string_equal(json_string_value(json_object_get(res, "Error")), "");
    json_decref(res);
    assert_int_equal(f->kube.binds, 1);
    assert_null(f->kube.annotations);
    assert_int_equal(atomic_load(&f->x.metrics.placements), 0);
}

static void test_bind_api_error_rolls_back(void **state)
{
    fixture *f = *state;
    json_t *res = filter(f, "train", "u-1", FRACTION_40G, NODES);

    json_decref(res);
    f->kube.fail_next = 1;
    res = do_bind(f, "train", "u-1", "gpu-node-1");
    assert_msg_has(json_string_value(json_object_get(res, "Error")), "ml/train", "409");
    json_decref(res);
    assert_int_equal(requested(f, 0) + requested(f, 1), 0);
    assert_int_equal(atomic_load(&f->x.metrics.bind_errors), 1);
    /* the retry succeeds */
    res = do_bind(f, "train", "u-1", "gpu-node-1");
    assert_string_equal(json_string_value(json_object_get(res, "Error")), "");
    json_decref(res);
    assert_int_equal(requested(f, 0) + requested(f, 1), 40 * GIB);
}

static void test_bind_unknown_pod(void **state)
{
    fixture *f = *state;
    json_t *res = do_bind(f, "nobody", "u-x", "gpu-node-1");

    assert_msg_has(json_string_value(json_object_get(res, "Error")), "nobody", "not found");
    json_decref(res);
    assert_int_equal(f->kube.binds, 0);
}

typedef struct racer {
    fixture *f;
    int i;
    bool ok;
} racer;

static void *race(void *cls)
{
    racer *r = cls;
    char name[32], uid[32], *body;
    gf_ext_reply rep = {0};
    json_t *res;

    snprintf(name, sizeof(name), "burst-%d", r->i);
    snprintf(uid, sizeof(uid), "u-burst-%d", r->i);
    if (asprintf(&body,
                 "{\"PodName\":\"%s\",\"PodNamespace\":\"ml\",\"PodUID\":\"%s\","
                 "\"Node\":\"gpu-node-1\"}",
                 name, uid) < 0)
        return NULL;
    if (gf_ext_bind(&r->f->x, body, strlen(body), &rep) == 0 &&
        (res = json_loads(rep.body, 0, NULL))) {
        r->ok = strcmp(json_string_value(json_object_get(res, "Error")), "") == 0;
        json_decref(res);
    }
    gf_ext_reply_free(&rep);
    free(body);
    return NULL;
}

/* 12 pods of 30 GiB bound at once to 2 GPUs of 80 GiB: exactly 4 fit. */
static void test_concurrent_binds_never_overpack(void **state)
{
    fixture *f = *state;
    pthread_t t[12];
    racer r[12];
    int ok = 0;

    for (int i = 0; i < 12; i++) {
        char name[32], uid[32];
        snprintf(name, sizeof(name), "burst-%d", i);
        snprintf(uid, sizeof(uid), "u-burst-%d", i);
        json_decref(filter(f, name, uid,
                           "{\"nvidia.com/container.main.gpu-memory.request\":\"30Gi\"}",
                           "[\"gpu-node-1\"]"));
    }
    for (int i = 0; i < 12; i++) {
        r[i] = (racer){f, i, false};
        assert_int_equal(pthread_create(&t[i], NULL, race, &r[i]), 0);
    }
    for (int i = 0; i < 12; i++) {
        pthread_join(t[i], NULL);
        ok += r[i].ok;
    }
    assert_int_equal(ok, 4);
    assert_int_equal(f->kube.binds, 4);
    assert_true(requested(f, 0) <= 80 * GIB && requested(f, 1) <= 80 * GIB);
    assert_int_equal(requested(f, 0) + requested(f, 1), 120 * GIB);
}

static void test_bind_args_parse(void **state)
{
    gf_ext_bind_args b;
    gf_error err;
    const char *ok = "{\"PodName\":\"p\",\"PodNamespace\":\"ns\",\"PodUID\":"
                     "\"8d7e0f4c-1a2b-4c3d-9e8f-0a1b2c3d4e5f\",\"Node\":\"n1\"}";

    (void)state;
    assert_int_equal(gf_ext_bind_args_parse(ok, strlen(ok), &b, &err), 0);
    assert_string_equal(b.name, "p");
    assert_string_equal(b.ns, "ns");
    assert_string_equal(b.uid, "8d7e0f4c-1a2b-4c3d-9e8f-0a1b2c3d4e5f");
    assert_string_equal(b.node, "n1");
    /* Go matches keys case-insensitively; PodUID may be absent */
    ok = "{\"podname\":\"p\",\"podNamespace\":\"ns\",\"node\":\"n1\"}";
    assert_int_equal(gf_ext_bind_args_parse(ok, strlen(ok), &b, &err), 0);
    assert_string_equal(b.uid, "");
    ok = "{\"PodName\":\"\",\"PodNamespace\":\"ns\",\"Node\":\"n1\"}";
    assert_int_equal(gf_ext_bind_args_parse(ok, strlen(ok), &b, &err), -1);
    assert_msg_has(err.msg, "PodName", "empty");
}

/* --- metrics and health --- */

static const char *const node_list[] = {"gpu-node-1", "cpu-node-1"};

static int names(void *cls, char ***out, size_t *n)
{
    (void)cls;
    *out = calloc(2, sizeof(char *));
    (*out)[0] = strdup(node_list[0]);
    (*out)[1] = strdup(node_list[1]);
    *n = 2;
    return 0;
}

static void test_metrics_and_health(void **state)
{
    fixture *f = *state;
    gf_ext_reply r = {0};

    f->x.node_names = names;
    json_decref(filter(f, "train", "u-1", FRACTION_40G, NODES));
    json_decref(do_bind(f, "train", "u-1", "gpu-node-1"));
    atomic_store(&f->x.synced, false);
    assert_int_equal(gf_ext_healthz(&f->x, &r), 0);
    assert_int_equal(r.status, 503);
    gf_ext_reply_free(&r);
    atomic_store(&f->x.synced, true);
    assert_int_equal(gf_ext_healthz(&f->x, &r), 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "ok\n");
    gf_ext_reply_free(&r);
    assert_int_equal(gf_ext_metrics_page(&f->x, &r), 0);
    assert_int_equal(r.status, 200);
    assert_msg_has(r.content_type, "version=0.0.4");
    assert_msg_has(r.body, "# TYPE gpufrac_scheduler_placements_total counter\n",
                   "gpufrac_scheduler_placements_total 1\n",
                   "gpufrac_scheduler_filter_failures_total 0\n",
                   "gpufrac_scheduler_bind_errors_total 0\n",
                   "gpufrac_scheduler_requests_total{verb=\"filter\"} 1\n",
                   "gpufrac_scheduler_requests_total{verb=\"prioritize\"} 0\n",
                   "gpufrac_scheduler_requests_total{verb=\"bind\"} 1\n",
                   "gpufrac_build_info{version=\"" GPUFRAC_VERSION "\",commit=\"" GPUFRAC_COMMIT
                   "\"} 1\n",
                   "gpufrac_scheduler_gpu_requested_bytes{node=\"gpu-node-1\",gpu=\"0\","
                   "UUID=\"GPU-aaaaaaaa-0000-0000-0000-000000000001\"} 42949672960\n",
                   "gpufrac_scheduler_gpu_total_bytes{node=\"gpu-node-1\",gpu=\"1\","
                   "UUID=\"GPU-aaaaaaaa-0000-0000-0000-000000000002\"} 85899345920\n");
    assert_int_equal(r.body[r.len - 1], '\n');
    gf_ext_reply_free(&r);
}

/* --- the HTTP server over a socket --- */

static size_t sink(char *p, size_t size, size_t n, void *cls)
{
    char **buf = cls;
    size_t old = *buf ? strlen(*buf) : 0;

    *buf = realloc(*buf, old + size * n + 1);
    memcpy(*buf + old, p, size * n);
    (*buf)[old + size * n] = '\0';
    return size * n;
}

static long http(const char *url, const char *body, char **out)
{
    CURL *c = curl_easy_init();
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    long status = 0;

    *out = NULL;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
    if (body)
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    assert_int_equal(curl_easy_perform(c), CURLE_OK);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return status;
}

static void test_http_server(void **state)
{
    fixture *f = *state;
    gf_server *s;
    gf_error err;
    char url[256], *out, *pod = pod_json("train", "u-1", FRACTION_40G),
                         *body = args_json(pod, NODES);

    if (gf_server_start(&s, &f->x, "127.0.0.1:0", "/gpufrac", &err) < 0)
        fail_msg("%s", err.msg);
    snprintf(url, sizeof(url), "http://%s/gpufrac/filter", gf_server_address(s));
    assert_int_equal(http(url, body, &out), 200);
    assert_msg_has(out, "\"NodeNames\":[\"gpu-node-1\"]", "\"Error\":\"\"");
    free(out);
    snprintf(url, sizeof(url), "http://%s/gpufrac/bind", gf_server_address(s));
    assert_int_equal(http(url,
                          "{\"PodName\":\"train\",\"PodNamespace\":\"ml\",\"PodUID\":"
                          "\"u-1\",\"Node\":\"gpu-node-1\"}",
                          &out),
                     200);
    assert_string_equal(out, "{\"Error\":\"\"}");
    free(out);
    assert_int_equal(http(url, "{oops", &out), 400);
    free(out);
    snprintf(url, sizeof(url), "http://%s/filter", gf_server_address(s));
    assert_int_equal(http(url, body, &out), 404);
    free(out);
    atomic_store(&f->x.synced, false);
    snprintf(url, sizeof(url), "http://%s/healthz", gf_server_address(s));
    assert_int_equal(http(url, NULL, &out), 503);
    free(out);
    snprintf(url, sizeof(url), "http://%s/metrics", gf_server_address(s));
    assert_int_equal(http(url, NULL, &out), 200);
    assert_msg_has(out, "gpufrac_scheduler_placements_total 1");
    free(out);
    gf_server_stop(s);
    free(body);
    free(pod);
}

/* --- bind answered later: a fake API server that keeps the callback --- */

typedef void (*later_fn)(void *cls, int rc, gf_error *err);

typedef struct later {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    later_fn done;
    void *cls;
} later;

static later pending = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, NULL};

static int fake_bind_later(void *cls, const char *ns, const char *name, const char *uid,
                           const char *node, json_t *annotations, later_fn done, void *done_cls,
                           gf_error *err)
{
    (void)cls, (void)ns, (void)name, (void)uid, (void)node, (void)annotations, (void)err;
    pthread_mutex_lock(&pending.lock);
    pending.done = done;
    pending.cls = done_cls;
    pthread_cond_broadcast(&pending.cond);
    pthread_mutex_unlock(&pending.lock);
    return 0;
}

/* Waits for the bind in flight and gives it the API server's outcome. */
static void answer_later(bool refused)
{
    gf_error err = {0};
    later_fn done;
    void *cls;

    pthread_mutex_lock(&pending.lock);
    while (!pending.done)
        pthread_cond_wait(&pending.cond, &pending.lock);
    done = pending.done;
    cls = pending.cls;
    pending.done = NULL;
    pthread_mutex_unlock(&pending.lock);
    if (refused)
        gf_error_set(&err, GF_ESTATE, "the API server refused the binding (HTTP 500): later");
    done(cls, refused ? -1 : 0, &err);
}

typedef struct poster {
    char url[256];
    const char *body;
    long status;
    char *out;
} poster;

static void *post_bind(void *cls)
{
    poster *p = cls;

    p->status = http(p->url, p->body, &p->out);
    return NULL;
}

static void *stop_server(void *cls)
{
    gf_server_stop(cls);
    return NULL;
}

/* The answer waits for the API server's: the GPUs stay reserved meanwhile,
 * a refusal gives them back, and stopping waits for the answer. */
static void test_http_bind_answered_later(void **state)
{
    fixture *f = *state;
    poster p = {.body = "{\"PodName\":\"train\",\"PodNamespace\":\"ml\",\"PodUID\":"
                        "\"u-1\",\"Node\":\"gpu-node-1\"}"};
    pthread_t client, stopper;
    gf_server *s;
    gf_error err;

    f->x.kube.bind_async = fake_bind_later;
    json_decref(filter(f, "train", "u-1", FRACTION_40G, NODES));
    if (gf_server_start(&s, &f->x, "127.0.0.1:0", "/", &err) < 0)
        fail_msg("%s", err.msg);
    snprintf(p.url, sizeof(p.url), "http://%s/bind", gf_server_address(s));
    /* refused after a while: reserved until then, given back after */
    assert_int_equal(pthread_create(&client, NULL, post_bind, &p), 0);
    answer_later(true);
    pthread_join(client, NULL);
    assert_int_equal(p.status, 200);
    assert_msg_has(p.out, "ml/train", "HTTP 500");
    free(p.out);
    assert_int_equal(requested(f, 0) + requested(f, 1), 0);
    assert_int_equal(atomic_load(&f->x.metrics.bind_errors), 1);
    /* made while the server stops: the answer still reaches the client */
    assert_int_equal(pthread_create(&client, NULL, post_bind, &p), 0);
    pthread_mutex_lock(&pending.lock);
    while (!pending.done)
        pthread_cond_wait(&pending.cond, &pending.lock);
    pthread_mutex_unlock(&pending.lock);
    assert_int_equal(requested(f, 0) + requested(f, 1), 40 * GIB);
    assert_int_equal(pthread_create(&stopper, NULL, stop_server, s), 0);
    answer_later(false);
    pthread_join(client, NULL);
    pthread_join(stopper, NULL);
    assert_int_equal(p.status, 200);
    assert_string_equal(p.out, "{\"Error\":\"\"}");
    free(p.out);
    assert_int_equal(atomic_load(&f->x.metrics.placements), 1);
}

/* --- watch stream framing, binding body --- */

typedef struct lines {
    char got[8][256];
    int n;
} lines;

static int on_line(void *cls, const char *line, size_t len, gf_error *err)
{
    lines *l = cls;

    (void)err;
    snprintf(l->got[l->n++], sizeof(l->got[0]), "%.*s", (int)len, line);
    return 0;
}

static void test_watch_framing(void **state)
{
    const char *stream =
        "{\"type\":\"ADDED\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"name\":\"a\","
        "\"resourceVersion\":\"11\"}}}\n"
        "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Pod\",\"metadata\":"
        "{\"resourceVersion\":\"12\"}}}\n"
        "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":"
        "\"Failure\",\"message\":\"too old resource version: 5 (12)\",\"reason\":\"Expired\","
        "\"code\":410}}\n";
    gf_linebuf lb = {0};
    lines l = {0};
    gf_error err;
    size_t len = strlen(stream);
    json_t *root, *obj;
    const char *type;
    long code;

    (void)state;
    /* fed in chunks of every size from 1 to 7 bytes */
    for (size_t chunk = 1; chunk <= 7; chunk++) {
        memset(&l, 0, sizeof(l));
        for (size_t off = 0; off < len; off += chunk)
            assert_int_equal(gf_linebuf_feed(&lb, stream + off,
                                             off + chunk > len ? len - off : chunk, on_line, &l,
                                             &err),
                             0);
        assert_int_equal(l.n, 3);
    }
    gf_linebuf_free(&lb);
    assert_int_equal(
        gf_kube_event_parse(l.got[0], strlen(l.got[0]), &root, &type, &obj, &code, &err), 0);
    assert_string_equal(type, "ADDED");
    json_decref(root);
    assert_int_equal(
        gf_kube_event_parse(l.got[2], strlen(l.got[2]), &root, &type, &obj, &code, &err), 0);
    assert_string_equal(type, "ERROR");
    assert_int_equal(code, 410);
    json_decref(root);
    assert_int_equal(gf_kube_event_parse("{\"type\":1}", 10, &root, &type, &obj, &code, &err), -1);
}

static void test_binding_body(void **state)
{
    json_t *ann = json_pack("{s:s}", "nvidia.com/container.main.gpus.devices", "GPU-1");
    json_t *b = gf_kube_binding_body("ml", "train", "u-1", "gpu-node-1", ann);
    char *s = json_dumps(b, JSON_COMPACT | JSON_SORT_KEYS);

    (void)state;
    assert_string_equal(s, "{\"apiVersion\":\"v1\",\"kind\":\"Binding\",\"metadata\":{"
                           "\"annotations\":{\"nvidia.com/container.main.gpus.devices\":"
                           "\"GPU-1\"},\"name\":\"train\",\"namespace\":\"ml\",\"uid\":\"u-1\"},"
                           "\"target\":{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"name\":"
                           "\"gpu-node-1\"}}");
    free(s);
    json_decref(b);
    json_decref(ann);
}

static void test_incluster_url(void **state)
{
    char buf[128];
    gf_error err;

    (void)state;
    setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
    setenv("KUBERNETES_SERVICE_PORT", "443", 1);
    assert_int_equal(gf_kube_incluster_url(buf, sizeof(buf), &err), 0);
    assert_string_equal(buf, "https://[fd00::1]:443");
    setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
    assert_int_equal(gf_kube_incluster_url(buf, sizeof(buf), &err), 0);
    assert_string_equal(buf, "https://10.96.0.1:443");
    unsetenv("KUBERNETES_SERVICE_HOST");
    assert_int_equal(gf_kube_incluster_url(buf, sizeof(buf), &err), -1);
    assert_msg_has(err.msg, "--api-server");
}

/* kube-scheduler 1.20 prints reasons as a format string: none carries a %. */
static void test_reasons_without_percent(void **state)
{
    fixture *f = *state;
    json_t *res = filter(f, "pct", "u-pct",
                         "{\"nvidia.com/container.main.gpu-memory.request\":\"150%\"}", NODES);
    const char *r = reason(res, "FailedNodes", "gpu-node-1");
    gf_ext_reply rep = {0};

    assert_non_null(r);
    assert_null(strchr(r, '%'));
    assert_msg_has(r, "150 percent", "50 percent");
    json_decref(res);
    assert_int_equal(gf_ext_reply_error(&rep, 200, "at 100% of 5%"), 0);
    assert_string_equal(rep.body, "{\"Error\":\"at 100 percent of 5 percent\"}");
    gf_ext_reply_free(&rep);
}

static json_t *preempt(fixture *f, const char *pod, const char *victims)
{
    char *body;
    json_t *res;

    if (asprintf(&body, "{\"Pod\":%s,\"NodeNameToVictims\":null,\"NodeNameToMetaVictims\":%s}", pod,
                 victims) < 0)
        fail();
    res = call(gf_ext_preempt, f, body, 200);
    free(body);
    return res;
}

static const char *victim(json_t *res, const char *node, size_t i)
{
    json_t *v = json_object_get(json_object_get(res, "NodeNameToMetaVictims"), node);

    return json_string_value(json_object_get(json_array_get(json_object_get(v, "Pods"), i), "UID"));
}

/* preemptVerb: a higher-priority fractional pod gets the fewest lower-priority
 * fractional pods of a node as victims; nodes where nothing helps are dropped;
 * kube-scheduler's own victims and PDB count are kept. */
static void test_preempt_verb(void **state)
{
    fixture *f = *state;
    const char *lo[3][2] = {{"lo-a", "40Gi"}, {"lo-b", "40Gi"}, {"lo-c", "80Gi"}};
    char ann[128], *pod, *hi, *p;
    json_t *res, *map;

    for (size_t i = 0; i < 3; i++) {
        snprintf(ann, sizeof(ann), "{\"nvidia.com/container.main.gpu-memory.request\":\"%s\"}",
                 lo[i][1]);
        json_decref(filter(f, lo[i][0], lo[i][0], ann, NODES));
        res = do_bind(f, lo[i][0], lo[i][0], "gpu-node-1");
        assert_string_equal(json_string_value(json_object_get(res, "Error")), "");
        json_decref(res);
    }
    pod = pod_json("hi", "u-hi", "{\"nvidia.com/container.main.gpu-memory.request\":\"80Gi\"}");
    hi = strdup(pod);
    assert_non_null(p = strstr(hi, "\"priority\":0"));
    memcpy(p, "\"priority\":9", strlen("\"priority\":9"));
    res = preempt(f, hi,
                  "{\"gpu-node-1\":{\"Pods\":[{\"UID\":\"other\"}],\"NumPDBViolations\":1},"
                  "\"cpu-node-1\":{\"Pods\":[],\"NumPDBViolations\":0}}");
    map = json_object_get(res, "NodeNameToMetaVictims");
    assert_int_equal(json_object_size(map), 1);
    assert_string_equal(victim(res, "gpu-node-1", 0), "other");
    assert_string_equal(victim(res, "gpu-node-1", 1), "lo-c"); /* one victim beats two */
    assert_null(victim(res, "gpu-node-1", 2));
    assert_int_equal(json_integer_value(
                         json_object_get(json_object_get(map, "gpu-node-1"), "NumPDBViolations")),
                     1);
    json_decref(res);
    /* same priority as the pods there: no room anywhere */
    res = preempt(f, pod, "{\"gpu-node-1\":{\"Pods\":[],\"NumPDBViolations\":0}}");
    assert_int_equal(json_object_size(json_object_get(res, "NodeNameToMetaVictims")), 0);
    json_decref(res);
    free(pod);
    free(hi);
    /* a pod without a fraction: kube-scheduler's choice back unchanged */
    pod = pod_json("plain", "u-plain", "{}");
    res = preempt(f, pod, "{\"cpu-node-1\":{\"Pods\":[{\"UID\":\"x\"}],\"NumPDBViolations\":0}}");
    assert_string_equal(victim(res, "cpu-node-1", 0), "x");
    json_decref(res);
    free(pod);
}

/* Both fractional containers (main, main-sidecar) on one GPU: each gets the
 * devices and its own request; the GPU is charged their sum. */
static void test_bind_two_fractional_containers(void **state)
{
    fixture *f = *state;
    const char *two = "{\"nvidia.com/container.main.gpu-memory.request\":\"30Gi\","
                      "\"nvidia.com/container.main-sidecar.gpu-memory.request\":\"25%\","
                      "\"nvidia.com/container.main-sidecar.gpu-memory.limit\":\"50%\"}";
    json_t *res = filter(f, "duo", "u-duo", two, NODES);

    assert_names(res, "gpu-node-1", 1);
    json_decref(res);
    res = do_bind(f, "duo", "u-duo", "gpu-node-1");
    assert_string_equal(json_string_value(json_object_get(res, "Error")), "");
    json_decref(res);
    assert_string_equal(ann(f, "nvidia.com/container.main.gpus.devices"),
                        "GPU-aaaaaaaa-0000-0000-0000-000000000001");
    assert_string_equal(ann(f, "nvidia.com/container.main-sidecar.gpus.devices"),
                        "GPU-aaaaaaaa-0000-0000-0000-000000000001");
    assert_string_equal(ann(f, "nvidia.com/container.main.gpu-memory.request"), "30720Mi");
    assert_string_equal(ann(f, "nvidia.com/container.main-sidecar.gpu-memory.request"), "20480Mi");
    assert_string_equal(ann(f, "nvidia.com/container.main-sidecar.gpu-memory.limit"), "40960Mi");
    assert_null(ann(f, "nvidia.com/container.main.gpu-memory.limit"));
    assert_int_equal(requested(f, 0), 50 * GIB);
    /* 30 GiB left on GPU 0: a third pod of 40 GiB goes to GPU 1 */
    json_decref(filter(f, "third", "u-3", FRACTION_40G, NODES));
    json_decref(do_bind(f, "third", "u-3", "gpu-node-1"));
    assert_int_equal(requested(f, 0), 50 * GIB);
    assert_int_equal(requested(f, 1), 40 * GIB);
}

static void *set_synced_later(void *arg)
{
    struct timespec ts = {0, 50 * 1000 * 1000};

    nanosleep(&ts, NULL);
    atomic_store((atomic_bool *)arg, true);
    return NULL;
}

/* Until the informer's first lists, no verb judges capacity: the model
 * does not hold the pods already bound (was: a restarted extender filtered
 * and bound against empty GPUs and over-packed them). */
static void test_verbs_refused_before_synced(void **state)
{
    fixture *f = *state;
    char *pod = pod_json("train", "u-1", FRACTION_40G), *body = args_json(pod, NODES);
    const char *bind = "{\"PodName\":\"train\",\"PodNamespace\":\"ml\",\"PodUID\":\"u-1\","
                       "\"Node\":\"gpu-node-1\"}";
    char *pre;
    pthread_t t;
    json_t *res;

    atomic_store(&f->x.synced, false);
    f->x.sync_wait_ms = 30;
    res = call(gf_ext_filter, f, body, 200);
    assert_msg_has(json_string_value(json_object_get(res, "Error")), "not synced");
    assert_null(json_object_get(res, "NodeNames"));
    json_decref(res);
    assert_int_equal(requested(f, 0), 0); /* nothing held */
    json_decref(call(gf_ext_prioritize, f, body, 503));
    res = call(gf_ext_bind, f, bind, 200);
    assert_msg_has(json_string_value(json_object_get(res, "Error")), "binding ml/train",
                   "not synced");
    json_decref(res);
    assert_int_equal(f->kube.binds, 0);
    assert_int_equal(requested(f, 0), 0);
    if (asprintf(&pre, "{\"Pod\":%s,\"NodeNameToMetaVictims\":{\"gpu-node-1\":{\"Pods\":[]}}}",
                 pod) < 0)
        fail();
    json_decref(call(gf_ext_preempt, f, pre, 503));
    free(pre);
    /* synced while a verb waits: it answers as usual */
    f->x.sync_wait_ms = 5000;
    assert_int_equal(pthread_create(&t, NULL, set_synced_later, &f->x.synced), 0);
    res = call(gf_ext_filter, f, body, 200);
    pthread_join(t, NULL);
    assert_names(res, "gpu-node-1", 1);
    assert_string_equal(json_string_value(json_object_get(res, "Error")), "");
    json_decref(res);
    res = call(gf_ext_bind, f, bind, 200);
    assert_string_equal(json_string_value(json_object_get(res, "Error")), "");
    json_decref(res);
    assert_int_equal(f->kube.binds, 1);
    free(body);
    free(pod);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_filter_non_fractional_passes_all),
        T(test_filter_fractional),
        T(test_filter_answers_best_or_fitting),
        T(test_filter_burst_holds),
        T(test_filter_malformed_annotation),
        T(test_filter_node_list_form),
        T(test_malformed_requests),
        T(test_prioritize),
        T(test_bind_fraction),
        T(test_bind_portion_limit_sm_sharing),
        cmocka_unit_test_setup_teardown(test_bind_cdi, setup_cdi, teardown),
        T(test_bind_non_fractional),
        T(test_bind_api_error_rolls_back),
        T(test_bind_unknown_pod),
        T(test_concurrent_binds_never_overpack),
        T(test_metrics_and_health),
        T(test_http_server),
        T(test_http_bind_answered_later),
        T(test_reasons_without_percent),
        T(test_preempt_verb),
        T(test_bind_two_fractional_containers),
        T(test_verbs_refused_before_synced),
        cmocka_unit_test(test_bind_args_parse),
        cmocka_unit_test(test_watch_framing),
        cmocka_unit_test(test_binding_body),
        cmocka_unit_test(test_incluster_url),
    };

    curl_global_init(CURL_GLOBAL_DEFAULT);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
