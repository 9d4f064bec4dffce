/* SPDX-License-Identifier: Apache-2.0 */
/* Prometheus text format 0.0.4. A page is formatted from the latest
 * snapshot the loop published (metrics_snapshot.h), never from the agent's
 * state: no a->lock here, and no name service either (user names come from
 * usernames.c's cache). Every label set is rendered once per (fraction, GPU)
 * row; each metric then walks the rows, so all samples of a name stay
 * contiguous and a scrape of 1000 fractions is a few memcpy per line rather
 * than a printf. */

#include "metrics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"
#include "metrics_snapshot.h"
#include "usernames.h"
#include "version.h"

typedef struct buf {
    char *p;
    size_t len, cap;
    bool oom;
} buf;

/* Where a row's label set lies in the label arena. */
typedef struct row_labels {
    size_t at, len;
} row_labels;

typedef struct render {
    const gf_msnap *s;
    buf out, lab;
    row_labels *rows; /* one per s->rows */
} render;

static bool grow(buf *b, size_t more)
{
    size_t cap = b->cap ? b->cap : 4096;
    char *p;

    if (b->oom)
        return false;
    if (b->len + more < b->cap)
        return true;
    while (b->len + more >= cap)
        cap *= 2;
    if (!(p = realloc(b->p, cap))) {
        b->oom = true;
        return false;
    }
    b->p = p;
    b->cap = cap;
    return true;
}

static void put(buf *b, const char *s, size_t n)
{
    if (!grow(b, n))
        return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

static void puts_(buf *b, const char *s)
{
    put(b, s, strlen(s));
}

static void put_u64(buf *b, uint64_t v)
{
    char tmp[24];
    size_t i = sizeof(tmp);

    do {
        tmp[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    put(b, tmp + i, sizeof(tmp) - i);
}

/* A label value: \ " and newline escaped, as the 0.0.4 format requires. */
static void put_escaped(buf *b, const char *s)
{
    for (const char *run = s;; s++) {
        const char *esc = NULL;
        if (*s == '\\')
            esc = "\\\\";
        else if (*s == '"')
            esc = "\\\"";
        else if (*s == '\n')
            esc = "\\n";
        else if (*s)
            continue;
        put(b, run, (size_t)(s - run));
        if (!esc)
            return;
        put(b, esc, 2);
        run = s + 1;
    }
}

static void put_label(buf *b, const char *name, const char *value, bool first)
{
    if (!first)
        put(b, ",", 1);
    puts_(b, name);
    put(b, "=\"", 2);
    put_escaped(b, value);
    put(b, "\"", 1);
}

/* dcgm-exporter's GPU labels, so PromQL joins with DCGM_FI_* work. */
static void put_gpu_labels(buf *b, const render *r, const gf_msnap_gpu *g)
{
    char dev[24];

    snprintf(dev, sizeof(dev), "nvidia%d", g->index);
    put_label(b, "Hostname", r->s->host, true);
    put(b, ",gpu=\"", 6);
    put_u64(b, (uint64_t)g->index);
    put(b, "\"", 1);
    put_label(b, "UUID", g->uuid, false);
    put_label(b, "device", dev, false);
    put_label(b, "modelName", g->name, false);
}

/* A pod's fraction carries namespace/pod/container; any other its user:
 * whom its ledger was given to (the kernel's record, not the tenant's word),
 * by name once the resolver has it. Never an empty pod label: Prometheus's
 * Kubernetes discovery would fill it with the agent's own pod. */
static void put_fraction_labels(buf *b, const gf_msnap_fraction *f, const char *user, bool first)
{
    if (f->pod[0]) {
        put_label(b, "namespace", f->ns, first);
        put_label(b, "pod", f->pod, false);
        put_label(b, "container", f->container, false);
    } else {
        put_label(b, "user", user, first);
    }
    put_label(b, "fraction", f->name, false);
}

static void header(render *r, const char *name, const char *type, const char *help)
{
    buf *b = &r->out;
    put(b, "# HELP ", 7);
    puts_(b, name);
    put(b, " ", 1);
    puts_(b, help);
    put(b, "\n# TYPE ", 8);
    puts_(b, name);
    put(b, " ", 1);
    puts_(b, type);
    put(b, "\n", 1);
}

/* name{labels[,extra]} value */
static void sample(render *r, const char *name, size_t labels, size_t len, const char *extra,
                   uint64_t v)
{
    buf *b = &r->out;
    puts_(b, name);
    put(b, "{", 1);
    put(b, r->lab.p + labels, len);
    if (extra)
        puts_(b, extra);
    put(b, "} ", 2);
    put_u64(b, v);
    put(b, "\n", 1);
}

static int build_rows(render *r)
{
    const gf_msnap *s = r->s;
    char user[GF_USERNAME_MAX] = "";
    size_t last = SIZE_MAX;

    if (!(r->rows = calloc(s->n_rows ? s->n_rows : 1, sizeof(*r->rows))))
        return -1;
    for (size_t i = 0; i < s->n_rows; i++) {
        const gf_msnap_row *w = &s->rows[i];
        const gf_msnap_fraction *f = &s->fractions[w->fraction];
        if (w->fraction != last && !f->pod[0]) {
            if (f->owner_known)
                gf_username(f->owner, user, sizeof(user));
            else
                snprintf(user, sizeof(user), "unknown");
        }
        last = w->fraction;
        r->rows[i].at = r->lab.len;
        put_gpu_labels(&r->lab, r, &s->gpus[w->gpu]);
        put_fraction_labels(&r->lab, f, user, false);
        r->rows[i].len = r->lab.len - r->rows[i].at;
    }
    return r->lab.oom ? -1 : 0;
}

typedef enum fval {
    FV_REQUEST,
    FV_LIMIT,
    FV_ACCOUNTED,
    FV_DRIVER,
    FV_BURST,
    FV_DENIED,
    FV_EVICTIONS,
    FV_WATCHDOG
} fval;

static uint64_t row_value(const gf_msnap_row *w, fval v)
{
    switch (v) {
    case FV_REQUEST: return w->request;
    case FV_LIMIT: return w->limit;
    case FV_DRIVER: return w->driver;
    case FV_ACCOUNTED: return w->accounted;
    case FV_BURST: return w->burst;
    case FV_DENIED: return w->denied;
    case FV_EVICTIONS: return w->evictions; /* the agent's own */
    case FV_WATCHDOG: return w->watchdog_kills;
    }
    return 0;
}

static void fraction_rows(render *r, const char *name, const char *extra, fval v)
{
    for (size_t i = 0; i < r->s->n_rows; i++)
        sample(r, name, r->rows[i].at, r->rows[i].len, extra, row_value(&r->s->rows[i], v));
}

static void fraction_metrics(render *r)
{
    header(r, "gpufrac_fraction_memory_request_bytes", "gauge",
           "Device memory guaranteed to the fraction on the GPU.");
    fraction_rows(r, "gpufrac_fraction_memory_request_bytes", NULL, FV_REQUEST);
    header(r, "gpufrac_fraction_memory_limit_bytes", "gauge",
           "Most device memory the fraction may use on the GPU (request plus burst).");
    fraction_rows(r, "gpufrac_fraction_memory_limit_bytes", NULL, FV_LIMIT);
    header(r, "gpufrac_fraction_memory_used_bytes", "gauge",
           "Device memory the fraction uses on the GPU: source=accounted by the shim's ledger, "
           "source=driver as NVML reports for the fraction's processes (contexts included).");
    fraction_rows(r, "gpufrac_fraction_memory_used_bytes", ",source=\"accounted\"", FV_ACCOUNTED);
    fraction_rows(r, "gpufrac_fraction_memory_used_bytes", ",source=\"driver\"", FV_DRIVER);
    header(r, "gpufrac_fraction_memory_burst_bytes", "gauge",
           "Device memory above its request the fraction holds on loan from the agent.");
    fraction_rows(r, "gpufrac_fraction_memory_burst_bytes", NULL, FV_BURST);
    header(r, "gpufrac_fraction_alloc_denied_total", "counter",
           "Allocations refused because they would pass the fraction's limit.");
    fraction_rows(r, "gpufrac_fraction_alloc_denied_total", NULL, FV_DENIED);
    header(r, "gpufrac_fraction_evictions_total", "counter",
           "Processes of the fraction terminated to take burst memory back.");
    fraction_rows(r, "gpufrac_fraction_evictions_total", NULL, FV_EVICTIONS);
    header(r, "gpufrac_fraction_watchdog_kills_total", "counter",
           "Processes of the fraction the watchdog terminated because the driver reported "
           "more memory than the fraction's limit.");
    fraction_rows(r, "gpufrac_fraction_watchdog_kills_total", NULL, FV_WATCHDOG);
}

typedef enum gval { GV_TOTAL, GV_GUARANTEED, GV_USED, GV_LENT, GV_MPS_UP, GV_MPS_FAULTS } gval;

static uint64_t gpu_value(const gf_msnap_gpu *g, gval v)
{
    switch (v) {
    case GV_TOTAL: return g->total;
    case GV_GUARANTEED: return g->guaranteed;
    case GV_USED: return g->used;
    case GV_LENT: return g->lent;
    case GV_MPS_UP: return g->mps_up;
    case GV_MPS_FAULTS: return g->mps_restarts;
    }
    return 0;
}

static void gpu_metric(render *r, const char *name, const char *type, const char *help, gval v)
{
    buf *b = &r->out;

    header(r, name, type, help);
    for (int g = 0; g < r->s->n_gpus; g++) {
        puts_(b, name);
        put(b, "{", 1);
        put_gpu_labels(b, r, &r->s->gpus[g]);
        put(b, "} ", 2);
        put_u64(b, gpu_value(&r->s->gpus[g], v));
        put(b, "\n", 1);
    }
}

static void gpu_metrics(render *r)
{
    gpu_metric(r, "gpufrac_gpu_memory_total_bytes", "gauge",
               "Device memory of the GPU as NVML reports it (DCGM_FI_DEV_FB_* are in MiB).",
               GV_TOTAL);
    gpu_metric(r, "gpufrac_gpu_memory_guaranteed_bytes", "gauge",
               "Sum of the requests of the fractions on the GPU.", GV_GUARANTEED);
    gpu_metric(r, "gpufrac_gpu_memory_used_bytes", "gauge",
               "Device memory in use on the GPU as NVML reports it.", GV_USED);
    gpu_metric(r, "gpufrac_gpu_memory_lent_bytes", "gauge",
               "Burst memory of the GPU on loan to fractions.", GV_LENT);
    gpu_metric(r, "gpufrac_gpu_mps_server_up", "gauge",
               "1 when the GPU's MPS control daemon runs without a fault.", GV_MPS_UP);
    gpu_metric(r, "gpufrac_gpu_mps_faults_total", "counter",
               "MPS faults the agent recovered from by restarting the daemon.", GV_MPS_FAULTS);
}

static void agent_metric(render *r, const char *name, const char *type, const char *help,
                         uint64_t v)
{
    header(r, name, type, help);
    puts_(&r->out, name);
    put(&r->out, "{", 1);
    put_label(&r->out, "Hostname", r->s->host, true);
    put(&r->out, "} ", 2);
    put_u64(&r->out, v);
    put(&r->out, "\n", 1);
}

static void build_info(render *r)
{
    static const char name[] = "gpufrac_build_info";

    header(r, name, "gauge", "Always 1: the agent's version and the commit it was built from.");
    puts_(&r->out, name);
    put(&r->out, "{", 1);
    put_label(&r->out, "Hostname", r->s->host, true);
    put_label(&r->out, "version", GPUFRAC_VERSION, false);
    put_label(&r->out, "commit", GPUFRAC_COMMIT, false);
    put(&r->out, "} 1\n", 4);
}

static void agent_metrics(render *r)
{
    agent_metric(r, "gpufrac_agent_fractions", "gauge", "Fractions the agent watches.",
                 (uint64_t)r->s->n_fractions);
    agent_metric(r, "gpufrac_agent_requests_total", "counter",
                 "Requests the agent answered on its socket.", r->s->requests_total);
    agent_metric(r, "gpufrac_agent_bad_requests_total", "counter",
                 "Requests the agent refused as malformed or not allowed.", r->s->requests_bad);
    agent_metric(r, "gpufrac_agent_evictions_total", "counter",
                 "Borrowing processes terminated to give guaranteed memory back, all fractions "
                 "(also those gone).",
                 r->s->evictions_total);
    agent_metric(r, "gpufrac_agent_watchdog_kills_total", "counter",
                 "Processes the watchdog terminated, all fractions (also those gone).",
                 r->s->watchdog_kills_total);
    agent_metric(r, "gpufrac_agent_ticks_total", "counter",
                 "Rounds of the agent's loop (registry scan, watchdog, MPS health); one per "
                 "watchdog period while the agent is healthy.",
                 r->s->ticks);
    agent_metric(r, "gpufrac_agent_last_tick_timestamp_seconds", "gauge",
                 "Unix time of the agent's last round.", (uint64_t)r->s->last_tick);
}

/* By whom they hit, kept after the fraction is gone (metrics_idents.h). */
static void ident_metric(render *r, const char *name, const char *help, bool kills)
{
    buf *b = &r->out;
    char user[GF_USERNAME_MAX];

    header(r, name, "counter", help);
    for (size_t i = 0; i < r->s->n_idents; i++) {
        const gf_ident_count *e = &r->s->idents[i];
        puts_(b, name);
        put(b, "{", 1);
        put_label(b, "Hostname", r->s->host, true);
        if (e->id.pod) {
            put_label(b, "namespace", e->id.ns, false);
            put_label(b, "pod", e->id.pod_name, false);
            put_label(b, "container", e->id.container, false);
        } else {
            if (e->id.uid_known)
                gf_username(e->id.uid, user, sizeof(user));
            else
                snprintf(user, sizeof(user), "unknown");
            put_label(b, "user", user, false);
        }
        put(b, "} ", 2);
        put_u64(b, kills ? e->kills : e->evictions);
        put(b, "\n", 1);
    }
}

static void ident_metrics(render *r)
{
    ident_metric(r, "gpufrac_evictions_total",
                 "Borrowing processes terminated to give guaranteed memory back, by the "
                 "container or user they ran as; kept after the fraction is gone (the oldest "
                 "of more than 256 label sets dropped).",
                 false);
    ident_metric(r, "gpufrac_watchdog_kills_total",
                 "Processes the watchdog terminated, by the container or user they ran as; kept "
                 "after the fraction is gone (the oldest of more than 256 label sets dropped).",
                 true);
}

/* Every verb and reason, 0 until one is refused: increase() sees the first. */
static void refusal_metrics(render *r)
{
    static const char name[] = "gpufrac_refusals_total";
    buf *b = &r->out;

    header(r, name, "counter",
           "Requests the agent refused, by verb (other: one it does not serve) and reason "
           "(bad_request, not_caller, no_fraction, in_use, policy, fit, journal_full, other).");
    for (int v = 0; v < GF_REFUSAL_VERBS; v++)
        for (int k = 0; k < GF_REFUSAL_REASONS; k++) {
            puts_(b, name);
            put(b, "{", 1);
            put_label(b, "Hostname", r->s->host, true);
            put_label(b, "verb", gf_refusal_verb_name(v), false);
            put_label(b, "reason", gf_refusal_reason_name(k), false);
            put(b, "} ", 2);
            put_u64(b, r->s->refusals.n[v][k]);
            put(b, "\n", 1);
        }
}

#ifdef GF_TEST_HOOKS
#include "log.h"

/* GPUFRAC_TEST_METRICS_STALL=<file>: a render logs that it stalls, then
 * waits until the file exists (at most 60 s). */
static void test_stall(const gf_agent *a)
{
    const char *path = getenv("GPUFRAC_TEST_METRICS_STALL");
    struct stat st;

    if (!path || !*path || stat(path, &st) == 0)
        return;
    gf_log_write(a->log_fd, GF_LOG_INFO, "gpufracd",
                 "test hook: metrics render stalled until %s "
                 "exists",
                 path);
    for (int i = 0; i < 6000 && stat(path, &st) < 0; i++)
        usleep(10000);
}
#else
#define test_stall(a) ((void)0)
#endif

static int format(render *r)
{
    if (build_rows(r) < 0)
        return -1;
    fraction_metrics(r);
    gpu_metrics(r);
    agent_metrics(r);
    ident_metrics(r);
    refusal_metrics(r);
    build_info(r);
    return r->out.oom ? -1 : 0;
}

int gf_metrics_render(gf_agent *a, char **out, size_t *len, gf_error *err)
{
    render r = {.s = gf_msnap_acquire(a)};
    int rc;

    if (!r.s)
        return gf_error_set(err, GF_ESTATE, "no metrics snapshot published yet");
    test_stall(a);
    rc = format(&r);
    gf_msnap_release((gf_msnap *)r.s);
    free(r.rows);
    free(r.lab.p);
    if (rc < 0 || !grow(&r.out, 1)) {
        free(r.out.p);
        return gf_error_set(err, GF_ENOSPACE, "rendering metrics: out of memory");
    }
    r.out.p[r.out.len] = '\0';
    *out = r.out.p;
    *len = r.out.len;
    return 0;
}
