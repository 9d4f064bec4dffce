/* SPDX-License-Identifier: Apache-2.0 */
/* async_attacker: a tenant that attacks the shim's stream-ordered accounting
 * (cuMemAllocAsync, cuMemAllocFromPoolAsync, cuMemFreeAsync and the pool
 * calls) from inside a fraction, over gpusim. Linked against the (simulated)
 * driver, run with the shim preloaded. One attack per run:
 *
 *   async_attacker ATTACK ARGS... [hold]
 *
 * Prints key=value lines: what each step got (ok or the error's number) and,
 * as ledger_used<d>, what the shim says the fraction holds on device d
 * (cuMemGetInfo_v2: total - free, total being the limit). With `hold` it
 * prints holding=1 at the end and sleeps, so that the test can compare the
 * ledger with gpusim's own count while everything is live. Exits 0 unless a
 * step that must work did not (not when the shim refuses: that is printed). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpufrac/cuda_abi.h"

CUresult cuInit(unsigned int flags);
CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d);
CUresult cuCtxSetCurrent(CUcontext c);
CUresult cuCtxSynchronize(void);
CUresult cuStreamCreate(CUstream *s, unsigned int flags);
CUresult cuStreamSynchronize(CUstream s);
CUresult cuStreamDestroy_v2(CUstream s);
CUresult cuMemGetInfo_v2(size_t *free, size_t *total);
CUresult cuMemAlloc_v2(CUdeviceptr *d, size_t bytes);
CUresult cuMemFree_v2(CUdeviceptr d);
CUresult cuMemFree(CUdeviceptr_v1 d);
CUresult cuMemAllocAsync(CUdeviceptr *d, size_t bytes, CUstream s);
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *d, size_t bytes, CUstream s);
CUresult cuMemAllocFromPoolAsync(CUdeviceptr *d, size_t bytes, CUmemoryPool p, CUstream s);
CUresult cuMemFreeAsync(CUdeviceptr d, CUstream s);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr d, CUstream s);
CUresult cuMemPoolCreate(CUmemoryPool *p, const CUmemPoolProps *props);
CUresult cuMemPoolDestroy(CUmemoryPool p);
CUresult cuMemPoolTrimTo(CUmemoryPool p, size_t keep);
CUresult cuMemPoolSetAttribute(CUmemoryPool p, CUmemPool_attribute a, void *v);
CUresult cuDeviceGetMemPool(CUmemoryPool *p, CUdevice d);
CUresult cuDeviceSetMemPool(CUdevice d, CUmemoryPool p);
CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *p, CUdevice d);

#define Mi (1ULL << 20)

static CUcontext ctx[2];
static int n_dev;

static void die(const char *what, CUresult rc)
{
    printf("error=%s returned %d\n", what, rc);
    fflush(stdout);
    exit(1);
}

#define MUST(call)               \
    do {                         \
        CUresult rc_ = (call);   \
        if (rc_ != CUDA_SUCCESS) \
            die(#call, rc_);     \
    } while (0)

static void report(const char *what, CUresult rc)
{
    if (rc == CUDA_SUCCESS)
        printf("%s=ok\n", what);
    else
        printf("%s=%d\n", what, rc);
    fflush(stdout);
}

/* What the shim counts for the fraction on device d (it reports the limit
 * as total). The current context is d's for the query, then back to 0. */
static uint64_t ledger_used(int d)
{
    size_t free = 0, total = 0;
    MUST(cuCtxSetCurrent(ctx[d]));
    MUST(cuMemGetInfo_v2(&free, &total));
    MUST(cuCtxSetCurrent(ctx[0]));
    return total - free;
}

static void print_used(const char *when)
{
    for (int d = 0; d < n_dev; d++)
        printf("%s_used%d=%llu\n", when, d, (unsigned long long)ledger_used(d));
    fflush(stdout);
}

static CUmemoryPool new_pool(int dev)
{
    CUmemoryPool p = NULL;
    CUmemPoolProps props = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                            .location = {CU_MEM_LOCATION_TYPE_DEVICE, dev}};
    MUST(cuMemPoolCreate(&p, &props));
    return p;
}

/* -- pointers held, counted by whoever holds them ------------------------ */
enum { MAX_PTRS = 1 << 16 };
typedef struct ptrs {
    CUdeviceptr p[MAX_PTRS];
    int n;
    int ok, refused, other; /* allocations granted, refused with OOM, other errors */
    CUresult last;
} ptrs;

static void keep(ptrs *h, CUresult rc, CUdeviceptr d)
{
    if (rc == CUDA_SUCCESS && h->n < MAX_PTRS) {
        h->p[h->n++] = d;
        h->ok++;
    } else if (rc == CUDA_ERROR_OUT_OF_MEMORY) {
        h->refused++;
    } else {
        h->other++;
        h->last = rc;
    }
}

static int free_all(ptrs *h, CUstream s)
{
    int bad = 0;
    for (int i = 0; i < h->n; i++)
        bad += cuMemFreeAsync(h->p[i], s) != CUDA_SUCCESS;
    h->n = 0;
    return bad;
}

static void print_counts(const char *what, const ptrs *h)
{
    printf("%s_ok=%d\n%s_refused=%d\n%s_other=%d\n", what, h->ok, what, h->refused, what, h->other);
    fflush(stdout);
}

static void trim_all(void)
{
    for (int d = 0; d < n_dev; d++) {
        CUmemoryPool p;
        MUST(cuDeviceGetMemPool(&p, d));
        MUST(cuMemPoolTrimTo(p, 0));
    }
}

/* -- the attacks -------------------------------------------------------- */

static ptrs held;

/* Device 1 filled this much first, the honest way (its context current). */
static void prefill(uint64_t bytes)
{
    CUdeviceptr d = 0;
    if (!bytes)
        return;
    MUST(cuCtxSetCurrent(ctx[1]));
    MUST(cuMemAlloc_v2(&d, bytes));
    MUST(cuCtxSetCurrent(ctx[0]));
}

/* A stream made on device 1, used with device 0's context current: the
 * driver allocates from device 1's current pool. */
static void attack_cross_stream(int n, uint64_t size, uint64_t fill)
{
    CUstream s1;
    MUST(cuCtxSetCurrent(ctx[1]));
    MUST(cuStreamCreate(&s1, 0));
    MUST(cuCtxSetCurrent(ctx[0]));
    prefill(fill);
    for (int i = 0; i < n; i++) {
        CUdeviceptr d = 0;
        CUresult rk = cuMemAllocAsync(&d, size, s1);
        keep(&held, rk, d);
    }
    print_counts("cross_stream", &held);
    print_used("live");
}

/* A pool of device 1 (one made there, or its default pool: which) allocated
 * from with device 0's context current (on device 0's null stream). */
static void attack_cross_pool(int n, uint64_t size, uint64_t fill, const char *which)
{
    CUmemoryPool p1 = NULL;
    if (strcmp(which, "default") == 0)
        MUST(cuDeviceGetDefaultMemPool(&p1, 1));
    else
        p1 = new_pool(1);
    prefill(fill);
    for (int i = 0; i < n; i++) {
        CUdeviceptr d = 0;
        CUresult rk = cuMemAllocFromPoolAsync(&d, size, p1, NULL);
        keep(&held, rk, d);
    }
    print_counts("cross_pool", &held);
    print_used("live");
}

/* Threads allocating from the device's current pool while another thread
 * switches it between two pools as fast as it can. */
typedef struct race {
    int iters, hold;
    uint64_t size;
    ptrs h;
} race;
static atomic_bool racing;
static CUmemoryPool race_pools[2];

static void *switcher(void *arg)
{
    (void)arg;
    MUST(cuCtxSetCurrent(ctx[0]));
    for (unsigned i = 0; atomic_load(&racing); i++)
        cuDeviceSetMemPool(0, race_pools[i & 1]);
    return NULL;
}

static void *switch_allocator(void *arg)
{
    race *r = arg;
    MUST(cuCtxSetCurrent(ctx[0]));
    for (int i = 0; i < r->iters; i++) {
        CUdeviceptr d = 0;
        CUresult rk = cuMemAllocAsync(&d, r->size, NULL);
        keep(&r->h, rk, d);
        if (r->h.n >= r->hold) {
            cuMemFreeAsync(r->h.p[0], NULL);
            memmove(r->h.p, r->h.p + 1, (size_t)--r->h.n * sizeof(r->h.p[0]));
        }
    }
    return NULL;
}

static void run_threads(int n, void *(*fn)(void *), race *rs, void *(*side)(void *))
{
    pthread_t t[64], s;
    atomic_store(&racing, true);
    if (side)
        pthread_create(&s, NULL, side, NULL);
    for (int i = 0; i < n; i++)
        pthread_create(&t[i], NULL, fn, &rs[i]);
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    atomic_store(&racing, false);
    if (side)
        pthread_join(s, NULL);
}

static void attack_switch_race(int threads, int iters, uint64_t size, int hold)
{
    static race rs[64];
    race total = {0};
    race_pools[0] = new_pool(0);
    race_pools[1] = new_pool(0);
    for (int i = 0; i < threads; i++)
        rs[i] = (race){.iters = iters, .hold = hold, .size = size};
    run_threads(threads, switch_allocator, rs, switcher);
    for (int i = 0; i < threads; i++) {
        total.h.ok += rs[i].h.ok;
        total.h.refused += rs[i].h.refused;
        total.h.other += rs[i].h.other;
        for (int j = 0; j < rs[i].h.n; j++)
            held.p[held.n++] = rs[i].h.p[j];
    }
    print_counts("switch_race", &total.h);
    print_used("live");
}

/* Rounds of the race: in each, the threads allocate without freeing until
 * each was refused `refusals` times, then everything is freed and trimmed. */
static void *round_allocator(void *arg)
{
    race *r = arg;
    MUST(cuCtxSetCurrent(ctx[0]));
    for (int refused = 0; refused < r->hold && r->h.n < MAX_PTRS;) {
        CUdeviceptr d = 0;
        CUresult rc = cuMemAllocAsync(&d, r->size, NULL);
        keep(&r->h, rc, d);
        refused += rc != CUDA_SUCCESS;
    }
    return NULL;
}

static void attack_switch_rounds(int rounds, int threads, uint64_t size)
{
    static race rs[64];
    race total = {0};
    race_pools[0] = new_pool(0);
    race_pools[1] = new_pool(0);
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < threads; i++)
            rs[i] = (race){.hold = 4, .size = size};
        run_threads(threads, round_allocator, rs, switcher);
        for (int i = 0; i < threads; i++) {
            total.h.ok += rs[i].h.ok;
            total.h.refused += rs[i].h.refused;
            total.h.other += rs[i].h.other;
            free_all(&rs[i].h, NULL);
        }
        MUST(cuCtxSynchronize());
        MUST(cuMemPoolTrimTo(race_pools[0], 0));
        MUST(cuMemPoolTrimTo(race_pools[1], 0));
        trim_all();
    }
    print_counts("switch_rounds", &total.h);
    print_used("end");
}

/* A thread with no current context allocates on another thread's stream,
 * from the current pool and from a named one. */
static CUstream ctxless_stream;
static CUmemoryPool ctxless_pool;
static int ctxless_n;
static uint64_t ctxless_size;

static void *ctxless(void *arg)
{
    (void)arg;
    MUST(cuCtxSetCurrent(NULL));
    for (int i = 0; i < ctxless_n; i++) {
        CUdeviceptr d = 0;
        CUresult rc = i & 1
                          ? cuMemAllocAsync(&d, ctxless_size, ctxless_stream)
                          : cuMemAllocFromPoolAsync(&d, ctxless_size, ctxless_pool, ctxless_stream);
        keep(&held, rc, d);
    }
    return NULL;
}

static void attack_no_context(int n, uint64_t size)
{
    pthread_t t;
    MUST(cuStreamCreate(&ctxless_stream, 0));
    ctxless_pool = new_pool(0);
    ctxless_n = n;
    ctxless_size = size;
    pthread_create(&t, NULL, ctxless, NULL);
    pthread_join(t, NULL);
    print_counts("no_context", &held);
    print_used("live");
}

/* Handles that are no longer: a destroyed stream (of either device) and a
 * destroyed pool, allocated on and from, through both variants. */
static void attack_dead_handles(void)
{
    CUstream s0, s1;
    CUdeviceptr d = 0;
    MUST(cuStreamCreate(&s0, 0));
    MUST(cuCtxSetCurrent(ctx[1]));
    MUST(cuStreamCreate(&s1, 0));
    MUST(cuCtxSetCurrent(ctx[0]));
    CUmemoryPool p = new_pool(0);
    report("alloc_live_stream", cuMemAllocAsync(&d, 64 * Mi, s1));
    report("free_live_stream", cuMemFreeAsync(d, s1));
    MUST(cuStreamDestroy_v2(s0));
    MUST(cuStreamDestroy_v2(s1));
    MUST(cuMemPoolDestroy(p));
    report("alloc_dead_stream0", cuMemAllocAsync(&d, 64 * Mi, s0));
    report("alloc_dead_stream1", cuMemAllocAsync_ptsz(&d, 64 * Mi, s1));
    report("alloc_dead_pool", cuMemAllocFromPoolAsync(&d, 64 * Mi, p, NULL));
    report("alloc_dead_pool_dead_stream", cuMemAllocFromPoolAsync(&d, 64 * Mi, p, s1));
    report("free_dead_stream", cuMemFreeAsync(d, s0));
    MUST(cuCtxSynchronize());
    trim_all();
    print_used("end");
}

/* A pool destroyed by one thread while another allocates from it. */
static CUmemoryPool doomed;
static atomic_int phase;

static void *destroyer(void *arg)
{
    (void)arg;
    MUST(cuCtxSetCurrent(ctx[0]));
    while (atomic_load(&phase) == 0)
        ;
    for (volatile int i = 0; i < (int)(random() % 2000); i++)
        ;
    cuMemPoolDestroy(doomed);
    atomic_store(&phase, 2);
    return NULL;
}

static void attack_destroy_race(int rounds, uint64_t size)
{
    uint64_t live = 0;
    for (int r = 0; r < rounds; r++) {
        pthread_t t;
        doomed = new_pool(0);
        atomic_store(&phase, 0);
        pthread_create(&t, NULL, destroyer, NULL);
        atomic_store(&phase, 1);
        while (atomic_load(&phase) == 1 && held.n < MAX_PTRS - 1) {
            CUdeviceptr d = 0;
            CUresult rc = cuMemAllocFromPoolAsync(&d, size, doomed, NULL);
            if (rc == CUDA_SUCCESS) {
                held.p[held.n++] = d;
                held.ok++;
                live += size;
            } else if (rc == CUDA_ERROR_OUT_OF_MEMORY) {
                held.refused++;
            }
        }
        pthread_join(t, NULL);
    }
    printf("destroy_race_ok=%d\ndestroy_race_refused=%d\n", held.ok, held.refused);
    printf("live_bytes=%llu\n", (unsigned long long)live);
    print_used("live");
}

/* Frees every wrong way: through the other family, twice, interior
 * pointers, truncated legacy pointers, pointers never allocated. */
static void attack_wrong_frees(void)
{
    CUdeviceptr a = 0, b = 0, c = 0, p = 0;
    CUresult rc;

    MUST(cuMemAllocAsync(&a, 64 * Mi, NULL));
    MUST(cuMemAllocAsync(&b, 64 * Mi, NULL));
    MUST(cuMemAllocAsync(&c, 64 * Mi, NULL));
    MUST(cuMemAlloc_v2(&p, 64 * Mi));
    print_used("allocated");
    report("legacy_free_truncated", cuMemFree((CUdeviceptr_v1)a));
    report("free_interior", cuMemFreeAsync(a + 256, NULL));
    report("free_interior_v2", cuMemFree_v2(b + 4096));
    report("free_zero", cuMemFreeAsync(0, NULL));
    report("free_one", cuMemFreeAsync(1, NULL));
    report("free_max", cuMemFreeAsync(~0ULL, NULL));
    print_used("bogus");
    report("async_by_free_v2", cuMemFree_v2(a));
    report("async_by_free_v2_again", cuMemFree_v2(a));
    report("async_by_free_async_after", cuMemFreeAsync(a, NULL));
    report("plain_by_free_async", cuMemFreeAsync(p, NULL));
    report("plain_by_free_async_again", cuMemFreeAsync(p, NULL));
    report("plain_by_free_v2_after", cuMemFree_v2(p));
    report("async_by_ptsz", cuMemFreeAsync_ptsz(b, NULL));
    report("async_by_ptsz_again", cuMemFreeAsync_ptsz(b, NULL));
    print_used("freed_but_one");
    rc = cuMemFreeAsync(c, NULL);
    report("last", rc);
    report("last_again", cuMemFreeAsync(c, NULL));
    MUST(cuCtxSynchronize());
    trim_all();
    print_used("end");
}

/* Allocated by one thread on device 0, freed by another with device 1's
 * context current and on device 1's stream. */
static CUdeviceptr handed;
static void *other_thread_free(void *arg)
{
    CUstream s1;
    (void)arg;
    MUST(cuCtxSetCurrent(ctx[1]));
    MUST(cuStreamCreate(&s1, 0));
    report("other_thread_free", cuMemFreeAsync(handed, s1));
    report("other_thread_free_again", cuMemFreeAsync(handed, s1));
    return NULL;
}

static void attack_cross_free(void)
{
    pthread_t t;
    MUST(cuMemAllocAsync(&handed, 256 * Mi, NULL));
    print_used("allocated");
    pthread_create(&t, NULL, other_thread_free, NULL);
    pthread_join(t, NULL);
    MUST(cuCtxSynchronize());
    trim_all();
    print_used("end");
}

/* More outstanding allocations than there are direct-mapped slots, so most
 * collide into the table behind them; freed in the reverse order, half by
 * each family. Then as many as fit, until the shim refuses. */
static void attack_slots(int n, uint64_t size)
{
    for (int i = 0; i < n; i++) {
        CUdeviceptr d = 0;
        CUresult rk = cuMemAllocAsync(&d, size, NULL);
        keep(&held, rk, d);
    }
    print_counts("slots", &held);
    print_used("live");
    int bad = 0;
    for (int i = held.n - 1; i >= 0; i--)
        bad += (i & 1 ? cuMemFree_v2(held.p[i]) : cuMemFreeAsync(held.p[i], NULL)) != CUDA_SUCCESS;
    printf("slots_free_failed=%d\n", bad);
    held.n = 0;
    MUST(cuCtxSynchronize());
    trim_all();
    print_used("freed");
}

/* Sizes at the edges: 0, one byte over the limit, 2^63, 2^64 - 1 and
 * 2^64 - 255 (which would wrap a sum), through both allocation calls; then
 * exactly the limit, then one byte more. */
static void attack_sizes(uint64_t limit)
{
    static const struct {
        const char *name;
        uint64_t delta; /* the size is limit + delta, or the absolute value */
        bool absolute;
    } sizes[] = {
        {"zero", 0, true},    {"limit_plus_1", 1, false},           {"two_63", 1ULL << 63, true},
        {"max", ~0ULL, true}, {"max_minus_255", ~0ULL - 255, true}, {"max_minus_limit", 0, true}};
    CUmemoryPool own = new_pool(0);
    char what[64];
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        uint64_t sz = sizes[i].absolute ? sizes[i].delta : limit + sizes[i].delta;
        if (strcmp(sizes[i].name, "max_minus_limit") == 0)
            sz = ~0ULL - limit + 1;
        CUdeviceptr d = 0;
        snprintf(what, sizeof what, "async_%s", sizes[i].name);
        CUresult rc = cuMemAllocAsync(&d, sz, NULL);
        report(what, rc);
        if (rc == CUDA_SUCCESS)
            cuMemFreeAsync(d, NULL);
        snprintf(what, sizeof what, "pool_%s", sizes[i].name);
        rc = cuMemAllocFromPoolAsync(&d, sz, own, NULL);
        report(what, rc);
        if (rc == CUDA_SUCCESS)
            cuMemFreeAsync(d, NULL);
    }
    print_used("after_edges");
    CUdeviceptr whole = 0, more = 0;
    report("exactly_limit", cuMemAllocFromPoolAsync(&whole, limit, own, NULL));
    report("one_more_byte", cuMemAllocAsync(&more, 1, NULL));
    report("one_more_from_pool", cuMemAllocFromPoolAsync(&more, 1, own, NULL));
    print_used("full");
    report("free_whole", cuMemFreeAsync(whole, NULL));
    MUST(cuCtxSynchronize());
    MUST(cuMemPoolTrimTo(own, 0));
    trim_all();
    print_used("end");
}

/* Allocations and frees racing a thread that changes the release threshold,
 * synchronises and trims, on the default pool and an own one. */
static CUmemoryPool trim_pool;
static void *trimmer(void *arg)
{
    CUmemoryPool dflt;
    (void)arg;
    MUST(cuCtxSetCurrent(ctx[0]));
    MUST(cuDeviceGetMemPool(&dflt, 0));
    for (unsigned i = 0; atomic_load(&racing); i++) {
        cuuint64_t t = (i % 5) * 96 * Mi;
        CUmemoryPool p = i & 1 ? dflt : trim_pool;
        cuMemPoolSetAttribute(p, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &t);
        switch (i % 3) {
        case 0: cuStreamSynchronize(NULL); break;
        case 1: cuCtxSynchronize(); break;
        default: cuMemPoolTrimTo(p, (i % 7) * 32 * Mi); break;
        }
    }
    return NULL;
}

static void *trim_allocator(void *arg)
{
    race *r = arg;
    MUST(cuCtxSetCurrent(ctx[0]));
    for (int i = 0; i < r->iters; i++) {
        CUdeviceptr d = 0;
        uint64_t sz = r->size / 2 + (uint64_t)(i % 7) * (r->size / 4) + 4096 * (i % 3);
        CUresult rc = i & 1 ? cuMemAllocFromPoolAsync(&d, sz, trim_pool, NULL)
                            : cuMemAllocAsync(&d, sz, NULL);
        keep(&r->h, rc, d);
        if (r->h.n >= r->hold) {
            CUdeviceptr f = r->h.p[0];
            memmove(r->h.p, r->h.p + 1, (size_t)--r->h.n * sizeof(r->h.p[0]));
            if (i % 4 == 0)
                cuMemFree_v2(f);
            else
                cuMemFreeAsync(f, NULL);
        }
    }
    free_all(&r->h, NULL);
    return NULL;
}

static void attack_trim_race(int threads, int iters, uint64_t size, int hold)
{
    static race rs[64];
    race total = {0};
    trim_pool = new_pool(0);
    for (int i = 0; i < threads; i++)
        rs[i] = (race){.iters = iters, .hold = hold, .size = size};
    run_threads(threads, trim_allocator, rs, trimmer);
    for (int i = 0; i < threads; i++) {
        total.h.ok += rs[i].h.ok;
        total.h.refused += rs[i].h.refused;
        total.h.other += rs[i].h.other;
    }
    print_counts("trim_race", &total.h);
    cuuint64_t zero = 0;
    CUmemoryPool dflt;
    MUST(cuDeviceGetMemPool(&dflt, 0));
    MUST(cuMemPoolSetAttribute(dflt, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &zero));
    MUST(cuMemPoolSetAttribute(trim_pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &zero));
    MUST(cuCtxSynchronize());
    MUST(cuMemPoolTrimTo(trim_pool, 0));
    trim_all();
    print_used("end");
}

/* Allocates, forks; the child frees the parent's pointer (not its own) and
 * allocates, then exits holding it; the parent frees its own. */
static void attack_fork(uint64_t size)
{
    CUdeviceptr d = 0;
    MUST(cuMemAllocAsync(&d, size, NULL));
    print_used("parent_allocated");
    pid_t pid = fork();
    if (pid == 0) {
        CUcontext c = NULL;
        CUdeviceptr mine = 0;
        if (cuInit(0) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&c, 0) != CUDA_SUCCESS ||
            cuCtxSetCurrent(c) != CUDA_SUCCESS)
            _exit(4);
        CUresult rc = cuMemFreeAsync(d, NULL);
        printf("child_frees_parent=%s\n", rc == CUDA_SUCCESS ? "ok" : "refused");
        rc = cuMemAllocAsync(&mine, size, NULL);
        printf("child_alloc=%s\n", rc == CUDA_SUCCESS ? "ok" : "refused");
        fflush(stdout);
        _exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    printf("child_exit=%d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    report("parent_free", cuMemFreeAsync(d, NULL));
    MUST(cuCtxSynchronize());
    trim_all();
    print_used("end");
}

/* A pool destroyed with allocations live, freed afterwards by another thread
 * through both families (and twice). */
static void *destroyed_frees(void *arg)
{
    (void)arg;
    MUST(cuCtxSetCurrent(ctx[0]));
    for (int i = 0; i < held.n; i++) {
        report(i & 1 ? "destroyed_free_v2" : "destroyed_free_async",
               i & 1 ? cuMemFree_v2(held.p[i]) : cuMemFreeAsync(held.p[i], NULL));
        report("destroyed_free_again", cuMemFreeAsync(held.p[i], NULL));
    }
    held.n = 0;
    return NULL;
}

static void attack_destroy_live(void)
{
    pthread_t t;
    CUmemoryPool p = new_pool(0);
    for (int i = 0; i < 4; i++) {
        CUdeviceptr d = 0;
        CUresult rk = cuMemAllocFromPoolAsync(&d, 100 * Mi + 4096, p, NULL);
        keep(&held, rk, d);
    }
    CUdeviceptr gone = 0;
    MUST(cuMemAllocFromPoolAsync(&gone, 64 * Mi, p, NULL));
    MUST(cuMemFreeAsync(gone, NULL)); /* reserved, not used: given back at destroy */
    print_used("live");
    report("destroy", cuMemPoolDestroy(p));
    report("destroy_again", cuMemPoolDestroy(p));
    report("alloc_destroyed", cuMemAllocFromPoolAsync(&gone, Mi, p, NULL));
    report("trim_destroyed", cuMemPoolTrimTo(p, 0));
    print_used("destroyed");
    pthread_create(&t, NULL, destroyed_frees, NULL);
    pthread_join(t, NULL);
    print_used("end");
}

int main(int argc, char **argv)
{
    int nd = 0;
    if (argc < 2) {
        fprintf(stderr, "usage: async_attacker ATTACK ARGS... [hold]\n");
        return 2;
    }
    MUST(cuInit(0));
    n_dev = getenv("ATTACK_DEVICES") ? atoi(getenv("ATTACK_DEVICES")) : 1;
    for (nd = 0; nd < n_dev; nd++)
        MUST(cuDevicePrimaryCtxRetain(&ctx[nd], nd));
    MUST(cuCtxSetCurrent(ctx[0]));
    srandom((unsigned)getpid());
    const char *a = argv[1];
#define ARG(i) (argc > (i) ? argv[i] : "0")
#define NUM(i) strtoull(ARG(i), NULL, 0)
    if (strcmp(a, "cross-stream") == 0)
        attack_cross_stream((int)NUM(2), NUM(3) * Mi, NUM(4) * Mi);
    else if (strcmp(a, "cross-pool") == 0)
        attack_cross_pool((int)NUM(2), NUM(3) * Mi, NUM(4) * Mi, ARG(5));
    else if (strcmp(a, "switch-rounds") == 0)
        attack_switch_rounds((int)NUM(2), (int)NUM(3), NUM(4) * Mi);
    else if (strcmp(a, "dead-handles") == 0)
        attack_dead_handles();
    else if (strcmp(a, "no-context") == 0)
        attack_no_context((int)NUM(2), NUM(3) * Mi);
    else if (strcmp(a, "switch-race") == 0)
        attack_switch_race((int)NUM(2), (int)NUM(3), NUM(4) * Mi, (int)NUM(5));
    else if (strcmp(a, "destroy-race") == 0)
        attack_destroy_race((int)NUM(2), NUM(3) * Mi);
    else if (strcmp(a, "wrong-frees") == 0)
        attack_wrong_frees();
    else if (strcmp(a, "cross-free") == 0)
        attack_cross_free();
    else if (strcmp(a, "slots") == 0)
        attack_slots((int)NUM(2), NUM(3));
    else if (strcmp(a, "sizes") == 0)
        attack_sizes(NUM(2) * Mi);
    else if (strcmp(a, "trim-race") == 0)
        attack_trim_race((int)NUM(2), (int)NUM(3), NUM(4) * Mi, (int)NUM(5));
    else if (strcmp(a, "fork") == 0)
        attack_fork(NUM(2) * Mi);
    else if (strcmp(a, "destroy-live") == 0)
        attack_destroy_live();
    else {
        fprintf(stderr, "unknown attack %s\n", a);
        return 2;
    }
    if (strcmp(argv[argc - 1], "hold") == 0) {
        printf("holding=1\n");
        fflush(stdout);
        sleep(120);
    }
    return 0;
}
