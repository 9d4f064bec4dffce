/* SPDX-License-Identifier: Apache-2.0 */
/* gpusim plain device memory: cuMemAlloc / cuMemFree / pitched / managed,
 * the legacy 32-bit ABI, and cuMemGetInfo. */
#include "gs.h"
#include "gs_api.h"

#define GS_ADDR_BASE 0x200000000000ULL /* fake UVA addresses (>= 4 GiB) */
#define GS_LOW_BASE 0x10000000ULL      /* legacy 32-bit allocations */
#define GS_LOW_END 0xFFFFFF00ULL
#define GS_ALIGN 256ULL
#define GS_PITCH_ALIGN 512ULL

static _Atomic uint64_t next_addr = GS_ADDR_BASE;
static _Atomic uint64_t next_low = GS_LOW_BASE;

uint64_t gs_fake_addr(uint64_t size)
{
    gs_arena_fd(); /* the window exists before its first address is handed out */
    return atomic_fetch_add_explicit(&next_addr, gs_round_up(size, GS_ALIGN) + GS_ALIGN,
                                     memory_order_relaxed);
}

static uint64_t fake_low_addr(uint64_t size)
{
    uint64_t step = gs_round_up(size, GS_ALIGN) + GS_ALIGN;
    uint64_t a = atomic_fetch_add_explicit(&next_low, step, memory_order_relaxed);
    return a + step > GS_LOW_END ? 0 : a;
}

static CUresult alloc_on(int p, CUcontext ctx, CUdeviceptr *dptr, uint64_t size, int kind)
{
    uint64_t a;
    if (GS_UNLIKELY(gs_charge(p, size) != 0) && gs_charge_retry(p, size) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    a = kind == GS_KIND_LEGACY ? fake_low_addr(size) : gs_fake_addr(size);
    if (!a || gs_table_put(&gs_ptrs, a, size, p, kind, ctx) != 0) {
        gs_uncharge(p, size);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (gs_range_add(a, size, p, kind == GS_KIND_MANAGED ? GS_RANGE_MANAGED : GS_RANGE_DEVICE, ctx,
                     0) != 0) {
        gs_entry_free(gs_table_take(&gs_ptrs, a));
        gs_uncharge(p, size);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *dptr = a;
    return CUDA_SUCCESS;
}

CUresult gs_alloc(CUdeviceptr *dptr, uint64_t size, int kind)
{
    int p;
    CUcontext ctx;
    CUresult rc;
    if (!dptr || size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    rc = gs_cur_pdev(&p, &ctx);
    if (rc)
        return rc;
    return alloc_on(p, ctx, dptr, size, kind);
}

void gs_pool_free_entry(gs_entry *e); /* cu_pool.c */

/* the bytes go with the allocation, unless an IPC handle named it: another
 * process may still map them, and the driver keeps them for it */
static void release_bytes(uint64_t base)
{
    gs_range r;
    if (!gs_range_del(base, 0, &r))
        return;
    if (r.flags & GS_RANGE_EXPORTED)
        gs_ipc_forget(base);
    else
        gs_arena_discard(r.base, r.size);
}

static void release_entry(gs_entry *e)
{
    release_bytes(e->key);
    if (e->kind == GS_KIND_POOL)
        gs_pool_free_entry(e);
    else
        gs_uncharge(e->pdev, e->size);
    gs_entry_free(e);
}

CUresult gs_free_ptr(CUdeviceptr ptr)
{
    gs_entry *e;
    CUresult rc = gs_need_init();
    if (rc)
        return rc;
    e = gs_table_take(&gs_ptrs, ptr);
    if (!e)
        return CUDA_ERROR_INVALID_VALUE;
    release_entry(e);
    return CUDA_SUCCESS;
}

static bool owned_by(const gs_entry *e, void *ctx)
{
    return e->owner == ctx && e->kind != GS_KIND_POOL;
}

void gs_free_ctx_allocations(CUcontext ctx)
{
    gs_entry *e = gs_table_take_if(&gs_ptrs, owned_by, ctx);
    while (e) {
        gs_entry *n = e->next;
        release_entry(e);
        e = n;
    }
}

GS_API CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    GS_FAILPOINT("cuMemAlloc_v2");
    return gs_alloc(dptr, bytesize, GS_KIND_PLAIN);
}

GS_API CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    GS_FAILPOINT("cuMemFree_v2");
    return gs_free_ptr(dptr);
}

static CUresult pitch_size(size_t width, size_t height, unsigned int elem, size_t *pitch,
                           uint64_t *bytes)
{
    uint64_t pt;
    if (width == 0 || height == 0 || (elem != 4 && elem != 8 && elem != 16))
        return CUDA_ERROR_INVALID_VALUE;
    if (width > UINT64_MAX - GS_PITCH_ALIGN)
        return CUDA_ERROR_INVALID_VALUE;
    pt = gs_round_up(width, GS_PITCH_ALIGN);
    if (height > UINT64_MAX / pt)
        return CUDA_ERROR_INVALID_VALUE;
    *pitch = pt;
    *bytes = pt * height;
    return CUDA_SUCCESS;
}

/* pitch = width rounded up to 512 bytes; pitch * height (at most max_bytes)
 * is charged; *pitch is set only on success */
static CUresult alloc_pitch(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height,
                            unsigned int elemsize, uint64_t max_bytes, int kind)
{
    size_t pt;
    uint64_t bytes;
    CUresult rc = pitch_size(width, height, elemsize, &pt, &bytes);
    if (rc == CUDA_SUCCESS && bytes > max_bytes)
        rc = CUDA_ERROR_INVALID_VALUE;
    if (rc == CUDA_SUCCESS)
        rc = gs_alloc(dptr, bytes, kind);
    if (rc == CUDA_SUCCESS)
        *pitch = pt;
    return rc;
}

GS_API CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height,
                                   unsigned int elemsize)
{
    GS_FAILPOINT("cuMemAllocPitch_v2");
    if (!dptr || !pitch)
        return CUDA_ERROR_INVALID_VALUE;
    return alloc_pitch(dptr, pitch, width, height, elemsize, UINT64_MAX, GS_KIND_PITCH);
}

/* managed memory is charged to the current device like device memory */
GS_API CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    GS_FAILPOINT("cuMemAllocManaged");
    if (flags != 1 && flags != 2)
        return CUDA_ERROR_INVALID_VALUE;
    return gs_alloc(dptr, bytesize, GS_KIND_MANAGED);
}

/* free and total bytes of the current device, each only where asked */
static CUresult mem_info(size_t *free, size_t *total)
{
    int p;
    CUresult rc;
    if (!free && !total)
        return CUDA_ERROR_INVALID_VALUE;
    rc = gs_cur_pdev(&p, NULL);
    if (rc)
        return rc;
    if (free)
        *free = gs_free(p);
    if (total)
        *total = gs.shm->size[p];
    return CUDA_SUCCESS;
}

GS_API CUresult cuMemGetInfo_v2(size_t *free, size_t *total)
{
    GS_FAILPOINT("cuMemGetInfo_v2");
    return mem_info(free, total);
}

/* ---- pre-3.2 ABI: 32-bit sizes and pointers ---------------------------------- */
static unsigned int clamp32(uint64_t v)
{
    return v > UINT32_MAX ? UINT32_MAX : (unsigned int)v;
}

GS_API CUresult cuMemGetInfo(unsigned int *free, unsigned int *total)
{
    size_t f, t;
    CUresult rc;
    GS_FAILPOINT("cuMemGetInfo");
    rc = mem_info(free ? &f : NULL, total ? &t : NULL);
    if (rc)
        return rc;
    if (free)
        *free = clamp32(f);
    if (total)
        *total = clamp32(t);
    return CUDA_SUCCESS;
}

GS_API CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize)
{
    CUdeviceptr d;
    CUresult rc;
    GS_FAILPOINT("cuMemAlloc");
    if (!dptr)
        return CUDA_ERROR_INVALID_VALUE;
    rc = gs_alloc(&d, bytesize, GS_KIND_LEGACY);
    if (rc == CUDA_SUCCESS)
        *dptr = (CUdeviceptr_v1)d;
    return rc;
}

GS_API CUresult cuMemFree(CUdeviceptr_v1 dptr)
{
    GS_FAILPOINT("cuMemFree");
    return gs_free_ptr((CUdeviceptr)dptr);
}

GS_API CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pitch, unsigned int width,
                                unsigned int height, unsigned int elemsize)
{
    size_t pt;
    CUdeviceptr d;
    CUresult rc;
    GS_FAILPOINT("cuMemAllocPitch");
    if (!dptr || !pitch)
        return CUDA_ERROR_INVALID_VALUE;
    rc = alloc_pitch(&d, &pt, width, height, elemsize, UINT32_MAX, GS_KIND_LEGACY);
    if (rc == CUDA_SUCCESS) {
        *dptr = (CUdeviceptr_v1)d;
        *pitch = (unsigned int)pt;
    }
    return rc;
}
