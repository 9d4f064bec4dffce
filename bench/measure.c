/* SPDX-License-Identifier: Apache-2.0 */
/* The measurements, parent side: start workers on both sides, turn what they
 * print into figures. Ratios are shim throughput / no-shim throughput. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "ledger.h"

static const char *const side_key[2] = {"noshim", "shim"};

void bench_put_side(bench_results *r, const char *prefix, bench_side s, int dec, double v)
{
    char key[48];
    snprintf(key, sizeof(key), "%s_%s", prefix, side_key[s]);
    bench_put_num(r, key, dec, v);
}

void bench_put_verdict(bench_results *r, const char *key, bool met)
{
    bench_put_str(r, key, met ? "met" : "missed");
}

/* ---- info ------------------------------------------------------------------ */
int bench_measure_info(const bench_env *e, bench_results *r, uint64_t *total, gf_error *err)
{
    const char *argv[] = {"info", NULL};
    bench_child c;
    char buf[160];
    uint64_t ver = 0;

    if (bench_run_worker(e, SIDE_BASE, argv, &c, err) < 0)
        return -1;
    bench_put_str(r, "device_name",
                  bench_kv(&c, "device_name", buf, sizeof(buf)) == 0 ? buf : "unknown");
    int rc = bench_kv_u64(&c, "device_total_bytes", total, err);
    if (rc == 0 && bench_kv_u64(&c, "driver_version", &ver, err) == 0)
        bench_put_u64(r, "driver_version", ver);
    bench_child_free(&c);
    if (rc < 0 || *total == 0)
        return gf_error_set(err, GF_ESTATE, "the driver reports no memory on device 0");
    bench_put_u64(r, "device_total_bytes", *total);
    return 0;
}

/* ---- alloc+free pairs, one process --------------------------------------------- */
static int pairs_side(const bench_env *e, bench_side s, const bench_plan *p, double *ns,
                      gf_error *err)
{
    char n[24], size[24], runs[24];
    const char *argv[] = {"pairs", n, size, runs, NULL};
    bench_child c;

    snprintf(n, sizeof(n), "%ld", p->pairs_n);
    snprintf(size, sizeof(size), "%llu", BENCH_PAIR_SIZE);
    snprintf(runs, sizeof(runs), "%d", p->runs);
    if (bench_run_worker(e, s, argv, &c, err) < 0)
        return -1;
    int rc = bench_kv_double(&c, "ns_per_pair", ns, err);
    bench_child_free(&c);
    return rc;
}

/* The shim side must really have counted: the fraction's peak is > 0. */
static int shim_counted(const bench_env *e, bench_results *r, gf_error *err)
{
    gf_ledger lg;
    uint64_t peak = 0;
    if (gf_ledger_open(e->ledger, &lg, err) < 0)
        return gf_error_wrap(err, "checking the bench fraction");
    for (uint32_t d = 0; d < lg.hdr->n_devices && d < GF_LEDGER_DEVICES; d++)
        peak += atomic_load(&lg.hdr->devices[d].peak);
    gf_ledger_close(&lg);
    bench_put_u64(r, "fraction_peak_bytes", peak);
    if (peak == 0)
        return gf_error_set(err, GF_ESTATE,
                            "the shim counted nothing in the bench fraction: was %s preloaded, "
                            "and did it read %s?",
                            e->shim, e->config);
    return 0;
}

int bench_measure_pairs(const bench_env *e, const bench_plan *p, bench_results *r, gf_error *err)
{
    double ns[2];
    for (int s = 0; s < 2; s++)
        if (pairs_side(e, (bench_side)s, p, &ns[s], err) < 0)
            return -1;
    if (shim_counted(e, r, err) < 0)
        return -1;
    bench_put_u64(r, "pairs_n", (uint64_t)p->pairs_n);
    bench_put_u64(r, "pairs_size_bytes", BENCH_PAIR_SIZE);
    bench_put_u64(r, "pairs_runs", (uint64_t)p->runs);
    for (int s = 0; s < 2; s++)
        bench_put_side(r, "pairs_ns", (bench_side)s, 1, ns[s]);
    bench_put_num(r, "pairs_added_ns", 1, ns[1] - ns[0]);
    bench_put_num(r, "pairs_ratio", 2, ns[0] / ns[1]);
    bench_put_verdict(r, "pairs_target", ns[1] - ns[0] <= 40.0);
    return 0;
}

/* ---- groups of workers started at once ------------------------------------------- */
void bench_group_free(group *g)
{
    if (g->go >= 0)
        close(g->go);
    g->go = -1;
    for (int i = 0; i < g->n; i++)
        bench_child_free(&g->c[i]);
    g->n = 0;
}

static int group_ready(group *g, gf_error *err)
{
    char line[64];
    for (int i = 0; i < g->n; i++) {
        if (bench_child_line(&g->c[i], line, sizeof(line), err) < 0)
            return -1;
        if (strcmp(line, "ready=1") != 0)
            return gf_error_set(err, GF_ESTATE, "a worker said '%s' instead of ready", line);
    }
    return 0;
}

/* Starts BENCH_PROCS workers and waits until each is set up and waiting. */
int bench_group_start(const bench_env *e, bench_side s, const char *const *argv, group *g,
                      gf_error *err)
{
    int go[2];
    memset(g, 0, sizeof(*g));
    g->go = -1;
    if (pipe2(go, O_CLOEXEC) < 0)
        return gf_error_sys(err, "pipe");
    g->go = go[1];
    while (g->n < BENCH_PROCS && bench_spawn(e, s, argv, go[0], &g->c[g->n], err) == 0)
        g->n++;
    close(go[0]);
    if (g->n < BENCH_PROCS || group_ready(g, err) < 0) {
        bench_group_free(g);
        return -1;
    }
    return 0;
}

int bench_group_run(group *g, gf_error *err)
{
    close(g->go);
    g->go = -1;
    for (int i = 0; i < g->n; i++)
        if (bench_child_finish(&g->c[i], err) < 0)
            return -1;
    return 0;
}

/* ---- contended pairs ---------------------------------------------------------------- */
/* Throughput over the window from the first start to the last end, and
 * CPU time per pair (what the contention costs, independent of core count). */
typedef struct contended {
    double tput, cpu_ns;
} contended;

static int contended_side(const bench_env *e, bench_side s, const bench_plan *p, contended *out,
                          gf_error *err)
{
    char n[24], size[24];
    const char *argv[] = {"contend", n, size, NULL};
    uint64_t first = UINT64_MAX, last = 0, pairs = 0, cpu = 0;
    group g;

    snprintf(n, sizeof(n), "%ld", p->contend_n);
    snprintf(size, sizeof(size), "%llu", BENCH_PAIR_SIZE);
    if (bench_group_start(e, s, argv, &g, err) < 0)
        return -1;
    int rc = bench_group_run(&g, err);
    for (int i = 0; rc == 0 && i < g.n; i++) {
        uint64_t t0, t1, k, c;
        if (bench_kv_u64(&g.c[i], "start_ns", &t0, err) < 0 ||
            bench_kv_u64(&g.c[i], "end_ns", &t1, err) < 0 ||
            bench_kv_u64(&g.c[i], "pairs", &k, err) < 0 ||
            bench_kv_u64(&g.c[i], "cpu_ns", &c, err) < 0) {
            rc = -1;
            break;
        }
        first = t0 < first ? t0 : first;
        last = t1 > last ? t1 : last;
        pairs += k;
        cpu += c;
    }
    bench_group_free(&g);
    out->tput = rc == 0 && last > first ? (double)pairs * 1e9 / (double)(last - first) : 0;
    out->cpu_ns = pairs ? (double)cpu / (double)pairs : 0;
    return rc;
}

int bench_measure_contended(const bench_env *e, const bench_plan *p, bench_results *r,
                            gf_error *err)
{
    contended c[2];
    for (int s = 0; s < 2; s++)
        if (contended_side(e, (bench_side)s, p, &c[s], err) < 0)
            return gf_error_wrap(err, "contended pairs (%s)", side_key[s]);
    bench_put_u64(r, "contended_procs", BENCH_PROCS);
    bench_put_u64(r, "contended_pairs_per_proc", (uint64_t)p->contend_n);
    for (int s = 0; s < 2; s++) {
        bench_put_side(r, "contended_pairs_per_s", (bench_side)s, 0, c[s].tput);
        bench_put_side(r, "contended_cpu_ns_per_pair", (bench_side)s, 1, c[s].cpu_ns);
    }
    bench_put_num(r, "contended_cpu_added_ns", 1, c[1].cpu_ns - c[0].cpu_ns);
    bench_put_num(r, "contended_ratio", 2, c[1].tput / c[0].tput);
    bench_put_verdict(r, "contended_target", c[1].tput / c[0].tput >= 0.85);
    return 0;
}

/* ---- 256 MiB allocation latency ---------------------------------------------------------- */
typedef struct lat {
    uint64_t *v;
    size_t n, cap;
} lat;

static int lat_take(lat *l, const bench_child *c, gf_error *err)
{
    char *line = c->out ? strstr(c->out, "lat_ns=") : NULL;
    if (!line)
        return gf_error_set(err, GF_ENOTFOUND, "a worker printed no lat_ns=");
    l->n += bench_parse_list(line + 7, l->v, l->n, l->cap);
    return 0;
}

static int big_single(const bench_env *e, bench_side s, const char *const *argv, lat *l,
                      gf_error *err)
{
    bench_child c;
    if (bench_run_worker(e, s, argv, &c, err) < 0)
        return -1;
    int rc = lat_take(l, &c, err);
    bench_child_free(&c);
    return rc;
}

static int big_group(const bench_env *e, bench_side s, const char *const *argv, lat *l,
                     gf_error *err)
{
    group g;
    if (bench_group_start(e, s, argv, &g, err) < 0)
        return -1;
    int rc = bench_group_run(&g, err);
    for (int i = 0; rc == 0 && i < g.n; i++)
        rc = lat_take(l, &g.c[i], err);
    bench_group_free(&g);
    return rc;
}

/* Fills med[2]/p99[2] (us) for one side: [0] one process, [1] eight at once. */
static int big_side(const bench_env *e, bench_side s, const bench_plan *p, double med[2],
                    double p99[2], gf_error *err)
{
    char it[24], size[24];
    const char *one[] = {"big", it, size, "0", NULL}, *many[] = {"big", it, size, "1", NULL};
    lat l = {.cap = (size_t)p->big_iters * BENCH_PROCS};

    snprintf(it, sizeof(it), "%d", p->big_iters);
    snprintf(size, sizeof(size), "%llu", BENCH_BIG_SIZE);
    if (!(l.v = calloc(l.cap, sizeof(uint64_t))))
        return gf_error_set(err, GF_ESYS, "out of memory");
    int rc = 0;
    for (int k = 0; rc == 0 && k < 2; k++) {
        l.n = 0;
        rc = k == 0 ? big_single(e, s, one, &l, err) : big_group(e, s, many, &l, err);
        bench_sort_u64(l.v, l.n);
        med[k] = (double)bench_quantile(l.v, l.n, 0.5) / 1e3;
        p99[k] = (double)bench_quantile(l.v, l.n, 0.99) / 1e3;
    }
    free(l.v);
    return rc;
}

int bench_measure_big(const bench_env *e, const bench_plan *p, bench_results *r, gf_error *err)
{
    double med[2][2], p99[2][2];
    for (int s = 0; s < 2; s++)
        if (big_side(e, (bench_side)s, p, med[s], p99[s], err) < 0)
            return gf_error_wrap(err, "256 MiB allocations (%s)", side_key[s]);
    bench_put_u64(r, "big_size_bytes", BENCH_BIG_SIZE);
    bench_put_u64(r, "big_allocs_per_proc", (uint64_t)p->big_iters);
    for (int s = 0; s < 2; s++) {
        bench_put_side(r, "big_uncontended_median_us", (bench_side)s, 3, med[s][0]);
        bench_put_side(r, "big_uncontended_p99_us", (bench_side)s, 3, p99[s][0]);
        bench_put_side(r, "big_contended_median_us", (bench_side)s, 3, med[s][1]);
        bench_put_side(r, "big_contended_p99_us", (bench_side)s, 3, p99[s][1]);
        bench_put_side(r, "big_contention_factor", (bench_side)s, 2, med[s][1] / med[s][0]);
    }
    bench_put_num(r, "big_uncontended_added_us", 3, med[1][0] - med[0][0]);
    bench_put_num(r, "big_contended_added_us", 3, med[1][1] - med[0][1]);
    bench_put_num(r, "big_contended_ratio", 2, med[0][1] / med[1][1]);
    /* as measured before on this machine: contended ~ uncontended, i.e. the shim adds no contention
     * of its own (1 us of slack for timer resolution on gpusim's sub-us calls) */
    bench_put_verdict(r, "big_target", med[1][1] <= 1.25 * med[0][1] + 1.0);
    return 0;
}

/* ---- cuLaunchKernel (not hooked) ------------------------------------------------------------ */
static int launch_side(const bench_env *e, bench_side s, const bench_plan *p, double *ns,
                       char *skip, size_t skip_len, gf_error *err)
{
    char n[24], runs[24];
    const char *argv[] = {"launch", n, runs, e->sim ? "1" : "0", NULL};
    bench_child c;

    snprintf(n, sizeof(n), "%ld", p->launch_n);
    snprintf(runs, sizeof(runs), "%d", p->runs);
    if (bench_run_worker(e, s, argv, &c, err) < 0)
        return -1;
    int rc = 0;
    if (bench_kv(&c, "skipped", skip, skip_len) < 0)
        rc = bench_kv_double(&c, "ns_per_call", ns, err);
    bench_child_free(&c);
    return rc;
}

int bench_measure_launch(const bench_env *e, const bench_plan *p, bench_results *r, gf_error *err)
{
    double ns[2] = {0, 0};
    char skip[128] = "";

    for (int s = 0; s < 2 && !skip[0]; s++)
        if (launch_side(e, (bench_side)s, p, &ns[s], skip, sizeof(skip), err) < 0)
            return gf_error_wrap(err, "cuLaunchKernel (%s)", side_key[s]);
    bench_put_u64(r, "launch_n", (uint64_t)p->launch_n);
    if (skip[0]) {
        char msg[160];
        snprintf(msg, sizeof(msg), "skipped: %s", skip);
        bench_put_str(r, "launch_status", msg);
        bench_put_str(r, "launch_ns_noshim", "skipped");
        bench_put_str(r, "launch_ns_shim", "skipped");
        bench_put_str(r, "launch_ratio", "skipped");
        bench_put_str(r, "launch_target", "skipped");
        return 0;
    }
    bench_put_str(r, "launch_status", "ok");
    for (int s = 0; s < 2; s++)
        bench_put_side(r, "launch_ns", (bench_side)s, 1, ns[s]);
    bench_put_num(r, "launch_ratio", 2, ns[0] / ns[1]);
    bench_put_verdict(r, "launch_target", ns[0] / ns[1] >= 0.95);
    return 0;
}

/* ---- start-up to first allocation ------------------------------------------------------------ */
static int startup_once(const bench_env *e, bench_side s, uint64_t *ns, gf_error *err)
{
    const char *argv[] = {"startup", NULL};
    bench_child c;
    uint64_t t1, t0 = bench_now_ns(); /* before the fork */

    if (bench_run_worker(e, s, argv, &c, err) < 0)
        return -1;
    int rc = bench_kv_u64(&c, "first_alloc_ns", &t1, err);
    bench_child_free(&c);
    *ns = t1 - t0;
    return rc;
}

int bench_measure_startup(const bench_env *e, const bench_plan *p, bench_results *r, gf_error *err)
{
    size_t n = (size_t)p->startup_runs;
    uint64_t *v[2] = {calloc(n, sizeof(uint64_t)), calloc(n, sizeof(uint64_t))};
    double med[2] = {0, 0};
    int rc = v[0] && v[1] ? 0 : gf_error_set(err, GF_ESYS, "out of memory");

    /* alternate the sides so drift (page cache, CPU clock) hits both alike */
    for (size_t i = 0; rc == 0 && i < n; i++)
        for (int s = 0; rc == 0 && s < 2; s++)
            rc = startup_once(e, (bench_side)s, &v[s][i], err);
    for (int s = 0; rc == 0 && s < 2; s++) {
        bench_sort_u64(v[s], n);
        med[s] = (double)bench_quantile(v[s], n, 0.5) / 1e6;
        bench_put_side(r, "startup_median_ms", (bench_side)s, 3, med[s]);
        bench_put_side(r, "startup_p90_ms", (bench_side)s, 3,
                       (double)bench_quantile(v[s], n, 0.9) / 1e6);
    }
    if (rc == 0) {
        bench_put_u64(r, "startup_runs", n);
        bench_put_num(r, "startup_added_ms", 3, med[1] - med[0]);
        bench_put_verdict(r, "startup_target", med[1] - med[0] <= 0.20);
    }
    free(v[0]);
    free(v[1]);
    return rc;
}
