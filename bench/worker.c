/* SPDX-License-Identifier: Apache-2.0 */
/* The child side: `gpufrac-bench --worker KIND ARGS...`. Each kind sets up
 * the driver the way an application would, runs one timed loop and prints
 * `key=value` lines on stdout. Exit 0, or 1 after a message on stderr. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
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
    size_t size;       /* pairs: bytes per allocation */
    CUfunction f;      /* launch: the kernel */
    CUmemoryPool pool; /* async: NULL for cuMemAllocAsync, else the pool */
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

/* gpusim with other devices: a state file of their own (gpusim refuses one
 * made for another set). */
static int set_devices(const char *devices)
{
    const char *state = getenv("GPUSIM_STATE");
    char path[4096];

    if (!state ||
        snprintf(path, sizeof(path), "%s.%zu", state, strlen(devices)) >= (int)sizeof(path))
        return -1;
    return setenv("GPUSIM_DEVICES", devices, 1) == 0 && setenv("GPUSIM_STATE", path, 1) == 0 ? 0
                                                                                             : -1;
}

/* pairs N SIZE RUNS [DEVICES]: best ns per alloc+free pair over RUNS runs;
 * DEVICES (gpusim's GPUSIM_DEVICES) makes more devices visible. */
static int kind_pairs(int argc, char **argv)
{
    bench_cu cu = {0};
    long n = arg_long(argc, argv, 3, 200000);
    loop_spec s = {.run = pairs_run,
                   .size = (size_t)arg_long(argc, argv, 4, (long)BENCH_PAIR_SIZE)};
    long runs = arg_long(argc, argv, 5, 5);
    double best = 0;

    if (argc > 6 && set_devices(argv[6]) < 0)
        return 1;
    if (setup(&cu) < 0 || best_ns(&cu, &s, n, runs, "ns_per_pair", &best) < 0)
        return 1;
    printf("ns_per_pair=%.1f\n", best);
    return 0;
}

/* ---- threads of one process ---- */
typedef struct mt_arg {
    bench_cu *cu;
    long n;
    size_t size;
    pthread_barrier_t *go;
    int rc;
} mt_arg;

static void *mt_thread(void *p)
{
    mt_arg *a = p;
    CUresult r = a->cu->cuCtxSetCurrent(a->cu->ctx);

    a->rc = r == CUDA_SUCCESS ? pairs_loop(a->cu, 1000, a->size) : -1;
    pthread_barrier_wait(&a->go[0]);
    if (a->rc == 0)
        a->rc = pairs_loop(a->cu, a->n, a->size);
    pthread_barrier_wait(&a->go[1]);
    return NULL;
}

/* threads N SIZE T: T threads of this process, N pairs each at once; prints
 * the process's CPU ns per pair over the timed window. */
static int kind_threads(int argc, char **argv)
{
    bench_cu cu = {0};
    long n = arg_long(argc, argv, 3, 100000);
    size_t size = (size_t)arg_long(argc, argv, 4, (long)BENCH_PAIR_SIZE);
    long t = arg_long(argc, argv, 5, 1);
    pthread_barrier_t go[2];
    pthread_t th[64];
    mt_arg a[64];

    if (t < 1 || t > 64 || setup(&cu) < 0)
        return 1;
    pthread_barrier_init(&go[0], NULL, (unsigned)t + 1);
    pthread_barrier_init(&go[1], NULL, (unsigned)t + 1);
    for (long i = 0; i < t; i++) {
        a[i] = (mt_arg){.cu = &cu, .n = n, .size = size, .go = go};
        if (pthread_create(&th[i], NULL, mt_thread, &a[i]) != 0)
            return 1;
    }
    pthread_barrier_wait(&go[0]);
    uint64_t c0 = bench_cpu_ns(), t0 = bench_now_ns();
    pthread_barrier_wait(&go[1]);
    uint64_t t1 = bench_now_ns(), c1 = bench_cpu_ns();
    int rc = 0;
    for (long i = 0; i < t; i++) {
        pthread_join(th[i], NULL);
        rc |= a[i].rc;
    }
    if (rc)
        return 1;
    printf("cpu_ns_per_pair=%.1f\nwall_ns_per_pair=%.1f\n", (double)(c1 - c0) / (double)(n * t),
           (double)(t1 - t0) / (double)(n * t));
    return 0;
}

/* ---- stream-ordered pairs and memory queries ---- */
static int async_run(bench_cu *cu, const loop_spec *s, long n)
{
    for (long i = 0; i < n; i++) {
        CUdeviceptr p;
        CUresult r = s->pool ? cu->cuMemAllocFromPoolAsync(&p, s->size, s->pool, NULL)
                             : cu->cuMemAllocAsync(&p, s->size, NULL);
        if (r != CUDA_SUCCESS)
            return bench_cu_fail(cu, s->pool ? "cuMemAllocFromPoolAsync" : "cuMemAllocAsync", r);
        if ((r = cu->cuMemFreeAsync(p, NULL)) != CUDA_SUCCESS)
            return bench_cu_fail(cu, "cuMemFreeAsync", r);
    }
    return 0;
}

/* async N SIZE RUNS POOL: best ns per stream-ordered pair (POOL=1: from the
 * device's pool by handle, cuMemAllocFromPoolAsync). */
static int kind_async(int argc, char **argv)
{
    bench_cu cu = {0};
    long n = arg_long(argc, argv, 3, 100000);
    loop_spec s = {.run = async_run,
                   .size = (size_t)arg_long(argc, argv, 4, (long)BENCH_PAIR_SIZE)};
    long runs = arg_long(argc, argv, 5, 5);
    bool pool = arg_long(argc, argv, 6, 0) != 0;
    double best = 0;

    if (setup(&cu) < 0)
        return 1;
    if (!cu.cuMemAllocAsync || !cu.cuMemFreeAsync || !cu.cuDeviceGetMemPool ||
        !cu.cuMemAllocFromPoolAsync) {
        printf("skipped=the driver has no stream-ordered allocator\n");
        return 0;
    }
    if (pool && cu.cuDeviceGetMemPool(&s.pool, cu.dev) != CUDA_SUCCESS)
        return worker_fail(&cu, "cuDeviceGetMemPool", CUDA_ERROR_NOT_SUPPORTED);
    if (best_ns(&cu, &s, n, runs, NULL, &best) < 0)
        return 1;
    printf("ns_per_pair=%.1f\n", best);
    return 0;
}

static int getinfo_run(bench_cu *cu, const loop_spec *s, long n)
{
    (void)s;
    for (long i = 0; i < n; i++) {
        size_t f, t;
        CUresult r = cu->cuMemGetInfo_v2(&f, &t);
        if (r != CUDA_SUCCESS)
            return bench_cu_fail(cu, "cuMemGetInfo_v2", r);
    }
    return 0;
}

/* getinfo N RUNS: best ns per cuMemGetInfo_v2. */
static int kind_getinfo(int argc, char **argv)
{
    bench_cu cu = {0};
    long n = arg_long(argc, argv, 3, 20000);
    long runs = arg_long(argc, argv, 4, 5);
    double best = 0;

    if (setup(&cu) < 0)
        return 1;
    if (!cu.cuMemGetInfo_v2) {
        printf("skipped=the driver has no cuMemGetInfo_v2\n");
        return 0;
    }
    if (best_ns(&cu, &(loop_spec){.run = getinfo_run}, n, runs, NULL, &best) < 0)
        return 1;
    printf("ns_per_call=%.1f\n", best);
    return 0;
}

/* churn N MAXSIZE: after the start signal, N operations on 16 slots chosen
 * by a fixed sequence: an empty slot is allocated (1 MiB .. MAXSIZE), a full
 * one freed. Prints the window and the operations the driver granted. */
static int kind_churn(int argc, char **argv)
{
    bench_cu cu = {0};
    long n = arg_long(argc, argv, 3, 100000);
    uint64_t max = (uint64_t)arg_long(argc, argv, 4, 32L << 20);
    CUdeviceptr slot[16] = {0};
    uint64_t x = (uint64_t)getpid() * 2654435761ULL + 1, granted = 0;

    if (setup(&cu) < 0)
        return 1;
    wait_for_go();
    uint64_t c0 = bench_cpu_ns(), t0 = bench_now_ns();
    for (long i = 0; i < n; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        CUdeviceptr *p = &slot[(x >> 33) & 15];
        if (*p) {
            granted += cu.cuMemFree_v2(*p) == CUDA_SUCCESS;
            *p = 0;
        } else {
            size_t size = (size_t)(((x >> 40) % (max >> 20)) + 1) << 20;
            granted += cu.cuMemAlloc_v2(p, size) == CUDA_SUCCESS;
        }
    }
    uint64_t t1 = bench_now_ns(), c1 = bench_cpu_ns();
    for (int i = 0; i < 16; i++)
        if (slot[i])
            cu.cuMemFree_v2(slot[i]);
    printf("start_ns=%" PRIu64 "\nend_ns=%" PRIu64 "\nops=%" PRIu64 "\ncpu_ns=%" PRIu64 "\n", t0,
           t1, granted, c1 - c0);
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
    else if (strcmp(kind, "threads") == 0)
        rc = kind_threads(argc, argv);
    else if (strcmp(kind, "async") == 0)
        rc = kind_async(argc, argv);
    else if (strcmp(kind, "getinfo") == 0)
        rc = kind_getinfo(argc, argv);
    else if (strcmp(kind, "churn") == 0)
        rc = kind_churn(argc, argv);
    else {
        fprintf(stderr, "gpufrac-bench: unknown worker kind '%s'\n", kind);
        rc = 2;
    }
    fflush(stdout);
    return rc;
}
