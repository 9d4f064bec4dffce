/* SPDX-License-Identifier: Apache-2.0 */
/* gpusim internals: a simulated NVIDIA driver (libcuda.so.1 + libnvidia-ml.so.1)
 * for tests. See gpusim/README.md for the model. Nothing here is product code.
 *
 * Shared state (one file per simulated host, see state.c) counts device
 * memory across processes; everything else (contexts, pointers, pools, graphs)
 * is per process, like in the real driver. */
#ifndef GPUSIM_GS_H
#define GPUSIM_GS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "gpufrac/cuda_abi.h"

#define GS_API __attribute__((visibility("default")))
#define GS_UNLIKELY(x) __builtin_expect(!!(x), 0)

#define GS_MAX_DEV 16
#define GS_MAX_SLOTS 4096
#define GS_GRAN (2ULL << 20) /* VMM / pool / array granularity */
#ifndef GS_DRIVER_VERSION
#define GS_DRIVER_VERSION 13000
#endif
#define GS_SM_COUNT 132
#define GS_DEFAULT_DEVICES "16Gi"
#define GS_DEFAULT_CTX_OVERHEAD (64ULL << 20)
#define GS_THREADS_PER_SM 2048   /* resident threads: the stack reservation's multiplier */
#define GS_DEFAULT_STACK 1024ULL /* CU_LIMIT_STACK_SIZE, bytes per thread */
#define GS_DEFAULT_PRINTF_FIFO (1ULL << 20)
#define GS_DEFAULT_MALLOC_HEAP (8ULL << 20)
#define GS_NLIMITS 7

/* ---- shared file layout ------------------------------------------------ */
#define GS_SHM_MAGIC 0x31304d4953555047ULL /* "GPUSIM01" */
#define GS_SHM_VERSION 2
#define GS_LOCK_INIT (1LL << 40)          /* byte locked while initialising */
#define GS_LOCK_RECLAIM ((1LL << 40) - 1) /* held (across processes) over a reclaim */
#define GS_LOCK_SLOT(i) ((1LL << 40) + 1 + (long long)(i)) /* slot i's liveness byte */

typedef struct gs_slot {
    _Atomic int32_t pid; /* 0: free */
    uint32_t pad;
    _Atomic uint64_t used[GS_MAX_DEV];
    _Atomic uint32_t contexts[GS_MAX_DEV]; /* live contexts: NVML lists the process */
} gs_slot;

typedef struct gs_shm {
    _Atomic uint64_t magic; /* written last, release */
    uint32_t version;
    uint32_t ndev;
    uint64_t size[GS_MAX_DEV];
    _Atomic uint64_t used[GS_MAX_DEV]; /* host-wide, all processes */
    _Atomic uint64_t peak[GS_MAX_DEV]; /* high-water mark of used (tests read it) */
    gs_slot slot[GS_MAX_SLOTS];
} gs_shm;

/* ---- process-wide configuration and shared-state handle ----------------- */
typedef struct gs_devinfo {
    uint64_t size;
    CUuuid uuid;
    char uuid_str[48]; /* GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx */
    char name[64];
} gs_devinfo;

typedef struct gs_sim {
    int ndev;
    gs_devinfo dev[GS_MAX_DEV];
    uint64_t ctx_overhead[GS_MAX_DEV]; /* per context, at the default limits */
    bool log;
    bool strict_ctx;
    char ctx_hold[512];        /* GPUSIM_CTX_HOLD: pause each context creation ("" = never) */
    char reclaim_hold[512];    /* GPUSIM_RECLAIM_HOLD: pause each reclaim of a dead slot */
    char free_async_hold[512]; /* GPUSIM_FREE_ASYNC_HOLD: pause each cuMemFreeAsync */
    char path[512];
    gs_shm *shm;
    int lock_fd; /* holds this process's slot lock; -1 when none */
    int slot;    /* own slot, -1 when none */
    pthread_mutex_t reclaim_mu;
} gs_sim;

extern gs_sim gs;

void gs_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* state.c: parse env + map the shared file (idempotent, thread-safe).
 * Returns a CUresult-like code: 0 ok, CUDA_ERROR_NO_DEVICE on a bad device
 * list, CUDA_ERROR_UNKNOWN when the shared file cannot be used. */
int gs_boot(void);
/* claim a slot in the process table (CUDA side only; NVML does not). */
int gs_claim_slot(void);
/* forget the slot (after fork in the child). */
void gs_drop_slot(void);
/* a context of this process appeared on / left physical device p */
void gs_context_count(int p, int delta);
/* charge/uncharge bytes of physical device p to this process. */
int gs_charge(int p, uint64_t bytes);
void gs_uncharge(int p, uint64_t bytes);
/* GPUSIM_CTX_HOLD (a test stand-in): a context's memory is charged; say so
 * and wait until the test lets the creation return. */
void gs_ctx_hold(void);
/* GPUSIM_FREE_ASYNC_HOLD (a test stand-in): a stream-ordered free is about
 * to give its memory back; say so and wait until the test lets it. */
void gs_free_async_hold(void);
/* charge, and on failure reclaim dead processes and try once more. */
int gs_charge_retry(int p, uint64_t bytes);
/* return the memory of dead processes to the devices. */
void gs_reclaim(void);
/* host-wide used bytes of device p (after a reclaim). */
uint64_t gs_used(int p);
uint64_t gs_free(int p);
/* live processes using device p: fills up to max entries, returns the count. */
unsigned gs_processes(int p, unsigned *pids, uint64_t *used, unsigned max);
int gs_parse_size(const char *s, const char *end, uint64_t *out);

/* fail.c: GPUSIM_FAIL fault injection. Returns true when this call fails. */
bool gs_fail_hit(const char *name, int *cache, int *err);
#define GS_FAILPOINT(name)                                              \
    do {                                                                \
        static int gs_fp_cache_ = -2;                                   \
        int gs_fp_err_;                                                 \
        if (GS_UNLIKELY(gs_fail_hit(name, &gs_fp_cache_, &gs_fp_err_))) \
            return gs_fp_err_;                                          \
    } while (0)

/* ---- CUDA side, per process ------------------------------------------------ */
enum {
    GS_MAGIC_CTX = 0x43545831,
    GS_MAGIC_STREAM,
    GS_MAGIC_POOL,
    GS_MAGIC_ARRAY,
    GS_MAGIC_MIPMAP,
    GS_MAGIC_GRAPH,
    GS_MAGIC_NODE,
    GS_MAGIC_EXEC,
    GS_MAGIC_MODULE,
    GS_MAGIC_LIBRARY,
    GS_MAGIC_EVENT,
    GS_MAGIC_LINK
};

typedef struct gs_obj {
    uint32_t magic;
    uint32_t gen;            /* process generation (bumped in a fork child) */
    struct gs_obj *all_next; /* every object ever made, kept reachable */
} gs_obj;

struct CUctx_st {
    gs_obj h;
    int pdev;
    bool primary;
    bool alive;
    uint64_t limit[GS_NLIMITS]; /* cuCtxSetLimit values */
    uint64_t charged;           /* what this context holds on its device */
};

typedef struct gs_pool_st {
    gs_obj h;
    int pdev;
    bool destroyed;
    bool is_default;
    pthread_mutex_t mu;
    uint64_t reserved, used, reserved_high, used_high, threshold;
    int reuse[3];
} gs_pool;

struct CUstream_st {
    gs_obj h;
    int pdev;
    bool alive;
};

typedef struct gs_pdev {
    pthread_mutex_t mu;
    struct CUctx_st primary;
    int primary_refs;
    bool implicit;
    gs_pool *default_pool;
    gs_pool *cur_pool;
    unsigned primary_flags; /* cuDevicePrimaryCtxSetFlags */
    uint32_t peers;         /* devices this one's contexts have peer access to */
    uint64_t graph_reserved, graph_used, graph_reserved_high, graph_used_high;
} gs_pdev;

typedef struct gs_proc {
    _Atomic int initialized;
    _Atomic uint32_t gen;
    int nvis;
    int vis[GS_MAX_DEV]; /* ordinal -> physical */
    gs_pdev pdev[GS_MAX_DEV];
    pthread_mutex_t obj_mu;
    gs_obj *all;
} gs_proc;

extern gs_proc gsp;

/* pointer tables (table.c): striped hash, key -> entry */
enum {
    GS_KIND_PLAIN = 1,
    GS_KIND_PITCH,
    GS_KIND_MANAGED,
    GS_KIND_POOL,
    GS_KIND_LEGACY,
    GS_KIND_VMM,
    GS_KIND_VA
};

typedef struct gs_entry {
    struct gs_entry *next;
    uint64_t key;
    uint64_t size;
    int pdev;
    int kind;
    void *owner; /* context (plain kinds) or pool (async) */
} gs_entry;

#define GS_STRIPES 64
#define GS_BUCKETS 1024
typedef struct gs_table {
    struct {
        pthread_mutex_t mu;
        gs_entry *b[GS_BUCKETS];
        char pad[64];
    } s[GS_STRIPES];
} gs_table;

extern gs_table gs_ptrs;    /* device pointers (all kinds of allocation) */
extern gs_table gs_handles; /* VMM physical handles and VA reservations */

int gs_table_put(gs_table *t, uint64_t key, uint64_t size, int pdev, int kind, void *owner);
/* removes and returns the entry (caller frees with gs_entry_free), or NULL. */
gs_entry *gs_table_take(gs_table *t, uint64_t key);
bool gs_table_get(gs_table *t, uint64_t key, gs_entry *out);
void gs_entry_free(gs_entry *e);
/* remove every entry for which pred returns true; returns them as a list. */
gs_entry *gs_table_take_if(gs_table *t, bool (*pred)(const gs_entry *, void *), void *arg);
void gs_table_forget_all(gs_table *t);

/* cu_core.c */
CUresult gs_need_init(void);
/* the current context's physical device; creates the implicit primary
 * context when none is current (see README). */
CUresult gs_cur_pdev(int *pdev, CUcontext *ctx);
CUresult gs_ordinal(CUdevice d, int *pdev);
int gs_pdev_ordinal(int pdev);
CUresult gs_stream_pdev(CUstream s, int *pdev);
void *gs_obj_new(size_t size, uint32_t magic);
bool gs_obj_ok(const void *o, uint32_t magic);
/* shrink every pool of device pdev to its release threshold (sync points). */
void gs_pools_sync(int pdev);
void gs_pools_reset(void);

/* cu_mem.c */
uint64_t gs_fake_addr(uint64_t size);
CUresult gs_alloc(CUdeviceptr *dptr, uint64_t size, int kind);
CUresult gs_free_ptr(CUdeviceptr p);
void gs_free_ctx_allocations(CUcontext ctx);

#define NEED_INIT()                    \
    do {                               \
        CUresult ni_ = gs_need_init(); \
        if (ni_)                       \
            return ni_;                \
    } while (0)

#define DEV_ARG(d, p)                     \
    do {                                  \
        CUresult da_ = gs_ordinal(d, &p); \
        if (da_)                          \
            return da_;                   \
    } while (0)

/* cu_copy.c: device memory backed by host memory. Every address that
 * gs_fake_addr hands out lies in one window of this process, mapped (sparse,
 * MAP_NORESERVE) from a memfd the process keeps open, so copies move real
 * bytes and another process can map an exported range (cu_ipc.c). The ranges
 * that copies may touch are kept in a sorted index. */
#define GS_ARENA_BASE 0x200000000000ULL /* data of the window starts here */
#define GS_ARENA_SIZE (32ULL << 40)     /* 32 TiB of address space, never reused */
#define GS_ARENA_HDR (1ULL << 20)       /* memfd bytes before the data: the IPC export table */
enum {
    GS_RANGE_DEVICE = 1, /* a device allocation in the arena */
    GS_RANGE_MANAGED,
    GS_RANGE_HOST,    /* cuMemHostAlloc */
    GS_RANGE_HOSTREG, /* cuMemHostRegister */
    GS_RANGE_IPC,     /* another process's allocation, opened here */
    GS_RANGE_POOL     /* a stream-ordered allocation */
};
typedef struct gs_range {
    uint64_t base, size;
    int pdev;  /* physical device (-1 for host memory) */
    int kind;  /* GS_RANGE_* */
    void *ctx; /* the context it was made in */
    unsigned flags;
    uint64_t id; /* process-wide unique buffer id */
} gs_range;
/* the memfd behind the window (-1 if the window could not be made) */
int gs_arena_fd(void);
bool gs_arena_backed(uint64_t addr, uint64_t size);
/* give the pages of a freed range back (no-op outside the window) */
void gs_arena_discard(uint64_t addr, uint64_t size);
int gs_range_add(uint64_t base, uint64_t size, int pdev, int kind, void *ctx, unsigned flags);
bool gs_range_del(uint64_t base, int kind, gs_range *out);
/* the range holding [p, p+n) (n 0: just p) */
bool gs_range_find(uint64_t p, uint64_t n, gs_range *out);
void gs_range_set_flags(uint64_t base, unsigned flags);
void gs_copy_after_fork(void);
#define GS_RANGE_EXPORTED 0x100u /* set in flags once an IPC handle names it */

/* cu_ipc.c */
void gs_ipc_forget(uint64_t base); /* a freed allocation's exports stop opening */
void gs_ipc_after_fork(void);

/* cu_module.c: a function handle that cuLaunchKernel and friends accept */
bool gs_func_ok(CUfunction f);

static inline uint64_t gs_round_up(uint64_t v, uint64_t a)
{
    return (v + a - 1) / a * a;
}

#endif
