/* SPDX-License-Identifier: Apache-2.0 */
/* gpusim CUDA side: initialisation, devices, contexts, streams, fork. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gs.h"
#include "gs_api.h"

gs_proc gsp = {.obj_mu = PTHREAD_MUTEX_INITIALIZER};

#define GS_CTX_STACK 16
static __thread CUcontext tls_stack[GS_CTX_STACK];
static __thread int tls_depth;

static pthread_mutex_t init_mu = PTHREAD_MUTEX_INITIALIZER;
static bool atfork_done;

/* ---- objects -------------------------------------------------------------- */
void *gs_obj_new(size_t size, uint32_t magic)
{
    gs_obj *o = calloc(1, size);
    if (!o)
        return NULL;
    o->magic = magic;
    o->gen = atomic_load(&gsp.gen);
    pthread_mutex_lock(&gsp.obj_mu);
    o->all_next = gsp.all;
    gsp.all = o;
    pthread_mutex_unlock(&gsp.obj_mu);
    return o;
}

bool gs_obj_ok(const void *p, uint32_t magic)
{
    const gs_obj *o = p;
    return o && o->magic == magic && o->gen == atomic_load_explicit(&gsp.gen, memory_order_relaxed);
}

/* ---- init, visibility, fork ------------------------------------------------ */
static int match_uuid(const char *tok, size_t len)
{
    int found = -1;
    for (int i = 0; i < gs.ndev; i++) {
        if (strncmp(gs.dev[i].uuid_str, tok, len) != 0)
            continue;
        if (found >= 0)
            return -1; /* ambiguous prefix */
        found = i;
    }
    return found;
}

static int parse_token(const char *tok, size_t len)
{
    char *end;
    char buf[64];
    long v;

    while (len && (*tok == ' ' || *tok == '\t'))
        tok++, len--;
    while (len && (tok[len - 1] == ' ' || tok[len - 1] == '\t'))
        len--;
    if (len == 0 || len >= sizeof buf)
        return -1;
    if (len > 4 && strncmp(tok, "GPU-", 4) == 0)
        return match_uuid(tok, len);
    memcpy(buf, tok, len);
    buf[len] = 0;
    v = strtol(buf, &end, 10);
    if (*end || v < 0 || v >= gs.ndev)
        return -1;
    return (int)v;
}

/* Like the driver: the list stops at the first entry that is invalid or
 * repeated; indices and UUIDs (unique prefixes) are accepted. */
static void compute_visible(void)
{
    const char *v = getenv("CUDA_VISIBLE_DEVICES");
    gsp.nvis = 0;
    if (!v) {
        for (int i = 0; i < gs.ndev; i++)
            gsp.vis[gsp.nvis++] = i;
        return;
    }
    for (const char *p = v; *p;) {
        const char *e = strchr(p, ',');
        int idx;
        bool dup = false;
        if (!e)
            e = p + strlen(p);
        idx = parse_token(p, (size_t)(e - p));
        for (int i = 0; i < gsp.nvis; i++)
            dup = dup || gsp.vis[i] == idx;
        if (idx < 0 || dup || gsp.nvis == GS_MAX_DEV)
            break;
        gsp.vis[gsp.nvis++] = idx;
        p = *e ? e + 1 : e;
    }
}

static void reset_pdevs(void)
{
    for (int i = 0; i < GS_MAX_DEV; i++) {
        memset(&gsp.pdev[i], 0, sizeof gsp.pdev[i]);
        pthread_mutex_init(&gsp.pdev[i].mu, NULL);
    }
}

/* A fork child starts with no CUDA state: like the real driver, it must call
 * cuInit again; it gets its own slot; nothing of the parent's is its own. */
static void atfork_child(void)
{
    atomic_fetch_add(&gsp.gen, 1);
    atomic_store(&gsp.initialized, 0);
    pthread_mutex_init(&init_mu, NULL);
    pthread_mutex_init(&gsp.obj_mu, NULL);
    reset_pdevs();
    gs_pools_reset();
    gs_table_forget_all(&gs_ptrs);
    gs_table_forget_all(&gs_handles);
    gs_copy_after_fork();
    gs_ipc_after_fork();
    tls_depth = 0; /* the slot is dropped by state.c's own handler */
}

GS_API CUresult cuInit(unsigned int flags)
{
    CUresult rc;
    GS_FAILPOINT("cuInit");
    if (flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (atomic_load_explicit(&gsp.initialized, memory_order_acquire))
        return CUDA_SUCCESS;
    rc = gs_boot();
    if (rc != 0)
        return rc;
    pthread_mutex_lock(&init_mu);
    if (!atomic_load(&gsp.initialized)) {
        if (!atfork_done) {
            reset_pdevs();
            pthread_atfork(NULL, NULL, atfork_child);
            atfork_done = true;
        }
        compute_visible();
        if (gsp.nvis == 0)
            rc = CUDA_ERROR_NO_DEVICE;
        else if (gs_claim_slot() != 0)
            rc = CUDA_ERROR_UNKNOWN;
        else
            atomic_store_explicit(&gsp.initialized, 1, memory_order_release);
    }
    pthread_mutex_unlock(&init_mu);
    return rc;
}

CUresult gs_need_init(void)
{
    return GS_UNLIKELY(!atomic_load_explicit(&gsp.initialized, memory_order_acquire))
               ? CUDA_ERROR_NOT_INITIALIZED
               : CUDA_SUCCESS;
}

GS_API CUresult cuDriverGetVersion(int *version)
{
    GS_FAILPOINT("cuDriverGetVersion");
    if (!version)
        return CUDA_ERROR_INVALID_VALUE;
    *version = GS_DRIVER_VERSION;
    return CUDA_SUCCESS;
}

/* ---- devices --------------------------------------------------------------- */
CUresult gs_ordinal(CUdevice d, int *pdev)
{
    if (d < 0 || d >= gsp.nvis)
        return CUDA_ERROR_INVALID_DEVICE;
    *pdev = gsp.vis[d];
    return CUDA_SUCCESS;
}

int gs_pdev_ordinal(int pdev)
{
    for (int i = 0; i < gsp.nvis; i++)
        if (gsp.vis[i] == pdev)
            return i;
    return -1;
}

GS_API CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
    GS_FAILPOINT("cuDeviceGet");
    NEED_INIT();
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    if (ordinal < 0 || ordinal >= gsp.nvis)
        return CUDA_ERROR_INVALID_DEVICE;
    *device = ordinal;
    return CUDA_SUCCESS;
}

GS_API CUresult cuDeviceGetCount(int *count)
{
    GS_FAILPOINT("cuDeviceGetCount");
    NEED_INIT();
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    *count = gsp.nvis;
    return CUDA_SUCCESS;
}

GS_API CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    int p;
    GS_FAILPOINT("cuDeviceGetName");
    NEED_INIT();
    if (!name || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    DEV_ARG(dev, p);
    snprintf(name, (size_t)len, "%s", gs.dev[p].name);
    return CUDA_SUCCESS;
}

static CUresult get_uuid(CUuuid *uuid, CUdevice dev)
{
    int p;
    NEED_INIT();
    if (!uuid)
        return CUDA_ERROR_INVALID_VALUE;
    DEV_ARG(dev, p);
    *uuid = gs.dev[p].uuid;
    return CUDA_SUCCESS;
}

GS_API CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
    GS_FAILPOINT("cuDeviceGetUuid");
    return get_uuid(uuid, dev);
}

GS_API CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
    GS_FAILPOINT("cuDeviceGetUuid_v2");
    return get_uuid(uuid, dev);
}

static int attribute_value(int attr, int pdev)
{
    switch (attr) {
    case 1: return 1024; /* MAX_THREADS_PER_BLOCK */
    case 2:
    case 3: return 1024;       /* MAX_BLOCK_DIM_X/Y */
    case 4: return 64;         /* MAX_BLOCK_DIM_Z */
    case 5: return 2147483647; /* MAX_GRID_DIM_X */
    case 6:
    case 7: return 65535;        /* MAX_GRID_DIM_Y/Z */
    case 8: return 49152;        /* MAX_SHARED_MEMORY_PER_BLOCK */
    case 9: return 65536;        /* TOTAL_CONSTANT_MEMORY */
    case 10: return 32;          /* WARP_SIZE */
    case 11: return 2147483647;  /* MAX_PITCH */
    case 12: return 65536;       /* MAX_REGISTERS_PER_BLOCK */
    case 13: return 1980000;     /* CLOCK_RATE (kHz) */
    case 14: return 512;         /* TEXTURE_ALIGNMENT */
    case 15: return 1;           /* GPU_OVERLAP */
    case 16: return GS_SM_COUNT; /* MULTIPROCESSOR_COUNT */
    case 31: return 1;           /* CONCURRENT_KERNELS */
    case 33: return pdev + 1;    /* PCI_BUS_ID */
    case 36: return 2619000;     /* MEMORY_CLOCK_RATE */
    case 37: return 6144;        /* GLOBAL_MEMORY_BUS_WIDTH */
    case 38: return 60 << 20;    /* L2_CACHE_SIZE */
    case 39: return 2048;        /* MAX_THREADS_PER_MULTIPROCESSOR */
    case 40: return 2;           /* ASYNC_ENGINE_COUNT */
    case 41: return 1;           /* UNIFIED_ADDRESSING */
    case 75: return 9;           /* COMPUTE_CAPABILITY_MAJOR */
    case 76: return 0;           /* COMPUTE_CAPABILITY_MINOR */
    case 83: return 1;           /* MANAGED_MEMORY */
    case 89: return 1;           /* CONCURRENT_MANAGED_ACCESS */
    case 102: return 1;          /* VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED */
    case 115: return 1;          /* MEMORY_POOLS_SUPPORTED */
    default: return 0;
    }
}

GS_API CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    int p;
    GS_FAILPOINT("cuDeviceGetAttribute");
    NEED_INIT();
    if (!pi || (int)attrib <= 0 || (int)attrib > 200)
        return CUDA_ERROR_INVALID_VALUE;
    DEV_ARG(dev, p);
    *pi = attribute_value((int)attrib, p);
    return CUDA_SUCCESS;
}

GS_API CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    int p;
    GS_FAILPOINT("cuDeviceTotalMem_v2");
    NEED_INIT();
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    DEV_ARG(dev, p);
    *bytes = gs.dev[p].size;
    return CUDA_SUCCESS;
}

/* pre-3.2 ABI: 32-bit size, clamped to 4 GiB - 1 */
GS_API CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
    int p;
    GS_FAILPOINT("cuDeviceTotalMem");
    NEED_INIT();
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    DEV_ARG(dev, p);
    *bytes = gs.dev[p].size > UINT32_MAX ? UINT32_MAX : (unsigned int)gs.dev[p].size;
    return CUDA_SUCCESS;
}

/* ---- contexts -------------------------------------------------------------- */
/* Every context holds device memory of its own, as on a real driver: a base
 * that depends on the device (GPUSIM_CTX_OVERHEAD, at the default limits),
 * plus what its cuCtxSetLimit values add over the defaults: the stack size
 * times the device's resident threads, the printf FIFO and the malloc heap. */
static const uint64_t limit_default[GS_NLIMITS] = {
    GS_DEFAULT_STACK, GS_DEFAULT_PRINTF_FIFO, GS_DEFAULT_MALLOC_HEAP, 2, 2048, 32, 0};

static uint64_t over(uint64_t v, uint64_t dflt)
{
    return v > dflt ? v - dflt : 0;
}

static uint64_t ctx_cost(int p, const uint64_t *limit)
{
    uint64_t threads = (uint64_t)GS_SM_COUNT * GS_THREADS_PER_SM;
    return gs.ctx_overhead[p] + over(limit[0], GS_DEFAULT_STACK) * threads +
           over(limit[1], GS_DEFAULT_PRINTF_FIFO) + over(limit[2], GS_DEFAULT_MALLOC_HEAP);
}

/* Charges a new context's memory (at the default limits). */
static CUresult ctx_up(int p, CUcontext c)
{
    memcpy(c->limit, limit_default, sizeof c->limit);
    c->charged = ctx_cost(p, c->limit);
    if (gs_charge_retry(p, c->charged) != 0) {
        c->charged = 0;
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    gs_context_count(p, 1);
    gs_ctx_hold(); /* the memory is the driver's now, the call not yet returned */
    return CUDA_SUCCESS;
}

static void ctx_down(CUcontext c)
{
    gs_uncharge(c->pdev, c->charged);
    gs_context_count(c->pdev, -1);
    c->charged = 0;
}

static bool ctx_live(CUcontext c)
{
    return gs_obj_ok(c, GS_MAGIC_CTX) && c->alive;
}

static CUresult primary_retain(int p, CUcontext *out)
{
    gs_pdev *d = &gsp.pdev[p];
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&d->mu);
    if (d->primary_refs == 0) {
        d->primary.pdev = p;
        rc = ctx_up(p, &d->primary);
        if (rc)
            goto out;
        d->primary.h.magic = GS_MAGIC_CTX;
        d->primary.h.gen = atomic_load(&gsp.gen);
        d->primary.primary = true;
        d->primary.alive = true;
    }
    d->primary_refs++;
    *out = &d->primary;
out:
    pthread_mutex_unlock(&d->mu);
    return rc;
}

/* Deactivate the primary context (refs reached 0 or reset): its plain
 * allocations and its own memory go with it, like the driver's teardown. */
static void primary_deactivate(int p)
{
    gs_pdev *d = &gsp.pdev[p];
    uint64_t held = d->primary.charged;
    d->primary.alive = false;
    d->primary.charged = 0;
    d->primary_refs = 0;
    d->implicit = false;
    pthread_mutex_unlock(&d->mu);
    gs_free_ctx_allocations(&d->primary);
    gs_uncharge(p, held);
    gs_context_count(p, -1);
}

GS_API CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    int p;
    GS_FAILPOINT("cuDevicePrimaryCtxRetain");
    NEED_INIT();
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    DEV_ARG(dev, p);
    return primary_retain(p, pctx);
}

/* Release one reference to the primary context, or (reset) all of them:
 * a release with none held is an error, a reset then does nothing. */
static CUresult primary_drop(CUdevice dev, bool reset)
{
    int p;
    gs_pdev *d;
    NEED_INIT();
    DEV_ARG(dev, p);
    d = &gsp.pdev[p];
    pthread_mutex_lock(&d->mu);
    if (d->primary_refs == 0) {
        pthread_mutex_unlock(&d->mu);
        return reset ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
    }
    if (reset || --d->primary_refs == 0) {
        primary_deactivate(p); /* unlocks */
        return CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&d->mu);
    return CUDA_SUCCESS;
}

GS_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    GS_FAILPOINT("cuDevicePrimaryCtxRelease_v2");
    return primary_drop(dev, false);
}

GS_API CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
    GS_FAILPOINT("cuDevicePrimaryCtxRelease");
    return primary_drop(dev, false);
}

GS_API CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    GS_FAILPOINT("cuDevicePrimaryCtxReset_v2");
    return primary_drop(dev, true);
}

GS_API CUresult cuDevicePrimaryCtxReset(CUdevice dev)
{
    GS_FAILPOINT("cuDevicePrimaryCtxReset");
    return primary_drop(dev, true);
}

GS_API CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    int p;
    GS_FAILPOINT("cuDevicePrimaryCtxGetState");
    NEED_INIT();
    if (!flags || !active)
        return CUDA_ERROR_INVALID_VALUE;
    DEV_ARG(dev, p);
    pthread_mutex_lock(&gsp.pdev[p].mu);
    *flags = gsp.pdev[p].primary_flags;
    *active = gsp.pdev[p].primary_refs > 0;
    pthread_mutex_unlock(&gsp.pdev[p].mu);
    return CUDA_SUCCESS;
}

static CUresult ctx_create(CUcontext *pctx, CUdevice dev)
{
    int p;
    CUcontext c;
    CUresult rc;
    NEED_INIT();
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    DEV_ARG(dev, p);
    if (tls_depth == GS_CTX_STACK)
        return CUDA_ERROR_INVALID_VALUE;
    c = gs_obj_new(sizeof *c, GS_MAGIC_CTX);
    if (!c)
        return CUDA_ERROR_OUT_OF_MEMORY;
    c->pdev = p;
    rc = ctx_up(p, c);
    if (rc)
        return rc; /* the object stays reachable, dead (see gs_obj) */
    c->alive = true;
    tls_stack[tls_depth++] = c;
    *pctx = c;
    return CUDA_SUCCESS;
}

/* the pre-3.2 export: the same call */
GS_API CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    GS_FAILPOINT("cuCtxCreate");
    (void)flags;
    return ctx_create(pctx, dev);
}

GS_API CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    GS_FAILPOINT("cuCtxCreate_v2");
    (void)flags;
    return ctx_create(pctx, dev);
}

GS_API CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *params, int n,
                               unsigned int flags, CUdevice dev)
{
    GS_FAILPOINT("cuCtxCreate_v3");
    (void)params, (void)n, (void)flags;
    return ctx_create(pctx, dev);
}

GS_API CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *params, unsigned int flags,
                               CUdevice dev)
{
    GS_FAILPOINT("cuCtxCreate_v4");
    (void)params, (void)flags;
    return ctx_create(pctx, dev);
}

static CUresult ctx_destroy(CUcontext ctx)
{
    NEED_INIT();
    if (!ctx_live(ctx) || ctx->primary)
        return CUDA_ERROR_INVALID_CONTEXT;
    ctx->alive = false;
    for (int i = 0; i < tls_depth; i++) {
        if (tls_stack[i] != ctx)
            continue;
        memmove(&tls_stack[i], &tls_stack[i + 1], (size_t)(tls_depth - i - 1) * sizeof ctx);
        tls_depth--;
        i--;
    }
    gs_free_ctx_allocations(ctx);
    ctx_down(ctx);
    return CUDA_SUCCESS;
}

GS_API CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    GS_FAILPOINT("cuCtxDestroy_v2");
    return ctx_destroy(ctx);
}

GS_API CUresult cuCtxDestroy(CUcontext ctx)
{
    GS_FAILPOINT("cuCtxDestroy");
    return ctx_destroy(ctx);
}

/* Limits of the current context. Stack size, printf FIFO and malloc heap
 * change what the context holds at once (the difference is charged; out of
 * memory leaves the old value); the others are stored only. */
GS_API CUresult cuCtxSetLimit(CUlimit limit, size_t value)
{
    int p;
    CUcontext c;
    uint64_t old, cost;
    CUresult rc;
    GS_FAILPOINT("cuCtxSetLimit");
    if ((int)limit < 0 || (int)limit >= GS_NLIMITS)
        return CUDA_ERROR_INVALID_VALUE;
    rc = gs_cur_pdev(&p, &c);
    if (rc)
        return rc;
    old = c->limit[limit];
    c->limit[limit] = value;
    cost = ctx_cost(p, c->limit);
    if (cost > c->charged && gs_charge_retry(p, cost - c->charged) != 0) {
        c->limit[limit] = old;
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (cost < c->charged)
        gs_uncharge(p, c->charged - cost);
    c->charged = cost;
    return CUDA_SUCCESS;
}

GS_API CUresult cuCtxGetLimit(size_t *pvalue, CUlimit limit)
{
    int p;
    CUcontext c;
    CUresult rc;
    GS_FAILPOINT("cuCtxGetLimit");
    if (!pvalue || (int)limit < 0 || (int)limit >= GS_NLIMITS)
        return CUDA_ERROR_INVALID_VALUE;
    rc = gs_cur_pdev(&p, &c);
    if (rc)
        return rc;
    *pvalue = c->limit[limit];
    return CUDA_SUCCESS;
}

GS_API CUresult cuCtxSetCurrent(CUcontext ctx)
{
    GS_FAILPOINT("cuCtxSetCurrent");
    NEED_INIT();
    if (!ctx) {
        if (tls_depth > 0)
            tls_depth--;
        return CUDA_SUCCESS;
    }
    if (!ctx_live(ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    if (tls_depth == 0)
        tls_depth = 1;
    tls_stack[tls_depth - 1] = ctx;
    return CUDA_SUCCESS;
}

GS_API CUresult cuCtxGetCurrent(CUcontext *pctx)
{
    GS_FAILPOINT("cuCtxGetCurrent");
    NEED_INIT();
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    *pctx = tls_depth ? tls_stack[tls_depth - 1] : NULL;
    return CUDA_SUCCESS;
}

GS_API CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
    GS_FAILPOINT("cuCtxPushCurrent_v2");
    NEED_INIT();
    if (!ctx_live(ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    if (tls_depth == GS_CTX_STACK)
        return CUDA_ERROR_INVALID_VALUE;
    tls_stack[tls_depth++] = ctx;
    return CUDA_SUCCESS;
}

GS_API CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
    GS_FAILPOINT("cuCtxPopCurrent_v2");
    NEED_INIT();
    if (tls_depth == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    tls_depth--;
    if (pctx)
        *pctx = tls_stack[tls_depth];
    return CUDA_SUCCESS;
}

/* the pre-4.0 ABI: the same stack */
GS_API CUresult cuCtxPushCurrent(CUcontext ctx)
{
    GS_FAILPOINT("cuCtxPushCurrent");
    return cuCtxPushCurrent_v2(ctx);
}

GS_API CUresult cuCtxPopCurrent(CUcontext *pctx)
{
    GS_FAILPOINT("cuCtxPopCurrent");
    return cuCtxPopCurrent_v2(pctx);
}

/* The current context's device. With none current (or a released primary
 * current), behave like the runtime: retain the device's primary context
 * once for the process and make it current (GPUSIM_STRICT_CTX=1: fail like
 * the bare driver with CUDA_ERROR_INVALID_CONTEXT). */
CUresult gs_cur_pdev(int *pdev, CUcontext *pctx)
{
    CUcontext c = tls_depth ? tls_stack[tls_depth - 1] : NULL;
    int p;
    CUresult rc;
    gs_pdev *d;

    if (GS_UNLIKELY(!atomic_load_explicit(&gsp.initialized, memory_order_acquire)))
        return CUDA_ERROR_NOT_INITIALIZED;
    if (GS_UNLIKELY(!ctx_live(c))) {
        if (gs.strict_ctx || (c && !(gs_obj_ok(c, GS_MAGIC_CTX) && c->primary)))
            return CUDA_ERROR_INVALID_CONTEXT;
        p = c ? c->pdev : gsp.vis[0];
        d = &gsp.pdev[p];
        pthread_mutex_lock(&d->mu);
        bool need = !d->implicit || d->primary_refs == 0;
        d->implicit = true;
        pthread_mutex_unlock(&d->mu);
        if (need) {
            rc = primary_retain(p, &c);
            if (rc)
                return rc;
        }
        c = &d->primary;
        if (tls_depth == 0)
            tls_depth = 1;
        tls_stack[tls_depth - 1] = c;
    }
    *pdev = c->pdev;
    if (pctx)
        *pctx = c;
    return CUDA_SUCCESS;
}

GS_API CUresult cuCtxGetDevice(CUdevice *device)
{
    int p;
    CUresult rc;
    GS_FAILPOINT("cuCtxGetDevice");
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    rc = gs_cur_pdev(&p, NULL);
    if (rc)
        return rc;
    *device = gs_pdev_ordinal(p);
    return CUDA_SUCCESS;
}

#if GS_DRIVER_VERSION >= 13000
GS_API CUresult cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx)
{
    GS_FAILPOINT("cuCtxGetDevice_v2");
    NEED_INIT();
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    if (!ctx)
        return cuCtxGetDevice(device);
    if (!ctx_live(ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    *device = gs_pdev_ordinal(ctx->pdev);
    return CUDA_SUCCESS;
}

#endif

GS_API CUresult cuCtxSynchronize(void)
{
    int p;
    CUresult rc;
    GS_FAILPOINT("cuCtxSynchronize");
    rc = gs_cur_pdev(&p, NULL);
    if (rc)
        return rc;
    gs_pools_sync(p);
    return CUDA_SUCCESS;
}

#if GS_DRIVER_VERSION >= 13000
GS_API CUresult cuCtxSynchronize_v2(CUcontext ctx)
{
    GS_FAILPOINT("cuCtxSynchronize_v2");
    NEED_INIT();
    if (!ctx)
        return cuCtxSynchronize();
    if (!ctx_live(ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    gs_pools_sync(ctx->pdev);
    return CUDA_SUCCESS;
}
#endif

/* ---- streams --------------------------------------------------------------- */
#define GS_STREAM_LEGACY ((CUstream)0x1)
#define GS_STREAM_PER_THREAD ((CUstream)0x2)

CUresult gs_stream_pdev(CUstream s, int *pdev)
{
    if (!s || s == GS_STREAM_LEGACY || s == GS_STREAM_PER_THREAD)
        return gs_cur_pdev(pdev, NULL);
    if (!gs_obj_ok(s, GS_MAGIC_STREAM) || !s->alive)
        return CUDA_ERROR_INVALID_HANDLE;
    *pdev = s->pdev;
    return CUDA_SUCCESS;
}

/* the device a stream's work runs on (12.8): the current context's for the
 * null, legacy and per-thread streams */
GS_API CUresult cuStreamGetDevice(CUstream s, CUdevice *device)
{
    int p;
    CUresult rc;
    GS_FAILPOINT("cuStreamGetDevice");
    NEED_INIT();
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    rc = gs_stream_pdev(s, &p);
    if (rc)
        return rc;
    *device = gs_pdev_ordinal(p);
    return CUDA_SUCCESS;
}

GS_API CUresult cuStreamCreate(CUstream *phStream, unsigned int flags)
{
    int p;
    CUstream s;
    CUresult rc;
    GS_FAILPOINT("cuStreamCreate");
    if (!phStream || flags > 1)
        return CUDA_ERROR_INVALID_VALUE;
    rc = gs_cur_pdev(&p, NULL);
    if (rc)
        return rc;
    s = gs_obj_new(sizeof *s, GS_MAGIC_STREAM);
    if (!s)
        return CUDA_ERROR_OUT_OF_MEMORY;
    s->pdev = p;
    s->alive = true;
    *phStream = s;
    return CUDA_SUCCESS;
}

GS_API CUresult cuStreamDestroy_v2(CUstream s)
{
    GS_FAILPOINT("cuStreamDestroy_v2");
    NEED_INIT();
    if (!gs_obj_ok(s, GS_MAGIC_STREAM) || !s->alive)
        return CUDA_ERROR_INVALID_HANDLE;
    s->alive = false;
    return CUDA_SUCCESS;
}

static CUresult stream_sync(CUstream s)
{
    int p;
    CUresult rc;
    NEED_INIT();
    rc = gs_stream_pdev(s, &p);
    if (rc)
        return rc;
    gs_pools_sync(p);
    return CUDA_SUCCESS;
}

GS_API CUresult cuStreamSynchronize(CUstream s)
{
    GS_FAILPOINT("cuStreamSynchronize");
    return stream_sync(s);
}

GS_API CUresult cuStreamSynchronize_ptsz(CUstream s)
{
    GS_FAILPOINT("cuStreamSynchronize_ptsz");
    return stream_sync(s);
}
