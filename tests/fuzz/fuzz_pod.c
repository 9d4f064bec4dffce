/* SPDX-License-Identifier: Apache-2.0 */
/* The scheduler's JSON decoders and the model behind them. The first byte
 * picks the target: 0 a v1.Pod, 1 a v1.Node, 2 the gpufrac.io/gpus value,
 * 3 GFD labels ("count\nmemory"), 4 a v1.Namespace (its GPU memory quota);
 * the rest is the input. A decoded pod is evaluated, reserved and deleted on
 * a small model, which must come back to empty GPUs; a namespace whose quota
 * could not be read takes no pod. */
#include "fuzz.h"

#include <jansson.h>

#include "decode.h"
#include "model.h"

static gf_model *model(void)
{
    static gf_model *m;
    static gf_sched_node n;
    gf_error err;
    size_t i;

    if (m != NULL)
        return m;
    FUZZ_CHECK(gf_model_new(NULL, &m, &err) == 0);
    snprintf(n.name, sizeof(n.name), "n1");
    n.ready = n.memory_known = true;
    n.source = GF_INV_AGENT;
    n.n_gpus = 4;
    for (i = 0; i < n.n_gpus; i++) {
        snprintf(n.gpus[i].id, sizeof(n.gpus[i].id), "GPU-%zu", i);
        n.gpus[i].has_uuid = true;
        n.gpus[i].index = (int)i;
        n.gpus[i].memory = (i + 1) << 30;
    }
    FUZZ_CHECK(gf_model_node_update(m, &n, &err) == 0);
    return m;
}

static void check_empty(gf_model *m)
{
    gf_model_gpu_state s[GF_SCHED_GPUS_MAX];
    gf_error err;
    size_t n = 0, i;

    FUZZ_CHECK(gf_model_node_gpus(m, "n1", s, GF_SCHED_GPUS_MAX, &n, &err) == 0);
    for (i = 0; i < n; i++)
        FUZZ_CHECK(s[i].requested == 0 && s[i].pods == 0);
}

static void run_pod(const gf_sched_pod *p)
{
    static const char *const names[] = {"n1", "unknown"};
    gf_sched_placement pl;
    gf_sched_verdict v[2];
    gf_model *m = model();
    gf_error err;
    size_t i;

    FUZZ_CHECK(gf_model_evaluate(m, p, names, 2, GF_POLICY_BINPACK, v, &err) == 0);
    for (i = 0; i < 2; i++) {
        FUZZ_CHECK(v[i].score >= 0 && v[i].score <= 10);
        FUZZ_CHECK(v[i].status == GF_FIT || v[i].reason[0] != '\0');
    }
    FUZZ_CHECK(!p->invalid || p->error[0] != '\0');
    if (gf_model_pod_update(m, p, &err) < 0)
        FUZZ_CHECK(err.msg[0] != '\0');
    if (v[0].status == GF_FIT && p->fractional &&
        gf_model_reserve(m, p, "n1", GF_POLICY_SPREAD, &pl, &err) == 0)
        FUZZ_CHECK(pl.n == (size_t)p->num_devices);
    gf_model_pod_delete(m, p->uid);
    check_empty(m);
}

static void run_ns(json_t *j)
{
    static gf_sched_ns ns;
    static const char *const names[] = {"n1"};
    gf_sched_pod *p = calloc(1, sizeof(*p));
    gf_sched_verdict v;
    gf_model *m = model();
    gf_error err;

    FUZZ_CHECK(p != NULL);
    if (gf_sched_ns_decode(j, &ns, &err) < 0) {
        FUZZ_CHECK(err.msg[0] != '\0');
        free(p);
        return;
    }
    FUZZ_CHECK(ns.error[0] == '\0' || ns.has_quota);
    FUZZ_CHECK(gf_model_ns_update(m, &ns, &err) == 0);
    snprintf(p->ns, sizeof(p->ns), "%s", ns.name);
    snprintf(p->uid, sizeof(p->uid), "fuzz-ns-pod");
    p->fractional = true;
    p->request.bytes = p->limit.bytes = 1u << 20;
    p->num_devices = 1;
    FUZZ_CHECK(gf_model_evaluate(m, p, names, 1, GF_POLICY_BINPACK, &v, &err) == 0);
    FUZZ_CHECK(ns.error[0] == '\0' || v.status != GF_FIT);
    FUZZ_CHECK(!ns.has_quota || ns.error[0] || ns.quota >= p->request.bytes || v.status != GF_FIT);
    gf_model_ns_delete(m, ns.name);
    free(p);
}

static void run_json(int target, const char *s)
{
    static gf_sched_pod pod;
    static gf_sched_node node;
    json_t *j = json_loads(s, JSON_DECODE_ANY, NULL);
    gf_error err;

    if (j == NULL)
        return;
    err.msg[0] = '\0';
    if (target == 4) {
        run_ns(j);
    } else if (target == 0) {
        if (gf_sched_pod_decode(j, NULL, &pod, &err) == 0)
            run_pod(&pod);
        else
            FUZZ_CHECK(err.msg[0] != '\0');
    } else if (gf_sched_node_decode(j, &node, &err) == 0) {
        FUZZ_CHECK(node.n_gpus <= GF_SCHED_GPUS_MAX);
        FUZZ_CHECK(node.inventory_error[0] == '\0' || node.n_gpus == 0);
    } else {
        FUZZ_CHECK(err.msg[0] != '\0');
    }
    json_decref(j);
}

static void run_inventory(int target, char *s)
{
    static gf_sched_node node;
    char *nl = strchr(s, '\n');
    gf_error err;
    int rc;

    memset(&node, 0, sizeof(node));
    if (target == 2) {
        rc = gf_sched_gpus_annotation_parse(s, "n", &node, &err);
    } else {
        if (nl != NULL)
            *nl++ = '\0';
        rc = gf_sched_gfd_labels_parse(s, nl, "n", &node, &err);
    }
    FUZZ_CHECK(node.n_gpus <= GF_SCHED_GPUS_MAX);
    FUZZ_CHECK(rc == 0 || (node.n_gpus == 0 && err.msg[0] != '\0'));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char s[FUZZ_INPUT_MAX + 1];
    int target;

    if (size < 1 || !fuzz_cstr(data + 1, size - 1, s))
        return 0;
    target = data[0] % 5;
    if (target < 2 || target == 4)
        run_json(target, s);
    else
        run_inventory(target, s);
    return 0;
}
