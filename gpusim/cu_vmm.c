/* SPDX-License-Identifier: Apache-2.0 */
/* gpusim virtual memory management (physical handles are charged, address
 * reservations and mappings are bookkeeping only) and CUDA arrays (charged
 * exactly what the memory-requirements queries report). */
#include "gs.h"
#include "gs_api.h"

#define GS_HANDLE_BASE 0x4000000000000000ULL
#define GS_ARRAY_ALIGN 512ULL

static _Atomic uint64_t next_handle = GS_HANDLE_BASE;

/* ---- VMM ----------------------------------------------------------------- */
static CUresult prop_pdev(const CUmemAllocationProp *prop, int *pdev)
{
    if (!prop || prop->type != CU_MEM_ALLOCATION_TYPE_PINNED)
        return CUDA_ERROR_INVALID_VALUE;
    switch (prop->location.type) {
    case CU_MEM_LOCATION_TYPE_DEVICE:
        return gs_ordinal(prop->location.id, pdev) ? CUDA_ERROR_INVALID_DEVICE : CUDA_SUCCESS;
    case CU_MEM_LOCATION_TYPE_HOST:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT:
        *pdev = -1; /* host memory: not charged to a device */
        return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
}

GS_API CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                            const CUmemAllocationProp *prop, unsigned long long flags)
{
    int p;
    uint64_t h;
    CUresult rc;
    GS_FAILPOINT("cuMemCreate");
    rc = gs_need_init();
    if (rc)
        return rc;
    if (!handle || flags != 0 || size == 0 || size % GS_GRAN)
        return CUDA_ERROR_INVALID_VALUE;
    rc = prop_pdev(prop, &p);
    if (rc)
        return rc;
    if (p >= 0 && gs_charge_retry(p, size) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    h = atomic_fetch_add(&next_handle, 1);
    if (gs_table_put(&gs_handles, h, size, p, GS_KIND_VMM, NULL) != 0) {
        if (p >= 0)
            gs_uncharge(p, size);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *handle = h;
    return CUDA_SUCCESS;
}

/* Takes the handle table's entry at key if it is of kind (and, with
 * match_size, of that size); any other entry stays in the table. */
static gs_entry *take_kind(uint64_t key, int kind, bool match_size, size_t size)
{
    gs_entry *e = gs_table_take(&gs_handles, key);
    if (e && (e->kind != kind || (match_size && e->size != size))) {
        gs_table_put(&gs_handles, e->key, e->size, e->pdev, e->kind, e->owner);
        gs_entry_free(e);
        return NULL;
    }
    return e;
}

GS_API CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    gs_entry *e;
    CUresult rc;
    GS_FAILPOINT("cuMemRelease");
    rc = gs_need_init();
    if (rc)
        return rc;
    e = take_kind(handle, GS_KIND_VMM, false, 0);
    if (!e)
        return CUDA_ERROR_INVALID_VALUE;
    if (e->pdev >= 0)
        gs_uncharge(e->pdev, e->size);
    gs_entry_free(e);
    return CUDA_SUCCESS;
}

GS_API CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                              CUmemAllocationGranularity_flags option)
{
    int p;
    CUresult rc;
    GS_FAILPOINT("cuMemGetAllocationGranularity");
    rc = gs_need_init();
    if (rc)
        return rc;
    if (!granularity || (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
                         option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
        return CUDA_ERROR_INVALID_VALUE;
    rc = prop_pdev(prop, &p);
    if (rc)
        return rc;
    *granularity = GS_GRAN;
    return CUDA_SUCCESS;
}

GS_API CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment,
                                    CUdeviceptr addr, unsigned long long flags)
{
    uint64_t a;
    CUresult rc;
    GS_FAILPOINT("cuMemAddressReserve");
    rc = gs_need_init();
    if (rc)
        return rc;
    (void)addr, (void)flags;
    if (!ptr || size == 0 || size % GS_GRAN || (alignment && (alignment & (alignment - 1))))
        return CUDA_ERROR_INVALID_VALUE;
    if (alignment < GS_GRAN)
        alignment = GS_GRAN;
    a = gs_round_up(gs_fake_addr(size + alignment), alignment);
    if (gs_table_put(&gs_handles, a, size, -1, GS_KIND_VA, NULL) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *ptr = a;
    return CUDA_SUCCESS;
}

GS_API CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    gs_entry *e;
    CUresult rc;
    GS_FAILPOINT("cuMemAddressFree");
    rc = gs_need_init();
    if (rc)
        return rc;
    e = take_kind(ptr, GS_KIND_VA, true, size);
    if (!e)
        return CUDA_ERROR_INVALID_VALUE;
    gs_entry_free(e);
    return CUDA_SUCCESS;
}

/* init, then a non-empty, granule-sized range at a non-NULL address */
static CUresult range_check(CUdeviceptr ptr, size_t size)
{
    CUresult rc = gs_need_init();
    if (rc)
        return rc;
    return !ptr || size == 0 || size % GS_GRAN ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

GS_API CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                         CUmemGenericAllocationHandle handle, unsigned long long flags)
{
    gs_entry e;
    CUresult rc;
    GS_FAILPOINT("cuMemMap");
    rc = range_check(ptr, size);
    if (rc)
        return rc;
    if (offset % GS_GRAN || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (!gs_table_get(&gs_handles, handle, &e) || e.kind != GS_KIND_VMM || offset + size > e.size)
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

GS_API CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    GS_FAILPOINT("cuMemUnmap");
    return range_check(ptr, size);
}

GS_API CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
                               size_t count)
{
    CUresult rc;
    GS_FAILPOINT("cuMemSetAccess");
    rc = range_check(ptr, size);
    if (rc)
        return rc;
    return !desc || count == 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

/* ---- arrays --------------------------------------------------------------- */
typedef struct gs_array {
    gs_obj h;
    int pdev;
    bool alive;
    uint64_t size;
} gs_array;

static unsigned format_bytes(CUarray_format f)
{
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF: return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT: return 4;
    default: return 0;
    }
}

/* bytes of one level: rows padded to 512 bytes, times height and depth */
static int level_bytes(const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned level, uint64_t *out)
{
    unsigned eb = format_bytes(d->Format);
    uint64_t w = d->Width >> level, h = d->Height >> level, z = d->Depth >> level, row;
    if (!eb || (d->NumChannels != 1 && d->NumChannels != 2 && d->NumChannels != 4))
        return -1;
    w = w ? w : 1;
    h = h ? h : 1;
    z = z ? z : 1;
    if (w > (1ULL << 32) || h > (1ULL << 20) || z > (1ULL << 20))
        return -1;
    row = gs_round_up(w * eb * d->NumChannels, GS_ARRAY_ALIGN);
    if (row > UINT64_MAX / h || row * h > UINT64_MAX / z)
        return -1;
    *out = row * h * z;
    return 0;
}

/* the whole array (all levels), rounded up to 2 MiB */
static int array_bytes(const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned levels, uint64_t *out)
{
    uint64_t sum = 0, b;
    uint64_t maxdim = d->Width;
    unsigned maxlevels = 0;
    if (d->Width == 0 || levels == 0)
        return -1;
    if (d->Height > maxdim)
        maxdim = d->Height;
    if (d->Depth > maxdim)
        maxdim = d->Depth;
    while (maxdim >> maxlevels)
        maxlevels++;
    if (levels > maxlevels)
        return -1;
    for (unsigned l = 0; l < levels; l++) {
        if (level_bytes(d, l, &b) != 0 || b > UINT64_MAX / 2 - sum)
            return -1;
        sum += b;
    }
    *out = gs_round_up(sum, GS_GRAN);
    return 0;
}

static CUresult array_make(const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned levels, uint32_t magic,
                           void **out)
{
    int p;
    uint64_t bytes;
    gs_array *a;
    CUresult rc;
    if (!out || !d || array_bytes(d, levels, &bytes) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    rc = gs_cur_pdev(&p, NULL);
    if (rc)
        return rc;
    if (gs_charge_retry(p, bytes) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    a = gs_obj_new(sizeof *a, magic);
    if (!a) {
        gs_uncharge(p, bytes);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    a->pdev = p;
    a->size = bytes;
    a->alive = true;
    *out = a;
    return CUDA_SUCCESS;
}

static CUresult array_destroy(void *h, uint32_t magic)
{
    gs_array *a = h;
    CUresult rc = gs_need_init();
    if (rc)
        return rc;
    if (!gs_obj_ok(a, magic) || !a->alive)
        return CUDA_ERROR_INVALID_HANDLE;
    a->alive = false;
    gs_uncharge(a->pdev, a->size);
    return CUDA_SUCCESS;
}

static CUresult array_reqs(CUDA_ARRAY_MEMORY_REQUIREMENTS *r, void *h, uint32_t magic, CUdevice dev)
{
    gs_array *a = h;
    int p;
    CUresult rc = gs_need_init();
    if (rc)
        return rc;
    if (!r)
        return CUDA_ERROR_INVALID_VALUE;
    if (!gs_obj_ok(a, magic) || !a->alive)
        return CUDA_ERROR_INVALID_HANDLE;
    rc = gs_ordinal(dev, &p);
    if (rc)
        return rc;
    *r = (CUDA_ARRAY_MEMORY_REQUIREMENTS){.size = a->size, .alignment = GS_ARRAY_ALIGN};
    return CUDA_SUCCESS;
}

GS_API CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *desc)
{
    CUDA_ARRAY3D_DESCRIPTOR d3;
    GS_FAILPOINT("cuArrayCreate_v2");
    if (!desc)
        return CUDA_ERROR_INVALID_VALUE;
    d3 = (CUDA_ARRAY3D_DESCRIPTOR){.Width = desc->Width,
                                   .Height = desc->Height,
                                   .Format = desc->Format,
                                   .NumChannels = desc->NumChannels};
    return array_make(&d3, 1, GS_MAGIC_ARRAY, (void **)pHandle);
}

GS_API CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *desc)
{
    GS_FAILPOINT("cuArray3DCreate_v2");
    return array_make(desc, 1, GS_MAGIC_ARRAY, (void **)pHandle);
}

/* pre-3.2 descriptors (32-bit sizes): not simulated */
GS_API CUresult cuArrayCreate(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR_v1 *desc)
{
    GS_FAILPOINT("cuArrayCreate");
    (void)pHandle, (void)desc;
    return CUDA_ERROR_NOT_SUPPORTED;
}

GS_API CUresult cuArray3DCreate(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR_v1 *desc)
{
    GS_FAILPOINT("cuArray3DCreate");
    (void)pHandle, (void)desc;
    return CUDA_ERROR_NOT_SUPPORTED;
}

GS_API CUresult cuArrayDestroy(CUarray hArray)
{
    GS_FAILPOINT("cuArrayDestroy");
    return array_destroy(hArray, GS_MAGIC_ARRAY);
}

GS_API CUresult cuMipmappedArrayCreate(CUmipmappedArray *pHandle,
                                       const CUDA_ARRAY3D_DESCRIPTOR *desc, unsigned int levels)
{
    GS_FAILPOINT("cuMipmappedArrayCreate");
    return array_make(desc, levels, GS_MAGIC_MIPMAP, (void **)pHandle);
}

GS_API CUresult cuMipmappedArrayDestroy(CUmipmappedArray h)
{
    GS_FAILPOINT("cuMipmappedArrayDestroy");
    return array_destroy(h, GS_MAGIC_MIPMAP);
}

GS_API CUresult cuArrayGetMemoryRequirements(CUDA_ARRAY_MEMORY_REQUIREMENTS *memoryRequirements,
                                             CUarray array, CUdevice device)
{
    GS_FAILPOINT("cuArrayGetMemoryRequirements");
    return array_reqs(memoryRequirements, array, GS_MAGIC_ARRAY, device);
}

GS_API CUresult cuMipmappedArrayGetMemoryRequirements(
    CUDA_ARRAY_MEMORY_REQUIREMENTS *memoryRequirements, CUmipmappedArray mipmap, CUdevice device)
{
    GS_FAILPOINT("cuMipmappedArrayGetMemoryRequirements");
    return array_reqs(memoryRequirements, mipmap, GS_MAGIC_MIPMAP, device);
}
