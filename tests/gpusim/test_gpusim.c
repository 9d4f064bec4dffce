/* SPDX-License-Identifier: Apache-2.0 */
/* Tests of gpusim, the simulated driver. Each test runs in a fresh child
 * process (its own environment, its own dlopen of the libraries, its own
 * GPUSIM_STATE file in a private temp dir); the child checks with CHECK and
 * exits non-zero on the first failure, the cmocka test asserts it exited 0. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "gpufrac/cuda_abi.h"
#include "gpufrac/nvml_abi.h"
#include "gs_api.h"

#define MiB (1ULL << 20)
#define GiB (1ULL << 30)

typedef struct cu_fns {
#define X(n, b, s, p, params) CUresult(*n) params;
    GS_CU_EXPORTS(X)
#undef X
} cu_fns;

typedef struct nv_fns {
    nvmlReturn_t (*init)(void);
    nvmlReturn_t (*shutdown)(void);
    nvmlReturn_t (*count)(unsigned *);
    nvmlReturn_t (*handle)(unsigned, nvmlDevice_t *);
    nvmlReturn_t (*by_uuid)(const char *, nvmlDevice_t *);
    nvmlReturn_t (*uuid)(nvmlDevice_t, char *, unsigned);
    nvmlReturn_t (*name)(nvmlDevice_t, char *, unsigned);
    nvmlReturn_t (*mem)(nvmlDevice_t, nvmlMemory_t *);
    nvmlReturn_t (*mem2)(nvmlDevice_t, nvmlMemory_v2_t *);
    nvmlReturn_t (*procs)(nvmlDevice_t, unsigned *, nvmlProcessInfo_t *);
    nvmlReturn_t (*procs1)(nvmlDevice_t, unsigned *, nvmlProcessInfo_v1_t *);
} nv_fns;

static cu_fns cu;
static nv_fns nv;
static void *cuda_lib;
static char tmpdir[256];

#define CHECK(c)                                                                  \
    do {                                                                          \
        if (!(c)) {                                                               \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
            _exit(1);                                                             \
        }                                                                         \
    } while (0)
#define CHECK_RC(call, want)                                                                     \
    do {                                                                                         \
        int got_ = (int)(call);                                                                  \
        if (got_ != (int)(want)) {                                                               \
            fprintf(stderr, "%s:%d: %s returned %d, want %d\n", __FILE__, __LINE__, #call, got_, \
                    (int)(want));                                                                \
            _exit(1);                                                                            \
        }                                                                                        \
    } while (0)
#define OK(call) CHECK_RC(call, CUDA_SUCCESS)

static void load(void)
{
    void *nvl;
    cuda_lib = dlopen(GPUSIM_LIB_DIR "/libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    nvl = dlopen(GPUSIM_LIB_DIR "/libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!cuda_lib || !nvl) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        _exit(1);
    }
#define X(n, b, s, p, params) CHECK((*(void **)&cu.n = dlsym(cuda_lib, #n)) != NULL);
    GS_CU_EXPORTS(X)
#undef X
#define L(f, sym) CHECK((*(void **)&nv.f = dlsym(nvl, sym)) != NULL)
    L(init, "nvmlInit_v2");
    L(shutdown, "nvmlShutdown");
    L(count, "nvmlDeviceGetCount_v2");
    L(handle, "nvmlDeviceGetHandleByIndex_v2");
    L(by_uuid, "nvmlDeviceGetHandleByUUID");
    L(uuid, "nvmlDeviceGetUUID");
    L(name, "nvmlDeviceGetName");
    L(mem, "nvmlDeviceGetMemoryInfo");
    L(mem2, "nvmlDeviceGetMemoryInfo_v2");
    L(procs, "nvmlDeviceGetComputeRunningProcesses_v3");
    L(procs1, "nvmlDeviceGetComputeRunningProcesses");
#undef L
}

/* env: NULL-terminated list of NAME=VALUE; GPUSIM_STATE is set per test. */
static void setup_env(const char *const *env)
{
    char state[512];
    unsetenv("CUDA_VISIBLE_DEVICES");
    unsetenv("GPUSIM_FAIL");
    setenv("GPUSIM_DEVICES", "1Gi", 1);
    setenv("GPUSIM_CTX_OVERHEAD", "0", 1);
    snprintf(state, sizeof state, "%s/state-%d", tmpdir, (int)getpid());
    setenv("GPUSIM_STATE", state, 1);
    for (; env && *env; env++) {
        char buf[512];
        char *eq;
        snprintf(buf, sizeof buf, "%s", *env);
        eq = strchr(buf, '=');
        *eq = 0;
        setenv(buf, eq + 1, 1);
    }
}

/* run fn in a child with env; the cmocka test fails unless it exits 0 */
static void run_child(void (*fn)(void), const char *const *env)
{
    int st = 0;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(120); /* a hung scenario fails instead of stalling the suite */
        setup_env(env);
        load();
        fn();
        _exit(0);
    }
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

static void init_ctx(void)
{
    CUcontext c;
    OK(cu.cuInit(0));
    OK(cu.cuDevicePrimaryCtxRetain(&c, 0));
    OK(cu.cuCtxSetCurrent(c));
}

static uint64_t cu_free(void)
{
    size_t f, t;
    OK(cu.cuMemGetInfo_v2(&f, &t));
    return f;
}

static uint64_t cu_used(void)
{
    size_t f, t;
    OK(cu.cuMemGetInfo_v2(&f, &t));
    return t - f;
}

static uint64_t nv_used(unsigned idx)
{
    nvmlDevice_t d;
    nvmlMemory_t m;
    CHECK(nv.init() == NVML_SUCCESS);
    CHECK(nv.handle(idx, &d) == NVML_SUCCESS);
    CHECK(nv.mem(d, &m) == NVML_SUCCESS);
    CHECK(m.total == m.used + m.free);
    nv.shutdown();
    return m.used;
}

/* fork a grandchild running fn(arg); returns its pid */
static pid_t spawn(void (*fn)(int), int arg)
{
    pid_t p = fork();
    CHECK(p >= 0);
    if (p == 0) {
        fn(arg);
        _exit(0);
    }
    return p;
}

static void wait_ok(pid_t p)
{
    int st;
    CHECK(waitpid(p, &st, 0) == p);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* ---- devices ----------------------------------------------------------------- */
static void devices_body(void)
{
    int n;
    char name[64], nvuuid[96];
    CUuuid u0, u1;
    size_t total;
    nvmlDevice_t d;
    unsigned cnt;

    OK(cu.cuInit(0));
    OK(cu.cuDeviceGetCount(&n));
    CHECK(n == 3);
    OK(cu.cuDeviceGetName(name, sizeof name, 1));
    CHECK(strcmp(name, "gpusim 80Gi") == 0);
    OK(cu.cuDeviceGetName(name, sizeof name, 2));
    CHECK(strcmp(name, "gpusim 1Gi") == 0);
    OK(cu.cuDeviceTotalMem_v2(&total, 1));
    CHECK(total == 80 * GiB);
    OK(cu.cuDeviceGetUuid_v2(&u0, 0));
    OK(cu.cuDeviceGetUuid(&u1, 1));
    CHECK(memcmp(&u0, &u1, sizeof u0) != 0);
    CHECK_RC(cu.cuDeviceGetUuid(&u1, 3), CUDA_ERROR_INVALID_DEVICE);
    /* NVML string is the same bytes */
    CHECK(nv.init() == NVML_SUCCESS);
    CHECK(nv.count(&cnt) == NVML_SUCCESS && cnt == 3);
    CHECK(nv.handle(0, &d) == NVML_SUCCESS);
    CHECK(nv.uuid(d, nvuuid, sizeof nvuuid) == NVML_SUCCESS);
    CHECK(nv.uuid(d, nvuuid, 10) == NVML_ERROR_INSUFFICIENT_SIZE);
    {
        const unsigned char *b = (const unsigned char *)u0.bytes;
        char want[96];
        snprintf(want, sizeof want,
                 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                 b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                 b[14], b[15]);
        CHECK(strcmp(want, nvuuid) == 0);
    }
    {
        nvmlDevice_t d2;
        CHECK(nv.by_uuid(nvuuid, &d2) == NVML_SUCCESS && d2 == d);
    }
    /* print for the stability check in the parent */
    printf("UUID0=%s\n", nvuuid);
}

static const char *const three_devs[] = {"GPUSIM_DEVICES=16Gi,80Gi,1073741824", NULL};

static void test_devices(void **state)
{
    (void)state;
    run_child(devices_body, three_devs);
}

static void uuid_of(int idx, char *out, size_t len)
{
    nvmlDevice_t d;
    CHECK(nv.init() == NVML_SUCCESS);
    CHECK(nv.handle((unsigned)idx, &d) == NVML_SUCCESS);
    CHECK(nv.uuid(d, out, (unsigned)len) == NVML_SUCCESS);
}

static void visible_body(void)
{
    char u1[96], u1b[96];
    int n;
    size_t total;
    unsigned cnt;
    uuid_of(1, u1, sizeof u1);
    /* stable: a second process derives the same UUIDs */
    {
        int fd[2];
        CHECK(pipe(fd) == 0);
        pid_t p = fork();
        if (p == 0) {
            char x[96];
            uuid_of(1, x, sizeof x);
            CHECK(write(fd[1], x, sizeof x) == (ssize_t)sizeof x);
            _exit(0);
        }
        CHECK(read(fd[0], u1b, sizeof u1b) == (ssize_t)sizeof u1b);
        wait_ok(p);
        CHECK(strcmp(u1, u1b) == 0);
    }
    setenv("CUDA_VISIBLE_DEVICES", "2,0", 1);
    {
        pid_t p = fork();
        if (p == 0) {
            OK(cu.cuInit(0));
            OK(cu.cuDeviceGetCount(&n));
            CHECK(n == 2);
            OK(cu.cuDeviceTotalMem_v2(&total, 0));
            CHECK(total == GiB);
            OK(cu.cuDeviceTotalMem_v2(&total, 1));
            CHECK(total == 16 * GiB);
            CHECK(nv.count(&cnt) == NVML_SUCCESS && cnt == 3); /* NVML ignores it */
            _exit(0);
        }
        wait_ok(p);
    }
    setenv("CUDA_VISIBLE_DEVICES", u1, 1);
    {
        pid_t p = fork();
        if (p == 0) {
            OK(cu.cuInit(0));
            OK(cu.cuDeviceGetCount(&n));
            CHECK(n == 1);
            OK(cu.cuDeviceTotalMem_v2(&total, 0));
            CHECK(total == 80 * GiB);
            _exit(0);
        }
        wait_ok(p);
    }
    setenv("CUDA_VISIBLE_DEVICES", "1,7,0", 1); /* stops at the invalid entry */
    {
        pid_t p = fork();
        if (p == 0) {
            OK(cu.cuInit(0));
            OK(cu.cuDeviceGetCount(&n));
            CHECK(n == 1);
            _exit(0);
        }
        wait_ok(p);
    }
    setenv("CUDA_VISIBLE_DEVICES", "", 1);
    {
        pid_t p = fork();
        if (p == 0) {
            CHECK_RC(cu.cuInit(0), CUDA_ERROR_NO_DEVICE);
            _exit(0);
        }
        wait_ok(p);
    }
}

static void test_visible_devices(void **state)
{
    (void)state;
    run_child(visible_body, three_devs);
}

/* ---- shared memory across processes ----------------------------------------- */
static int sync_pipe[2], go_pipe[2];

static void hold_alloc(int mib)
{
    CUdeviceptr d;
    char c = 0;
    init_ctx();
    c = cu.cuMemAlloc_v2(&d, (size_t)mib * MiB) == CUDA_SUCCESS ? 'y' : 'n';
    CHECK(write(sync_pipe[1], &c, 1) == 1);
    CHECK(read(go_pipe[0], &c, 1) == 1); /* wait until told */
}

static void shared_body(void)
{
    pid_t kids[5];
    char c, go[5] = {0};
    int yes = 0;
    CHECK(pipe(sync_pipe) == 0 && pipe(go_pipe) == 0);
    init_ctx();
    kids[0] = spawn(hold_alloc, 256);
    CHECK(read(sync_pipe[0], &c, 1) == 1 && c == 'y');
    CHECK(cu_used() == 256 * MiB);
    CHECK(nv_used(0) == 256 * MiB);
    for (int i = 1; i < 5; i++)
        kids[i] = spawn(hold_alloc, 256);
    for (int i = 1; i < 5; i++) {
        CHECK(read(sync_pipe[0], &c, 1) == 1);
        yes += c == 'y';
    }
    CHECK(yes == 3); /* 1 GiB device: only four 256 MiB allocations fit */
    CHECK(cu_free() == 0);
    {
        CUdeviceptr d;
        CHECK_RC(cu.cuMemAlloc_v2(&d, 1), CUDA_ERROR_OUT_OF_MEMORY);
    }
    CHECK(write(go_pipe[1], go, 5) == 5);
    for (int i = 0; i < 5; i++)
        wait_ok(kids[i]);
    CHECK(cu_used() == 0); /* children exited: memory back */
}

static void test_shared_memory(void **state)
{
    (void)state;
    run_child(shared_body, NULL);
}

static void reclaim_body(void)
{
    pid_t kid;
    char c;
    CHECK(pipe(sync_pipe) == 0 && pipe(go_pipe) == 0);
    init_ctx();
    kid = spawn(hold_alloc, 512);
    CHECK(read(sync_pipe[0], &c, 1) == 1 && c == 'y');
    CHECK(cu_used() == 512 * MiB);
    kill(kid, SIGKILL);
    waitpid(kid, NULL, 0);
    CHECK(cu_used() == 0);
    CHECK(nv_used(0) == 0);
}

static void test_dead_process_reclaim(void **state)
{
    (void)state;
    run_child(reclaim_body, NULL);
}

/* 8 processes create the state file and allocate at once */
static int release_pipe[2];

static void race_alloc(int unused)
{
    CUdeviceptr d;
    char c;
    (void)unused;
    close(release_pipe[1]);
    CHECK(read(go_pipe[0], &c, 1) == 1);
    init_ctx();
    OK(cu.cuMemAlloc_v2(&d, 16 * MiB));
    c = 'y';
    CHECK(write(sync_pipe[1], &c, 1) == 1);
    CHECK(read(release_pipe[0], &c, 1) == 0); /* until the parent closes it */
}

static void race_body(void)
{
    pid_t kids[8];
    char c, go[16] = {0};
    CHECK(pipe(sync_pipe) == 0 && pipe(go_pipe) == 0 && pipe(release_pipe) == 0);
    for (int i = 0; i < 8; i++)
        kids[i] = spawn(race_alloc, 0);
    CHECK(write(go_pipe[1], go, 8) == 8);
    for (int i = 0; i < 8; i++)
        CHECK(read(sync_pipe[0], &c, 1) == 1 && c == 'y');
    CHECK(nv_used(0) == 8 * 16 * MiB);
    close(release_pipe[1]);
    for (int i = 0; i < 8; i++)
        wait_ok(kids[i]);
    CHECK(nv_used(0) == 0);
}

static void test_concurrent_start(void **state)
{
    (void)state;
    run_child(race_body, NULL);
}

/* ---- contexts ------------------------------------------------------------------ */
static void ctx_body(void)
{
    CUcontext p, c, cur;
    CUdeviceptr d;
    OK(cu.cuInit(0));
    CHECK(nv_used(0) == 0);
    OK(cu.cuDevicePrimaryCtxRetain(&p, 0));
    CHECK(nv_used(0) == 64 * MiB);
    OK(cu.cuDevicePrimaryCtxRetain(&p, 0));
    CHECK(nv_used(0) == 64 * MiB); /* a second reference holds nothing more */
    OK(cu.cuCtxCreate_v4(&c, NULL, 0, 0));
    CHECK(nv_used(0) == 128 * MiB); /* every context holds its own */
    OK(cu.cuCtxGetCurrent(&cur));
    CHECK(cur == c);
    OK(cu.cuMemAlloc_v2(&d, MiB));
    CHECK(nv_used(0) == 129 * MiB);
    OK(cu.cuCtxDestroy_v2(c)); /* its memory goes with it */
    CHECK(nv_used(0) == 64 * MiB);
    CHECK_RC(cu.cuMemFree_v2(d), CUDA_ERROR_INVALID_VALUE);
    OK(cu.cuDevicePrimaryCtxRelease_v2(0));
    CHECK(nv_used(0) == 64 * MiB);
    OK(cu.cuDevicePrimaryCtxRelease_v2(0));
    CHECK(nv_used(0) == 0);
    CHECK_RC(cu.cuDevicePrimaryCtxRelease_v2(0), CUDA_ERROR_INVALID_CONTEXT);
    /* implicit primary context, like the runtime */
    OK(cu.cuMemAlloc_v2(&d, MiB));
    CHECK(nv_used(0) == 65 * MiB);
    OK(cu.cuCtxGetCurrent(&cur));
    CHECK(cur == p);
    OK(cu.cuDevicePrimaryCtxReset_v2(0));
    CHECK(nv_used(0) == 0);
    /* cuCtxCreate (legacy), _v2 / _v3 push */
    OK(cu.cuCtxCreate_v2(&c, 0, 0));
    OK(cu.cuCtxCreate_v3(&p, NULL, 0, 0, 0));
    CHECK(nv_used(0) == 128 * MiB);
    OK(cu.cuCtxPopCurrent_v2(&cur));
    CHECK(cur == p);
    OK(cu.cuCtxGetCurrent(&cur));
    CHECK(cur == c);
    OK(cu.cuCtxDestroy_v2(p));
    OK(cu.cuCtxDestroy(c));
    CHECK(nv_used(0) == 0);
    OK(cu.cuCtxCreate(&c, 0, 0));
    CHECK(nv_used(0) == 64 * MiB);
    OK(cu.cuCtxDestroy_v2(c));
    CHECK(nv_used(0) == 0);
}

/* cuCtxSetLimit: stack size x resident threads, printf FIFO, malloc heap */
static void limits_body(void)
{
    CUcontext c;
    size_t v = 0;
    const uint64_t threads = 132ULL * 2048; /* gpusim: 132 SMs x 2048 resident threads */
    OK(cu.cuInit(0));
    OK(cu.cuDevicePrimaryCtxRetain(&c, 0));
    OK(cu.cuCtxSetCurrent(c));
    CHECK(nv_used(0) == 64 * MiB);
    OK(cu.cuCtxGetLimit(&v, CU_LIMIT_STACK_SIZE));
    CHECK(v == 1024);
    OK(cu.cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 2048));
    CHECK(nv_used(0) == 64 * MiB + 1024 * threads);
    OK(cu.cuCtxSetLimit(CU_LIMIT_PRINTF_FIFO_SIZE, 5 * MiB));
    OK(cu.cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 40 * MiB));
    CHECK(nv_used(0) == 64 * MiB + 1024 * threads + 4 * MiB + 32 * MiB);
    OK(cu.cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 1024)); /* lowering gives it back */
    CHECK(nv_used(0) == 100 * MiB);
    /* more than the device has: refused, unchanged */
    CHECK_RC(cu.cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 4 * GiB), CUDA_ERROR_OUT_OF_MEMORY);
    OK(cu.cuCtxGetLimit(&v, CU_LIMIT_MALLOC_HEAP_SIZE));
    CHECK(v == 40 * MiB);
    CHECK(nv_used(0) == 100 * MiB);
    CHECK_RC(cu.cuCtxSetLimit((CUlimit)42, 1), CUDA_ERROR_INVALID_VALUE);
    OK(cu.cuDevicePrimaryCtxReset_v2(0));
    CHECK(nv_used(0) == 0);
    /* a fresh primary context starts at the defaults again */
    OK(cu.cuDevicePrimaryCtxRetain(&c, 0));
    OK(cu.cuCtxSetCurrent(c));
    OK(cu.cuCtxGetLimit(&v, CU_LIMIT_MALLOC_HEAP_SIZE));
    CHECK(v == 8 * MiB);
    CHECK(nv_used(0) == 64 * MiB);
}

/* the base overhead depends on the device */
static void per_device_body(void)
{
    CUcontext c0, c1;
    OK(cu.cuInit(0));
    OK(cu.cuDevicePrimaryCtxRetain(&c0, 0));
    OK(cu.cuDevicePrimaryCtxRetain(&c1, 1));
    CHECK(nv_used(0) == 64 * MiB);
    CHECK(nv_used(1) == 96 * MiB);
}

/* modules and libraries take device memory while loaded */
static void modules_body(void)
{
    CUmodule m, m2;
    CUlibrary l;
    CUfunction fn;
    char path[600];
    FILE *fp;
    nvmlDevice_t nd;
    nvmlProcessInfo_t infos[8];
    unsigned cnt = 8;
    init_ctx();
    /* like NVML: a process with a context is listed, even holding nothing */
    CHECK(nv.init() == NVML_SUCCESS && nv.handle(0, &nd) == NVML_SUCCESS);
    CHECK(nv.procs(nd, &cnt, infos) == NVML_SUCCESS && cnt == 1);
    CHECK(infos[0].pid == (unsigned)getpid() && infos[0].usedGpuMemory == 0);
    OK(cu.cuModuleLoadData(&m, "gpusim-module 3145728"));
    CHECK(nv_used(0) == 4 * MiB); /* rounded up to 2 MiB */
    OK(cu.cuModuleGetFunction(&fn, m, "k"));
    OK(cu.cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
    OK(cu.cuModuleLoadDataEx(&m2, "gpusim-module 2097152", 0, NULL, NULL));
    OK(cu.cuLibraryLoadData(&l, "gpusim-module 8388608", NULL, NULL, 0, NULL, NULL, 0));
    CHECK(nv_used(0) == 14 * MiB);
    OK(cu.cuModuleUnload(m2));
    OK(cu.cuLibraryUnload(l));
    CHECK_RC(cu.cuLibraryUnload(l), CUDA_ERROR_INVALID_HANDLE);
    CHECK(nv_used(0) == 4 * MiB);
    CHECK_RC(cu.cuModuleLoadData(&m2, "\x7f"
                                      "ELF"),
             CUDA_ERROR_INVALID_IMAGE);
    CHECK_RC(cu.cuModuleLoadData(&m2, "gpusim-module 2Gi"), CUDA_ERROR_INVALID_IMAGE);
    CHECK_RC(cu.cuModuleLoadData(&m2, "gpusim-module 2147483648"), CUDA_ERROR_OUT_OF_MEMORY);
    snprintf(path, sizeof path, "%s/mod-%d", tmpdir, (int)getpid());
    fp = fopen(path, "w");
    CHECK(fp != NULL);
    fputs("gpusim-module 1048576\n", fp);
    fclose(fp);
    OK(cu.cuModuleLoad(&m2, path));
    OK(cu.cuLibraryLoadFromFile(&l, path, NULL, NULL, 0, NULL, NULL, 0));
    CHECK(nv_used(0) == 8 * MiB);
    CHECK_RC(cu.cuModuleLoad(&m2, "/nonexistent/module"), CUDA_ERROR_NOT_FOUND);
    OK(cu.cuModuleUnload(m));
    CHECK(nv_used(0) == 4 * MiB);
    unlink(path);
}

static const char *const per_device_env[] = {"GPUSIM_CTX_OVERHEAD=64Mi,96Mi",
                                             "GPUSIM_DEVICES=1Gi,1Gi", NULL};

static void test_limits_modules(void **state)
{
    static const char *const env64[] = {"GPUSIM_CTX_OVERHEAD=64Mi", "GPUSIM_DEVICES=2Gi", NULL};
    (void)state;
    run_child(limits_body, env64);
    run_child(per_device_body, per_device_env);
    run_child(modules_body, NULL);
}

static const char *const ctx_env[] = {"GPUSIM_CTX_OVERHEAD=64Mi", NULL};

static void test_context_overhead(void **state)
{
    (void)state;
    run_child(ctx_body, ctx_env);
}

static void strict_body(void)
{
    CUdeviceptr d;
    CHECK_RC(cu.cuMemAlloc_v2(&d, MiB), CUDA_ERROR_NOT_INITIALIZED);
    OK(cu.cuInit(0));
    CHECK_RC(cu.cuMemAlloc_v2(&d, MiB), CUDA_ERROR_INVALID_CONTEXT);
}

static const char *const strict_env[] = {"GPUSIM_STRICT_CTX=1", NULL};

static void test_strict_context(void **state)
{
    (void)state;
    run_child(strict_body, strict_env);
}

/* ---- plain, pitched, managed, legacy --------------------------------------------- */
static void plain_body(void)
{
    CUdeviceptr a, b;
    size_t pitch;
    init_ctx();
    OK(cu.cuMemAlloc_v2(&a, 1000));
    OK(cu.cuMemAlloc_v2(&b, 1000));
    CHECK(a != b && a % 256 == 0 && b % 256 == 0);
    CHECK(cu_used() == 2000);
    CHECK_RC(cu.cuMemAlloc_v2(&a, 0), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(cu.cuMemAlloc_v2(&a, 2 * GiB), CUDA_ERROR_OUT_OF_MEMORY);
    OK(cu.cuMemFree_v2(b));
    CHECK_RC(cu.cuMemFree_v2(b), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(cu.cuMemFree_v2(12345), CUDA_ERROR_INVALID_VALUE);
    OK(cu.cuMemFreeAsync(a, NULL)); /* allowed for cuMemAlloc memory */
    CHECK(cu_used() == 0);
    OK(cu.cuMemAllocPitch_v2(&a, &pitch, 1000, 10, 4));
    CHECK(pitch == 1024);
    CHECK(cu_used() == 10240);
    CHECK_RC(cu.cuMemAllocPitch_v2(&b, &pitch, 1000, 10, 3), CUDA_ERROR_INVALID_VALUE);
    OK(cu.cuMemFree_v2(a));
    OK(cu.cuMemAllocManaged(&a, 5 * MiB, CU_MEM_ATTACH_GLOBAL));
    CHECK(cu_used() == 5 * MiB);
    OK(cu.cuMemFree_v2(a));
    CHECK(cu_used() == 0);
}

static void test_plain_pitch_managed(void **state)
{
    (void)state;
    run_child(plain_body, NULL);
}

static void legacy_body(void)
{
    CUdeviceptr_v1 p;
    unsigned f, t, pitch, tm;
    init_ctx();
    OK(cu.cuMemGetInfo(&f, &t));
    CHECK(t == UINT32_MAX && f == UINT32_MAX); /* 16 GiB clamps */
    OK(cu.cuDeviceTotalMem(&tm, 0));
    CHECK(tm == UINT32_MAX);
    OK(cu.cuMemAlloc(&p, 3 * MiB));
    CHECK(p != 0 && p % 256 == 0);
    CHECK(cu_used() == 3 * MiB);
    OK(cu.cuMemFree(p));
    OK(cu.cuMemAllocPitch(&p, &pitch, 100, 4, 8));
    CHECK(pitch == 512 && cu_used() == 2048);
    OK(cu.cuMemFree(p));
    CHECK(cu_used() == 0);
    CHECK_RC(cu.cuArrayCreate(NULL, NULL), CUDA_ERROR_NOT_SUPPORTED);
}

static const char *const big_dev[] = {"GPUSIM_DEVICES=16Gi", NULL};

static void test_legacy(void **state)
{
    (void)state;
    run_child(legacy_body, big_dev);
}

/* ---- pools ----------------------------------------------------------------------- */
static cuuint64_t pool_attr(CUmemoryPool p, CUmemPool_attribute a)
{
    cuuint64_t v = 0;
    OK(cu.cuMemPoolGetAttribute(p, a, &v));
    return v;
}

static void pool_body(void)
{
    CUmemoryPool dp, cp, mine;
    CUdeviceptr a, b;
    CUstream s;
    cuuint64_t thr = 8 * MiB, zero = 0;
    CUmemPoolProps props = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                            .location = {CU_MEM_LOCATION_TYPE_DEVICE, 0}};
    init_ctx();
    OK(cu.cuDeviceGetDefaultMemPool(&dp, 0));
    OK(cu.cuDeviceGetMemPool(&cp, 0));
    CHECK(dp == cp);
    OK(cu.cuStreamCreate(&s, 0));
    OK(cu.cuMemAllocAsync(&a, MiB, s));
    CHECK(pool_attr(dp, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) == 2 * MiB);
    CHECK(pool_attr(dp, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) == MiB);
    CHECK(cu_used() == 2 * MiB);
    OK(cu.cuMemAllocAsync_ptsz(&b, MiB, s)); /* fits in the reservation */
    CHECK(cu_used() == 2 * MiB);
    OK(cu.cuMemFreeAsync(a, s));
    OK(cu.cuMemFreeAsync_ptsz(b, s));
    CHECK(pool_attr(dp, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) == 0);
    CHECK(cu_used() == 2 * MiB); /* reserved until a sync */
    OK(cu.cuStreamSynchronize(s));
    CHECK(cu_used() == 0);
    CHECK(pool_attr(dp, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH) == 2 * MiB);
    CHECK(pool_attr(dp, CU_MEMPOOL_ATTR_USED_MEM_HIGH) == 2 * MiB);
    OK(cu.cuMemPoolSetAttribute(dp, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &zero));
    CHECK(pool_attr(dp, CU_MEMPOOL_ATTR_USED_MEM_HIGH) == 0);
    /* release threshold keeps memory over a sync; trim releases it */
    OK(cu.cuMemPoolSetAttribute(dp, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &thr));
    CHECK(pool_attr(dp, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD) == 8 * MiB);
    OK(cu.cuMemAllocAsync(&a, 20 * MiB, NULL));
    OK(cu.cuMemFreeAsync(a, NULL));
    OK(cu.cuCtxSynchronize());
    CHECK(cu_used() == 8 * MiB);
    OK(cu.cuMemAllocAsync(&a, 3 * MiB, NULL));
    OK(cu.cuMemPoolTrimTo(dp, 0));
    CHECK(cu_used() == 4 * MiB); /* used 3 MiB, rounded to 2 MiB granules */
    OK(cu.cuMemFreeAsync(a, NULL));
    OK(cu.cuMemPoolTrimTo(dp, 0));
    CHECK(cu_used() == 0);
    /* own pool, made current, destroyed */
    OK(cu.cuMemPoolCreate(&mine, &props));
    OK(cu.cuMemAllocFromPoolAsync(&a, 5 * MiB, mine, s));
    OK(cu.cuMemAllocFromPoolAsync_ptsz(&b, 5 * MiB, mine, s));
    CHECK(cu_used() == 10 * MiB);
    OK(cu.cuDeviceSetMemPool(0, mine));
    OK(cu.cuDeviceGetMemPool(&cp, 0));
    CHECK(cp == mine);
    OK(cu.cuMemFreeAsync(a, s));
    OK(cu.cuMemPoolDestroy(mine)); /* reserved, less what is in use, goes back */
    CHECK(cu_used() == 5 * MiB);
    OK(cu.cuMemFreeAsync(b, s));
    CHECK(cu_used() == 0);
    OK(cu.cuDeviceGetMemPool(&cp, 0));
    CHECK(cp == dp);
    CHECK_RC(cu.cuMemPoolDestroy(dp), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(cu.cuMemAllocAsync(&a, 2 * GiB, s), CUDA_ERROR_OUT_OF_MEMORY);
    OK(cu.cuStreamDestroy_v2(s));
    CHECK_RC(cu.cuStreamSynchronize(s), CUDA_ERROR_INVALID_HANDLE);
}

static void test_pools(void **state)
{
    (void)state;
    run_child(pool_body, NULL);
}

/* ---- VMM, arrays, graphs ------------------------------------------------------------ */
static void vmm_body(void)
{
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {CU_MEM_LOCATION_TYPE_DEVICE, 0}};
    size_t g;
    CUmemGenericAllocationHandle h;
    CUdeviceptr va;
    CUmemAccessDesc acc = {.location = {CU_MEM_LOCATION_TYPE_DEVICE, 0},
                           .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    init_ctx();
    OK(cu.cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CHECK(g == 2 * MiB);
    CHECK_RC(cu.cuMemCreate(&h, 3 * MiB, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    OK(cu.cuMemCreate(&h, 4 * MiB, &prop, 0));
    CHECK(cu_used() == 4 * MiB);
    OK(cu.cuMemAddressReserve(&va, 8 * MiB, 0, 0, 0));
    CHECK(va % (2 * MiB) == 0);
    OK(cu.cuMemMap(va, 4 * MiB, 0, h, 0));
    OK(cu.cuMemSetAccess(va, 4 * MiB, &acc, 1));
    CHECK(cu_used() == 4 * MiB); /* mapping charges nothing */
    OK(cu.cuMemUnmap(va, 4 * MiB));
    OK(cu.cuMemAddressFree(va, 8 * MiB));
    OK(cu.cuMemRelease(h));
    CHECK_RC(cu.cuMemRelease(h), CUDA_ERROR_INVALID_VALUE);
    CHECK(cu_used() == 0);
    prop.location.id = 5;
    CHECK_RC(cu.cuMemCreate(&h, 2 * MiB, &prop, 0), CUDA_ERROR_INVALID_DEVICE);
    prop.location.id = 0;
    CHECK_RC(cu.cuMemCreate(&h, 2 * GiB, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
}

static void test_vmm(void **state)
{
    (void)state;
    run_child(vmm_body, NULL);
}

static void array_body(void)
{
    CUarray a;
    CUmipmappedArray m;
    CUDA_ARRAY_DESCRIPTOR d2 = {
        .Width = 1000, .Height = 1000, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1};
    CUDA_ARRAY3D_DESCRIPTOR d3 = {.Width = 1024,
                                  .Height = 1024,
                                  .Depth = 0,
                                  .Format = CU_AD_FORMAT_UNSIGNED_INT8,
                                  .NumChannels = 4};
    CUDA_ARRAY_MEMORY_REQUIREMENTS r;
    init_ctx();
    OK(cu.cuArrayCreate_v2(&a, &d2));
    OK(cu.cuArrayGetMemoryRequirements(&r, a, 0));
    CHECK(r.size == 4 * MiB && r.alignment == 512); /* 4096 B rows x 1000 -> 2 MiB granules */
    CHECK(cu_used() == r.size);
    OK(cu.cuArrayDestroy(a));
    CHECK_RC(cu.cuArrayDestroy(a), CUDA_ERROR_INVALID_HANDLE);
    CHECK(cu_used() == 0);
    OK(cu.cuArray3DCreate_v2(&a, &d3));
    OK(cu.cuArrayGetMemoryRequirements(&r, a, 0));
    CHECK(r.size == 4 * MiB);
    OK(cu.cuArrayDestroy(a));
    /* mipmaps: 4 MiB + 1 MiB + 256 KiB = 5.25 MiB -> 6 MiB */
    OK(cu.cuMipmappedArrayCreate(&m, &d3, 3));
    OK(cu.cuMipmappedArrayGetMemoryRequirements(&r, m, 0));
    CHECK(r.size == 6 * MiB);
    CHECK(cu_used() == 6 * MiB);
    OK(cu.cuMipmappedArrayDestroy(m));
    CHECK(cu_used() == 0);
    CHECK_RC(cu.cuMipmappedArrayCreate(&m, &d3, 12), CUDA_ERROR_INVALID_VALUE);
    d3.NumChannels = 3;
    CHECK_RC(cu.cuArray3DCreate_v2(&a, &d3), CUDA_ERROR_INVALID_VALUE);
}

static void test_arrays(void **state)
{
    (void)state;
    run_child(array_body, NULL);
}

static cuuint64_t graph_attr(CUgraphMem_attribute a)
{
    cuuint64_t v = 0;
    OK(cu.cuDeviceGetGraphMemAttribute(0, a, &v));
    return v;
}

static void graph_body(void)
{
    CUgraph g, big;
    CUgraphNode n, fnode;
    CUgraphExec e, eb;
    CUDA_MEM_ALLOC_NODE_PARAMS prm = {.poolProps = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                                                    .location = {CU_MEM_LOCATION_TYPE_DEVICE, 0}},
                                      .bytesize = 3 * MiB};
    init_ctx();
    OK(cu.cuGraphCreate(&g, 0));
    OK(cu.cuGraphAddMemAllocNode(&n, g, NULL, 0, &prm));
    CHECK(prm.dptr != 0);
    OK(cu.cuGraphAddMemFreeNode(&fnode, g, &n, 1, prm.dptr));
    OK(cu.cuGraphAddMemAllocNode(&n, g, &fnode, 1, &prm));
    OK(cu.cuGraphInstantiateWithFlags(&e, g, 0));
    CHECK(cu_used() == 0); /* nothing until launch */
    OK(cu.cuGraphLaunch(e, NULL));
    CHECK(cu_used() == 6 * MiB);
    CHECK(graph_attr(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT) == 6 * MiB);
    CHECK(graph_attr(CU_GRAPH_MEM_ATTR_USED_MEM_HIGH) == 6 * MiB);
    CHECK(graph_attr(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT) == 0);
    OK(cu.cuGraphLaunch_ptsz(e, NULL)); /* reuses the reservation */
    CHECK(cu_used() == 6 * MiB);
    OK(cu.cuDeviceGraphMemTrim(0));
    CHECK(cu_used() == 0);
    CHECK(graph_attr(CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH) == 6 * MiB);
    /* a graph bigger than the device fails at launch */
    OK(cu.cuGraphCreate(&big, 0));
    prm.bytesize = 2 * GiB;
    OK(cu.cuGraphAddMemAllocNode(&n, big, NULL, 0, &prm));
    OK(cu.cuGraphInstantiateWithFlags(&eb, big, 0));
    CHECK_RC(cu.cuGraphLaunch(eb, NULL), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(cu_used() == 0);
    OK(cu.cuGraphExecDestroy(eb));
    OK(cu.cuGraphExecDestroy(e));
    OK(cu.cuGraphDestroy(g));
    OK(cu.cuGraphDestroy(big));
    CHECK_RC(cu.cuLaunchKernel(NULL, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL),
             CUDA_ERROR_INVALID_HANDLE);
    OK(cu.cuLaunchKernel((CUfunction)0x1000, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
}

static void test_graphs(void **state)
{
    (void)state;
    run_child(graph_body, NULL);
}

/* ---- cuGetProcAddress ---------------------------------------------------------------- */
static void *gpa2(const char *sym, int ver, cuuint64_t flags, int want_status)
{
    void *p = (void *)1;
    CUdriverProcAddressQueryResult st;
    OK(cu.cuGetProcAddress_v2(sym, &p, ver, flags, &st));
    CHECK((int)st == want_status);
    return p;
}

static void procaddr_body(void)
{
    void *p = NULL;
    CHECK(gpa2("cuMemAlloc", 2000, 0, 0) == dlsym(cuda_lib, "cuMemAlloc"));
    CHECK(gpa2("cuMemAlloc", 3020, 0, 0) == dlsym(cuda_lib, "cuMemAlloc_v2"));
    CHECK(gpa2("cuMemAlloc", 12000, 0, 0) == (void *)cu.cuMemAlloc_v2);
    CHECK(gpa2("cuMemAllocAsync", 12000, 2, 0) == dlsym(cuda_lib, "cuMemAllocAsync_ptsz"));
    CHECK(gpa2("cuMemAllocAsync", 12000, 1, 0) == dlsym(cuda_lib, "cuMemAllocAsync"));
    CHECK(gpa2("cuMemAlloc", 12000, 2, 0) == dlsym(cuda_lib, "cuMemAlloc_v2")); /* no ptsz */
    CHECK(gpa2("cuGraphLaunch", 12000, 2, 0) == dlsym(cuda_lib, "cuGraphLaunch_ptsz"));
    CHECK(gpa2("cuCtxCreate", 12040, 0, 0) == dlsym(cuda_lib, "cuCtxCreate_v3"));
    CHECK(gpa2("cuCtxCreate", 13000, 0, 0) == dlsym(cuda_lib, "cuCtxCreate_v4"));
    CHECK(gpa2("cuGetProcAddress", 11030, 0, 0) == dlsym(cuda_lib, "cuGetProcAddress"));
    CHECK(gpa2("cuGetProcAddress", 12000, 0, 0) == dlsym(cuda_lib, "cuGetProcAddress_v2"));
    CHECK(gpa2("cuGraphInstantiate", 12000, 0, 0) ==
          dlsym(cuda_lib, "cuGraphInstantiateWithFlags"));
    CHECK(gpa2("cuMemAllocAsync", 11000, 0, 2) == NULL); /* version not sufficient */
    CHECK(gpa2("cuNoSuchThing", 12000, 0, 1) == NULL);
    CHECK(gpa2("cuMemAlloc_v2", 12000, 0, 1) == NULL); /* base names only */
    OK(cu.cuGetProcAddress_v2("cuInit", &p, 12000, 0, NULL));
    CHECK(p == dlsym(cuda_lib, "cuInit"));
    CHECK_RC(cu.cuGetProcAddress_v2("cuInit", &p, 13010, 0, NULL), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(cu.cuGetProcAddress_v2(NULL, &p, 12000, 0, NULL), CUDA_ERROR_INVALID_VALUE);
    /* the 4-argument form */
    OK(cu.cuGetProcAddress("cuMemFree", &p, 11080, 0));
    CHECK(p == dlsym(cuda_lib, "cuMemFree_v2"));
    OK(cu.cuGetProcAddress("cuGetProcAddress", &p, 12000, 0));
    CHECK(p == dlsym(cuda_lib, "cuGetProcAddress_v2"));
    CHECK_RC(cu.cuGetProcAddress("cuNoSuchThing", &p, 11080, 0), CUDA_ERROR_NOT_FOUND);
    CHECK(p == NULL);
    /* every export is reachable by its base name at its own version */
#define X(n, b, s, pt, params) CHECK(gpa2(#b, s, pt ? 2 : 0, 0) == dlsym(cuda_lib, #n));
    GS_CU_EXPORTS(X)
#undef X
    {
        const char *s = NULL;
        OK(cu.cuGetErrorName(CUDA_ERROR_OUT_OF_MEMORY, &s));
        CHECK(strcmp(s, "CUDA_ERROR_OUT_OF_MEMORY") == 0);
        OK(cu.cuGetErrorString(CUDA_ERROR_OUT_OF_MEMORY, &s));
        CHECK(strcmp(s, "out of memory") == 0);
        CHECK_RC(cu.cuGetErrorName(12345, &s), CUDA_ERROR_INVALID_VALUE);
    }
    {
        int v;
        OK(cu.cuDriverGetVersion(&v));
        CHECK(v == 13000);
    }
}

static void test_get_proc_address(void **state)
{
    (void)state;
    run_child(procaddr_body, NULL);
}

/* ---- bytes: copies, memsets, pinned and registered host memory ------------------- */
static long rss_pages(void)
{
    long size = 0, rss = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    CHECK(f && fscanf(f, "%ld %ld", &size, &rss) == 2);
    fclose(f);
    return rss;
}

static void copies_body(void)
{
    CUdeviceptr a, b, p, lg, big;
    CUstream s;
    unsigned char src[4096], dst[4096];
    CUdeviceptr_v1 legacy;
    long before;
    init_ctx();
    for (int i = 0; i < 4096; i++)
        src[i] = (unsigned char)(i * 7 + 3);
    OK(cu.cuMemAlloc_v2(&a, 4096));
    OK(cu.cuMemAlloc_v2(&b, 4096));
    OK(cu.cuMemcpyHtoD_v2(a, src, 4096));
    OK(cu.cuMemcpyDtoD_v2(b, a, 4096));
    memset(dst, 0, sizeof dst);
    OK(cu.cuMemcpyDtoH_v2(dst, b, 4096));
    CHECK(memcmp(src, dst, 4096) == 0);
    /* inside an allocation, and up to its last byte */
    OK(cu.cuMemcpyDtoH_v2(dst, a + 4000, 96));
    CHECK(memcmp(dst, src + 4000, 96) == 0);
    OK(cu.cuMemsetD8_v2(a + 100, 0xAB, 10));
    OK(cu.cuMemcpyDtoH_v2(dst, a + 99, 12));
    CHECK(dst[0] == src[99] && dst[1] == 0xAB && dst[10] == 0xAB && dst[11] == src[110]);
    /* async forms on a stream: done when they return */
    OK(cu.cuStreamCreate(&s, 0));
    OK(cu.cuMemcpyHtoDAsync_v2(a, src, 4096, s));
    OK(cu.cuMemsetD8Async(b, 0x11, 4096, s));
    OK(cu.cuMemcpyDtoDAsync_v2(b + 1, a + 1, 10, s));
    OK(cu.cuMemcpyDtoHAsync_v2(dst, b, 4096, s));
    CHECK(dst[0] == 0x11 && memcmp(dst + 1, src + 1, 10) == 0 && dst[11] == 0x11);
    {
        CUstream gone;
        OK(cu.cuStreamCreate(&gone, 0));
        OK(cu.cuStreamDestroy_v2(gone));
        CHECK_RC(cu.cuMemcpyHtoDAsync_v2(a, src, 1, gone), CUDA_ERROR_INVALID_HANDLE);
        CHECK_RC(cu.cuEventRecord(NULL, gone), CUDA_ERROR_INVALID_HANDLE);
    }
    /* past the end, unknown, NULL host, freed: refused, nothing moves */
    CHECK_RC(cu.cuMemcpyHtoD_v2(a + 1, src, 4096), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(cu.cuMemcpyDtoH_v2(dst, 0x1234, 1), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(cu.cuMemcpyHtoD_v2(a, NULL, 1), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(cu.cuMemsetD8_v2(a, 0, 4097), CUDA_ERROR_INVALID_VALUE);
    OK(cu.cuMemcpyHtoD_v2(a, src, 0)); /* nothing to copy */
    OK(cu.cuMemFree_v2(b));
    CHECK_RC(cu.cuMemcpyDtoD_v2(b, a, 16), CUDA_ERROR_INVALID_VALUE);
    /* pools hold bytes too; legacy 32-bit allocations have none */
    OK(cu.cuMemAllocAsync(&p, 64, s));
    OK(cu.cuMemcpyHtoD_v2(p, src, 64));
    OK(cu.cuMemcpyDtoH_v2(dst, p, 64));
    CHECK(memcmp(dst, src, 64) == 0);
    OK(cu.cuMemFreeAsync(p, s));
    CHECK_RC(cu.cuMemcpyHtoD_v2(p, src, 1), CUDA_ERROR_INVALID_VALUE);
    OK(cu.cuMemAlloc(&legacy, 64));
    lg = legacy;
    CHECK_RC(cu.cuMemcpyHtoD_v2(lg, src, 1), CUDA_ERROR_NOT_SUPPORTED);
    /* sparse: 900 MiB of a 1 GiB device costs only the touched page */
    before = rss_pages();
    OK(cu.cuMemAlloc_v2(&big, 900 * MiB));
    OK(cu.cuMemsetD8_v2(big + 900 * MiB - 1, 1, 1));
    CHECK(rss_pages() - before < (long)(16 * MiB / 4096));
    OK(cu.cuMemFree_v2(big));
    CHECK(cu_used() == 4096 + 64 + 2 * MiB); /* the pool keeps its 2 MiB reservation */
    OK(cu.cuMemFree_v2(a));
}

static void test_copies(void **state)
{
    (void)state;
    run_child(copies_body, NULL);
}

static void host_body(void)
{
    void *h;
    unsigned flags;
    CUdeviceptr d, a;
    char *buf = malloc(8192), out[16];
    init_ctx();
    CHECK_RC(cu.cuMemHostAlloc(&h, 4096, 0x80), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(cu.cuMemHostAlloc(&h, 0, 0), CUDA_ERROR_INVALID_VALUE);
    OK(cu.cuMemHostAlloc(&h, 4096, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
    CHECK(cu_used() == 0); /* pinned host memory is not device memory */
    OK(cu.cuMemHostGetFlags(&flags, h));
    CHECK(flags == (CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
    OK(cu.cuMemHostGetDevicePointer_v2(&d, h, 0));
    CHECK(d == (CUdeviceptr)(uintptr_t)h); /* unified addressing */
    CHECK_RC(cu.cuMemHostGetDevicePointer_v2(&d, h, 1), CUDA_ERROR_INVALID_VALUE);
    OK(cu.cuMemAlloc_v2(&a, 16));
    memcpy(h, "pinned bytes 123", 16);
    OK(cu.cuMemcpyDtoD_v2(a, d, 16)); /* the device sees it through its pointer */
    OK(cu.cuMemcpyDtoH_v2(out, a, 16));
    CHECK(memcmp(out, "pinned bytes 123", 16) == 0);
    OK(cu.cuMemFreeHost(h));
    CHECK_RC(cu.cuMemFreeHost(h), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(cu.cuMemHostGetFlags(&flags, h), CUDA_ERROR_INVALID_VALUE);
    /* registration of memory the process has */
    CHECK(buf);
    OK(cu.cuMemHostRegister_v2(buf, 8192, CU_MEMHOSTREGISTER_DEVICEMAP));
    CHECK_RC(cu.cuMemHostRegister_v2(buf + 100, 16, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    OK(cu.cuMemHostGetDevicePointer_v2(&d, buf + 10, 0));
    CHECK(d == (CUdeviceptr)(uintptr_t)(buf + 10));
    CHECK_RC(cu.cuMemHostGetFlags(&flags, buf), CUDA_ERROR_INVALID_VALUE); /* not HostAlloc'd */
    OK(cu.cuMemcpyDtoH_v2(buf + 8000, a, 16));
    CHECK(memcmp(buf + 8000, "pinned bytes 123", 16) == 0);
    CHECK_RC(cu.cuMemHostUnregister(buf + 1), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    OK(cu.cuMemHostUnregister(buf));
    CHECK_RC(cu.cuMemHostUnregister(buf), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    CHECK_RC(cu.cuMemHostRegister_v2(buf, 16, CU_MEMHOSTREGISTER_IOMEMORY),
             CUDA_ERROR_NOT_SUPPORTED);
    CHECK_RC(cu.cuMemHostRegister_v2(buf, 16, 0x100), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(cu.cuMemHostRegister_v2(NULL, 16, 0), CUDA_ERROR_INVALID_VALUE);
    OK(cu.cuMemFree_v2(a));
    free(buf);
}

static void test_host_memory(void **state)
{
    (void)state;
    run_child(host_body, NULL);
}

/* ---- what a pointer is ------------------------------------------------------------ */
static void pointer_body(void)
{
    CUdeviceptr a, m, base, dp, start;
    CUcontext ctx, got;
    size_t size, rsize;
    unsigned type;
    int v, ord;
    unsigned long long id1, id2;
    void *hp;
    init_ctx();
    OK(cu.cuCtxGetCurrent(&ctx));
    OK(cu.cuMemAlloc_v2(&a, 1000));
    OK(cu.cuMemAllocManaged(&m, 100, CU_MEM_ATTACH_GLOBAL));
    OK(cu.cuMemGetAddressRange_v2(&base, &size, a + 999));
    CHECK(base == a && size == 1000);
    CHECK_RC(cu.cuMemGetAddressRange_v2(&base, &size, a + 1000), CUDA_ERROR_NOT_FOUND);
    OK(cu.cuPointerGetAttribute(&got, CU_POINTER_ATTRIBUTE_CONTEXT, a + 5));
    CHECK(got == ctx);
    OK(cu.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, a + 5));
    CHECK(type == CU_MEMORYTYPE_DEVICE);
    OK(cu.cuPointerGetAttribute(&dp, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, a + 5));
    CHECK(dp == a + 5);
    CHECK_RC(cu.cuPointerGetAttribute(&hp, CU_POINTER_ATTRIBUTE_HOST_POINTER, a),
             CUDA_ERROR_INVALID_VALUE);
    OK(cu.cuPointerGetAttribute(&hp, CU_POINTER_ATTRIBUTE_HOST_POINTER, m));
    OK(cu.cuPointerGetAttribute(&v, CU_POINTER_ATTRIBUTE_IS_MANAGED, m));
    CHECK(v == 1);
    OK(cu.cuPointerGetAttribute(&v, CU_POINTER_ATTRIBUTE_IS_MANAGED, a));
    CHECK(v == 0);
    OK(cu.cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, a));
    CHECK(ord == 0);
    OK(cu.cuPointerGetAttribute(&id1, CU_POINTER_ATTRIBUTE_BUFFER_ID, a));
    OK(cu.cuPointerGetAttribute(&id2, CU_POINTER_ATTRIBUTE_BUFFER_ID, m));
    CHECK(id1 != id2);
    OK(cu.cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, a + 7));
    OK(cu.cuPointerGetAttribute(&rsize, CU_POINTER_ATTRIBUTE_RANGE_SIZE, a + 7));
    CHECK(start == a && rsize == 1000);
    OK(cu.cuPointerGetAttribute(&v, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, a));
    CHECK(v == 1);
    OK(cu.cuPointerGetAttribute(&v, CU_POINTER_ATTRIBUTE_MAPPED, a));
    CHECK(v == 1);
    /* bogus pointers and attributes: refused, nothing written */
    v = 42;
    CHECK_RC(cu.cuPointerGetAttribute(&v, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, 0),
             CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(cu.cuPointerGetAttribute(&v, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, ~0ULL),
             CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(cu.cuPointerGetAttribute(&v, (CUpointer_attribute)999, a), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(cu.cuPointerGetAttribute(NULL, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, a),
             CUDA_ERROR_INVALID_VALUE);
    CHECK(v == 42);
    OK(cu.cuMemFree_v2(a));
    CHECK_RC(cu.cuPointerGetAttribute(&v, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, a),
             CUDA_ERROR_INVALID_VALUE);
    OK(cu.cuMemFree_v2(m));
}

static void test_pointer_attributes(void **state)
{
    (void)state;
    run_child(pointer_body, NULL);
}

/* ---- events and stream callbacks ------------------------------------------------------ */
static pthread_t callback_thread;
static void *callback_data;

static void on_stream_done(CUstream s, CUresult status, void *data)
{
    (void)s;
    CHECK(status == CUDA_SUCCESS);
    callback_thread = pthread_self();
    callback_data = data;
}

static void events_body(void)
{
    CUevent e1, e2, nt;
    CUstream s;
    float ms = -1;
    init_ctx();
    OK(cu.cuStreamCreate(&s, 0));
    CHECK_RC(cu.cuEventCreate(&e1, 0x80), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(cu.cuEventCreate(&e1, CU_EVENT_INTERPROCESS), CUDA_ERROR_INVALID_VALUE);
    OK(cu.cuEventCreate(&e1, CU_EVENT_DEFAULT));
    OK(cu.cuEventCreate(&e2, CU_EVENT_BLOCKING_SYNC));
    OK(cu.cuEventCreate(&nt, CU_EVENT_DISABLE_TIMING));
    OK(cu.cuEventQuery(e1)); /* nothing recorded: complete */
    CHECK_RC(cu.cuEventElapsedTime(&ms, e1, e2), CUDA_ERROR_INVALID_HANDLE);
    OK(cu.cuEventRecord(e1, s));
    OK(cu.cuEventRecord(e2, NULL));
    OK(cu.cuEventRecord(nt, s));
    OK(cu.cuEventSynchronize(e2));
    OK(cu.cuEventQuery(e2));
    OK(cu.cuEventElapsedTime(&ms, e1, e2));
    CHECK(ms >= 0);
    OK(cu.cuEventElapsedTime_v2(&ms, e1, e2));
    CHECK_RC(cu.cuEventElapsedTime(&ms, e1, nt), CUDA_ERROR_INVALID_HANDLE);
    OK(cu.cuStreamWaitEvent(s, e1, 0));
    CHECK_RC(cu.cuStreamWaitEvent(s, e1, 7), CUDA_ERROR_INVALID_VALUE);
    /* a callback runs on a thread of its own, before the call returns */
    OK(cu.cuStreamAddCallback(s, on_stream_done, &ms, 0));
    CHECK(callback_data == &ms && !pthread_equal(callback_thread, pthread_self()));
    CHECK_RC(cu.cuStreamAddCallback(s, on_stream_done, NULL, 1), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(cu.cuStreamAddCallback(s, NULL, NULL, 0), CUDA_ERROR_INVALID_VALUE);
    OK(cu.cuEventDestroy_v2(e1));
    CHECK_RC(cu.cuEventQuery(e1), CUDA_ERROR_INVALID_HANDLE);
    CHECK_RC(cu.cuEventDestroy_v2(e1), CUDA_ERROR_INVALID_HANDLE);
    CHECK_RC(cu.cuStreamWaitEvent(s, e1, 0), CUDA_ERROR_INVALID_HANDLE);
    OK(cu.cuEventDestroy(e2));
    OK(cu.cuEventDestroy_v2(nt));
}

static void test_events_and_callbacks(void **state)
{
    (void)state;
    run_child(events_body, NULL);
}

/* ---- IPC: another process maps the same bytes, charged to the exporter only ------------ */
static CUipcMemHandle ipc_handle;
static CUdeviceptr ipc_ptr;
static uint64_t ipc_used; /* the device's use with the export made */

static void importer(int forged)
{
    CUdeviceptr d;
    CUipcMemHandle h = ipc_handle;
    char buf[8];
    uint64_t before;
    init_ctx();
    before = cu_used();
    CHECK(before == ipc_used); /* the exporter's allocation, on the shared device */
    if (forged) {
        h.reserved[forged] ^= 1; /* any other bit of the handle */
        CHECK_RC(cu.cuIpcOpenMemHandle_v2(&d, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
                 CUDA_ERROR_INVALID_VALUE);
        _exit(0);
    }
    CHECK_RC(cu.cuIpcOpenMemHandle_v2(&d, h, 2), CUDA_ERROR_INVALID_VALUE);
    OK(cu.cuIpcOpenMemHandle_v2(&d, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    CHECK(cu_used() == before); /* opening charges nothing */
    OK(cu.cuMemcpyDtoH_v2(buf, d + 4088, 8));
    CHECK(memcmp(buf, "exported", 8) == 0);
    OK(cu.cuMemcpyHtoD_v2(d, "imported", 8));
    CHECK_RC(cu.cuMemcpyHtoD_v2(d + 4090, "imported", 8), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(cu.cuMemFree_v2(d), CUDA_ERROR_INVALID_VALUE); /* not this process's allocation */
    OK(cu.cuIpcCloseMemHandle(d));
    CHECK_RC(cu.cuIpcCloseMemHandle(d), CUDA_ERROR_INVALID_VALUE);
    _exit(0);
}

static void ipc_body(void)
{
    CUipcMemHandle again;
    CUdeviceptr d, pool;
    char buf[8];
    init_ctx();
    OK(cu.cuMemAlloc_v2(&ipc_ptr, 4096));
    OK(cu.cuMemcpyHtoD_v2(ipc_ptr + 4088, "exported", 8));
    CHECK_RC(cu.cuIpcGetMemHandle(&ipc_handle, ipc_ptr + 8), CUDA_ERROR_INVALID_VALUE);
    CHECK_RC(cu.cuIpcGetMemHandle(NULL, ipc_ptr), CUDA_ERROR_INVALID_VALUE);
    OK(cu.cuMemAllocAsync(&pool, 64, NULL));
    CHECK_RC(cu.cuIpcGetMemHandle(&again, pool), CUDA_ERROR_INVALID_VALUE); /* pools: no */
    OK(cu.cuMemFreeAsync(pool, NULL));
    OK(cu.cuIpcGetMemHandle(&ipc_handle, ipc_ptr));
    ipc_used = cu_used();
    OK(cu.cuIpcGetMemHandle(&again, ipc_ptr));
    CHECK(memcmp(&again, &ipc_handle, sizeof again) == 0); /* one export per allocation */
    CHECK_RC(cu.cuIpcOpenMemHandle_v2(&d, ipc_handle, 1), CUDA_ERROR_INVALID_CONTEXT);
    wait_ok(spawn(importer, 0));
    OK(cu.cuMemcpyDtoH_v2(buf, ipc_ptr, 8));
    CHECK(memcmp(buf, "imported", 8) == 0); /* the importer wrote these very bytes */
    for (int bit = 8; bit < 56; bit += 4)   /* pid, fd, inode, nonce, offset, size, index */
        wait_ok(spawn(importer, bit));
    /* freed: the handle opens nothing any more */
    OK(cu.cuMemFree_v2(ipc_ptr));
    {
        pid_t p = fork();
        if (p == 0) {
            CUdeviceptr x;
            init_ctx();
            CHECK_RC(cu.cuIpcOpenMemHandle_v2(&x, ipc_handle, 1), CUDA_ERROR_INVALID_VALUE);
            _exit(0);
        }
        wait_ok(p);
    }
}

static void test_ipc(void **state)
{
    (void)state;
    run_child(ipc_body, NULL);
}

/* ---- code: attributes, occupancy, the linker; peers, profiler, device queries --------- */
static size_t smem_of(int block)
{
    return (size_t)block * 64;
}

static void code_body(void)
{
    CUmodule mod;
    CUfunction f;
    CUlinkState ls;
    CUdeviceptr g;
    size_t gs_size, cubin_size;
    void *cubin;
    int v, grid, block, major, minor, active;
    unsigned flags;
    char path[512];
    static char ptx[3 * MiB]; /* the linker takes it whole, whatever it says */
    FILE *fp;
    init_ctx();
    OK(cu.cuModuleLoadData(&mod, "gpusim-module 1024"));
    OK(cu.cuModuleGetFunction(&f, mod, "k"));
    OK(cu.cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f));
    CHECK(v == 1024);
    OK(cu.cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, f));
    CHECK(v == 32);
    CHECK_RC(cu.cuFuncGetAttribute(&v, (CUfunction_attribute)99, f), CUDA_ERROR_INVALID_VALUE);
    OK(cu.cuFuncSetCacheConfig(f, CU_FUNC_CACHE_PREFER_L1));
    CHECK_RC(cu.cuFuncSetCacheConfig(f, (CUfunc_cache)9), CUDA_ERROR_INVALID_VALUE);
    OK(cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(&v, f, 256, 0));
    CHECK(v == 8);
    OK(cu.cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(&v, f, 32, 64 * 1024, 0));
    CHECK(v == 3); /* shared memory bounds it */
    CHECK_RC(cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(&v, f, 2048, 0),
             CUDA_ERROR_INVALID_VALUE);
    OK(cu.cuOccupancyMaxPotentialBlockSize(&grid, &block, f, NULL, 0, 0));
    CHECK(block == 1024 && grid == 2 * 132);
    OK(cu.cuOccupancyMaxPotentialBlockSizeWithFlags(&grid, &block, f, smem_of, 0, 256, 0));
    CHECK(block <= 256 && block % 32 == 0 && grid > 0);
    OK(cu.cuLaunchCooperativeKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL));
    CHECK_RC(cu.cuModuleGetGlobal_v2(&g, &gs_size, mod, "x"), CUDA_ERROR_NOT_FOUND);
    CHECK_RC(cu.cuModuleGetGlobal_v2(&g, &gs_size, mod, NULL), CUDA_ERROR_INVALID_VALUE);
    /* linking: the image is a gpusim module of the inputs' size, charged when loaded */
    OK(cu.cuLinkCreate_v2(0, NULL, NULL, &ls));
    CHECK_RC(cu.cuLinkComplete(ls, &cubin, &cubin_size), CUDA_ERROR_INVALID_VALUE);
    OK(cu.cuLinkAddData_v2(ls, CU_JIT_INPUT_PTX, ptx, 3 * MiB, "a.ptx", 0, NULL, NULL));
    CHECK_RC(cu.cuLinkAddData_v2(ls, CU_JIT_NUM_INPUT_TYPES, ptx, 1, "b", 0, NULL, NULL),
             CUDA_ERROR_INVALID_VALUE);
    snprintf(path, sizeof path, "%s/obj-%d", tmpdir, (int)getpid());
    fp = fopen(path, "w");
    CHECK(fp && fwrite("0123456789", 1, 10, fp) == 10);
    fclose(fp);
    OK(cu.cuLinkAddFile_v2(ls, CU_JIT_INPUT_OBJECT, path, 0, NULL, NULL));
    unlink(path);
    CHECK_RC(cu.cuLinkAddFile_v2(ls, CU_JIT_INPUT_OBJECT, path, 0, NULL, NULL),
             CUDA_ERROR_FILE_NOT_FOUND);
    OK(cu.cuLinkComplete(ls, &cubin, &cubin_size));
    CHECK(strcmp(cubin, "gpusim-module 3145738") == 0 && cubin_size == strlen(cubin) + 1);
    {
        CUmodule linked;
        uint64_t before = cu_used();
        OK(cu.cuModuleLoadData(&linked, cubin));
        CHECK(cu_used() == before + 4 * MiB);
        OK(cu.cuModuleUnload(linked));
    }
    OK(cu.cuLinkDestroy(ls));
    CHECK_RC(cu.cuLinkDestroy(ls), CUDA_ERROR_INVALID_HANDLE);
    OK(cu.cuModuleUnload(mod));
    CHECK_RC(cu.cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, f), CUDA_ERROR_INVALID_HANDLE);
    /* device queries, primary context flags, the profiler */
    OK(cu.cuDeviceComputeCapability(&major, &minor, 0));
    CHECK(major == 9 && minor == 0);
    CHECK_RC(cu.cuDeviceComputeCapability(&major, &minor, 5), CUDA_ERROR_INVALID_DEVICE);
    OK(cu.cuDevicePrimaryCtxSetFlags_v2(0, 4));
    OK(cu.cuDevicePrimaryCtxGetState(0, &flags, &active));
    CHECK(flags == 4 && active == 1);
    OK(cu.cuDevicePrimaryCtxSetFlags(0, 0));
    CHECK_RC(cu.cuDevicePrimaryCtxSetFlags_v2(0, 3), CUDA_ERROR_INVALID_VALUE);
    OK(cu.cuProfilerStart());
    OK(cu.cuProfilerStop());
}

static void test_code_and_device_queries(void **state)
{
    (void)state;
    run_child(code_body, NULL);
}

static void peer_body(void)
{
    CUcontext c0, c1;
    int can;
    OK(cu.cuInit(0));
    OK(cu.cuDeviceCanAccessPeer(&can, 0, 1));
    CHECK(can == 1);
    OK(cu.cuDeviceCanAccessPeer(&can, 0, 0));
    CHECK(can == 0);
    CHECK_RC(cu.cuDeviceCanAccessPeer(&can, 0, 7), CUDA_ERROR_INVALID_DEVICE);
    OK(cu.cuDevicePrimaryCtxRetain(&c1, 1));
    OK(cu.cuDevicePrimaryCtxRetain(&c0, 0));
    OK(cu.cuCtxSetCurrent(c0));
    OK(cu.cuCtxEnablePeerAccess(c1, 0));
    CHECK_RC(cu.cuCtxEnablePeerAccess(c1, 0), CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
    CHECK_RC(cu.cuCtxEnablePeerAccess(c0, 0), CUDA_ERROR_PEER_ACCESS_UNSUPPORTED);
    CHECK_RC(cu.cuCtxEnablePeerAccess(c1, 1), CUDA_ERROR_INVALID_VALUE);
}

static void test_peers(void **state)
{
    static const char *const env[] = {"GPUSIM_DEVICES=1Gi,1Gi", NULL};
    (void)state;
    run_child(peer_body, env);
}

/* the 12.8 build: what clients written before 13.0 find */
static void cuda12_body(void)
{
    int v;
    void *l = dlopen(GPUSIM_LIB_DIR "-cuda12/libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    CUresult (*get_version)(int *);
    CHECK(l);
    *(void **)&get_version = dlsym(l, "cuDriverGetVersion");
    CHECK(get_version && get_version(&v) == CUDA_SUCCESS && v == 12080);
    CHECK(dlsym(l, "cuCtxGetDevice_v2") == NULL && dlsym(l, "cuCtxSynchronize_v2") == NULL);
    CHECK(dlsym(l, "cuCtxGetDevice") && dlsym(l, "cuMemcpyHtoD_v2"));
}

static void test_cuda12_build(void **state)
{
    (void)state;
    run_child(cuda12_body, NULL);
}

/* ---- fault injection -------------------------------------------------------------------- */
static void fail_body(void)
{
    CUdeviceptr a, b;
    size_t f, t;
    init_ctx();
    CHECK_RC(cu.cuMemGetInfo_v2(&f, &t), 999);
    OK(cu.cuMemAlloc_v2(&a, MiB));
    CHECK_RC(cu.cuMemAlloc_v2(&b, MiB), CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(cu_used() == MiB); /* no side effect */
    OK(cu.cuMemAlloc_v2(&b, MiB));
    CHECK(cu_used() == 2 * MiB);
    CHECK_RC(cu.cuMemAlloc_v2(&b, MiB), 1); /* the 4th call, error 1 */
}

static const char *const fail_env[] = {
    "GPUSIM_FAIL=cuMemAlloc_v2:2,cuMemGetInfo_v2:1:999,cuMemAlloc_v2:4:1", NULL};

static void test_fault_injection(void **state)
{
    (void)state;
    run_child(fail_body, fail_env);
}

/* ---- NVML ---------------------------------------------------------------------------------- */
static void nvml_body(void)
{
    nvmlDevice_t d;
    unsigned cnt;
    nvmlMemory_v2_t m2 = {.version = nvmlMemory_v2};
    nvmlProcessInfo_t infos[8];
    nvmlProcessInfo_v1_t infos1[8];
    pid_t kid;
    char c;

    CHECK(nv.count(&cnt) == NVML_ERROR_UNINITIALIZED);
    CHECK(nv.init() == NVML_SUCCESS);
    CHECK(nv.handle(0, &d) == NVML_SUCCESS);
    CHECK(nv.mem2(d, &m2) == NVML_SUCCESS);
    CHECK(m2.total == GiB && m2.used == 0 && m2.free == GiB && m2.reserved == 0);
    m2.version = 1;
    CHECK(nv.mem2(d, &m2) == NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    cnt = 0;
    CHECK(nv.procs(d, &cnt, NULL) == NVML_SUCCESS && cnt == 0);

    CHECK(pipe(sync_pipe) == 0 && pipe(go_pipe) == 0);
    kid = spawn(hold_alloc, 100);
    CHECK(read(sync_pipe[0], &c, 1) == 1 && c == 'y');
    cnt = 0;
    CHECK(nv.procs(d, &cnt, NULL) == NVML_ERROR_INSUFFICIENT_SIZE && cnt == 1);
    cnt = 8;
    CHECK(nv.procs(d, &cnt, infos) == NVML_SUCCESS && cnt == 1);
    CHECK(infos[0].pid == (unsigned)kid && infos[0].usedGpuMemory == 100 * MiB);
    cnt = 8;
    CHECK(nv.procs1(d, &cnt, infos1) == NVML_SUCCESS && cnt == 1);
    CHECK(infos1[0].pid == (unsigned)kid && infos1[0].usedGpuMemory == 100 * MiB);
    m2.version = nvmlMemory_v2;
    CHECK(nv.mem2(d, &m2) == NVML_SUCCESS && m2.used == 100 * MiB && m2.free == GiB - 100 * MiB);
    kill(kid, SIGKILL);
    waitpid(kid, NULL, 0);
    cnt = 8;
    CHECK(nv.procs(d, &cnt, infos) == NVML_SUCCESS && cnt == 0);
    CHECK(nv.shutdown() == NVML_SUCCESS);
    CHECK(nv.shutdown() == NVML_ERROR_UNINITIALIZED);
}

static void test_nvml(void **state)
{
    (void)state;
    run_child(nvml_body, NULL);
}

/* ---- threads and speed ------------------------------------------------------------------- */
static void *thread_loop(void *arg)
{
    CUcontext c;
    (void)arg;
    if (cu.cuDevicePrimaryCtxRetain(&c, 0) || cu.cuCtxSetCurrent(c))
        return (void *)1;
    for (int i = 0; i < 20000; i++) {
        CUdeviceptr d;
        if (cu.cuMemAlloc_v2(&d, 4096) != CUDA_SUCCESS || cu.cuMemFree_v2(d) != CUDA_SUCCESS)
            return (void *)1;
    }
    return NULL;
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void speed_body(void)
{
    pthread_t t[8];
    const int n = 200000;
    double t0, ns;
    init_ctx();
    for (int i = 0; i < 8; i++)
        CHECK(pthread_create(&t[i], NULL, thread_loop, NULL) == 0);
    for (int i = 0; i < 8; i++) {
        void *r;
        CHECK(pthread_join(t[i], &r) == 0 && r == NULL);
    }
    CHECK(cu_used() == 0);
    t0 = now_ns();
    for (int i = 0; i < n; i++) {
        CUdeviceptr d;
        OK(cu.cuMemAlloc_v2(&d, 1 << 20));
        OK(cu.cuMemFree_v2(d));
    }
    ns = (now_ns() - t0) / n;
    printf("# gpusim cuMemAlloc_v2+cuMemFree_v2 pair: %.0f ns\n", ns);
    CHECK(ns < 20000); /* generous: sanitizer builds and busy CI machines */
}

static void test_threads_and_speed(void **state)
{
    (void)state;
    run_child(speed_body, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_devices),
        cmocka_unit_test(test_visible_devices),
        cmocka_unit_test(test_shared_memory),
        cmocka_unit_test(test_dead_process_reclaim),
        cmocka_unit_test(test_concurrent_start),
        cmocka_unit_test(test_context_overhead),
        cmocka_unit_test(test_strict_context),
        cmocka_unit_test(test_limits_modules),
        cmocka_unit_test(test_plain_pitch_managed),
        cmocka_unit_test(test_legacy),
        cmocka_unit_test(test_pools),
        cmocka_unit_test(test_vmm),
        cmocka_unit_test(test_arrays),
        cmocka_unit_test(test_graphs),
        cmocka_unit_test(test_get_proc_address),
        cmocka_unit_test(test_copies),
        cmocka_unit_test(test_host_memory),
        cmocka_unit_test(test_pointer_attributes),
        cmocka_unit_test(test_events_and_callbacks),
        cmocka_unit_test(test_ipc),
        cmocka_unit_test(test_code_and_device_queries),
        cmocka_unit_test(test_peers),
        cmocka_unit_test(test_cuda12_build),
        cmocka_unit_test(test_fault_injection),
        cmocka_unit_test(test_nvml),
        cmocka_unit_test(test_threads_and_speed),
    };
    int rc;
    snprintf(tmpdir, sizeof tmpdir, "%s/gpusim-test-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    setvbuf(stdout, NULL, _IONBF, 0);
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
        if (system(cmd) != 0)
            rc = rc ? rc : 1;
    }
    return rc;
}
