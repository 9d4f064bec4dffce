/* SPDX-License-Identifier: Apache-2.0 */
/* The extender's /metrics page (Prometheus text 0.0.4) and /healthz. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "extender.h"
#include "version.h"

#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

typedef struct node_gpus {
    char *name;
    size_t n;
    gf_model_gpu_state gpus[GF_SCHED_GPUS_MAX];
} node_gpus;

static void label(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\' || *s == '"')
            fprintf(f, "\\%c", *s);
        else if (*s == '\n')
            fputs("\\n", f);
        else
            fputc(*s, f);
    }
}

static void counter(FILE *f, const char *name, const char *help, uint64_t v)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s counter\n%s %" PRIu64 "\n", name, help, name, name, v);
}

static void build_info(FILE *f)
{
    fputs("# HELP gpufrac_build_info Always 1: the extender's version and the commit it was "
          "built from.\n# TYPE gpufrac_build_info gauge\ngpufrac_build_info{version=\"",
          f);
    label(f, GPUFRAC_VERSION);
    fputs("\",commit=\"", f);
    label(f, GPUFRAC_COMMIT);
    fputs("\"} 1\n", f);
}

static void requests(FILE *f, gf_extender *x)
{
    static const char *const verb[GF_EXT_VERBS] = {"filter", "prioritize", "bind", "preempt"};

    fputs("# HELP gpufrac_scheduler_requests_total Extender calls by verb.\n"
          "# TYPE gpufrac_scheduler_requests_total counter\n",
          f);
    for (int i = 0; i < GF_EXT_VERBS; i++)
        fprintf(f, "gpufrac_scheduler_requests_total{verb=\"%s\"} %" PRIu64 "\n", verb[i],
                atomic_load(&x->metrics.requests[i]));
}

static void gpu_family(FILE *f, const char *name, const char *help, const node_gpus *ng, size_t n,
                       int which)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name);
    for (size_t i = 0; i < n; i++) {
        for (size_t g = 0; g < ng[i].n; g++) {
            const gf_model_gpu_state *s = &ng[i].gpus[g];
            bool uuid = strncmp(s->id, "GPU-", 4) == 0 || strncmp(s->id, "MIG-", 4) == 0;
            uint64_t v = which == 0   ? s->requested
                         : which == 1 ? s->total
                         : which == 2 ? s->pods
                                      : (uint64_t)!s->closed;
            fprintf(f, "%s{node=\"", name);
            label(f, ng[i].name);
            fprintf(f, "\",gpu=\"%d\",UUID=\"", s->index);
            label(f, uuid ? s->id : "");
            fprintf(f, "\"} %" PRIu64 "\n", v);
        }
    }
}

/* Every known node's GPU accounting, one snapshot per node. */
static node_gpus *collect(gf_extender *x, size_t *count)
{
    char **names = NULL;
    size_t n = 0, kept = 0;
    node_gpus *ng = NULL;
    gf_error err;

    *count = 0;
    if (!x->node_names || x->node_names(x->node_names_cls, &names, &n) < 0 || n == 0)
        goto out;
    if (!(ng = calloc(n, sizeof(*ng))))
        goto out;
    for (size_t i = 0; i < n; i++) {
        if (gf_model_node_gpus(x->model, names[i], ng[kept].gpus, GF_SCHED_GPUS_MAX, &ng[kept].n,
                               &err) < 0)
            continue;
        if (ng[kept].n > GF_SCHED_GPUS_MAX)
            ng[kept].n = GF_SCHED_GPUS_MAX;
        ng[kept].name = names[i];
        names[i] = NULL;
        kept++;
    }
    *count = kept;
out:
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return ng;
}

static void reservations(FILE *f, gf_extender *x)
{
    size_t holding, pending;

    gf_reserver_counts(x->reserver, &holding, &pending);
    fprintf(f,
            "# HELP gpufrac_scheduler_reservations Reservation pods holding a device-plugin GPU "
            "for fractions, and those not holding one yet.\n"
            "# TYPE gpufrac_scheduler_reservations gauge\n"
            "gpufrac_scheduler_reservations{state=\"holding\"} %zu\n"
            "gpufrac_scheduler_reservations{state=\"pending\"} %zu\n",
            holding, pending);
}

#define QUOTAS_SHOWN 1000

/* Every namespace with a quota annotation: the quota, what its fractional
 * pods request, and whether the annotation could be read. */
static void quotas(FILE *f, gf_extender *x)
{
    gf_model_quota *q = calloc(QUOTAS_SHOWN, sizeof(*q));
    size_t n = q ? gf_model_quotas(x->model, q, QUOTAS_SHOWN) : 0;
    static const char *const fam[3][2] = {
        {"gpufrac_scheduler_namespace_memory_quota_bytes",
         "A namespace's GPU memory quota (annotation gpufrac.io/memory-quota)."},
        {"gpufrac_scheduler_namespace_memory_requested_bytes",
         "GPU memory requested by a namespace's placed fractional pods."},
        {"gpufrac_scheduler_namespace_quota_valid",
         "0 when the quota annotation cannot be read: the namespace gets no fractional pods."}};

    n = n < QUOTAS_SHOWN ? n : QUOTAS_SHOWN;
    for (int k = 0; k < 3; k++) {
        fprintf(f, "# HELP %s %s\n# TYPE %s gauge\n", fam[k][0], fam[k][1], fam[k][0]);
        for (size_t i = 0; i < n; i++) {
            uint64_t v = k == 0 ? q[i].quota : k == 1 ? q[i].used : (uint64_t)q[i].valid;
            fprintf(f, "%s{namespace=\"", fam[k][0]);
            label(f, q[i].name);
            fprintf(f, "\"} %" PRIu64 "\n", v);
        }
    }
    free(q);
}

static void render(gf_extender *x, FILE *f, const node_gpus *ng, size_t n)
{
    gf_model_stats st;

    gf_model_stats_get(x->model, &st);
    counter(f, "gpufrac_scheduler_placements_total", "Fractional pods bound to GPUs.",
            atomic_load(&x->metrics.placements));
    counter(f, "gpufrac_scheduler_binds_total", "Pods bound (fractional or not).",
            atomic_load(&x->metrics.binds));
    counter(f, "gpufrac_scheduler_filter_failures_total",
            "Filter calls in which a fractional pod fit none of the nodes offered.",
            atomic_load(&x->metrics.filter_failures));
    counter(f, "gpufrac_scheduler_bind_errors_total",
            "Bind calls answered with an error (no fit, API server refusal).",
            atomic_load(&x->metrics.bind_errors));
    requests(f, x);
    build_info(f);
    counter(f, "gpufrac_scheduler_bad_requests_total", "Requests refused as malformed (HTTP 400).",
            atomic_load(&x->metrics.bad_requests));
    if (x->kube.connections)
        counter(f, "gpufrac_scheduler_api_connections_total",
                "Connections opened to the API server (watches' included).",
                x->kube.connections(x->kube.cls));
    fprintf(f,
            "# HELP gpufrac_scheduler_synced Whether the cache holds a full list of nodes "
            "and pods.\n# TYPE gpufrac_scheduler_synced gauge\ngpufrac_scheduler_synced %d\n",
            atomic_load(&x->synced) ? 1 : 0);
    fprintf(f,
            "# HELP gpufrac_scheduler_pods Fractional pods in the cache by state.\n"
            "# TYPE gpufrac_scheduler_pods gauge\n"
            "gpufrac_scheduler_pods{state=\"placed\"} %zu\n"
            "gpufrac_scheduler_pods{state=\"assumed\"} %zu\n"
            "gpufrac_scheduler_pods{state=\"pending\"} %zu\n",
            st.pods - st.assumed, st.assumed, st.pending);
    gpu_family(f, "gpufrac_scheduler_gpu_requested_bytes",
               "Memory requested by the fractions placed on a GPU, in bytes.", ng, n, 0);
    gpu_family(f, "gpufrac_scheduler_gpu_total_bytes", "A GPU's memory, in bytes.", ng, n, 1);
    gpu_family(f, "gpufrac_scheduler_gpu_pods", "Fractional pods placed on a GPU.", ng, n, 2);
    gpu_family(f, "gpufrac_scheduler_gpu_open",
               "1 when a GPU takes fractions: no device plugin on its node, or a reservation "
               "pod holds it.",
               ng, n, 3);
    reservations(f, x);
    quotas(f, x);
    fprintf(f,
            "# HELP gpufrac_scheduler_filter_cache_pods Pods filter saw whose bind has not come "
            "(freed at bind or when the pod is deleted).\n"
            "# TYPE gpufrac_scheduler_filter_cache_pods gauge\n"
            "gpufrac_scheduler_filter_cache_pods %zu\n",
            gf_ext_cache_count(&x->cache));
}

int gf_ext_metrics_page(gf_extender *x, gf_ext_reply *r)
{
    char *buf = NULL;
    size_t len = 0, n = 0;
    node_gpus *ng = collect(x, &n);
    FILE *f = open_memstream(&buf, &len);

    if (!f) {
        free(ng);
        return gf_ext_reply_text(r, 500, "text/plain", "out of memory\n");
    }
    render(x, f, ng, n);
    for (size_t i = 0; i < n; i++)
        free(ng[i].name);
    free(ng);
    if (fclose(f) != 0) {
        free(buf);
        return gf_ext_reply_text(r, 500, "text/plain", "out of memory\n");
    }
    r->status = 200;
    r->body = buf;
    r->len = len;
    r->content_type = CONTENT_TYPE;
    return 0;
}

int gf_ext_healthz(gf_extender *x, gf_ext_reply *r)
{
    if (atomic_load(&x->synced))
        return gf_ext_reply_text(r, 200, "text/plain; charset=utf-8", "ok\n");
    return gf_ext_reply_text(r, 503, "text/plain; charset=utf-8",
                             "not synced: the node and pod lists are not loaded yet\n");
}
