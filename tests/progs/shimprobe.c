/* SPDX-License-Identifier: Apache-2.0 */
/* shimprobe: drives every CUDA entry point the shim hooks, reached the way
 * the caller chooses (--via direct|dlsym|procaddr|procaddr4), and prints one
 * `key=value` line per step so tests can assert on it.
 *
 *   shimprobe [--via MODE] [--device N] STEP...
 *   steps: info | legacy-info | totalmem | nvml | alloc SIZE | legacy-alloc SIZE |
 *          managed SIZE | pitch W H | async SIZE | pool-async SIZE | sync | trim |
 *          vmm SIZE | array W H | array3d W H D | mipmap W H LEVELS |
 *          graph SIZE | graph-upload SIZE | graph-trim | free | freeall | hold SECONDS |
 *          race THREADS ITERS SIZE [HOLD] | race-async THREADS ITERS SIZE [HOLD] |
 *          ptr-check |
 *          retain DEV | primary-release DEV | primary-reset DEV | ctx-create DEV |
 *          ctx-push[-legacy] DEV (its primary) | ctx-pop[-legacy] | set-pool |
 *          set-pool-default | fork-alloc SIZE | set-current HANDLE |
 *          ctx-legacy DEV | set-limit stack|fifo|heap BYTES | module SIZE | library SIZE |
 *          legacy-pitch W H | pools N SIZE | pools-destroy | pa2000 | barrier PATH
 * (module/library SIZE: a gpusim image of that many bytes; free/freeall
 * unload and destroy them like allocations.)
 * Sizes are bytes or with a binary suffix (Ki Mi Gi). Exit 0 unless a step
 * could not run at all (not when an allocation is refused: that is printed). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpufrac/cuda_abi.h"
#include "gpufrac/nvml_abi.h"

#define CU_HOOK(name, base, since, ptsz, ret, params) ret name params;
#include "../../shim/hooks.def"

/* Entry points the probe needs beyond the hooked ones (always via dlsym). */
#define PROBE_USED(X)                                     \
    X(cuInit, (unsigned int flags))                       \
    X(cuDriverGetVersion, (int *v))                       \
    X(cuDeviceGet, (CUdevice * d, int ordinal))           \
    X(cuCtxSynchronize, (void))                           \
    X(cuDeviceGetMemPool, (CUmemoryPool * p, CUdevice d)) \
    X(cuGraphCreate, (CUgraph * g, unsigned int flags))   \
    X(cuGetErrorName, (CUresult r, const char **s))       \
    X(cuDeviceGetUuid, (CUuuid * u, CUdevice d))          \
    X(cuCtxGetLimit, (size_t * v, CUlimit l))

typedef struct fns {
#define CU_HOOK(name, base, since, ptsz, ret, params) ret(*name) params;
#include "../../shim/hooks.def"
#define X(name, params) CUresult(*name) params;
    PROBE_USED(X)
#undef X
} fns;

static fns f;
static int device;
static CUdevice dev;

enum { MAX_HELD = 4096 };
typedef struct held {
    int kind; /* 1 ptr, 2 legacy, 3 async, 4 vmm, 5 array, 6 mipmap, 7 module, 8 library,
                 9 context */
    uint64_t v;
} held;
static held stack[MAX_HELD];
static int n_held;
static CUmemoryPool own_pool;
static CUmemoryPool many_pools[MAX_HELD];
static int n_pools;

static uint64_t parse_size(const char *s)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (strcmp(end, "Ki") == 0)
        v <<= 10;
    else if (strcmp(end, "Mi") == 0)
        v <<= 20;
    else if (strcmp(end, "Gi") == 0)
        v <<= 30;
    else if (*end) {
        fprintf(stderr, "shimprobe: bad size '%s'\n", s);
        exit(2);
    }
    return v;
}

static const char *errname(CUresult r)
{
    const char *s = NULL;
    if (f.cuGetErrorName && f.cuGetErrorName(r, &s) == CUDA_SUCCESS && s)
        return s;
    return r == CUDA_SUCCESS ? "CUDA_SUCCESS" : "CUDA_ERROR";
}

/* Is there a newer variant of base than `since` among the hooks? A lookup
 * by base name then returns that one, never this. */
static bool has_newer(const char *base, int since)
{
#define CU_HOOK(name, b, s, ptsz, ret, params) \
    if (strcmp(#b, base) == 0 && (s) > since)  \
        return true;
#include "../../shim/hooks.def"
    return false;
}

static void *resolve(void *lib, const char *via, const char *name, const char *base, int since,
                     int ptsz, void *direct)
{
    void *p = NULL;
    int version = 0;

    if (strcmp(via, "direct") == 0)
        return direct;
    if (strcmp(via, "dlsym") == 0)
        return dlsym(lib, name);
    f.cuDriverGetVersion(&version);
    if (since > version)
        return NULL;
    if (since < 3020 && strcmp(name, base) == 0 && has_newer(base, since))
        return NULL; /* legacy bare names: a lookup by base name returns _v2 (pa2000 asks
                        for them at version 2000) */
    if (strcmp(via, "procaddr4") == 0) {
        /* the 4-argument lookup of CUDA 11.3-11.8, itself found by lookup */
        CUresult (*gpa)(const char *, void **, int, cuuint64_t) = dlsym(lib, "cuGetProcAddress");
        if (gpa(base, &p, since < 11080 ? 11080 : since, ptsz ? 2 : 0) != CUDA_SUCCESS)
            return NULL;
        (void)name;
        return p;
    }
    CUdriverProcAddressQueryResult st;
    CUresult (*gpa2)(const char *, void **, int, cuuint64_t,
                     CUdriverProcAddressQueryResult *) = dlsym(lib, "cuGetProcAddress_v2");
    /* the exact variant: ask with the version that introduced it */
    int ask = since < 12000 ? 12000 : since;
    if (gpa2(base, &p, ask, ptsz ? 2 : 0, &st) != CUDA_SUCCESS || st != 0)
        return NULL;
    return p;
}

static void load(const char *via)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib) {
        fprintf(stderr, "shimprobe: %s\n", dlerror());
        exit(2);
    }
#define X(name, params) f.name = (CUresult(*) params)dlsym(lib, #name);
    PROBE_USED(X)
#undef X
#define CU_HOOK(name, base, since, ptsz, ret, params) \
    f.name = (ret(*) params)resolve(lib, via, #name, #base, since, ptsz, (void *)name);
#include "../../shim/hooks.def"
}

static void push(int kind, uint64_t v)
{
    if (n_held < MAX_HELD)
        stack[n_held++] = (held){kind, v};
}

static void report(const char *step, CUresult rc)
{
    printf("%s=%s\n", step, rc == CUDA_SUCCESS ? "ok" : errname(rc));
}

static void release(held h)
{
    CUresult rc = CUDA_ERROR_INVALID_VALUE;
    switch (h.kind) {
    case 1: rc = f.cuMemFree_v2(h.v); break;
    case 2: rc = f.cuMemFree((CUdeviceptr_v1)h.v); break;
    case 3: rc = f.cuMemFreeAsync(h.v, NULL); break;
    case 4: rc = f.cuMemRelease(h.v); break;
    case 5: rc = f.cuArrayDestroy((CUarray)(uintptr_t)h.v); break;
    case 6: rc = f.cuMipmappedArrayDestroy((CUmipmappedArray)(uintptr_t)h.v); break;
    case 7: rc = f.cuModuleUnload((CUmodule)(uintptr_t)h.v); break;
    case 8: rc = f.cuLibraryUnload((CUlibrary)(uintptr_t)h.v); break;
    case 9: rc = f.cuCtxDestroy_v2((CUcontext)(uintptr_t)h.v); break;
    }
    report("freed", rc);
}

typedef struct race_arg {
    int iters, hold;
    bool async; /* stream-ordered, synchronised after each round (the pool shrinks) */
    uint64_t size;
    int ok, refused;
} race_arg;

static void *race_thread(void *p)
{
    race_arg *a = p;
    CUcontext c;
    f.cuDevicePrimaryCtxRetain(&c, dev);
    f.cuCtxSetCurrent(c);
    for (int i = 0; i < a->iters; i++) {
        CUdeviceptr d[16];
        int n = 0;
        for (int k = 0; k < a->hold; k++) { /* up to `hold` at once, then all freed */
            CUresult rc = a->async ? f.cuMemAllocAsync(&d[n], a->size, NULL)
                                   : f.cuMemAlloc_v2(&d[n], a->size);
            if (rc == CUDA_SUCCESS) {
                a->ok++;
                n++;
            } else {
                a->refused++;
            }
        }
        usleep(50);
        while (n)
            a->async ? f.cuMemFreeAsync(d[--n], NULL) : f.cuMemFree_v2(d[--n]);
        if (a->async)
            f.cuCtxSynchronize();
    }
    return NULL;
}

/* Frees everything held from another thread: a charge is found wherever the
 * allocating thread left it. */
static void *free_thread(void *p)
{
    CUcontext c;
    (void)p;
    f.cuDevicePrimaryCtxRetain(&c, dev);
    f.cuCtxSetCurrent(c);
    while (n_held)
        release(stack[--n_held]);
    return NULL;
}

static void race(int threads, int iters, uint64_t size, int hold, bool async)
{
    pthread_t t[64];
    race_arg a[64];
    int ok = 0, refused = 0;
    if (threads > 64)
        threads = 64;
    for (int i = 0; i < threads; i++) {
        a[i] = (race_arg){.iters = iters,
                          .async = async,
                          .size = size,
                          .hold = hold < 1    ? 1
                                  : hold > 16 ? 16
                                              : hold};
        pthread_create(&t[i], NULL, race_thread, &a[i]);
    }
    for (int i = 0; i < threads; i++) {
        pthread_join(t[i], NULL);
        ok += a[i].ok;
        refused += a[i].refused;
    }
    printf("race_ok=%d\nrace_refused=%d\n", ok, refused);
}

static void nvml_info(void)
{
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    nvmlDevice_t d;
    nvmlMemory_t m;
    nvmlMemory_v2_t m2 = {.version = nvmlMemory_v2};
    if (!lib) {
        printf("nvml=unavailable\n");
        return;
    }
    nvmlReturn_t (*init)(void) = dlsym(lib, "nvmlInit_v2");
    nvmlReturn_t (*get)(unsigned, nvmlDevice_t *) = dlsym(lib, "nvmlDeviceGetHandleByIndex_v2");
    nvmlReturn_t (*mi)(nvmlDevice_t, nvmlMemory_t *) = dlsym(lib, "nvmlDeviceGetMemoryInfo");
    nvmlReturn_t (*mi2)(nvmlDevice_t, nvmlMemory_v2_t *) = dlsym(lib, "nvmlDeviceGetMemoryInfo_v2");
    if (init() || get((unsigned)device, &d) || mi(d, &m) || mi2(d, &m2)) {
        printf("nvml=error\n");
        return;
    }
    printf("nvml_total=%llu\nnvml_free=%llu\nnvml_used=%llu\n", m.total, m.free, m.used);
    printf("nvml2_total=%llu\nnvml2_free=%llu\nnvml2_used=%llu\n", m2.total, m2.free, m2.used);
}

static int step(char **argv, int i, int argc)
{
    const char *s = argv[i];
#define ARG(k) (i + (k) < argc ? argv[i + (k)] : "0")
    CUresult rc;
    if (strcmp(s, "info") == 0) {
        size_t fr = 0, to = 0;
        rc = f.cuMemGetInfo_v2(&fr, &to);
        printf("info=%s\nfree=%zu\ntotal=%zu\n", errname(rc), fr, to);
        rc = f.cuMemGetInfo_v2(NULL, NULL); /* NULL out-params must be tolerated */
        printf("info_null=%s\n", errname(rc));
    } else if (strcmp(s, "legacy-info") == 0) {
        unsigned int fr = 0, to = 0;
        rc = f.cuMemGetInfo(&fr, &to);
        printf("legacy_info=%s\nlegacy_free=%u\nlegacy_total=%u\n", errname(rc), fr, to);
    } else if (strcmp(s, "totalmem") == 0) {
        size_t b = 0;
        unsigned int lb = 0;
        rc = f.cuDeviceTotalMem_v2(&b, dev);
        printf("devtotal=%zu\n", rc == CUDA_SUCCESS ? b : 0);
        if (f.cuDeviceTotalMem && f.cuDeviceTotalMem(&lb, dev) == CUDA_SUCCESS)
            printf("legacy_devtotal=%u\n", lb);
    } else if (strcmp(s, "uuid") == 0) {
        CUuuid u;
        const unsigned char *b = (const unsigned char *)u.bytes;
        f.cuDeviceGetUuid(&u, dev);
        printf("uuid=GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x\n",
               b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
               b[13], b[14], b[15]);
    } else if (strcmp(s, "nvml") == 0) {
        nvml_info();
    } else if (strcmp(s, "alloc") == 0 || strcmp(s, "managed") == 0) {
        CUdeviceptr d = 0;
        rc = s[0] == 'a' ? f.cuMemAlloc_v2(&d, parse_size(ARG(1)))
                         : f.cuMemAllocManaged(&d, parse_size(ARG(1)), CU_MEM_ATTACH_GLOBAL);
        if (rc == CUDA_SUCCESS)
            push(1, d);
        report(s, rc);
        return 1;
    } else if (strcmp(s, "legacy-alloc") == 0) {
        CUdeviceptr_v1 d = 0;
        rc = f.cuMemAlloc(&d, (unsigned int)parse_size(ARG(1)));
        if (rc == CUDA_SUCCESS)
            push(2, d);
        report(s, rc);
        return 1;
    } else if (strcmp(s, "pitch") == 0) {
        CUdeviceptr d = 0;
        size_t pitch = 0;
        rc = f.cuMemAllocPitch_v2(&d, &pitch, parse_size(ARG(1)), parse_size(ARG(2)), 4);
        if (rc == CUDA_SUCCESS)
            push(1, d);
        report(s, rc);
        printf("pitch_bytes=%zu\n", pitch);
        return 2;
    } else if (strcmp(s, "async") == 0 || strcmp(s, "pool-async") == 0) {
        CUdeviceptr d = 0;
        if (s[0] == 'a') {
            rc = f.cuMemAllocAsync(&d, parse_size(ARG(1)), NULL);
        } else {
            if (!own_pool) {
                CUmemPoolProps p = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                                    .location = {CU_MEM_LOCATION_TYPE_DEVICE, dev}};
                f.cuMemPoolCreate(&own_pool, &p);
            }
            rc = f.cuMemAllocFromPoolAsync(&d, parse_size(ARG(1)), own_pool, NULL);
        }
        if (rc == CUDA_SUCCESS)
            push(3, d);
        report(s, rc);
        return 1;
    } else if (strcmp(s, "set-pool") == 0 || strcmp(s, "set-pool-default") == 0) {
        /* the device's current pool: the probe's own (cuDeviceSetMemPool), or
         * back to the default (13.0's cuMemSetMemPool) */
        static CUmemoryPool dflt;
        CUmemLocation loc = {CU_MEM_LOCATION_TYPE_DEVICE, dev};
        if (!dflt)
            f.cuDeviceGetMemPool(&dflt, dev);
        if (!own_pool) {
            CUmemPoolProps p = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED, .location = loc};
            f.cuMemPoolCreate(&own_pool, &p);
        }
        rc = s[8] ? f.cuMemSetMemPool(&loc, CU_MEM_ALLOCATION_TYPE_PINNED, dflt)
                  : f.cuDeviceSetMemPool(dev, own_pool);
        report(s, rc);
    } else if (strcmp(s, "fork-alloc") == 0) {
        /* a forked child allocates and dies holding it */
        pid_t pid = fork();
        int st = 0;
        if (pid == 0) { /* a child starts with no CUDA state, as on the real driver */
            CUdeviceptr d = 0;
            CUcontext c = NULL;
            if (f.cuInit(0) != CUDA_SUCCESS ||
                f.cuDevicePrimaryCtxRetain(&c, dev) != CUDA_SUCCESS ||
                f.cuCtxSetCurrent(c) != CUDA_SUCCESS)
                _exit(4);
            _exit(f.cuMemAlloc_v2(&d, parse_size(ARG(1))) == CUDA_SUCCESS ? 0 : 3);
        }
        waitpid(pid, &st, 0);
        printf("fork-alloc=%s\n", WIFEXITED(st) && WEXITSTATUS(st) == 0 ? "ok" : "failed");
        return 1;
    } else if (strcmp(s, "sync") == 0) {
        report(s, f.cuCtxSynchronize());
    } else if (strcmp(s, "trim") == 0) {
        CUmemoryPool p;
        f.cuDeviceGetMemPool(&p, dev);
        report(s, f.cuMemPoolTrimTo(p, 0));
        if (own_pool)
            f.cuMemPoolTrimTo(own_pool, 0);
    } else if (strcmp(s, "pool-destroy") == 0) {
        report(s, own_pool ? f.cuMemPoolDestroy(own_pool) : CUDA_ERROR_INVALID_VALUE);
        own_pool = NULL;
    } else if (strcmp(s, "vmm") == 0) {
        CUmemGenericAllocationHandle h = 0;
        CUmemAllocationProp p = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                 .location = {CU_MEM_LOCATION_TYPE_DEVICE, dev}};
        rc = f.cuMemCreate(&h, parse_size(ARG(1)), &p, 0);
        if (rc == CUDA_SUCCESS)
            push(4, h);
        report(s, rc);
        return 1;
    } else if (strcmp(s, "array") == 0 || strcmp(s, "array3d") == 0) {
        CUarray a = NULL;
        if (s[5] == 0) {
            CUDA_ARRAY_DESCRIPTOR d = {parse_size(ARG(1)), parse_size(ARG(2)), CU_AD_FORMAT_FLOAT,
                                       4};
            rc = f.cuArrayCreate_v2(&a, &d);
        } else {
            CUDA_ARRAY3D_DESCRIPTOR d = {parse_size(ARG(1)),
                                         parse_size(ARG(2)),
                                         parse_size(ARG(3)),
                                         CU_AD_FORMAT_FLOAT,
                                         4,
                                         0};
            rc = f.cuArray3DCreate_v2(&a, &d);
        }
        if (rc == CUDA_SUCCESS)
            push(5, (uint64_t)(uintptr_t)a);
        report(s, rc);
        return s[5] == 0 ? 2 : 3;
    } else if (strcmp(s, "mipmap") == 0) {
        CUmipmappedArray m = NULL;
        CUDA_ARRAY3D_DESCRIPTOR d = {
            parse_size(ARG(1)), parse_size(ARG(2)), 0, CU_AD_FORMAT_FLOAT, 4, 0};
        rc = f.cuMipmappedArrayCreate(&m, &d, (unsigned)parse_size(ARG(3)));
        if (rc == CUDA_SUCCESS)
            push(6, (uint64_t)(uintptr_t)m);
        report(s, rc);
        return 3;
    } else if (strcmp(s, "graph") == 0 || strcmp(s, "graph-upload") == 0) {
        CUgraph g = NULL;
        CUgraphNode n;
        CUgraphExec e;
        CUDA_MEM_ALLOC_NODE_PARAMS prm = {0};
        prm.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
        prm.poolProps.location = (CUmemLocation){CU_MEM_LOCATION_TYPE_DEVICE, dev};
        prm.bytesize = parse_size(ARG(1));
        f.cuGraphCreate(&g, 0);
        rc = f.cuGraphAddMemAllocNode(&n, g, NULL, 0, &prm);
        if (rc == CUDA_SUCCESS)
            rc = f.cuGraphInstantiateWithFlags(&e, g, 0);
        if (rc == CUDA_SUCCESS)
            rc = s[5] ? f.cuGraphUpload(e, NULL) : f.cuGraphLaunch(e, NULL);
        report(s, rc);
        return 1;
    } else if (strcmp(s, "graph-trim") == 0) {
        f.cuCtxSynchronize();
        report(s, f.cuDeviceGraphMemTrim(dev));
    } else if (strcmp(s, "free") == 0) {
        if (n_held)
            release(stack[--n_held]);
    } else if (strcmp(s, "freeall") == 0) {
        while (n_held)
            release(stack[--n_held]);
    } else if (strcmp(s, "freeall-thread") == 0) {
        pthread_t t;
        pthread_create(&t, NULL, free_thread, NULL);
        pthread_join(t, NULL);
    } else if (strcmp(s, "free-unknown") == 0) {
        report(s, f.cuMemFree_v2(0xdead0000ULL));
    } else if (strcmp(s, "barrier") == 0) {
        /* barrier PATH: says so, then waits until PATH exists (start together) */
        printf("waiting=%d\n", (int)getpid());
        fflush(stdout);
        while (access(ARG(1), F_OK) != 0)
            usleep(1000);
        return 1;
    } else if (strcmp(s, "hold") == 0) {
        printf("holding=%d\n", (int)getpid());
        fflush(stdout);
        sleep((unsigned)atoi(ARG(1)));
        return 1;
    } else if (strcmp(s, "race") == 0 || strcmp(s, "race-async") == 0) {
        /* race THREADS ITERS SIZE [HOLD]: HOLD is optional (a number) */
        int hold =
            i + 4 < argc && argv[i + 4][0] >= '0' && argv[i + 4][0] <= '9' ? atoi(argv[i + 4]) : 1;
        race(atoi(ARG(1)), atoi(ARG(2)), parse_size(ARG(3)), hold, s[4] != '\0');
        return i + 4 < argc && argv[i + 4][0] >= '0' && argv[i + 4][0] <= '9' ? 4 : 3;
    } else if (strcmp(s, "retain") == 0) {
        CUcontext c = NULL;
        rc = f.cuDevicePrimaryCtxRetain(&c, atoi(ARG(1)));
        if (rc == CUDA_SUCCESS)
            f.cuCtxSetCurrent(c);
        report(s, rc);
        return 1;
    } else if (strcmp(s, "ctx-push") == 0 || strcmp(s, "ctx-push-legacy") == 0) {
        CUcontext c = NULL;
        rc = f.cuDevicePrimaryCtxRetain(&c, atoi(ARG(1)));
        if (rc == CUDA_SUCCESS)
            rc = s[8] ? f.cuCtxPushCurrent(c) : f.cuCtxPushCurrent_v2(c);
        report(s, rc);
        return 1;
    } else if (strcmp(s, "set-current") == 0) {
        /* set-current HANDLE: any value, 0 for none (a forged one must fail) */
        rc = f.cuCtxSetCurrent((CUcontext)(uintptr_t)strtoull(ARG(1), NULL, 0));
        report(s, rc);
        return 1;
    } else if (strcmp(s, "ctx-pop") == 0 || strcmp(s, "ctx-pop-legacy") == 0) {
        CUcontext c = NULL;
        rc = s[7] ? f.cuCtxPopCurrent(&c) : f.cuCtxPopCurrent_v2(&c);
        report(s, rc);
        return 0;
    } else if (strcmp(s, "primary-release") == 0 || strcmp(s, "primary-reset") == 0) {
        rc = s[8] == 'r' && s[10] == 'l' ? f.cuDevicePrimaryCtxRelease_v2(atoi(ARG(1)))
                                         : f.cuDevicePrimaryCtxReset_v2(atoi(ARG(1)));
        report(s, rc);
        return 1;
    } else if (strcmp(s, "ctx-create") == 0 || strcmp(s, "ctx-legacy") == 0) {
        CUcontext c = NULL;
        rc = s[4] == 'c' ? f.cuCtxCreate_v2(&c, 0, atoi(ARG(1)))
                         : f.cuCtxCreate(&c, 0, atoi(ARG(1)));
        if (rc == CUDA_SUCCESS)
            push(9, (uint64_t)(uintptr_t)c);
        report(s, rc);
        return 1;
    } else if (strcmp(s, "set-limit") == 0) {
        const char *w = ARG(1);
        CUlimit l = strcmp(w, "stack") == 0  ? CU_LIMIT_STACK_SIZE
                    : strcmp(w, "fifo") == 0 ? CU_LIMIT_PRINTF_FIFO_SIZE
                                             : CU_LIMIT_MALLOC_HEAP_SIZE;
        size_t v = 0;
        rc = f.cuCtxSetLimit(l, parse_size(ARG(2)));
        report(s, rc);
        f.cuCtxGetLimit(&v, l);
        printf("limit_%s=%zu\n", w, v);
        return 2;
    } else if (strcmp(s, "module") == 0 || strcmp(s, "library") == 0) {
        char image[64];
        void *h = NULL;
        snprintf(image, sizeof image, "gpusim-module %llu", (unsigned long long)parse_size(ARG(1)));
        rc = s[0] == 'm'
                 ? f.cuModuleLoadData((CUmodule *)&h, image)
                 : f.cuLibraryLoadData((CUlibrary *)&h, image, NULL, NULL, 0, NULL, NULL, 0);
        if (rc == CUDA_SUCCESS)
            push(s[0] == 'm' ? 7 : 8, (uint64_t)(uintptr_t)h);
        report(s, rc);
        return 1;
    } else if (strcmp(s, "legacy-pitch") == 0) {
        CUdeviceptr_v1 d = 0;
        unsigned int pitch = 0;
        rc = f.cuMemAllocPitch(&d, &pitch, (unsigned int)parse_size(ARG(1)),
                               (unsigned int)parse_size(ARG(2)), 4);
        if (rc == CUDA_SUCCESS)
            push(2, d);
        report(s, rc);
        printf("legacy_pitch_bytes=%u\n", pitch);
        return 2;
    } else if (strcmp(s, "pools") == 0) {
        int n = atoi(ARG(1)), ok = 0;
        uint64_t size = parse_size(ARG(2));
        for (int k = 0; k < n && n_pools < MAX_HELD; k++) {
            CUmemPoolProps p = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {CU_MEM_LOCATION_TYPE_DEVICE, dev}};
            CUdeviceptr d = 0;
            if (f.cuMemPoolCreate(&many_pools[n_pools], &p) != CUDA_SUCCESS)
                break;
            rc = f.cuMemAllocFromPoolAsync(&d, size, many_pools[n_pools++], NULL);
            if (rc == CUDA_SUCCESS) {
                push(3, d);
                ok++;
            }
        }
        printf("pools_ok=%d\n", ok);
        return 2;
    } else if (strcmp(s, "pools-destroy") == 0) {
        int ok = 0;
        while (n_pools)
            ok += f.cuMemPoolDestroy(many_pools[--n_pools]) == CUDA_SUCCESS;
        printf("pools_destroyed=%d\n", ok);
    } else if (strcmp(s, "pa2000") == 0) {
        /* the legacy entry points by lookup at version 2000: the shim's hooks? */
        static const char *const names[] = {
            "cuMemAlloc",       "cuMemFree",        "cuMemAllocPitch",         "cuMemGetInfo",
            "cuDeviceTotalMem", "cuArrayCreate",    "cuArray3DCreate",         "cuCtxCreate",
            "cuCtxDestroy",     "cuModuleLoadData", "cuDevicePrimaryCtxRetain"};
        CUresult (*gpa2)(const char *, void **, int, cuuint64_t,
                         CUdriverProcAddressQueryResult *) = f.cuGetProcAddress_v2;
        CUresult (*gpa)(const char *, void **, int, cuuint64_t) = f.cuGetProcAddress;
        for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
            for (int four = 0; four < 2; four++) {
                void *p = NULL;
                Dl_info di;
                CUdriverProcAddressQueryResult st;
                rc = four ? gpa(names[k], &p, 2000, 0) : gpa2(names[k], &p, 2000, 0, &st);
                printf("pa2000%s_%s=%s\n", four ? "v1" : "", names[k],
                       rc != CUDA_SUCCESS || !p ? "none"
                       : dladdr(p, &di) && di.dli_fname && strstr(di.dli_fname, "libgpufrac")
                           ? "hook"
                           : "driver");
            }
        }
    } else if (strcmp(s, "resolved") == 0) {
        /* which entry points resolved to the shim's hooks */
        void *shim = dlopen("libgpufrac.so", RTLD_NOW | RTLD_NOLOAD);
        int hooked = 0, total = 0;
#define CU_HOOK(name, base, since, ptsz, ret, params)                                          \
    if (f.name) {                                                                              \
        Dl_info di;                                                                            \
        total++;                                                                               \
        if (dladdr((void *)f.name, &di) && di.dli_fname && strstr(di.dli_fname, "libgpufrac")) \
            hooked++;                                                                          \
        else                                                                                   \
            printf("unhooked=%s\n", #name);                                                    \
    }
#include "../../shim/hooks.def"
        printf("resolved=%d\nhooked=%d\nshim_loaded=%d\n", total, hooked, shim != NULL);
    } else {
        fprintf(stderr, "shimprobe: unknown step '%s'\n", s);
        exit(2);
    }
    return 0;
#undef ARG
}

int main(int argc, char **argv)
{
    const char *via = "direct";
    CUcontext ctx;
    int i = 1;

    setvbuf(stdout, NULL, _IOLBF, 0);
    for (; i + 1 < argc && argv[i][0] == '-'; i += 2) {
        if (strcmp(argv[i], "--via") == 0)
            via = argv[i + 1];
        else if (strcmp(argv[i], "--device") == 0)
            device = atoi(argv[i + 1]);
    }
    load(via);
    if (f.cuInit(0) != CUDA_SUCCESS || f.cuDeviceGet(&dev, device) != CUDA_SUCCESS ||
        f.cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS ||
        f.cuCtxSetCurrent(ctx) != CUDA_SUCCESS) {
        fprintf(stderr, "shimprobe: cannot open device %d\n", device);
        return 2;
    }
    for (; i < argc; i++)
        i += step(argv, i, argc);
    return 0;
}
