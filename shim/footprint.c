/* SPDX-License-Identifier: Apache-2.0 */
/* What a process holds on a device beyond its allocations: its contexts,
 * their limit reservations (stack size x resident threads, printf FIFO,
 * malloc heap) and its loaded modules. None of it has a size the API tells,
 * so each call that makes some is measured from the driver: under this
 * process's per-device lock the shim samples NVML before and after the call
 * and charges the difference when the call succeeded (refusing it, undone,
 * with CUDA_ERROR_OUT_OF_MEMORY when the difference does not fit).
 *
 * The sample is NVML's used memory of this process on the device
 * (nvmlDeviceGetComputeRunningProcesses_v3, found by pid); when NVML does not
 * list this process under its pid (a PID namespace without host PIDs), the
 * device-wide used memory instead. Either way the change of this process's
 * own ledger charge across the call is taken off, so allocations of other
 * threads in the meantime are not counted twice. What is charged is returned
 * when the context is destroyed (the primary one released to inactive or
 * reset), the module unloaded, the limit lowered, or the process dies (its
 * ledger slot). docs/footprint.md gives the error bound.
 *
 * Memory that appears without any hooked call (lazy module loading, driver
 * internals) is caught by a resync, where NVML attributes this process: at
 * a cuMemGetInfo (the first, then at most one per 50 ms per device) the
 * process's "untracked" overhead is set to NVML's figure minus everything
 * charged. Before an allocation is refused the same
 * resync may only lower it (under allocation churn the two reads disagree
 * most, and a spurious raise would refuse memory the fraction has). */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "shim.h"
#include "table.h"

enum { ATTRIB_UNKNOWN = 0, ATTRIB_PROCESS = 1, ATTRIB_DEVICE = -1 };
enum { KIND_CTX = 20, KIND_CODE };

typedef struct fp_dev {
    pthread_mutex_t lock;
    nvmlDevice_t nvml;  /* NULL until looked up */
    int attrib;         /* how this process's memory on the device is measured */
    uint64_t primary;   /* charged for the primary context (its limits included) */
    uint64_t tracked;   /* primary + contexts + modules of this process */
    uint64_t untracked; /* from the resync */
} fp_dev;

static fp_dev devs[GF_MAX_ORDINALS] = {
    [0 ... GF_MAX_ORDINALS - 1] = {.lock = PTHREAD_MUTEX_INITIALIZER}};
static pthread_once_t nvml_once = PTHREAD_ONCE_INIT;
static bool nvml_ok;
static gf_table owners; /* CUcontext / CUmodule / CUlibrary -> what it holds */
static _Atomic uint64_t last_view_resync[GF_MAX_ORDINALS]; /* CLOCK_MONOTONIC_COARSE, offset */

static void nvml_init(void)
{
    gf_shim_init_nvml();
    /* NVML counts initialisations: this one never disturbs the program's */
    nvml_ok = gf_nvml.nvmlInit_v2 && gf_nvml.nvmlDeviceGetHandleByUUID &&
              gf_nvml.nvmlDeviceGetMemoryInfo && gf_nvml.nvmlInit_v2() == NVML_SUCCESS;
    if (!nvml_ok)
        gf_log(GF_LOG_WARN, "NVML is not usable: context and module memory cannot be measured "
                            "and is not charged (the agent's watchdog still sees it)");
}

typedef struct sample {
    bool ok;
    bool listed;      /* NVML lists this pid on the device */
    bool stable;      /* the process's charge did not move while NVML was read */
    uint64_t process; /* NVML: this pid's used memory there */
    uint64_t device;  /* NVML: the device's used memory */
    uint64_t charged; /* ledger: what this process is charged there */
} sample;

static nvmlDevice_t nvml_device(const gf_ordinal *o, fp_dev *d)
{
    if (!d->nvml && gf_nvml.nvmlDeviceGetHandleByUUID(o->uuid, &d->nvml) != NVML_SUCCESS)
        d->nvml = NULL;
    return d->nvml;
}

/* This pid's entry in NVML's process list of the device: 1 listed (*out
 * set), 0 answered without it, -1 no answer. */
static int process_used(nvmlDevice_t h, uint64_t *out)
{
    nvmlProcessInfo_t stackbuf[32], *infos = stackbuf;
    unsigned int n = 32;
    unsigned int me = (unsigned int)getpid();
    int found = 0;
    nvmlReturn_t rc;

    if (!gf_nvml.nvmlDeviceGetComputeRunningProcesses_v3)
        return -1;
    rc = gf_nvml.nvmlDeviceGetComputeRunningProcesses_v3(h, &n, infos);
    if (rc == NVML_ERROR_INSUFFICIENT_SIZE) {
        n += 16; /* processes may start in between */
        infos = calloc(n, sizeof(*infos));
        if (!infos)
            return -1;
        rc = gf_nvml.nvmlDeviceGetComputeRunningProcesses_v3(h, &n, infos);
    }
    for (unsigned int i = 0; rc == NVML_SUCCESS && i < n && !found; i++) {
        if (infos[i].pid == me && infos[i].usedGpuMemory != NVML_VALUE_NOT_AVAILABLE) {
            *out = infos[i].usedGpuMemory;
            found = 1;
        }
    }
    if (infos != stackbuf)
        free(infos);
    return rc == NVML_SUCCESS ? found : -1;
}

/* Which NVML figures a sample reads: only those the measurement uses (each
 * query is a driver call; on gpusim a scan of its state). */
enum {
    NEED_DEVICE = 1,        /* the device's used memory */
    NEED_PROCESS = 2,       /* this pid's entry */
    DEVICE_IF_UNLISTED = 4, /* the device's too, when the pid's entry is missing */
};

/* What a sample of the device needs, before (prev NULL) or after the call
 * with the sample before it. Caller holds d->lock (attrib does not move).
 * A measurement reads the process's figure once NVML attributes it and the
 * device's where it does not. At the first context, while that is not known,
 * the sample before reads both (an entry for this pid then is someone
 * else's: measured decides), the one after the pid's entry, and the device's
 * only where that entry is missing or not this process's. */
static int sample_needs(const fp_dev *d, bool first_context, const sample *prev)
{
    if (d->attrib == ATTRIB_PROCESS)
        return NEED_PROCESS;
    if (d->attrib == ATTRIB_DEVICE || !first_context)
        return NEED_DEVICE;
    if (!prev)
        return NEED_DEVICE | NEED_PROCESS;
    if (prev->listed && prev->process > 0)
        return NEED_DEVICE; /* someone else's entry: device-wide (measured) */
    return NEED_PROCESS | DEVICE_IF_UNLISTED;
}

/* One read of what the sample needs; false when NVML did not answer. */
static bool read_nvml(nvmlDevice_t h, int needs, sample *s)
{
    nvmlMemory_t m;
    int listed = 0;

    if (needs & NEED_PROCESS) {
        listed = process_used(h, &s->process);
        s->listed = listed == 1;
        if (listed < 0 && !(needs & (NEED_DEVICE | DEVICE_IF_UNLISTED)))
            return false; /* the one figure it needs */
    }
    if ((needs & NEED_DEVICE) || ((needs & DEVICE_IF_UNLISTED) && !s->listed)) {
        if (gf_nvml.nvmlDeviceGetMemoryInfo(h, &m) != NVML_SUCCESS)
            return false;
        s->device = m.used;
    }
    return true;
}

static void take_sample(int ord, const gf_ordinal *o, int needs, sample *s)
{
    fp_dev *d = &devs[ord];
    nvmlDevice_t h;

    *s = (sample){0};
    pthread_once(&nvml_once, nvml_init);
    if (!nvml_ok || o->dev < 0 || !(h = nvml_device(o, d)))
        return;
    _Atomic uint64_t *mine = &gf_state.ledger.hdr->slots[gf_state.ledger.slot].used[o->dev];
    /* NVML and the ledger cannot be read at one instant: other threads'
     * allocations and frees in between would show as overhead. A few tries
     * for a read the charge did not move across. */
    for (int attempt = 0; attempt < 4 && !s->stable; attempt++) {
        uint64_t before = atomic_load_explicit(mine, memory_order_acquire);
        if (!read_nvml(h, needs, s)) {
            s->ok = false;
            return;
        }
        s->ok = true;
        s->charged = atomic_load_explicit(mine, memory_order_acquire);
        s->stable = s->charged == before;
    }
}

static uint64_t minus(uint64_t a, uint64_t b)
{
    return a > b ? a - b : 0;
}

/* What the call between the two samples added on the device (signed), less
 * what this process's ledger charge grew by meanwhile. Caller holds d->lock. */
static int64_t measured(fp_dev *d, const sample *a, const sample *b, bool first_context)
{
    int64_t grew;
    if (!a->ok || !b->ok)
        return 0;
    if (first_context && d->attrib == ATTRIB_UNKNOWN) {
        /* before its first context here the process holds nothing on the
         * device: an entry for its pid then is someone else's (another PID
         * namespace); no entry after a context appeared means NVML lists the
         * process under a pid it does not know */
        if (a->listed && a->process > 0)
            d->attrib = ATTRIB_DEVICE;
        else if (b->listed)
            d->attrib = ATTRIB_PROCESS;
        else if (b->device > a->device)
            d->attrib = ATTRIB_DEVICE;
        if (d->attrib == ATTRIB_DEVICE)
            gf_log(GF_LOG_INFO, "NVML does not attribute pid %d: measuring device-wide",
                   (int)getpid());
    }
    if (d->attrib == ATTRIB_PROCESS)
        grew = (int64_t)(b->process - a->process);
    else
        grew = (int64_t)(b->device - a->device);
    return grew - (int64_t)(b->charged - a->charged);
}

typedef struct holder {
    int ord;
    const gf_ordinal *o;
    fp_dev *d;
    sample before;
    bool first; /* holds the fraction's first-context lock of the device */
} holder;

/* Locks the device and, with sample_now, samples; false when the shim does not
 * count it. */
static bool begin_at(int ord, holder *h, bool sample_now)
{
    if (ord < 0 || ord >= GF_MAX_ORDINALS || !(h->o = gf_ordinal_get(ord)))
        return false;
    h->ord = ord;
    h->d = &devs[ord];
    h->first = false;
    pthread_mutex_lock(&h->d->lock);
    if (sample_now)
        take_sample(ord, h->o, sample_needs(h->d, false, NULL), &h->before);
    return true;
}

static bool begin(int ord, holder *h)
{
    return begin_at(ord, h, true);
}

static int64_t end(holder *h, bool first_context)
{
    sample after;
    take_sample(h->ord, h->o, sample_needs(h->d, first_context, &h->before), &after);
    return measured(h->d, &h->before, &after, first_context);
}

/* Charges bytes the driver already holds for the process, against the limit.
 * Caller holds the device lock. */
static bool charge(holder *h, uint64_t bytes)
{
    if (!bytes)
        return true;
    if (!gf_admit(h->o, bytes))
        return false;
    gf_ledger_overhead_mark(&gf_state.ledger, h->o->dev, bytes);
    h->d->tracked += bytes;
    return true;
}

static void uncharge(const gf_ordinal *o, fp_dev *d, uint64_t bytes)
{
    if (bytes > d->tracked)
        bytes = d->tracked;
    if (!bytes || o->dev < 0)
        return;
    d->tracked -= bytes;
    gf_ledger_overhead_unmark(&gf_state.ledger, o->dev, bytes);
    gf_unadmit(o, bytes);
}

static void remember(void *handle, uint64_t bytes, int ord, int kind)
{
    gf_entry e = {.key = (uint64_t)(uintptr_t)handle, .bytes = bytes, .ordinal = ord, .kind = kind};
    if (!gf_table_set(&owners, &e))
        gf_log(GF_LOG_ERROR,
               "out of host memory tracking a context or module: its %llu bytes "
               "stay counted",
               (unsigned long long)bytes);
}

/* Returns what a context or module was charged, once it is gone. */
static void forget(void *handle)
{
    gf_entry e;
    const gf_ordinal *o;
    if (!gf_table_take(&owners, (uint64_t)(uintptr_t)handle, &e) || !e.bytes ||
        !(o = gf_ordinal_get(e.ordinal)))
        return;
    pthread_mutex_lock(&devs[e.ordinal].lock);
    uncharge(o, &devs[e.ordinal], e.bytes);
    pthread_mutex_unlock(&devs[e.ordinal].lock);
}

/* ---- primary contexts ------------------------------------------------------ */
/* No process of the fraction measured a context on this device yet, so there
 * is nothing to reserve: the context is made under the fraction's
 * first-context lock of the device (in the ledger file, taken across its
 * processes, dropped by the kernel if the holder dies), held until it is
 * measured and charged or undone. While one is uncounted no other process of
 * the fraction can make a context there, so none has memory there to
 * allocate into its room: the driver never holds more than the limit. A
 * process that waited finds the estimate the holder measured. */
static uint64_t first_context_lock(holder *h)
{
    static _Atomic bool warned;
    uint64_t est;
    if (gf_ledger_first_ctx_lock(&gf_state.ledger, h->o->dev) < 0) {
        if (!atomic_exchange(&warned, true))
            gf_log(GF_LOG_WARN,
                   "cannot take the ledger's first-context lock (%s): a first "
                   "context is uncounted while it is made",
                   strerror(errno));
        return 0;
    }
    est = gf_ledger_ctx_estimate(&gf_state.ledger, h->o->dev);
    if (est)
        gf_ledger_first_ctx_unlock(&gf_state.ledger, h->o->dev);
    else
        h->first = true;
    return est;
}

static void first_context_unlock(holder *h)
{
    if (h->first)
        gf_ledger_first_ctx_unlock(&gf_state.ledger, h->o->dev);
    h->first = false;
}

/* Before a context is made: what the fraction's contexts took on this device
 * so far is reserved, so that the driver never holds it uncounted while the
 * call runs; with no estimate yet, the first-context lock is taken instead.
 * Then the one sample before the call. Caller holds the device lock. */
static bool reserve_estimate(holder *h, uint64_t *est)
{
    *est = h->o->dev >= 0 ? gf_ledger_ctx_estimate(&gf_state.ledger, h->o->dev) : 0;
    if (!*est && h->o->dev >= 0)
        *est = first_context_lock(h);
    if (*est && !gf_admit(h->o, *est))
        return false;
    /* after the reservation: it is not the context's */
    take_sample(h->ord, h->o, sample_needs(h->d, true, NULL), &h->before);
    return true;
}

/* After it: the measured overhead replaces the estimate. */
static bool settle_context(holder *h, uint64_t est, int64_t grew)
{
    uint64_t bytes = grew > 0 ? (uint64_t)grew : 0;
    if (est)
        gf_unadmit(h->o, est);
    if (h->o->dev >= 0 && bytes)
        gf_ledger_note_ctx_overhead(&gf_state.ledger, h->o->dev, bytes);
    return charge(h, bytes);
}

static bool primary_active(CUdevice dev)
{
    unsigned int flags;
    int active = 0;
    return gf_cu.cuDevicePrimaryCtxGetState &&
           gf_cu.cuDevicePrimaryCtxGetState(dev, &flags, &active) == CUDA_SUCCESS && active;
}

GF_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    holder h;
    CUresult rc;
    int64_t grew;
    uint64_t est;

    GF_HOOK_ENTER(cu, cuDevicePrimaryCtxRetain);
    if (primary_active(dev) || !begin_at(dev, &h, false)) /* another reference: nothing new */
        return gf_cu.cuDevicePrimaryCtxRetain(pctx, dev);
    if (!reserve_estimate(&h, &est)) {
        pthread_mutex_unlock(&h.d->lock);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    rc = gf_cu.cuDevicePrimaryCtxRetain(pctx, dev);
    grew = end(&h, true);
    if (rc != CUDA_SUCCESS) {
        if (est)
            gf_unadmit(h.o, est);
    } else {
        if (settle_context(&h, est, grew)) {
            h.d->primary += grew > 0 ? (uint64_t)grew : 0;
        } else {
            gf_cu.cuDevicePrimaryCtxRelease_v2(dev);
            *pctx = NULL;
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    first_context_unlock(&h);
    pthread_mutex_unlock(&h.d->lock);
    return rc;
}

/* After a release or reset: an inactive primary context holds nothing. */
static CUresult primary_dropped(CUresult rc, CUdevice dev)
{
    const gf_ordinal *o;
    fp_dev *d;
    if (rc != CUDA_SUCCESS || dev < 0 || dev >= GF_MAX_ORDINALS || !(o = gf_ordinal_get(dev)))
        return rc;
    d = &devs[dev];
    pthread_mutex_lock(&d->lock);
    if (d->primary && !primary_active(dev)) {
        uncharge(o, d, d->primary);
        d->primary = 0;
    }
    pthread_mutex_unlock(&d->lock);
    return rc;
}

#define PRIMARY_DROP(X)          \
    X(cuDevicePrimaryCtxRelease) \
    X(cuDevicePrimaryCtxRelease_v2) X(cuDevicePrimaryCtxReset) X(cuDevicePrimaryCtxReset_v2)
#define DEFINE_DROP(name)                 \
    GF_EXPORT CUresult name(CUdevice dev) \
    {                                     \
        GF_HOOK_ENTER(cu, name);          \
        CUresult rc = gf_cu.name(dev);    \
        gf_ctx_switched();                \
        return primary_dropped(rc, dev);  \
    }
PRIMARY_DROP(DEFINE_DROP)

/* ---- switching contexts: only the thread's cached device moves ------------------ */
#define DEFINE_SWITCH(name, type, arg) \
    GF_EXPORT CUresult name(type arg)  \
    {                                  \
        GF_HOOK_ENTER(cu, name);       \
        CUresult rc = gf_cu.name(arg); \
        gf_ctx_switched();             \
        return rc;                     \
    }
DEFINE_SWITCH(cuCtxSetCurrent, CUcontext, ctx)
DEFINE_SWITCH(cuCtxPushCurrent_v2, CUcontext, ctx)
DEFINE_SWITCH(cuCtxPushCurrent, CUcontext, ctx)
DEFINE_SWITCH(cuCtxPopCurrent_v2, CUcontext *, pctx)
DEFINE_SWITCH(cuCtxPopCurrent, CUcontext *, pctx)

/* ---- contexts made with cuCtxCreate ------------------------------------------ */
typedef CUresult (*create_call)(CUcontext *pctx, const void *args);

static CUresult ctx_create_at(CUcontext *pctx, CUdevice dev, create_call call, const void *args)
{
    holder h;
    CUresult rc;
    int64_t grew;
    uint64_t est;

    if (!begin_at(dev, &h, false))
        return call(pctx, args);
    if (!reserve_estimate(&h, &est)) {
        pthread_mutex_unlock(&h.d->lock);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    rc = call(pctx, args);
    grew = end(&h, true);
    if (rc != CUDA_SUCCESS && est)
        gf_unadmit(h.o, est);
    if (rc == CUDA_SUCCESS) {
        uint64_t bytes = grew > 0 ? (uint64_t)grew : 0;
        if (settle_context(&h, est, grew)) {
            remember(*pctx, bytes, dev, KIND_CTX);
        } else {
            gf_cu.cuCtxDestroy_v2(*pctx);
            *pctx = NULL;
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    first_context_unlock(&h);
    pthread_mutex_unlock(&h.d->lock);
    return rc;
}

/* A made context is pushed on the thread's stack: its device is current. */
static CUresult ctx_create(CUcontext *pctx, CUdevice dev, create_call call, const void *args)
{
    CUresult rc = ctx_create_at(pctx, dev, call, args);
    gf_ctx_switched();
    return rc;
}

typedef struct create_args {
    unsigned int flags;
    CUdevice dev;
    CUexecAffinityParam *affinity;
    int n_affinity;
    CUctxCreateParams *params;
} create_args;

static CUresult call_create(CUcontext *pctx, const void *p)
{
    const create_args *a = p;
    return gf_cu.cuCtxCreate(pctx, a->flags, a->dev);
}

static CUresult call_create_v2(CUcontext *pctx, const void *p)
{
    const create_args *a = p;
    return gf_cu.cuCtxCreate_v2(pctx, a->flags, a->dev);
}

static CUresult call_create_v3(CUcontext *pctx, const void *p)
{
    const create_args *a = p;
    return gf_cu.cuCtxCreate_v3(pctx, a->affinity, a->n_affinity, a->flags, a->dev);
}

static CUresult call_create_v4(CUcontext *pctx, const void *p)
{
    const create_args *a = p;
    return gf_cu.cuCtxCreate_v4(pctx, a->params, a->flags, a->dev);
}

GF_EXPORT CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    create_args a = {.flags = flags, .dev = dev};
    GF_HOOK_ENTER(cu, cuCtxCreate);
    return ctx_create(pctx, dev, call_create, &a);
}

GF_EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    create_args a = {.flags = flags, .dev = dev};
    GF_HOOK_ENTER(cu, cuCtxCreate_v2);
    return ctx_create(pctx, dev, call_create_v2, &a);
}

GF_EXPORT CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams,
                                  unsigned int flags, CUdevice dev)
{
    create_args a = {.flags = flags, .dev = dev, .affinity = paramsArray, .n_affinity = numParams};
    GF_HOOK_ENTER(cu, cuCtxCreate_v3);
    return ctx_create(pctx, dev, call_create_v3, &a);
}

GF_EXPORT CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams,
                                  unsigned int flags, CUdevice dev)
{
    create_args a = {.flags = flags, .dev = dev, .params = ctxCreateParams};
    GF_HOOK_ENTER(cu, cuCtxCreate_v4);
    return ctx_create(pctx, dev, call_create_v4, &a);
}

GF_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    CUresult rc;
    GF_HOOK_ENTER(cu, cuCtxDestroy_v2);
    rc = gf_cu.cuCtxDestroy_v2(ctx);
    gf_ctx_switched();
    if (rc == CUDA_SUCCESS)
        forget(ctx);
    return rc;
}

GF_EXPORT CUresult cuCtxDestroy(CUcontext ctx)
{
    CUresult rc;
    GF_HOOK_ENTER(cu, cuCtxDestroy);
    rc = gf_cu.cuCtxDestroy(ctx);
    gf_ctx_switched();
    if (rc == CUDA_SUCCESS)
        forget(ctx);
    return rc;
}

/* ---- context limits ------------------------------------------------------------ */
/* Moves a context's charge by delta: the primary's, or a created one's. */
static void holder_adjust(holder *h, CUcontext ctx, int64_t delta)
{
    gf_entry e;
    bool created = ctx && gf_table_get(&owners, (uint64_t)(uintptr_t)ctx, &e);
    uint64_t *held = created ? &e.bytes : &h->d->primary;
    if (delta > 0) {
        *held += (uint64_t)delta;
    } else {
        uint64_t back = (uint64_t)-delta < *held ? (uint64_t)-delta : *held;
        *held -= back;
        uncharge(h->o, h->d, back);
    }
    if (created)
        gf_table_set(&owners, &e);
}

GF_EXPORT CUresult cuCtxSetLimit(CUlimit limit, size_t value)
{
    holder h;
    size_t old = 0;
    CUcontext ctx = NULL;
    CUresult rc;
    int64_t grew;

    GF_HOOK_ENTER(cu, cuCtxSetLimit);
    if ((limit != CU_LIMIT_STACK_SIZE && limit != CU_LIMIT_PRINTF_FIFO_SIZE &&
         limit != CU_LIMIT_MALLOC_HEAP_SIZE) ||
        !begin(gf_current_ordinal(), &h))
        return gf_cu.cuCtxSetLimit(limit, value);
    if (gf_cu.cuCtxGetLimit)
        gf_cu.cuCtxGetLimit(&old, limit);
    if (gf_cu.cuCtxGetCurrent)
        gf_cu.cuCtxGetCurrent(&ctx);
    rc = gf_cu.cuCtxSetLimit(limit, value);
    grew = end(&h, false);
    if (rc == CUDA_SUCCESS && grew > 0 && !charge(&h, (uint64_t)grew)) {
        gf_cu.cuCtxSetLimit(limit, old); /* the refusal leaves the old value */
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    } else if (rc == CUDA_SUCCESS && grew != 0) {
        holder_adjust(&h, ctx, grew);
    }
    pthread_mutex_unlock(&h.d->lock);
    return rc;
}

/* ---- modules and libraries ------------------------------------------------------ */
typedef CUresult (*load_call)(void **handle, const void *args);

static CUresult code_load(void **handle, load_call call, const void *args,
                          CUresult (*unload)(void *))
{
    holder h;
    CUresult rc;
    int64_t grew;

    if (!begin(gf_current_ordinal(), &h))
        return call(handle, args);
    rc = call(handle, args);
    grew = end(&h, false);
    if (rc == CUDA_SUCCESS) {
        uint64_t bytes = grew > 0 ? (uint64_t)grew : 0;
        if (charge(&h, bytes)) {
            remember(*handle, bytes, h.ord, KIND_CODE);
        } else {
            unload(*handle);
            *handle = NULL;
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    pthread_mutex_unlock(&h.d->lock);
    return rc;
}

typedef struct load_args {
    const void *image;
    const char *path;
    unsigned int n_opts, n_lib_opts;
    CUjit_option *opts;
    void **opt_values;
    CUlibraryOption *lib_opts;
    void **lib_opt_values;
} load_args;

static CUresult unload_module(void *m)
{
    return gf_cu.cuModuleUnload(m);
}

static CUresult unload_library(void *l)
{
    return gf_cu.cuLibraryUnload(l);
}

static CUresult call_module_load(void **h, const void *p)
{
    return gf_cu.cuModuleLoad((CUmodule *)h, ((const load_args *)p)->path);
}

static CUresult call_module_data(void **h, const void *p)
{
    return gf_cu.cuModuleLoadData((CUmodule *)h, ((const load_args *)p)->image);
}

static CUresult call_module_data_ex(void **h, const void *p)
{
    const load_args *a = p;
    return gf_cu.cuModuleLoadDataEx((CUmodule *)h, a->image, a->n_opts, a->opts, a->opt_values);
}

static CUresult call_module_fatbin(void **h, const void *p)
{
    return gf_cu.cuModuleLoadFatBinary((CUmodule *)h, ((const load_args *)p)->image);
}

static CUresult call_library_data(void **h, const void *p)
{
    const load_args *a = p;
    return gf_cu.cuLibraryLoadData((CUlibrary *)h, a->image, a->opts, a->opt_values, a->n_opts,
                                   a->lib_opts, a->lib_opt_values, a->n_lib_opts);
}

static CUresult call_library_file(void **h, const void *p)
{
    const load_args *a = p;
    return gf_cu.cuLibraryLoadFromFile((CUlibrary *)h, a->path, a->opts, a->opt_values, a->n_opts,
                                       a->lib_opts, a->lib_opt_values, a->n_lib_opts);
}

GF_EXPORT CUresult cuModuleLoad(CUmodule *module, const char *fname)
{
    load_args a = {.path = fname};
    GF_HOOK_ENTER(cu, cuModuleLoad);
    return code_load((void **)module, call_module_load, &a, unload_module);
}

GF_EXPORT CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
    load_args a = {.image = image};
    GF_HOOK_ENTER(cu, cuModuleLoadData);
    return code_load((void **)module, call_module_data, &a, unload_module);
}

GF_EXPORT CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
                                      CUjit_option *options, void **optionValues)
{
    load_args a = {
        .image = image, .n_opts = numOptions, .opts = options, .opt_values = optionValues};
    GF_HOOK_ENTER(cu, cuModuleLoadDataEx);
    return code_load((void **)module, call_module_data_ex, &a, unload_module);
}

GF_EXPORT CUresult cuModuleLoadFatBinary(CUmodule *module, const void *fatCubin)
{
    load_args a = {.image = fatCubin};
    GF_HOOK_ENTER(cu, cuModuleLoadFatBinary);
    return code_load((void **)module, call_module_fatbin, &a, unload_module);
}

GF_EXPORT CUresult cuModuleUnload(CUmodule hmod)
{
    CUresult rc;
    GF_HOOK_ENTER(cu, cuModuleUnload);
    rc = gf_cu.cuModuleUnload(hmod);
    if (rc == CUDA_SUCCESS)
        forget(hmod);
    return rc;
}

GF_EXPORT CUresult cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions,
                                     void **jitOptionsValues, unsigned int numJitOptions,
                                     CUlibraryOption *libraryOptions, void **libraryOptionValues,
                                     unsigned int numLibraryOptions)
{
    load_args a = {.image = code,
                   .opts = jitOptions,
                   .opt_values = jitOptionsValues,
                   .n_opts = numJitOptions,
                   .lib_opts = libraryOptions,
                   .lib_opt_values = libraryOptionValues,
                   .n_lib_opts = numLibraryOptions};
    GF_HOOK_ENTER(cu, cuLibraryLoadData);
    return code_load((void **)library, call_library_data, &a, unload_library);
}

GF_EXPORT CUresult cuLibraryLoadFromFile(CUlibrary *library, const char *fileName,
                                         CUjit_option *jitOptions, void **jitOptionsValues,
                                         unsigned int numJitOptions,
                                         CUlibraryOption *libraryOptions,
                                         void **libraryOptionValues, unsigned int numLibraryOptions)
{
    load_args a = {.path = fileName,
                   .opts = jitOptions,
                   .opt_values = jitOptionsValues,
                   .n_opts = numJitOptions,
                   .lib_opts = libraryOptions,
                   .lib_opt_values = libraryOptionValues,
                   .n_lib_opts = numLibraryOptions};
    GF_HOOK_ENTER(cu, cuLibraryLoadFromFile);
    return code_load((void **)library, call_library_file, &a, unload_library);
}

GF_EXPORT CUresult cuLibraryUnload(CUlibrary library)
{
    CUresult rc;
    GF_HOOK_ENTER(cu, cuLibraryUnload);
    rc = gf_cu.cuLibraryUnload(library);
    if (rc == CUDA_SUCCESS)
        forget(library);
    return rc;
}

/* ---- resync ------------------------------------------------------------------------ */
static void resync(int ord, bool may_raise)
{
    const gf_ordinal *o;
    fp_dev *d;
    sample s;
    uint64_t allocations, target;

    if (ord < 0 || ord >= GF_MAX_ORDINALS || !(o = gf_ordinal_get(ord)) || o->dev < 0)
        return;
    d = &devs[ord];
    if (d->attrib != ATTRIB_PROCESS || pthread_mutex_trylock(&d->lock) != 0)
        return; /* only where NVML names this process; never waits on a measurement */
    take_sample(ord, o, NEED_PROCESS, &s);
    if (s.ok && s.listed && s.stable) {
        allocations = minus(s.charged, d->tracked + d->untracked);
        target = minus(s.process, allocations + d->tracked);
        if (target > d->untracked && !may_raise)
            target = d->untracked;
        if (target > d->untracked) {
            /* the memory exists already: counted, not admitted */
            gf_ledger_charge(&gf_state.ledger, o->dev, target - d->untracked);
            gf_ledger_overhead_mark(&gf_state.ledger, o->dev, target - d->untracked);
        } else if (target < d->untracked) {
            gf_ledger_overhead_unmark(&gf_state.ledger, o->dev, d->untracked - target);
            gf_ledger_release(&gf_state.ledger, o->dev, d->untracked - target);
        }
        d->untracked = target;
    }
    pthread_mutex_unlock(&d->lock);
}

/* In a fork child: the parent's contexts and modules are not the child's. */
static void footprint_after_fork(void)
{
    for (int i = 0; i < GF_MAX_ORDINALS; i++) {
        nvmlDevice_t h = devs[i].nvml;
        devs[i] = (fp_dev){.nvml = h};
        pthread_mutex_init(&devs[i].lock, NULL);
    }
    gf_table_reset(&owners);
    for (int i = 0; i < GF_MAX_ORDINALS; i++)
        atomic_store_explicit(&last_view_resync[i], 0, memory_order_relaxed);
}

/* A memory query resyncs at most once per RESYNC_EVERY_NS per device (the
 * first query always does): NVML's process list costs several times the query
 * itself. What the query reports is bounded by the count either way
 * (info.c); only memory the driver made unasked waits this long to be
 * counted. */
#define RESYNC_EVERY_NS (50 * 1000 * 1000ULL)

static bool view_resync_due(int ord)
{
    struct timespec ts;
    uint64_t now, last;

    if (ord < 0 || ord >= GF_MAX_ORDINALS || clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) != 0)
        return true;
    now = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec + RESYNC_EVERY_NS;
    last = atomic_load_explicit(&last_view_resync[ord], memory_order_relaxed);
    if (last && now - last < RESYNC_EVERY_NS)
        return false;
    return atomic_compare_exchange_strong_explicit(&last_view_resync[ord], &last, now,
                                                   memory_order_relaxed, memory_order_relaxed);
}

/* A refusal only lowers: the overhead is not raised while an allocation waits. */
static void reconcile(int ordinal, gf_reconcile_why why)
{
    if (why == GF_RECONCILE_VIEW && !view_resync_due(ordinal))
        return;
    resync(ordinal, why == GF_RECONCILE_VIEW);
}

GF_HIDDEN const gf_family gf_family_footprint = {.name = "footprint",
                                                 .after_fork = footprint_after_fork,
                                                 .reconcile = reconcile};
