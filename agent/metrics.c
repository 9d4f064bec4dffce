/* Prometheus text format 0.0.4 (DESIGN 3.6). Every label set is rendered
 * once per (fraction, GPU) row; each metric then walks the rows, so all
 * samples of a name stay contiguous and a scrape of 1000 fractions is a few
 * memcpy per line rather than a printf. */
#include <pwd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"

typedef struct buf {
    char *p;
    size_t len, cap;
    bool oom;
} buf;

/* One (fraction, GPU) pair; labels point into the label arena. */
typedef struct row {
    const gf_afraction *f;
    const gf_gpu *gpu;
    const gf_config_device *cd;
    const gf_ledger_device *ld; /* NULL: no process used the GPU yet */
    size_t labels, labels_len;
} row;

typedef struct render {
    gf_agent *a;
    char host[256];
    uid_t cached_uid;
    char cached_user[64];
    buf out, lab;
    row *rows;
    size_t n_rows;
    size_t *flabels, *flabels_len; /* per fraction: labels without gpu/UUID */
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
static void put_gpu_labels(buf *b, const render *r, const gf_gpu *g)
{
    char dev[24];

    snprintf(dev, sizeof(dev), "nvidia%d", g->index);
    put_label(b, "Hostname", r->host, true);
    put(b, ",gpu=\"", 6);
    put_u64(b, (uint64_t)g->index);
    put(b, "\"", 1);
    put_label(b, "UUID", g->uuid, false);
    put_label(b, "device", dev, false);
    put_label(b, "modelName", g->name, false);
}

/* Who owns a fraction outside Kubernetes: whom its ledger was given to (the
 * kernel's record, not the tenant's word). */
static const char *owner_of(render *r, const gf_afraction *f)
{
    struct passwd pw, *res = NULL;
    char pwbuf[1024];

    if (f->ledger_fd < 0)
        return "unknown";
    if (f->owner == r->cached_uid && r->cached_user[0])
        return r->cached_user;
    r->cached_uid = f->owner;
    if (getpwuid_r(f->owner, &pw, pwbuf, sizeof(pwbuf), &res) == 0 && res)
        snprintf(r->cached_user, sizeof(r->cached_user), "%s", pw.pw_name);
    else
        snprintf(r->cached_user, sizeof(r->cached_user), "%u", (unsigned)f->owner);
    return r->cached_user;
}

/* A pod's fraction carries namespace/pod/container; any other its user.
 * Never an empty pod label: Prometheus's Kubernetes discovery would fill it
 * with the agent's own pod. */
static void put_fraction_labels(buf *b, render *r, const gf_afraction *f, bool first)
{
    if (f->pod[0]) {
        put_label(b, "namespace", f->ns, first);
        put_label(b, "pod", f->pod, false);
        put_label(b, "container", f->container, false);
    } else {
        put_label(b, "user", owner_of(r, f), first);
    }
    put_label(b, "fraction", f->cfg.name, false);
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

static const gf_ledger_device *ledger_device(const gf_afraction *f, int gpu)
{
    /* the agent's private copy (ledger_view.h), its lent/evictions the agent's own */
    return gf_fraction_ledger_device(f, gpu, true, NULL);
}

static int build_rows(render *r)
{
    gf_agent *a = r->a;
    size_t max = (size_t)a->n_fractions * (size_t)(a->n_gpus ? a->n_gpus : 1);

    r->rows = calloc(max ? max : 1, sizeof(*r->rows));
    r->flabels = calloc((size_t)a->n_fractions + 1, sizeof(size_t));
    r->flabels_len = calloc((size_t)a->n_fractions + 1, sizeof(size_t));
    if (!r->rows || !r->flabels || !r->flabels_len)
        return -1;
    for (int i = 0; i < a->n_fractions; i++) {
        const gf_afraction *f = &a->fractions[i];
        r->flabels[i] = r->lab.len;
        put_fraction_labels(&r->lab, r, f, true);
        r->flabels_len[i] = r->lab.len - r->flabels[i];
        for (int g = 0; g < a->n_gpus; g++) {
            const gf_config_device *cd = gf_aconfig_device(&f->cfg, a->gpus[g].uuid);
            row *w;
            if (!cd)
                continue;
            w = &r->rows[r->n_rows++];
            *w = (row){.f = f, .gpu = &a->gpus[g], .cd = cd,
                       .ld = ledger_device(f, g), .labels = r->lab.len};
            put_gpu_labels(&r->lab, r, w->gpu);
            put_fraction_labels(&r->lab, r, f, false);
            w->labels_len = r->lab.len - w->labels;
        }
    }
    return r->lab.oom ? -1 : 0;
}

typedef enum fval {
    FV_REQUEST, FV_LIMIT, FV_ACCOUNTED, FV_DRIVER, FV_BURST, FV_DENIED, FV_EVICTIONS,
    FV_WATCHDOG
} fval;

static uint64_t row_value(const row *w, fval v)
{
    const gf_ledger_device *ld = w->ld;

    switch (v) {
    case FV_REQUEST: return w->cd->request;
    case FV_LIMIT: return w->cd->limit;
    case FV_DRIVER: return w->f->driver_used[w->cd - w->f->cfg.devices];
    case FV_ACCOUNTED: return ld ? atomic_load(&ld->used) : 0;
    case FV_BURST: return ld ? atomic_load(&ld->lent) : 0;
    case FV_DENIED: return ld ? atomic_load(&ld->denied) : 0;
    case FV_EVICTIONS: return w->f->evictions[w->cd - w->f->cfg.devices]; /* the agent's own */
    case FV_WATCHDOG:
        /* one GPU: the fraction's journaled count, which survives restarts;
         * several: the agent's own per-GPU count since it started */
        return w->f->cfg.n_devices == 1 ? w->f->watchdog_kills
                                        : w->f->watchdog_kills_gpu[w->cd - w->f->cfg.devices];
    }
    return 0;
}

static void fraction_rows(render *r, const char *name, const char *extra, fval v)
{
    for (size_t i = 0; i < r->n_rows; i++)
        sample(r, name, r->rows[i].labels, r->rows[i].labels_len, extra, row_value(&r->rows[i], v));
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

static uint64_t gpu_value(const gf_gpu *g, gval v)
{
    switch (v) {
    case GV_TOTAL: return g->total;
    case GV_GUARANTEED: return g->guaranteed;
    case GV_USED: return g->used;
    case GV_LENT: return g->lent;
    case GV_MPS_UP: return g->mps_running && !g->mps_fault;
    case GV_MPS_FAULTS: return g->mps_restarts;
    }
    return 0;
}

static void gpu_metric(render *r, const char *name, const char *type, const char *help, gval v)
{
    buf *b = &r->out;

    header(r, name, type, help);
    for (int g = 0; g < r->a->n_gpus; g++) {
        puts_(b, name);
        put(b, "{", 1);
        put_gpu_labels(b, r, &r->a->gpus[g]);
        put(b, "} ", 2);
        put_u64(b, gpu_value(&r->a->gpus[g], v));
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
    put_label(&r->out, "Hostname", r->host, true);
    put(&r->out, "} ", 2);
    put_u64(&r->out, v);
    put(&r->out, "\n", 1);
}

static void agent_metrics(render *r)
{
    agent_metric(r, "gpufrac_agent_fractions", "gauge", "Fractions the agent watches.",
                 (uint64_t)r->a->n_fractions);
    agent_metric(r, "gpufrac_agent_requests_total", "counter",
                 "Requests the agent answered on its socket.", r->a->requests_total);
    agent_metric(r, "gpufrac_agent_bad_requests_total", "counter",
                 "Requests the agent refused as malformed or not allowed.", r->a->requests_bad);
    agent_metric(r, "gpufrac_agent_evictions_total", "counter",
                 "Borrowing processes terminated to give guaranteed memory back, all fractions "
                 "(also those gone).",
                 r->a->evictions_total);
    agent_metric(r, "gpufrac_agent_watchdog_kills_total", "counter",
                 "Processes the watchdog terminated, all fractions (also those gone).",
                 r->a->watchdog_kills_total);
    agent_metric(r, "gpufrac_agent_ticks_total", "counter",
                 "Rounds of the agent's loop (registry scan, watchdog, MPS health); one per "
                 "watchdog period while the agent is healthy.",
                 r->a->ticks);
    agent_metric(r, "gpufrac_agent_last_tick_timestamp_seconds", "gauge",
                 "Unix time of the agent's last round.", (uint64_t)r->a->last_tick);
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
    gf_log_write(a->log_fd, GF_LOG_INFO, "gpufracd", "test hook: metrics render stalled until %s "
                 "exists", path);
    for (int i = 0; i < 6000 && stat(path, &st) < 0; i++)
        usleep(10000);
}
#else
#define test_stall(a) ((void)0)
#endif

static int render_locked(render *r)
{
    test_stall(r->a);
    if (build_rows(r) < 0)
        return -1;
    fraction_metrics(r);
    gpu_metrics(r);
    agent_metrics(r);
    return r->out.oom ? -1 : 0;
}

int gf_metrics_render(gf_agent *a, char **out, size_t *len, gf_error *err)
{
    render r = {.a = a, .cached_uid = (uid_t)-1};
    int rc;

    /* dcgm-exporter's Hostname: the node's name where the agent publishes one */
    if (a->node_name[0])
        snprintf(r.host, sizeof(r.host), "%s", a->node_name);
    else if (gethostname(r.host, sizeof(r.host) - 1) < 0)
        snprintf(r.host, sizeof(r.host), "unknown");

    pthread_mutex_lock(&a->lock);
    rc = render_locked(&r);
    pthread_mutex_unlock(&a->lock);
    free(r.rows);
    free(r.flabels);
    free(r.flabels_len);
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
