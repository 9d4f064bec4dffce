/* SPDX-License-Identifier: Apache-2.0 */
/* gpusim device memory that holds bytes: the arena (one memfd per process,
 * mapped sparse at a fixed window, so an 80 GiB simulated GPU costs only the
 * pages a test touches), the index of ranges a copy may touch, copies,
 * memsets, pinned and registered host memory, pointer attributes and address
 * ranges.
 *
 * Invariant: a copy or memset touches only bytes inside one range of the
 * index (a live allocation, pinned or registered host memory, or an opened
 * IPC mapping); anything else is refused with CUDA_ERROR_INVALID_VALUE before
 * a byte moves. Host pointers on the other side of a copy are the caller's,
 * as with the real driver. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cleanup.h"
#include "gs.h"
#include "gs_api.h"

#define GS_PAGE 4096ULL

/* ---- the arena ----------------------------------------------------------- */
static pthread_mutex_t arena_mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int arena_state; /* 0: not tried, 1: mapped, -1: unavailable */
static int arena_fd = -1;

/* the window, mapped from a new memfd; -1 when it cannot be made */
static int arena_map(void)
{
    void *m;
    gf_cleanup_close int fd = memfd_create("gpusim-device-memory", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, (off_t)(GS_ARENA_HDR + GS_ARENA_SIZE)) != 0)
        return -1;
    m = mmap((void *)GS_ARENA_BASE, GS_ARENA_SIZE, PROT_READ | PROT_WRITE,
             MAP_SHARED | MAP_NORESERVE | MAP_FIXED_NOREPLACE, fd, (off_t)GS_ARENA_HDR);
    if (m == MAP_FAILED)
        return -1;
    if (m != (void *)GS_ARENA_BASE) { /* a kernel without MAP_FIXED_NOREPLACE */
        munmap(m, GS_ARENA_SIZE);
        return -1;
    }
    madvise(m, GS_ARENA_SIZE, MADV_DONTFORK); /* a fork child gets an arena of its own */
    return gf_steal_fd(&fd);
}

static void arena_make(void)
{
    arena_fd = arena_map();
    if (arena_fd < 0)
        gs_log("gpusim: no device memory backing (copies will be refused)");
    atomic_store(&arena_state, arena_fd >= 0 ? 1 : -1);
}

int gs_arena_fd(void)
{
    if (GS_UNLIKELY(atomic_load_explicit(&arena_state, memory_order_acquire) == 0)) {
        pthread_mutex_lock(&arena_mu);
        if (atomic_load(&arena_state) == 0)
            arena_make();
        pthread_mutex_unlock(&arena_mu);
    }
    return atomic_load_explicit(&arena_state, memory_order_acquire) == 1 ? arena_fd : -1;
}

bool gs_arena_backed(uint64_t addr, uint64_t size)
{
    return gs_arena_fd() >= 0 && addr >= GS_ARENA_BASE && size <= GS_ARENA_SIZE &&
           addr - GS_ARENA_BASE <= GS_ARENA_SIZE - size;
}

/* Smaller frees keep their touched pages until the process exits (addresses are
 * never reused, so this is resident memory only): a syscall per free would make
 * gpusim's alloc+free pair, the baseline the benchmarks measure the shim against,
 * ten times slower. */
#define GS_DISCARD_MIN (64ULL << 20)

void gs_arena_discard(uint64_t addr, uint64_t size)
{
    uint64_t lo = gs_round_up(addr, GS_PAGE), hi = (addr + size) / GS_PAGE * GS_PAGE;
    if (size < GS_DISCARD_MIN || hi <= lo || !gs_arena_backed(addr, size))
        return;
    fallocate(arena_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
              (off_t)(GS_ARENA_HDR + lo - GS_ARENA_BASE), (off_t)(hi - lo));
}

/* ---- the range index ------------------------------------------------------------
 * Striped so that threads allocating at once rarely meet: a range lives in the
 * stripe of its base's 2 MiB chunk (chunk % GS_RSTRIPES), each stripe a sorted
 * array under its own mutex. Invariant: no two ranges overlap (device
 * allocations cannot, their addresses are never reused; every other kind is
 * added under add_mu after checking), so in each stripe only the last range
 * starting at or before p can hold p: a lookup asks every stripe once, its
 * own first. */
#define GS_RSTRIPES 64
#define GS_CHUNK_SHIFT 21

typedef struct gs_rstripe {
    pthread_mutex_t mu;
    gs_range *v;
    size_t n, cap;
    char pad[64];
} gs_rstripe;

static gs_rstripe rstripes[GS_RSTRIPES];
static pthread_once_t rstripes_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t add_mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint64_t next_id = 1;

static void rstripes_init(void)
{
    for (int i = 0; i < GS_RSTRIPES; i++)
        pthread_mutex_init(&rstripes[i].mu, NULL);
}

static gs_rstripe *stripe_at(unsigned i)
{
    pthread_once(&rstripes_once, rstripes_init);
    return &rstripes[i % GS_RSTRIPES];
}

static unsigned stripe_index(uint64_t addr)
{
    return (unsigned)((addr >> GS_CHUNK_SHIFT) % GS_RSTRIPES);
}

/* first index of st whose base is >= key */
static size_t lower_bound(const gs_rstripe *st, uint64_t key)
{
    size_t lo = 0, hi = st->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (st->v[mid].base < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* the range of st holding [p, p+n); the caller holds st->mu */
static gs_range *holding(gs_rstripe *st, uint64_t p, uint64_t n)
{
    size_t i = p == UINT64_MAX ? st->n : lower_bound(st, p + 1);
    gs_range *r = i ? &st->v[i - 1] : NULL;
    if (!r || p - r->base >= r->size || n > r->size - (p - r->base))
        return NULL;
    return r;
}

/* calls fn on the range holding [p, p+n) under its stripe's mutex */
static bool with_range(uint64_t p, uint64_t n, void (*fn)(gs_range *, void *), void *arg)
{
    unsigned own = stripe_index(p);
    for (unsigned k = 0; k < GS_RSTRIPES; k++) {
        gs_rstripe *st = stripe_at(own + k);
        gs_range *r;
        pthread_mutex_lock(&st->mu);
        r = holding(st, p, n ? n : 1);
        if (r)
            fn(r, arg);
        pthread_mutex_unlock(&st->mu);
        if (r)
            return true;
    }
    return false;
}

static void copy_out(gs_range *r, void *out)
{
    if (out)
        *(gs_range *)out = *r;
}

/* whether any range meets [base, base+size): one holds base, or one starts inside */
static bool meets(uint64_t base, uint64_t size)
{
    if (with_range(base, 1, copy_out, NULL))
        return true;
    for (unsigned k = 0; k < GS_RSTRIPES; k++) {
        gs_rstripe *st = stripe_at(k);
        size_t i;
        bool hit;
        pthread_mutex_lock(&st->mu);
        i = lower_bound(st, base + 1);
        hit = i < st->n && st->v[i].base - base < size;
        pthread_mutex_unlock(&st->mu);
        if (hit)
            return true;
    }
    return false;
}

static int insert(const gs_range *r)
{
    gs_rstripe *st = stripe_at(stripe_index(r->base));
    size_t i;
    pthread_mutex_lock(&st->mu);
    if (st->n == st->cap) {
        size_t ncap = st->cap ? st->cap * 2 : 64;
        gs_range *v = realloc(st->v, ncap * sizeof *v);
        if (!v) {
            pthread_mutex_unlock(&st->mu);
            return -1;
        }
        st->v = v, st->cap = ncap;
    }
    i = lower_bound(st, r->base);
    memmove(&st->v[i + 1], &st->v[i], (st->n - i) * sizeof *st->v);
    st->v[i] = *r;
    st->n++;
    pthread_mutex_unlock(&st->mu);
    return 0;
}

int gs_range_add(uint64_t base, uint64_t size, int pdev, int kind, void *ctx, unsigned flags)
{
    gs_range r = {
        .base = base, .size = size, .pdev = pdev, .kind = kind, .ctx = ctx, .flags = flags};
    int rc;
    if (size == 0 || base > UINT64_MAX - size)
        return -1;
    r.id = atomic_fetch_add(&next_id, 1);
    if (kind == GS_RANGE_DEVICE || kind == GS_RANGE_MANAGED || kind == GS_RANGE_POOL)
        return insert(&r);
    pthread_mutex_lock(&add_mu);
    rc = meets(base, size) ? -2 : insert(&r);
    pthread_mutex_unlock(&add_mu);
    return rc;
}

bool gs_range_del(uint64_t base, int kind, gs_range *out)
{
    gs_rstripe *st = stripe_at(stripe_index(base));
    bool found = false;
    size_t i;
    pthread_mutex_lock(&st->mu);
    i = lower_bound(st, base);
    if (i < st->n && st->v[i].base == base && (kind == 0 || st->v[i].kind == kind)) {
        if (out)
            *out = st->v[i];
        memmove(&st->v[i], &st->v[i + 1], (st->n - i - 1) * sizeof *st->v);
        st->n--;
        found = true;
    }
    pthread_mutex_unlock(&st->mu);
    return found;
}

bool gs_range_find(uint64_t p, uint64_t n, gs_range *out)
{
    return with_range(p, n, copy_out, out);
}

static void add_flags(gs_range *r, void *flags)
{
    r->flags |= *(unsigned *)flags;
}

void gs_range_set_flags(uint64_t base, unsigned flags)
{
    with_range(base, 1, add_flags, &flags);
}

/* fork child (single-threaded): none of the parent's memory is the child's */
void gs_copy_after_fork(void)
{
    pthread_mutex_init(&arena_mu, NULL);
    pthread_mutex_init(&add_mu, NULL);
    if (arena_fd >= 0)
        close(arena_fd);
    arena_fd = -1;
    atomic_store(&arena_state, 0);
    for (int i = 0; i < GS_RSTRIPES; i++) {
        pthread_mutex_init(&rstripes[i].mu, NULL);
        free(rstripes[i].v);
        rstripes[i].v = NULL;
        rstripes[i].n = rstripes[i].cap = 0;
    }
}

/* ---- copies and memsets ---------------------------------------------------- */
static bool is_device_kind(int kind)
{
    return kind == GS_RANGE_DEVICE || kind == GS_RANGE_MANAGED || kind == GS_RANGE_POOL;
}

/* the bytes [p, p+n) of one known range, else why not */
static CUresult span(CUdeviceptr p, size_t n, void **out)
{
    gs_range r;
    if (!gs_range_find(p, n, &r))
        return CUDA_ERROR_INVALID_VALUE;
    if (is_device_kind(r.kind) && !gs_arena_backed(r.base, r.size))
        return CUDA_ERROR_NOT_SUPPORTED; /* legacy 32-bit allocations have no bytes */
    *out = (void *)(uintptr_t)p;
    return CUDA_SUCCESS;
}

static CUresult on_stream(CUstream s)
{
    int p;
    NEED_INIT();
    return gs_stream_pdev(s, &p);
}

static CUresult copy_htod(CUdeviceptr dst, const void *src, size_t n)
{
    void *d;
    CUresult rc;
    NEED_INIT();
    if (n == 0)
        return CUDA_SUCCESS;
    if (!src)
        return CUDA_ERROR_INVALID_VALUE;
    rc = span(dst, n, &d);
    if (rc == CUDA_SUCCESS)
        memmove(d, src, n);
    return rc;
}

static CUresult copy_dtoh(void *dst, CUdeviceptr src, size_t n)
{
    void *s;
    CUresult rc;
    NEED_INIT();
    if (n == 0)
        return CUDA_SUCCESS;
    if (!dst)
        return CUDA_ERROR_INVALID_VALUE;
    rc = span(src, n, &s);
    if (rc == CUDA_SUCCESS)
        memmove(dst, s, n);
    return rc;
}

static CUresult copy_dtod(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    void *d, *s;
    CUresult rc;
    NEED_INIT();
    if (n == 0)
        return CUDA_SUCCESS;
    rc = span(dst, n, &d);
    if (rc == CUDA_SUCCESS)
        rc = span(src, n, &s);
    if (rc == CUDA_SUCCESS)
        memmove(d, s, n);
    return rc;
}

static CUresult set_d8(CUdeviceptr dst, unsigned char v, size_t n)
{
    void *d;
    CUresult rc;
    NEED_INIT();
    if (n == 0)
        return CUDA_SUCCESS;
    rc = span(dst, n, &d);
    if (rc == CUDA_SUCCESS)
        memset(d, v, n);
    return rc;
}

GS_API CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
    GS_FAILPOINT("cuMemcpyHtoD_v2");
    return copy_htod(dstDevice, srcHost, ByteCount);
}

GS_API CUresult cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
    GS_FAILPOINT("cuMemcpyDtoH_v2");
    return copy_dtoh(dstHost, srcDevice, ByteCount);
}

GS_API CUresult cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{
    GS_FAILPOINT("cuMemcpyDtoD_v2");
    return copy_dtod(dstDevice, srcDevice, ByteCount);
}

/* streams complete their work at once: an async copy is done when it returns */
GS_API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
                                     CUstream hStream)
{
    CUresult rc;
    GS_FAILPOINT("cuMemcpyHtoDAsync_v2");
    rc = on_stream(hStream);
    return rc ? rc : copy_htod(dstDevice, srcHost, ByteCount);
}

GS_API CUresult cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                                     CUstream hStream)
{
    CUresult rc;
    GS_FAILPOINT("cuMemcpyDtoHAsync_v2");
    rc = on_stream(hStream);
    return rc ? rc : copy_dtoh(dstHost, srcDevice, ByteCount);
}

GS_API CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount,
                                     CUstream hStream)
{
    CUresult rc;
    GS_FAILPOINT("cuMemcpyDtoDAsync_v2");
    rc = on_stream(hStream);
    return rc ? rc : copy_dtod(dstDevice, srcDevice, ByteCount);
}

GS_API CUresult cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
    GS_FAILPOINT("cuMemsetD8_v2");
    return set_d8(dstDevice, uc, N);
}

GS_API CUresult cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream)
{
    CUresult rc;
    GS_FAILPOINT("cuMemsetD8Async");
    rc = on_stream(hStream);
    return rc ? rc : set_d8(dstDevice, uc, N);
}

/* ---- pinned and registered host memory ----------------------------------------- */
static CUresult current_ctx(int *pdev, CUcontext *ctx)
{
    NEED_INIT();
    return gs_cur_pdev(pdev, ctx);
}

GS_API CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    int p;
    CUcontext ctx;
    void *m;
    CUresult rc;
    GS_FAILPOINT("cuMemHostAlloc");
    if (!pp || bytesize == 0 || bytesize > GS_ARENA_SIZE ||
        (Flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                             CU_MEMHOSTALLOC_WRITECOMBINED)))
        return CUDA_ERROR_INVALID_VALUE;
    rc = current_ctx(&p, &ctx);
    if (rc)
        return rc;
    m = mmap(NULL, bytesize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (gs_range_add((uint64_t)(uintptr_t)m, bytesize, p, GS_RANGE_HOST, ctx, Flags) != 0) {
        munmap(m, bytesize);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *pp = m;
    return CUDA_SUCCESS;
}

GS_API CUresult cuMemFreeHost(void *p)
{
    gs_range r;
    GS_FAILPOINT("cuMemFreeHost");
    NEED_INIT();
    if (!gs_range_del((uint64_t)(uintptr_t)p, GS_RANGE_HOST, &r))
        return CUDA_ERROR_INVALID_VALUE;
    munmap(p, r.size);
    return CUDA_SUCCESS;
}

/* [p, p+size) is mapped memory of this process: msync fails with ENOMEM
 * over a hole, whatever the size, and touches nothing */
static bool host_mapped(uint64_t p, uint64_t size)
{
    uint64_t lo = p / GS_PAGE * GS_PAGE;
    if (size > UINT64_MAX - 2 * GS_PAGE || p > UINT64_MAX - 2 * GS_PAGE - size)
        return false;
    return msync((void *)(uintptr_t)lo, gs_round_up(p + size, GS_PAGE) - lo, MS_ASYNC) == 0;
}

GS_API CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
    int pd, rc2;
    CUcontext ctx;
    CUresult rc;
    uint64_t a = (uint64_t)(uintptr_t)p;
    GS_FAILPOINT("cuMemHostRegister_v2");
    if (!p || bytesize == 0 ||
        (Flags & ~(unsigned)(CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
                             CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY)))
        return CUDA_ERROR_INVALID_VALUE;
    if (Flags & CU_MEMHOSTREGISTER_IOMEMORY)
        return CUDA_ERROR_NOT_SUPPORTED; /* no I/O memory on a simulated host */
    rc = current_ctx(&pd, &ctx);
    if (rc)
        return rc;
    if (!host_mapped(a, bytesize))
        return CUDA_ERROR_INVALID_VALUE;
    rc2 = gs_range_add(a, bytesize, pd, GS_RANGE_HOSTREG, ctx, Flags);
    if (rc2 == -2)
        return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    return rc2 ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
}

GS_API CUresult cuMemHostUnregister(void *p)
{
    GS_FAILPOINT("cuMemHostUnregister");
    NEED_INIT();
    if (!gs_range_del((uint64_t)(uintptr_t)p, GS_RANGE_HOSTREG, NULL))
        return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    return CUDA_SUCCESS;
}

static bool host_kind(int kind)
{
    return kind == GS_RANGE_HOST || kind == GS_RANGE_HOSTREG;
}

/* unified addressing: pinned host memory has the same address on the device */
GS_API CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
    gs_range r;
    GS_FAILPOINT("cuMemHostGetDevicePointer_v2");
    NEED_INIT();
    if (!pdptr || Flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (!gs_range_find((uint64_t)(uintptr_t)p, 0, &r) || !host_kind(r.kind))
        return CUDA_ERROR_INVALID_VALUE;
    *pdptr = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

GS_API CUresult cuMemHostGetFlags(unsigned int *pFlags, void *p)
{
    gs_range r;
    GS_FAILPOINT("cuMemHostGetFlags");
    NEED_INIT();
    if (!pFlags)
        return CUDA_ERROR_INVALID_VALUE;
    if (!gs_range_find((uint64_t)(uintptr_t)p, 0, &r) || r.kind != GS_RANGE_HOST)
        return CUDA_ERROR_INVALID_VALUE;
    *pFlags = r.flags & 0xffu;
    return CUDA_SUCCESS;
}

/* ---- what a pointer is ---------------------------------------------------------- */
GS_API CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    gs_range r;
    GS_FAILPOINT("cuMemGetAddressRange_v2");
    NEED_INIT();
    if (!gs_range_find(dptr, 0, &r) || host_kind(r.kind))
        return CUDA_ERROR_NOT_FOUND;
    if (pbase)
        *pbase = r.base;
    if (psize)
        *psize = r.size;
    return CUDA_SUCCESS;
}

static CUresult put_int(void *data, int v)
{
    memcpy(data, &v, sizeof v);
    return CUDA_SUCCESS;
}

static CUresult pointer_attr(void *data, CUpointer_attribute a, CUdeviceptr ptr, const gs_range *r)
{
    bool host = host_kind(r->kind);
    void *hp = (void *)(uintptr_t)ptr;
    unsigned long long id = r->id;
    size_t size = r->size;
    switch (a) {
    case CU_POINTER_ATTRIBUTE_CONTEXT: memcpy(data, &r->ctx, sizeof r->ctx); return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        return put_int(data, host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE);
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: memcpy(data, &ptr, sizeof ptr); return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        if (!host && r->kind != GS_RANGE_MANAGED)
            return CUDA_ERROR_INVALID_VALUE;
        memcpy(data, &hp, sizeof hp);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID: memcpy(data, &id, sizeof id); return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED: return put_int(data, r->kind == GS_RANGE_MANAGED);
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: return put_int(data, gs_pdev_ordinal(r->pdev));
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
        return put_int(data, r->kind == GS_RANGE_DEVICE);
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        memcpy(data, &r->base, sizeof r->base);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE: memcpy(data, &size, sizeof size); return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPED: return put_int(data, 1);
    default: return CUDA_ERROR_INVALID_VALUE;
    }
}

GS_API CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    gs_range r;
    GS_FAILPOINT("cuPointerGetAttribute");
    NEED_INIT();
    if (!data)
        return CUDA_ERROR_INVALID_VALUE;
    if (!gs_range_find(ptr, 0, &r))
        return CUDA_ERROR_INVALID_VALUE;
    return pointer_attr(data, attribute, ptr, &r);
}
