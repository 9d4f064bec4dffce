/* SPDX-License-Identifier: Apache-2.0 */
/* Results: an ordered list of key=value figures, printed as a table for
 * people, as key=value lines for scripts, and as JSON on request. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

static bench_key *slot(bench_results *r, const char *key)
{
    for (size_t i = 0; i < r->n; i++)
        if (strcmp(r->keys[i].key, key) == 0)
            return &r->keys[i];
    if (r->n >= BENCH_KEYS_MAX)
        return NULL;
    bench_key *k = &r->keys[r->n++];
    snprintf(k->key, sizeof(k->key), "%s", key);
    return k;
}

void bench_put_str(bench_results *r, const char *key, const char *val)
{
    bench_key *k = slot(r, key);
    if (!k)
        return;
    snprintf(k->val, sizeof(k->val), "%s", val);
    for (char *s = k->val; *s; s++)
        if (*s == '\n' || *s == '\r')
            *s = ' ';
    k->number = false;
}

void bench_put_num(bench_results *r, const char *key, int decimals, double v)
{
    bench_key *k = slot(r, key);
    if (!k)
        return;
    if (!isfinite(v)) {
        bench_put_str(r, key, "n/a");
        return;
    }
    snprintf(k->val, sizeof(k->val), "%.*f", decimals, v);
    k->number = true;
}

void bench_put_u64(bench_results *r, const char *key, uint64_t v)
{
    bench_key *k = slot(r, key);
    if (!k)
        return;
    snprintf(k->val, sizeof(k->val), "%llu", (unsigned long long)v);
    k->number = true;
}

const char *bench_get(const bench_results *r, const char *key)
{
    for (size_t i = 0; i < r->n; i++)
        if (strcmp(r->keys[i].key, key) == 0)
            return r->keys[i].val;
    return "-";
}

/* One table row: a figure with and without the shim, what the shim added,
 * the ratio (shim throughput / no-shim throughput), and the target. */
typedef struct row {
    const char *label, *base, *shim, *added, *ratio, *target, *verdict;
} row;

static const row rows[] = {
    {"alloc+free 1 MiB, ns/pair (best)", "pairs_ns_noshim", "pairs_ns_shim", "pairs_added_ns",
     "pairs_ratio", "added <= 40 ns", "pairs_target"},
    {"alloc+free, instructions/pair", "instructions_per_pair_noshim", "instructions_per_pair_shim",
     "instructions_added", NULL, "added <= 150", "instructions_target"},
    {"2 devices, instructions/pair", "instructions_devices2_noshim", "instructions_devices2_shim",
     "instructions_devices2_extra_added", NULL, "extra 0", "instructions_devices2_target"},
    {"AllocAsync+FreeAsync, instr/pair", "instructions_async_noshim", "instructions_async_shim",
     "instructions_async_added", NULL, "added <= pair's", "instructions_async_target"},
    {"FromPoolAsync+Free, instr/pair", "instructions_pool_noshim", "instructions_pool_shim",
     "instructions_pool_added", NULL, "added <= pair's", "instructions_pool_target"},
    {"2 threads, CPU ns/pair", "threads2_cpu_ns_noshim", "threads2_cpu_ns_shim", NULL,
     "threads2_cost_ratio", "", NULL},
    {"4 threads, CPU ns/pair", "threads4_cpu_ns_noshim", "threads4_cpu_ns_shim", NULL,
     "threads4_cost_ratio", "", NULL},
    {"8 threads, CPU ns/pair", "threads8_cpu_ns_noshim", "threads8_cpu_ns_shim", NULL,
     "threads8_cost_ratio", "cost <= 1.30", "threads_target"},
    {"8 procs contended, pairs/s", "contended_pairs_per_s_noshim", "contended_pairs_per_s_shim",
     NULL, "contended_ratio", "ratio >= 0.85", "contended_target"},
    {"8 procs contended, CPU ns/pair", "contended_cpu_ns_per_pair_noshim",
     "contended_cpu_ns_per_pair_shim", "contended_cpu_added_ns", NULL, "", NULL},
    {"cuMemAllocAsync+FreeAsync, ns", "async_ns_noshim", "async_ns_shim", "async_added_ns", NULL,
     "added <= pair's", "async_target"},
    {"FromPoolAsync+FreeAsync, ns", "pool_ns_noshim", "pool_ns_shim", "pool_added_ns", NULL,
     "added <= pair's", "pool_target"},
    {"cuMemGetInfo_v2, ns/call", "getinfo_ns_noshim", "getinfo_ns_shim", NULL, "getinfo_cost_x",
     "cost <= 1.5x", "getinfo_target"},
    {"pair, 2 devices visible, ns", "devices2_ns_noshim", "devices2_ns_shim",
     "devices2_extra_added_ns", NULL, "extra ~ 0 (<=5)", "devices_target"},
    {"churn under the limit, ops/s", "churn_granted_per_s_noshim", "churn_granted_per_s_shim", NULL,
     "churn_ratio", "ratio >= 0.85", "churn_target"},
    {"256 MiB alloc, 1 proc, median us", "big_uncontended_median_us_noshim",
     "big_uncontended_median_us_shim", "big_uncontended_added_us", NULL, "", NULL},
    {"256 MiB alloc, 8 procs, median us", "big_contended_median_us_noshim",
     "big_contended_median_us_shim", "big_contended_added_us", "big_contended_ratio",
     "<= 1.25x +1us", "big_target"},
    {"256 MiB alloc, 8 procs, p99 us", "big_contended_p99_us_noshim", "big_contended_p99_us_shim",
     NULL, NULL, "", NULL},
    {"256 MiB: 8-proc / 1-proc median (x)", "big_contention_factor_noshim",
     "big_contention_factor_shim", NULL, NULL, "", NULL},
    {"cuLaunchKernel, ns/call (best)", "launch_ns_noshim", "launch_ns_shim", NULL, "launch_ratio",
     "ratio ~ 1.00", "launch_target"},
    {"start-up to 1st alloc, median ms", "startup_median_ms_noshim", "startup_median_ms_shim",
     "startup_added_ms", NULL, "added <= 0.20 ms", "startup_target"},
    {"start-up to 1st alloc, p90 ms", "startup_p90_ms_noshim", "startup_p90_ms_shim", NULL, NULL,
     "", NULL},
};

static const char *cell(const bench_results *r, const char *key)
{
    return key ? bench_get(r, key) : "";
}

void bench_print_table(const bench_results *r)
{
    printf("gpufrac-bench: the shim (%s) against no shim, one run\n", bench_get(r, "shim"));
    printf("platform: %s | device: %s | %s bytes | driver %s | %s CPUs | %s\n\n",
           bench_get(r, "platform"), bench_get(r, "device_name"),
           bench_get(r, "device_total_bytes"), bench_get(r, "driver_version"), bench_get(r, "cpus"),
           strcmp(bench_get(r, "quick"), "1") == 0 ? "quick" : "full");
    printf("%-34s %12s %12s %10s %7s  %-16s %s\n", "measure", "no shim", "shim", "added", "ratio",
           "target", "");
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        const row *w = &rows[i];
        printf("%-34s %12s %12s %10s %7s  %-16s %s\n", w->label, cell(r, w->base), cell(r, w->shim),
               cell(r, w->added), cell(r, w->ratio), w->target, cell(r, w->verdict));
    }
    if (strcmp(bench_get(r, "launch_status"), "ok") != 0)
        printf("cuLaunchKernel: %s\n", bench_get(r, "launch_status"));
    if (strcmp(bench_get(r, "instructions_status"), "ok") != 0)
        printf("instructions per pair: %s\n", bench_get(r, "instructions_status"));
    printf("\nratio = shim throughput / no-shim throughput (1.00: the shim costs nothing);\n"
           "threads: cost = (shim CPU per pair at N / at 1) / (no shim's at N / at 1)\n");
    if (strcmp(bench_get(r, "platform"), "gpusim") == 0)
        printf("gpusim: a simulated driver call costs tens of ns (a real one: microseconds),\n"
               "so on gpusim the ratios show the shim's own cost at its largest; read the\n"
               "'added' column for what the shim adds per call.\n");
    printf("\n");
}

void bench_print_kv(const bench_results *r)
{
    for (size_t i = 0; i < r->n; i++)
        printf("%s=%s\n", r->keys[i].key, r->keys[i].val);
    fflush(stdout);
}

static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

int bench_write_json(const bench_results *r, const char *path, gf_error *err)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return gf_error_sys(err, "writing %s", path);
    fputs("{\n", f);
    for (size_t i = 0; i < r->n; i++) {
        fputs("  ", f);
        json_string(f, r->keys[i].key);
        fputs(": ", f);
        if (r->keys[i].number)
            fputs(r->keys[i].val, f);
        else
            json_string(f, r->keys[i].val);
        fputs(i + 1 < r->n ? ",\n" : "\n", f);
    }
    fputs("}\n", f);
    if (fclose(f) != 0)
        return gf_error_sys(err, "writing %s", path);
    return 0;
}
