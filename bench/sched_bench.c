/* SPDX-License-Identifier: Apache-2.0 */
/* gpufrac-sched-bench: the scheduler extender's cluster model against a
 * synthetic cluster (default 5,000 nodes x 8 GPUs, 40,000 fractional pods):
 * memory, rebuild from a full list, and filter + prioritize per pod, each
 * printed beside the cost of merely parsing the same JSON in the same run.
 * Prints key=value lines: each *_target says what a figure is held to and
 * its *_verdict whether this run met it (met or missed; never asserted).
 * --quick: 500 nodes, 4,000 pods, fewer requests. */
#include <malloc.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "decode.h"
#include "extender.h"
#include "model.h"
#include "quantity.h"

#define GPUS_PER_NODE 8
#define GPU_MEMORY (80ULL * GF_GIB)

typedef struct cfg {
    size_t nodes, pods, requests;
} cfg;

typedef struct buf {
    char *s;
    size_t len, cap;
} buf;

__attribute__((format(printf, 2, 3))) static void put(buf *b, const char *fmt, ...)
{
    va_list ap;
    int n;

    for (;;) {
        va_start(ap, fmt);
        n = vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n >= 0 && (size_t)n < b->cap - b->len)
            break;
        b->cap = b->cap * 2 + (size_t)n + 4096;
        b->s = realloc(b->s, b->cap);
        if (b->s == NULL) {
            fprintf(stderr, "gpufrac-sched-bench: out of memory\n");
            exit(1);
        }
    }
    b->len += (size_t)n;
}

static double now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static size_t heap_in_use(void)
{
    return mallinfo2().uordblks;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

static double quantile(double *v, size_t n, double q)
{
    size_t i;

    qsort(v, n, sizeof(*v), cmp_double);
    i = (size_t)(q * (double)(n - 1) + 0.5);
    return n ? v[i] : 0.0;
}

/* --- the synthetic cluster as API JSON --- */

static void node_json(buf *b, size_t i)
{
    size_t g;

    put(b,
        "{\"metadata\":{\"name\":\"node-%05zu\",\"labels\":{\"kubernetes.io/hostname\":"
        "\"node-%05zu\",\"nvidia.com/gpu.count\":\"8\",\"nvidia.com/gpu.memory\":\"81920\"},"
        "\"annotations\":{\"gpufrac.io/gpus\":\"[",
        i, i);
    for (g = 0; g < GPUS_PER_NODE; g++)
        put(b,
            "%s{\\\"uuid\\\":\\\"GPU-%08zx-0000-0000-0000-%012zx\\\",\\\"index\\\":%zu,"
            "\\\"memory\\\":%llu}",
            g ? "," : "", i, g, g, (unsigned long long)GPU_MEMORY);
    put(b, "]\"}},\"spec\":{},\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":"
           "\"True\"}],\"capacity\":{\"cpu\":\"96\",\"memory\":\"1Ti\"}}}");
}

/* A pod of request gib GiB, bound to node/gpu when node >= 0. */
static void pod_json(buf *b, size_t i, unsigned gib, bool sm, long node, size_t gpu)
{
    put(b,
        "{\"metadata\":{\"name\":\"job-%zu\",\"namespace\":\"team-%zu\",\"uid\":"
        "\"%08zx-1111-2222-3333-444444444444\",\"labels\":{\"app\":\"job-%zu\"},"
        "\"annotations\":{\"nvidia.com/container.main.gpu-memory.request\":\"%uGi\","
        "\"nvidia.com/container.main.gpu-memory.limit\":\"%uGi\","
        "\"nvidia.com/container.main.gpu-compute.mode\":\"%s\"",
        i, i % 50, i, i, gib, gib * 2 > 80 ? 80 : gib * 2, sm ? "sm-sharing" : "time-slicing");
    if (node >= 0)
        put(b, ",\"nvidia.com/container.main.gpus.devices\":\"GPU-%08lx-0000-0000-0000-%012zx\"",
            node, gpu);
    if (node >= 0)
        put(b, "}},\"spec\":{\"nodeName\":\"node-%05ld\",", node);
    else
        put(b, "}},\"spec\":{");
    put(b,
        "\"containers\":[{\"name\":\"main\",\"image\":"
        "\"registry.example/ml/train:1.2.3\",\"command\":[\"python\",\"train.py\"],\"env\":["
        "{\"name\":\"EPOCHS\",\"value\":\"10\"},{\"name\":\"BATCH\",\"value\":\"64\"}],"
        "\"resources\":{\"requests\":{\"cpu\":\"4\",\"memory\":\"16Gi\"}}},{\"name\":"
        "\"sidecar\",\"image\":\"registry.example/log:1\"}]},\"status\":{\"phase\":\"%s\"}}",
        node >= 0 ? "Running" : "Pending");
}

/* Pods spread over the GPUs, several per GPU, never over the GPU's memory. */
static void cluster_json(const cfg *c, buf *nodes, buf *pods)
{
    unsigned *used = calloc(c->nodes * GPUS_PER_NODE, sizeof(*used));
    size_t i;

    put(nodes, "{\"kind\":\"NodeList\",\"items\":[");
    for (i = 0; i < c->nodes; i++) {
        put(nodes, "%s", i ? "," : "");
        node_json(nodes, i);
    }
    put(nodes, "]}");
    put(pods, "{\"kind\":\"PodList\",\"items\":[");
    for (i = 0; i < c->pods; i++) {
        unsigned gib = 2 + (unsigned)((i * 2654435761u) % 15);
        size_t g = (i * 7 + i / 13) % (c->nodes * GPUS_PER_NODE), tries = 0;

        while (used[g] + gib > 80 && tries++ < c->nodes * GPUS_PER_NODE)
            g = (g + 1) % (c->nodes * GPUS_PER_NODE);
        used[g] += gib;
        put(pods, "%s", i ? "," : "");
        pod_json(pods, i, gib, (g % 4) == 3, (long)(g / GPUS_PER_NODE), g % GPUS_PER_NODE);
    }
    put(pods, "]}");
    free(used);
}

/* --- rebuild from a full list --- */

static int load_nodes(gf_model *m, const json_t *list, gf_sched_node *n)
{
    const json_t *item;
    gf_error err;
    size_t i;

    json_array_foreach(json_object_get(list, "items"), i, item)
    {
        if (gf_sched_node_decode(item, n, &err) < 0 || gf_model_node_update(m, n, &err) < 0) {
            fprintf(stderr, "node %zu: %s\n", i, err.msg);
            return -1;
        }
    }
    return 0;
}

static int load_pods(gf_model *m, const json_t *list, gf_sched_pod *p)
{
    const json_t *item;
    gf_error err;
    size_t i;

    json_array_foreach(json_object_get(list, "items"), i, item)
    {
        if (gf_sched_pod_decode(item, NULL, p, &err) < 0 || gf_model_pod_update(m, p, &err) < 0) {
            fprintf(stderr, "pod %zu: %s\n", i, err.msg);
            return -1;
        }
    }
    return 0;
}

static int rebuild(gf_model *m, const buf *nodes, const buf *pods, double *parse_ms,
                   double *total_ms)
{
    static gf_sched_node n;
    static gf_sched_pod p;
    double t0 = now_us(), t1, t2;
    json_t *jn = json_loadb(nodes->s, nodes->len, 0, NULL);
    json_t *jp = json_loadb(pods->s, pods->len, 0, NULL);
    int rc = -1;

    t1 = now_us();
    if (jn == NULL || jp == NULL)
        goto out;
    gf_model_resync_begin(m, GF_MODEL_NODES);
    if (load_nodes(m, jn, &n) < 0)
        goto out;
    gf_model_resync_end(m, GF_MODEL_NODES);
    gf_model_resync_begin(m, GF_MODEL_PODS);
    if (load_pods(m, jp, &p) < 0)
        goto out;
    gf_model_resync_end(m, GF_MODEL_PODS);
    rc = 0;
out:
    json_decref(jn);
    json_decref(jp);
    t2 = now_us();
    *parse_ms = (t1 - t0) / 1e3;
    *total_ms = (t2 - t0) / 1e3;
    return rc;
}

/* --- filter + prioritize --- */

typedef struct req_times {
    double *parse, *model, *total;
    size_t fits;
} req_times;

/* One extender call: parse the body as the extender does, decode the pod,
 * evaluate every node. */
static int one_call(gf_model *m, const buf *body, gf_sched_verdict *v, double *parse_us,
                    double *model_us, size_t *fits)
{
    static gf_sched_pod pod;
    double t0 = now_us(), t1;
    gf_ext_args a;
    gf_error err;
    int prc = gf_ext_args_parse(body->s, body->len, &a, &err), rc = -1;

    t1 = now_us();
    if (prc < 0)
        goto out;
    if (gf_sched_pod_decode(a.pod, NULL, &pod, &err) < 0 ||
        gf_model_evaluate(m, &pod, a.names, a.n, GF_POLICY_BINPACK, v, &err) < 0)
        goto out_args;
    *fits = 0;
    for (size_t i = 0; i < a.n; i++)
        *fits += v[i].status == GF_FIT;
    rc = 0;
out_args:
    gf_ext_args_free(&a);
out:
    *model_us = now_us() - t1;
    *parse_us = t1 - t0;
    return rc;
}

/* Rewrites the pod's request and limit in b into portions ("0.05".."0.30"). */
static void portion_form(buf *b, size_t k)
{
    static const char *const keys[] = {"gpu-memory.request\":\"", "gpu-memory.limit\":\""};
    char v[8];
    size_t i;

    snprintf(v, sizeof(v), "0.%02zu", 5 + k % 26);
    put(b, "%16s", ""); /* room to grow in place */
    b->len -= 16;
    b->s[b->len] = '\0';
    for (i = 0; i < 2; i++) {
        char *at = strstr(b->s, keys[i]), *end;

        if (at == NULL)
            continue;
        at += strlen(keys[i]);
        end = strchr(at, '"');
        memmove(at + strlen(v), end, strlen(end) + 1);
        memcpy(at, v, strlen(v));
        b->len = strlen(b->s);
    }
}

static void request_body(buf *b, const cfg *c, size_t k)
{
    size_t i;

    b->len = 0;
    put(b, "{\"Pod\":");
    pod_json(b, 1000000 + k, 1 + (unsigned)(k % 24), k % 5 == 4, -1, 0);
    if (k % 3 == 0) /* a third ask for a portion instead of a size */
        portion_form(b, k);
    put(b, ",\"NodeNames\":[");
    for (i = 0; i < c->nodes; i++)
        put(b, "%s\"node-%05zu\"", i ? "," : "", i);
    put(b, "]}");
}

static int requests(gf_model *m, const cfg *c, req_times *t)
{
    gf_sched_verdict *v = calloc(c->nodes, sizeof(*v));
    buf body = {0};
    size_t k, fits = 0;
    int rc = -1;

    if (v == NULL)
        goto out;
    for (k = 0; k < c->requests; k++) {
        double p1, m1, p2, m2;

        request_body(&body, c, k);
        /* kube-scheduler sends the same body to filter, then to prioritize */
        if (one_call(m, &body, v, &p1, &m1, &fits) < 0 ||
            one_call(m, &body, v, &p2, &m2, &fits) < 0)
            goto out;
        t->parse[k] = p1 + p2;
        t->model[k] = m1 + m2;
        t->total[k] = p1 + p2 + m1 + m2;
        t->fits += fits;
    }
    rc = 0;
out:
    free(body.s);
    free(v);
    return rc;
}

/* --- report --- */

static const char *verdict(bool met)
{
    return met ? "met" : "missed";
}

static void print_times(const char *key, double *v, size_t n)
{
    printf("%s_p50_us=%.1f\n", key, quantile(v, n, 0.50));
    printf("%s_p99_us=%.1f\n", key, quantile(v, n, 0.99));
}

static int run(const cfg *c)
{
    buf nodes = {0}, pods = {0};
    req_times t = {0};
    gf_model_stats st;
    gf_model *m = NULL;
    gf_error err;
    double parse_ms, total_ms, parse2_ms, total2_ms;
    size_t heap0;
    int rc = 1;

    cluster_json(c, &nodes, &pods);
    heap0 = heap_in_use();
    if (gf_model_new(NULL, &m, &err) < 0 || rebuild(m, &nodes, &pods, &parse_ms, &total_ms) < 0)
        goto out;
    gf_model_stats_get(m, &st);
    printf("nodes=%zu\ngpus=%zu\npods=%zu\n", st.nodes, st.gpus, st.pods);
    printf("nodes_json_bytes=%zu\npods_json_bytes=%zu\n", nodes.len, pods.len);
    printf("model_bytes=%zu\nmodel_heap_bytes=%zu\n", st.memory_bytes, heap_in_use() - heap0);
    printf("memory_target=model under 64 MiB at 5000 nodes x 8 GPUs, 40000 pods\n");
    printf("memory_verdict=%s\n", verdict(st.memory_bytes < 64 * GF_MIB));
    printf("rebuild_parse_ms=%.1f\nrebuild_ms=%.1f\n", parse_ms, total_ms);
    /* the same list again over the live model (a re-list after a 410) */
    if (rebuild(m, &nodes, &pods, &parse2_ms, &total2_ms) < 0)
        goto out;
    printf("relist_parse_ms=%.1f\nrelist_ms=%.1f\n", parse2_ms, total2_ms);
    printf("rebuild_target=rebuild_ms under 2000\n");
    printf("rebuild_verdict=%s\n", verdict(total_ms < 2000.0));
    t.parse = calloc(c->requests, sizeof(double));
    t.model = calloc(c->requests, sizeof(double));
    t.total = calloc(c->requests, sizeof(double));
    if (t.parse == NULL || t.model == NULL || t.total == NULL || requests(m, c, &t) < 0)
        goto out;
    printf("fp_requests=%zu\nfp_nodes_per_request=%zu\nfp_fitting_nodes_avg=%.1f\n", c->requests,
           c->nodes, (double)t.fits / (double)c->requests);
    print_times("fp_parse", t.parse, c->requests);
    print_times("fp_model", t.model, c->requests);
    double p50 = quantile(t.model, c->requests, 0.50), p99 = quantile(t.model, c->requests, 0.99);
    print_times("fp_total", t.total, c->requests);
    printf("fp_target=fp_model p50 under 1000 us, p99 under 5000 us (filter + prioritize)\n");
    printf("fp_verdict=%s\n", verdict(p50 < 1000.0 && p99 < 5000.0));
    rc = 0;
out:
    if (rc != 0)
        fprintf(stderr, "gpufrac-sched-bench: failed%s%s\n", m ? "" : ": ", m ? "" : err.msg);
    free(t.parse), free(t.model), free(t.total);
    free(nodes.s), free(pods.s);
    gf_model_free(m);
    return rc;
}

int main(int argc, char **argv)
{
    cfg c = {5000, 40000, 400};

    if (argc > 1 && strcmp(argv[1], "--quick") == 0) {
        c = (cfg){500, 4000, 40};
    } else if (argc > 1) {
        fprintf(stderr, "usage: gpufrac-sched-bench [--quick]\n");
        return 2;
    }
    printf("quick=%d\n", c.nodes != 5000);
    return run(&c);
}
