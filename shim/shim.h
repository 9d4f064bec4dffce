/* SPDX-License-Identifier: Apache-2.0 */
/* libgpufrac internals. Everything here is hidden; only the hooks in
 * hooks.def (and dlsym) leave the library.
 *
 * Floors: a file calls only the floors below its own, never the one above.
 *   3 lookup and the table: dlsym.c, procaddr.c (every hook, via hooks.def),
 *     families.c (every family's entry, via families.def)
 *   2 families: alloc.c async.c objects.c graph.c footprint.c info.c; each
 *     holds its hooks and state, and gives its after-fork and reconcile to
 *     the table as one gf_family. No family calls another, but for one
 *     arrow: alloc.c's frees ask async.c (async.h) for stream-ordered pointers.
 *   1 shim core (this header): init.c (the real driver, state, logging, the
 *     after-fork handler), elfsym.c (the driver's symbol table), device.c
 *     (ordinals, admission, gf_reconcile),
 *     agent.c (loans from gpufracd; its after-fork is a table entry too),
 *     table.c (handle maps). It reaches the families only by walking
 *     gf_families, never by name.
 *   0 gfcore (core/): config, ledger, log. */
#ifndef GPUFRAC_SHIM_H
#define GPUFRAC_SHIM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "gpufrac/cuda_abi.h"
#include "gpufrac/nvml_abi.h"
#include "ledger.h"
#include "log.h"

#define GF_HIDDEN __attribute__((visibility("hidden")))
#define GF_EXPORT __attribute__((visibility("default")))
#define GF_MAX_ORDINALS 64

/* Driver entry points the shim calls but does not hook. */
#define GF_CU_USED(X)                                                                             \
    X(cuCtxGetDevice, CUresult, (CUdevice * device))                                              \
    X(cuCtxGetCurrent, CUresult, (CUcontext * pctx))                                              \
    X(cuCtxGetLimit, CUresult, (size_t * pvalue, CUlimit limit))                                  \
    X(cuDevicePrimaryCtxGetState, CUresult, (CUdevice dev, unsigned int *flags, int *active))     \
    X(cuDeviceGetUuid, CUresult, (CUuuid * uuid, CUdevice dev))                                   \
    X(cuDeviceGetMemPool, CUresult, (CUmemoryPool * pool, CUdevice dev))                          \
    X(cuDeviceGetDefaultMemPool, CUresult, (CUmemoryPool * pool, CUdevice dev))                   \
    X(cuStreamGetDevice, CUresult, (CUstream stream, CUdevice * dev))                             \
    X(cuStreamGetCtx, CUresult, (CUstream stream, CUcontext * pctx))                              \
    X(cuMemPoolGetAttribute, CUresult, (CUmemoryPool pool, CUmemPool_attribute attr, void *v))    \
    X(cuDeviceGetGraphMemAttribute, CUresult, (CUdevice dev, CUgraphMem_attribute attr, void *v)) \
    X(cuArrayGetMemoryRequirements, CUresult,                                                     \
      (CUDA_ARRAY_MEMORY_REQUIREMENTS * req, CUarray arr, CUdevice dev))                          \
    X(cuMipmappedArrayGetMemoryRequirements, CUresult,                                            \
      (CUDA_ARRAY_MEMORY_REQUIREMENTS * req, CUmipmappedArray arr, CUdevice dev))

#define GF_NVML_USED(X)                                                                  \
    X(nvmlDeviceGetUUID, nvmlReturn_t, (nvmlDevice_t dev, char *uuid, unsigned int len)) \
    X(nvmlInit_v2, nvmlReturn_t, (void))                                                 \
    X(nvmlDeviceGetHandleByUUID, nvmlReturn_t, (const char *uuid, nvmlDevice_t *dev))    \
    X(nvmlDeviceGetComputeRunningProcesses_v3, nvmlReturn_t,                             \
      (nvmlDevice_t dev, unsigned int *count, nvmlProcessInfo_t *infos))

typedef struct gf_real {
#define CU_HOOK(name, base, since, ptsz, ret, params) ret(*name) params;
#include "hooks.def"
#define X(name, ret, params) ret(*name) params;
    GF_CU_USED(X)
#undef X
} gf_real;

typedef struct gf_real_nvml {
#define NVML_HOOK(name, ret, params) ret(*name) params;
#include "hooks.def"
#define X(name, ret, params) ret(*name) params;
    GF_NVML_USED(X)
#undef X
} gf_real_nvml;

/* Per device ordinal of this process: where it is counted and its limit. */
typedef struct gf_ordinal {
    _Atomic int state; /* 0 unknown, 1 ready */
    int dev;           /* ledger device index; -1: not part of the fraction */
    uint64_t limit;    /* effective: min(config, environment) */
    char uuid[GF_UUID_MAX];
} gf_ordinal;

/* An ordinal's hot view, one cache line: on is set (after the rest) once the
 * ordinal is ready, counted on a ledger device, and no agent lends, where
 * admission is the ledger's compare-and-swap on *used against cap and
 * nothing else; the hooks test on and take their inline path (gf_hot_reserve,
 * gf_hot_release). A fork child clears it before it maps the ledger anew and
 * sets it again after. */
typedef struct gf_hot {
    _Atomic int on;
    uint64_t cap;           /* min(limit, the ledger device's own limit) */
    _Atomic uint64_t *used; /* the ledger device's count */
    _Atomic uint64_t *mine; /* this process's slot's count on it */
    _Atomic uint64_t *peak;
} __attribute__((aligned(64))) gf_hot;

typedef struct gf_shim {
    bool active; /* a fraction config was found and the ledger is open */
    gf_log_level log_level;
    int log_fd;
    char config_path[GF_PATH_MAX];
    gf_fraction_config cfg;
    gf_ledger ledger;
    uint64_t env_limit; /* GPUFRAC_MEMORY_LIMIT, or UINT64_MAX */
    void *cuda;         /* libcuda.so.1 */
    gf_ordinal ordinals[GF_MAX_ORDINALS];
    gf_hot hot[GF_MAX_ORDINALS];
} gf_shim;

GF_HIDDEN extern gf_real gf_cu;
GF_HIDDEN extern gf_real_nvml gf_nvml;
GF_HIDDEN extern gf_shim gf_state;
GF_HIDDEN extern void *(*gf_real_dlsym)(void *, const char *);

GF_HIDDEN extern _Atomic int gf_init_done;
GF_HIDDEN void gf_shim_init_slow(void);

/* Makes sure the shim is initialised: one load after the first call. */
static inline void gf_shim_init(void)
{
    if (__builtin_expect(!atomic_load_explicit(&gf_init_done, memory_order_acquire), 0))
        gf_shim_init_slow();
}
GF_HIDDEN void gf_shim_init_nvml(void);

/* Every hook's first statement: the shim is initialised (the NVML side for an
 * NVML hook), and a driver that lacks the entry point gets its own "not
 * initialised" answer. lib is cu or nvml, name the hook's hooks.def name. */
#define GF_HOOK_ENTER(lib, name)             \
    do {                                     \
        GF_HOOK_INIT_##lib();                \
        if (!gf_##lib.name)                  \
            return GF_HOOK_UNRESOLVED_##lib; \
    } while (0)
#define GF_HOOK_INIT_cu gf_shim_init
#define GF_HOOK_INIT_nvml gf_shim_init_nvml
#define GF_HOOK_UNRESOLVED_cu CUDA_ERROR_NOT_INITIALIZED
#define GF_HOOK_UNRESOLVED_nvml NVML_ERROR_UNINITIALIZED

GF_HIDDEN bool gf_shim_initialising(void);
GF_HIDDEN void gf_find_real_dlsym(void);
GF_HIDDEN void gf_log(gf_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

GF_HIDDEN const gf_ordinal *gf_ordinal_get_slow(CUdevice ordinal);

/* gf_ordinal_get for a caller past GF_HOOK_ENTER (the shim is initialised). */
static inline const gf_ordinal *gf_ordinal_of(CUdevice ordinal)
{
    if (__builtin_expect(gf_state.active && ordinal >= 0 && ordinal < GF_MAX_ORDINALS, 1)) {
        const gf_ordinal *o = &gf_state.ordinals[ordinal];
        if (__builtin_expect(atomic_load_explicit(&o->state, memory_order_acquire), 1))
            return o;
    }
    return gf_ordinal_get_slow(ordinal);
}

/* The fraction's view of a device ordinal; NULL when the shim is inactive. */
static inline const gf_ordinal *gf_ordinal_get(CUdevice ordinal)
{
    gf_shim_init();
    if (__builtin_expect(gf_state.active && ordinal >= 0 && ordinal < GF_MAX_ORDINALS, 1)) {
        const gf_ordinal *o = &gf_state.ordinals[ordinal];
        if (__builtin_expect(atomic_load_explicit(&o->state, memory_order_acquire), 1))
            return o;
    }
    return gf_ordinal_get_slow(ordinal);
}

GF_HIDDEN int gf_current_ordinal_slow(void);

/* The calling thread's current ordinal, cached: epoch ^ ordinal, valid while
 * gf_ctx_epoch (a multiple of 256, never 0) is what it was when the driver
 * was asked. A thread's context changes only through its own calls, and
 * every entry point that can change it, or a context's device (destroy:
 * the handle may come back on another device), is a hook that moves the
 * epoch on (gf_ctx_switched); so a cache of the current epoch names the
 * device of the thread's context. */
GF_HIDDEN extern _Atomic uint64_t gf_ctx_epoch;
GF_HIDDEN extern _Thread_local uint64_t gf_ctx_cache __attribute__((tls_model("initial-exec")));
GF_HIDDEN void gf_ctx_switched(void);

/* The ordinal of the calling thread's context, or -1; one thread-local load
 * and one shared one, the same with one device or many. */
static inline int gf_current_ordinal(void)
{
    uint64_t x = gf_ctx_cache ^ atomic_load_explicit(&gf_ctx_epoch, memory_order_relaxed);
    if (__builtin_expect(x < 256, 1))
        return (int)x;
    return gf_current_ordinal_slow();
}
GF_HIDDEN void gf_uuid_format(const CUuuid *u, char *buf, size_t len);

/* Admission: reserves bytes on the ordinal's ledger device; on refusal returns
 * dead processes' and idle pools' memory and tries once more. The common
 * case (no agent: the limit is the cap, and it fits) is inline. */
GF_HIDDEN bool gf_admit_slow(const gf_ordinal *o, uint64_t bytes);
GF_HIDDEN void gf_unadmit_slow(const gf_ordinal *o, uint64_t bytes);

static inline bool gf_admit(const gf_ordinal *o, uint64_t bytes)
{
    if (__builtin_expect(o->dev >= 0 && !gf_state.cfg.agent[0], 1) &&
        gf_ledger_reserve(&gf_state.ledger, o->dev, bytes, o->limit))
        return true;
    return gf_admit_slow(o, bytes);
}

static inline void gf_unadmit(const gf_ordinal *o, uint64_t bytes)
{
    if (__builtin_expect(o->dev >= 0 && !gf_state.cfg.agent[0], 1)) {
        gf_ledger_release(&gf_state.ledger, o->dev, bytes);
        return;
    }
    gf_unadmit_slow(o, bytes);
}
GF_HIDDEN bool gf_reclaim_for(const gf_ordinal *o, uint64_t bytes);
GF_HIDDEN uint64_t gf_used(const gf_ordinal *o);

/* The ordinal's hot view, or NULL (not ready, not counted, an agent lends,
 * the shim inactive). For a caller past GF_HOOK_ENTER. */
static inline gf_hot *gf_hot_ordinal(int ordinal)
{
    if (__builtin_expect((unsigned)ordinal < GF_MAX_ORDINALS, 1)) {
        gf_hot *h = &gf_state.hot[ordinal];
        if (__builtin_expect(atomic_load_explicit(&h->on, memory_order_acquire), 1))
            return h;
    }
    return NULL;
}

/* gf_ledger_reserve and gf_ledger_release through the hot view: the same
 * words in the same order. */
static inline bool gf_hot_reserve(const gf_hot *h, uint64_t bytes)
{
    uint64_t cap = h->cap;
    _Atomic uint64_t *used = h->used, *peak = h->peak;
    uint64_t cur = atomic_load_explicit(used, memory_order_relaxed), next;

    if (bytes > cap)
        return false;
    do {
        if (cur > cap - bytes)
            return false;
        next = cur + bytes;
    } while (!atomic_compare_exchange_weak_explicit(used, &cur, next, memory_order_acq_rel,
                                                    memory_order_relaxed));
    atomic_fetch_add_explicit(h->mine, bytes, memory_order_relaxed);
    uint64_t top = atomic_load_explicit(peak, memory_order_relaxed);
    while (next > top && !atomic_compare_exchange_weak_explicit(
                             peak, &top, next, memory_order_relaxed, memory_order_relaxed))
        ;
    return true;
}

static inline void gf_hot_release(const gf_hot *h, uint64_t bytes)
{
    atomic_fetch_sub_explicit(h->mine, bytes, memory_order_relaxed);
    atomic_fetch_sub_explicit(h->used, bytes, memory_order_release);
}

GF_HIDDEN void gf_return_charge_cold(int ordinal, uint64_t bytes);

/* Gives a charge back on ordinal's ledger device, hot or not. */
static inline void gf_return_charge(int ordinal, uint64_t bytes)
{
    gf_hot *h = gf_hot_ordinal(ordinal);
    if (__builtin_expect(h != NULL, 1))
        gf_hot_release(h, bytes);
    else
        gf_return_charge_cold(ordinal, bytes);
}

/* device.c: sets every ready ordinal's hot view from the ledger as mapped
 * now (hot false: clears them all, before the ledger goes). */
GF_HIDDEN void gf_ordinals_hot(bool hot);

/* Why a family trues its charges up to the driver's own figures. */
typedef enum gf_reconcile_why {
    GF_RECONCILE_VIEW,    /* the process asks what the ordinal has: that ordinal, up or down */
    GF_RECONCILE_REFUSAL, /* an admission on the ordinal (-1: none) was refused: whatever can
                           * be given back, and nothing raised */
} gf_reconcile_why;

/* A family: the hooks of one kind of memory and the process-local state
 * behind them. Either function may be NULL. */
typedef struct gf_family {
    const char *name;
    void (*after_fork)(void); /* in a fork child: the parent's objects are not its */
    void (*reconcile)(int ordinal, gf_reconcile_why why);
} gf_family;

/* families.c: every family, in families.def order, NULL-terminated. */
GF_HIDDEN extern const gf_family *const gf_families[];

/* Walks the families' reconcile in order. */
GF_HIDDEN void gf_reconcile(int ordinal, gf_reconcile_why why);

/* elfsym.c: the driver's own definitions by name, as dlsym on its handle
 * finds them (gf_elf_lookup asks dlsym whenever the table cannot tell). */
typedef struct gf_elf {
    bool ok;
    uintptr_t base;
    const void *symtab;
    const char *strtab;
    const uint32_t *hash; /* DT_GNU_HASH */
} gf_elf;
GF_HIDDEN int gf_elf_open(void *handle, gf_elf *e);
GF_HIDDEN void *gf_elf_lookup(const gf_elf *e, void *handle, const char *name);

/* Returns the hook wrapping real pointer fn, or NULL. */
GF_HIDDEN void *gf_hook_for_real(void *fn);
/* Returns the hook for a symbol name, or NULL; *real: where init stored the
 * driver's own pointer for it (NULL for NVML's). */
GF_HIDDEN void *gf_hook_for_name(const char *name, void ***real);
GF_HIDDEN void *gf_hook_for_version(const char *base, int version, cuuint64_t flags);

/* agent.c: burst loans and reclaim through gpufracd (off the fast path). */
GF_HIDDEN bool gf_agent_borrow(const gf_ordinal *o, uint64_t bytes);
GF_HIDDEN bool gf_agent_reclaim(const gf_ordinal *o, uint64_t bytes);
GF_HIDDEN void gf_agent_maybe_return(const gf_ordinal *o);
GF_HIDDEN void *gf_dlsym_lookup(void *handle, const char *name);

/* The exported hooks. */
#define CU_HOOK(name, base, since, ptsz, ret, params) GF_EXPORT ret name params;
#define NVML_HOOK(name, ret, params) GF_EXPORT ret name params;
#include "hooks.def"

#endif
