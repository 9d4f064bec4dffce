/* SPDX-License-Identifier: Apache-2.0 */
/* The child side: `gpufrac-bench --worker KIND ARGS...`. Each kind sets up
 * the driver the way an application would, runs one timed loop and prints
 * `key=value` lines on stdout. Exit 0, or 1 after a message on stderr. */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "cu.h"

/* An empty kernel, for launching on a real GPU (PTX is JIT-compiled by the
 * driver, so no toolkit is needed). Tried in order. */
static const char *const empty_ptx[] = {
    ".version 7.0\n.target sm_70\n.address_size 64\n"
    ".visible .entry gf_bench_empty()\n{\n\tret;\n}\n",
    ".version 6.0\n.target sm_50\n.address_size 64\n"
    ".visible .entry gf_bench_empty()\n{\n\tret;\n}\n",
};

static long arg_long(int argc, char **argv, int i, long dflt)
{
    char *end;
    long v;
    if (i >= argc)
        return dflt;
    errno = 0;
    v = strtol(argv[i], &end, 10);
    if (errno || *end || v < 0) {
        fprintf(stderr, "gpufrac-bench worker: bad number '%s'\n", argv[i]);
        exit(2);
    }
    return v;
}

/* Blocks until the parent closes our stdin: every contender starts at once. */
static void wait_for_go(void)
{
    char c;
    ssize_t n;
    printf("ready=1\n");
    fflush(stdout);
    do {
        n = read(STDIN_FILENO, &c, 1);
    } while (n > 0 || (n < 0 && errno == EINTR));
}

static int pairs_loop(bench_cu *cu, long n, size_t size)
{
    for (long i = 0; i < n; i++) {
        CUdeviceptr p;
        CUresult r = cu->cuMemAlloc_v2(&p, size);
        if (r != CUDA_SUCCESS)
            return bench_cu_fail(cu, "cuMemAlloc_v2", r);
        r = cu->cuMemFree_v2(p);
        if (r != CUDA_SUCCESS)
            return bench_cu_fail(cu, "cuMemFree_v2", r);
    }
    return 0;
}

/* bench_cu_fail, as a worker exit code. */
static int worker_fail(const bench_cu *cu, const char *what, CUresult r)
{
    bench_cu_fail(cu, what, r);
    return 1;
}

static int setup(bench_cu *cu)
{
    return bench_cu_load(cu) < 0 || bench_cu_context(cu) < 0 ? -1 : 0;
}

/* a loop a timed kind runs n times over */
typedef struct loop_spec {
    int (*run)(bench_cu *cu, const struct loop_spec *s, long n);
    size_t size;  /* pairs: bytes per allocation */
    CUfunction f; /* launch: the kernel */
} loop_spec;

/* Best ns per iteration over runs runs of n, after a warm-up run of n/10+1.
 * With run_key, each run is printed as run<r>_<run_key>=NS. */
static int best_ns(bench_cu *cu, const loop_spec *s, long n, long runs, const char *run_key,
                   double *best)
{
    if (s->run(cu, s, n / 10 + 1) < 0)
        return -1;
    for (long r = 0; r < runs; r++) {
        uint64_t t0 = bench_now_ns();
        if (s->run(cu, s, n) < 0)
            return -1;
        double ns = (double)(bench_now_ns() - t0) / (double)n;
        if (run_key)
            printf("run%ld_%s=%.1f\n", r, run_key, ns);
        if (r == 0 || ns < *best)
            *best = ns;
    }
    return 0;
}

static int pairs_run(bench_cu *cu, const loop_spec *s, long n)
{
    return pairs_loop(cu, n, s->size);
}

/* pairs N SIZE RUNS: best ns per alloc+free pair over RUNS runs. */
static int kind_pairs(int argc, char **argv)
{
    bench_cu cu = {0};
    long n = arg_long(argc, argv, 3, 200000);
    loop_spec s = {.run = pairs_run,
                   .size = (size_t)arg_long(argc, argv, 4, (long)BENCH_PAIR_SIZE)};
    long runs = arg_long(argc, argv, 5, 5);
    double best = 0;

    if (setup(&cu) < 0 || best_ns(&cu, &s, n, runs, "ns_per_pair", &best) < 0)
        return 1;
    printf("ns_per_pair=%.1f\n", best);
    return 0;
}

/* contend N SIZE: N pairs after the start signal; prints the window. */
static int kind_contend(int argc, char **argv)
{
    bench_cu cu = {0};
    long n = arg_long(argc, argv, 3, 200000);
    size_t size = (size_t)arg_long(argc, argv, 4, (long)BENCH_PAIR_SIZE);

    if (setup(&cu) < 0 || pairs_loop(&cu, 100, size) < 0)
        return 1;
    wait_for_go();
    uint64_t c0 = bench_cpu_ns(), t0 = bench_now_ns();
    if (pairs_loop(&cu, n, size) < 0)
        return 1;
    uint64_t t1 = bench_now_ns(), c1 = bench_cpu_ns();
    printf("start_ns=%" PRIu64 "\nend_ns=%" PRIu64 "\npairs=%ld\ncpu_ns=%" PRIu64 "\n", t0, t1, n,
           c1 - c0);
    return 0;
}

/* big ITERS SIZE [nogo]: latency of each cuMemAlloc_v2 of SIZE (freed at once). */
static int kind_big(int argc, char **argv)
{
    bench_cu cu = {0};
    long iters = arg_long(argc, argv, 3, 50);
    size_t size = (size_t)arg_long(argc, argv, 4, (long)BENCH_BIG_SIZE);
    bool go = arg_long(argc, argv, 5, 1) != 0;

    if (setup(&cu) < 0 || pairs_loop(&cu, 2, size) < 0)
        return 1;
    if (go)
        wait_for_go();
    printf("lat_ns=");
    for (long i = 0; i < iters; i++) {
        CUdeviceptr p;
        uint64_t t0 = bench_now_ns();
        CUresult r = cu.cuMemAlloc_v2(&p, size);
        uint64_t t1 = bench_now_ns();
        if (r != CUDA_SUCCESS)
            return worker_fail(&cu, "cuMemAlloc_v2 (big)", r);
        if ((r = cu.cuMemFree_v2(p)) != CUDA_SUCCESS)
            return worker_fail(&cu, "cuMemFree_v2 (big)", r);
        printf("%s%" PRIu64, i ? "," : "", t1 - t0);
    }
    printf("\n");
    return 0;
}

/* Real GPU: an empty kernel from PTX. Returns NULL (reason in why) when none. */
static CUfunction real_kernel(bench_cu *cu, const char **why)
{
    CUmodule m;
    CUfunction f;
    if (!cu->cuModuleLoadData || !cu->cuModuleGetFunction) {
        *why = "the driver has no cuModuleLoadData/cuModuleGetFunction";
        return NULL;
    }
    for (size_t i = 0; i < sizeof(empty_ptx) / sizeof(empty_ptx[0]); i++) {
        if (cu->cuModuleLoadData(&m, empty_ptx[i]) == CUDA_SUCCESS &&
            cu->cuModuleGetFunction(&f, m, "gf_bench_empty") == CUDA_SUCCESS)
            return f;
    }
    *why = "the driver could not load the embedded PTX kernel";
    return NULL;
}

static int launch_loop(bench_cu *cu, CUfunction f, long n)
{
    for (long i = 0; i < n; i++) {
        CUresult r = cu->cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL);
        if (r != CUDA_SUCCESS)
            return bench_cu_fail(cu, "cuLaunchKernel", r);
    }
    CUresult r = cu->cuCtxSynchronize ? cu->cuCtxSynchronize() : CUDA_SUCCESS;
    return r == CUDA_SUCCESS ? 0 : bench_cu_fail(cu, "cuCtxSynchronize", r);
}

static int launch_run(bench_cu *cu, const loop_spec *s, long n)
{
    return launch_loop(cu, s->f, n);
}

/* launch N RUNS SIM: best ns per cuLaunchKernel (+ one sync per run). */
static int kind_launch(int argc, char **argv)
{
    bench_cu cu = {0};
    long n = arg_long(argc, argv, 3, 100000);
    long runs = arg_long(argc, argv, 4, 5);
    bool sim = arg_long(argc, argv, 5, 1) != 0;
    const char *why = "the driver has no cuLaunchKernel";
    CUfunction f = NULL;
    double best = 0;

    if (setup(&cu) < 0)
        return 1;
    if (cu.cuLaunchKernel)
        f = sim ? (CUfunction)(uintptr_t)0x1000 : real_kernel(&cu, &why);
    if (!f) {
        printf("skipped=needs a kernel: %s\n", why);
        return 0;
    }
    if (best_ns(&cu, &(loop_spec){.run = launch_run, .f = f}, n, runs, NULL, &best) < 0)
        return 1;
    printf("ns_per_call=%.1f\n", best);
    return 0;
}

/* startup SIZE: the moment the first allocation returned. */
static int kind_startup(int argc, char **argv)
{
    bench_cu cu = {0};
    size_t size = (size_t)arg_long(argc, argv, 3, (long)BENCH_PAIR_SIZE);
    CUdeviceptr p;
    CUresult r;

    if (setup(&cu) < 0)
        return 1;
    if ((r = cu.cuMemAlloc_v2(&p, size)) != CUDA_SUCCESS)
        return worker_fail(&cu, "first cuMemAlloc_v2", r);
    uint64_t t1 = bench_now_ns();
    printf("first_alloc_ns=%" PRIu64 "\n", t1);
    cu.cuMemFree_v2(p);
    return 0;
}

/* info: what we run on. */
static int kind_info(void)
{
    bench_cu cu = {0};
    char name[256] = "unknown";
    size_t total = 0;
    int ver = 0;

    if (setup(&cu) < 0)
        return 1;
    if (cu.cuDeviceGetName && cu.cuDeviceGetName(name, (int)sizeof(name), cu.dev) != 0)
        snprintf(name, sizeof(name), "unknown");
    if (cu.cuDeviceTotalMem_v2)
        cu.cuDeviceTotalMem_v2(&total, cu.dev);
    if (cu.cuDriverGetVersion)
        cu.cuDriverGetVersion(&ver);
    for (char *s = name; *s; s++)
        if (*s == '\n' || *s == '\r')
            *s = ' ';
    printf("device_name=%s\ndevice_total_bytes=%zu\ndriver_version=%d\n", name, total, ver);
    return 0;
}

int bench_worker_main(int argc, char **argv)
{
    const char *kind = argc > 2 ? argv[2] : "";
    int rc;

    if (strcmp(kind, "info") == 0)
        rc = kind_info();
    else if (strcmp(kind, "pairs") == 0)
        rc = kind_pairs(argc, argv);
    else if (strcmp(kind, "contend") == 0)
        rc = kind_contend(argc, argv);
    else if (strcmp(kind, "big") == 0)
        rc = kind_big(argc, argv);
    else if (strcmp(kind, "launch") == 0)
        rc = kind_launch(argc, argv);
    else if (strcmp(kind, "startup") == 0)
        rc = kind_startup(argc, argv);
    else {
        fprintf(stderr, "gpufrac-bench: unknown worker kind '%s'\n", kind);
        rc = 2;
    }
    fflush(stdout);
    return rc;
}
