/* SPDX-License-Identifier: Apache-2.0 */
/* gpufrac-bench: measures the shim against no shim in one run.
 *
 *   gpufrac-bench [--quick] [--sim] [--json FILE] [--n PAIRS] [--runs N]
 *                 [--startup-runs N] [--no-callgrind] [--instructions]
 *
 * Without a real GPU (NVML not loadable with the default library path) or
 * with --sim it runs on gpusim from <exe dir>/../lib/gpusim. The shim is
 * <exe dir>/../lib/libgpufrac.so unless GPUFRAC_SHIM says otherwise. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

static void usage(FILE *f)
{
    fputs("usage: gpufrac-bench [--quick] [--sim] [--json FILE] [--n PAIRS] [--runs N]\n"
          "                     [--startup-runs N] [--no-callgrind] [--instructions]\n"
          "Measures libgpufrac.so against no shim in one run and prints a table and\n"
          "key=value lines.\n"
          "  --quick            small counts (CI); timings are then rough\n"
          "  --sim              use gpusim even where a GPU is present\n"
          "  --json FILE        also write the figures as a JSON object\n"
          "  --n PAIRS          alloc+free pairs per process (default: 200000 on gpusim,\n"
          "                     20000 on a GPU)\n"
          "  --runs N           best-of count for single-process timings (default 5)\n"
          "  --startup-runs N   start-ups per side (default 50)\n"
          "  --no-callgrind     do not count instructions per pair under valgrind\n"
          "  --instructions     only count instructions per pair under valgrind (plain;\n"
          "                     on gpusim also two devices and stream-ordered): no timings\n"
          "env: GPUFRAC_SHIM=<path to libgpufrac.so>\n",
          f);
}

static int parse_count(const char *s, const char *what, long max, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < 1 || v > max) {
        fprintf(stderr, "gpufrac-bench: %s '%s': give a whole number from 1 to %ld\n", what, s,
                max);
        return -1;
    }
    *out = v;
    return 0;
}

/* Returns 0, 1 (stop: help printed, exit 0) or -1 (usage error). */
static int parse_args(int argc, char **argv, bench_opts *o)
{
    static const struct option longs[] = {
        {"quick", no_argument, NULL, 'q'},        {"sim", no_argument, NULL, 's'},
        {"json", required_argument, NULL, 'j'},   {"n", required_argument, NULL, 'n'},
        {"runs", required_argument, NULL, 'r'},   {"startup-runs", required_argument, NULL, 'u'},
        {"help", no_argument, NULL, 'h'},         {"no-callgrind", no_argument, NULL, 'c'},
        {"instructions", no_argument, NULL, 'i'}, {NULL, 0, NULL, 0}};
    long v;
    int c;
    while ((c = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
        switch (c) {
        case 'q': o->quick = true; break;
        case 's': o->force_sim = true; break;
        case 'j': o->json_path = optarg; break;
        case 'n':
            if (parse_count(optarg, "--n", 100000000, &o->pairs_n) < 0)
                return -1;
            break;
        case 'r':
            if (parse_count(optarg, "--runs", 100, &v) < 0)
                return -1;
            o->runs = (int)v;
            break;
        case 'u':
            if (parse_count(optarg, "--startup-runs", 10000, &v) < 0)
                return -1;
            o->startup_runs = (int)v;
            break;
        case 'c': o->no_callgrind = true; break;
        case 'i': o->instructions_only = true; break;
        case 'h': usage(stdout); return 1;
        default: usage(stderr); return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "gpufrac-bench: unexpected argument '%s'\n", argv[optind]);
        return -1;
    }
    return 0;
}

/* Counts per platform: a real driver is ~50x slower per call than gpusim. */
static bench_plan make_plan(const bench_opts *o, bool sim)
{
    bench_plan p;
    long scale = sim ? 1 : 10;
    p.pairs_n = o->pairs_n ? o->pairs_n : (o->quick ? 20000 : 200000) / scale;
    p.contend_n = p.pairs_n;
    p.runs = o->runs ? o->runs : (o->quick ? 3 : 5);
    /* a 256 MiB allocation takes ~0.1-3 us on gpusim, ~0.5 ms on a GPU */
    p.big_iters = sim ? (o->quick ? 200 : 2000) : (o->quick ? 10 : 50);
    p.launch_n = (o->quick ? 20000 : 200000) / scale;
    p.startup_runs = o->startup_runs ? o->startup_runs : (o->quick ? 10 : 50);
    p.threads_n = (o->quick ? 10000 : 100000) / scale;
    p.async_n = (o->quick ? 10000 : 100000) / scale;
    p.info_n = (o->quick ? 2000 : 20000) / scale;
    p.churn_n = (o->quick ? 10000 : 100000) / scale;
    p.callgrind = !o->no_callgrind;
    return p;
}

static void put_meta(const bench_env *e, const bench_opts *o, bench_results *r)
{
    bench_put_u64(r, "bench_version", 1);
    bench_put_str(r, "platform", e->sim ? "gpusim" : "gpu");
    bench_put_str(r, "device_name", "unknown");
    bench_put_u64(r, "device_total_bytes", 0);
    bench_put_u64(r, "driver_version", 0);
    bench_put_u64(r, "fraction_limit_bytes", 0);
    bench_put_u64(r, "cpus", (uint64_t)sysconf(_SC_NPROCESSORS_ONLN));
    bench_put_u64(r, "quick", o->quick);
    bench_put_str(r, "shim", e->shim);
}

static int run_all(bench_env *e, const bench_opts *o, bench_results *r, gf_error *err)
{
    bench_plan p = make_plan(o, e->sim);
    uint64_t total;

    put_meta(e, o, r);
    if (bench_measure_info(e, r, &total, err) < 0)
        return gf_error_wrap(err, "reading the device");
    /* half the device: room for 8 x 256 MiB, and a real limit to count against */
    bench_put_u64(r, "fraction_limit_bytes", total / 2);
    fprintf(stderr, "gpufrac-bench: on %s (%s); measuring...\n", e->sim ? "gpusim" : "a real GPU",
            bench_get(r, "device_name"));
    if (o->instructions_only) {
        p.callgrind = true;
        if (bench_env_fraction(e, total / 2, err) < 0 ||
            bench_measure_instructions(e, &p, r, err) < 0)
            return -1;
        return 0;
    }
    if (bench_env_fraction(e, total / 2, err) < 0 || bench_measure_pairs(e, &p, r, err) < 0 ||
        bench_measure_contended(e, &p, r, err) < 0 || bench_measure_big(e, &p, r, err) < 0 ||
        bench_measure_launch(e, &p, r, err) < 0 || bench_measure_startup(e, &p, r, err) < 0 ||
        bench_measure_threads(e, &p, r, err) < 0 || bench_measure_async(e, &p, r, err) < 0 ||
        bench_measure_getinfo(e, &p, r, err) < 0 || bench_measure_devices(e, &p, r, err) < 0 ||
        bench_measure_churn(e, &p, r, err) < 0 || bench_measure_instructions(e, &p, r, err) < 0)
        return -1;
    return 0;
}

int main(int argc, char **argv)
{
    bench_opts o = {0};
    bench_env e;
    static bench_results r;
    gf_error err = {0};

    if (argc > 1 && strcmp(argv[1], "--worker") == 0)
        return bench_worker_main(argc, argv);
    int a = parse_args(argc, argv, &o);
    if (a != 0)
        return a > 0 ? 0 : 2;
    int rc = bench_env_init(&e, o.force_sim, &err) < 0 || run_all(&e, &o, &r, &err) < 0;
    bench_env_cleanup(&e);
    if (rc) {
        fprintf(stderr, "gpufrac-bench: %s\n", err.msg);
        return 1;
    }
    bench_print_table(&r);
    bench_print_kv(&r);
    if (o.json_path && bench_write_json(&r, o.json_path, &err) < 0) {
        fprintf(stderr, "gpufrac-bench: %s\n", err.msg);
        return 1;
    }
    return 0;
}
