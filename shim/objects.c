/* SPDX-License-Identifier: Apache-2.0 */
/* VMM physical handles and CUDA arrays: charged per object, keyed by handle. */
#include "shim.h"
#include "table.h"

enum { KIND_VMM = 10, KIND_ARRAY, KIND_MIPMAP };

static gf_table objects; /* all-zero is an empty table (see alloc.c) */

static void track(uint64_t key, uint64_t bytes, int ordinal, int kind)
{
    gf_entry e = {.key = key, .bytes = bytes, .ordinal = ordinal, .kind = kind};
    if (!gf_table_set(&objects, &e))
        gf_log(GF_LOG_ERROR, "out of host memory tracking an object: %llu bytes stay counted",
               (unsigned long long)bytes);
}

static void untrack(uint64_t key)
{
    gf_entry e;
    if (!gf_table_take(&objects, key, &e))
        return;
    const gf_ordinal *o = gf_ordinal_get(e.ordinal);
    if (o)
        gf_unadmit(o, e.bytes);
}

/* Physical memory is charged whatever its location type: a host location
 * is charged to the calling context's device rather than escaping the count. */
GF_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                               const CUmemAllocationProp *prop, unsigned long long flags)
{
    int ord;
    const gf_ordinal *o;
    CUresult rc;

    GF_HOOK_ENTER(cu, cuMemCreate);
    if (prop && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE)
        ord = prop->location.id;
    else
        ord = gf_current_ordinal();
    o = ord >= 0 ? gf_ordinal_get(ord) : NULL;
    if (!o)
        return gf_cu.cuMemCreate(handle, size, prop, flags);
    if (!gf_admit(o, size))
        return CUDA_ERROR_OUT_OF_MEMORY;
    rc = gf_cu.cuMemCreate(handle, size, prop, flags);
    if (rc != CUDA_SUCCESS) {
        gf_unadmit(o, size);
        return rc;
    }
    track(*handle, size, ord, KIND_VMM);
    return rc;
}

GF_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    CUresult rc;
    GF_HOOK_ENTER(cu, cuMemRelease);
    rc = gf_cu.cuMemRelease(handle);
    if (rc == CUDA_SUCCESS)
        untrack(handle);
    return rc;
}

/* An array's size is known only once it exists (cuArrayGetMemoryRequirements),
 * so it is charged right after creation and destroyed again if over. */
static CUresult charge_array(uint64_t key, uint64_t bytes, int ord, int kind)
{
    const gf_ordinal *o = gf_ordinal_get(ord);
    if (!o)
        return CUDA_SUCCESS;
    if (!gf_admit(o, bytes))
        return CUDA_ERROR_OUT_OF_MEMORY;
    track(key, bytes, ord, kind);
    return CUDA_SUCCESS;
}

typedef struct array_ops {
    int kind;
    CUresult (*size)(CUDA_ARRAY_MEMORY_REQUIREMENTS *req, void *handle, CUdevice dev);
    CUresult (*destroy)(void *handle);
} array_ops;

static CUresult array_size(CUDA_ARRAY_MEMORY_REQUIREMENTS *req, void *h, CUdevice dev)
{
    if (!gf_cu.cuArrayGetMemoryRequirements)
        return CUDA_ERROR_NOT_SUPPORTED;
    return gf_cu.cuArrayGetMemoryRequirements(req, h, dev);
}

static CUresult array_destroy(void *h)
{
    return gf_cu.cuArrayDestroy(h);
}

static CUresult mipmap_size(CUDA_ARRAY_MEMORY_REQUIREMENTS *req, void *h, CUdevice dev)
{
    if (!gf_cu.cuMipmappedArrayGetMemoryRequirements)
        return CUDA_ERROR_NOT_SUPPORTED;
    return gf_cu.cuMipmappedArrayGetMemoryRequirements(req, h, dev);
}

static CUresult mipmap_destroy(void *h)
{
    return gf_cu.cuMipmappedArrayDestroy(h);
}

static const array_ops arrays = {KIND_ARRAY, array_size, array_destroy};
static const array_ops mipmaps = {KIND_MIPMAP, mipmap_size, mipmap_destroy};

/* Charges a just-created array (rc is the create's result); over the limit
 * the array is destroyed again and *handle cleared. */
static CUresult after_create(CUresult rc, void **handle, const array_ops *ops)
{
    CUDA_ARRAY_MEMORY_REQUIREMENTS req = {0};
    int ord;

    if (rc != CUDA_SUCCESS || (ord = gf_current_ordinal()) < 0 || !gf_ordinal_get(ord))
        return rc;
    if (ops->size(&req, *handle, ord) != CUDA_SUCCESS) {
        gf_log(GF_LOG_WARN, "cannot size a new array: it is not counted");
        return rc;
    }
    if (charge_array((uint64_t)(uintptr_t)*handle, req.size, ord, ops->kind) != CUDA_SUCCESS) {
        ops->destroy(*handle);
        *handle = NULL;
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return rc;
}

GF_EXPORT CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *desc)
{
    GF_HOOK_ENTER(cu, cuArrayCreate_v2);
    return after_create(gf_cu.cuArrayCreate_v2(pHandle, desc), (void **)pHandle, &arrays);
}

GF_EXPORT CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *desc)
{
    GF_HOOK_ENTER(cu, cuArray3DCreate_v2);
    return after_create(gf_cu.cuArray3DCreate_v2(pHandle, desc), (void **)pHandle, &arrays);
}

/* the pre-3.2 descriptors (32-bit sizes): charged the same way */
GF_EXPORT CUresult cuArrayCreate(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR_v1 *desc)
{
    GF_HOOK_ENTER(cu, cuArrayCreate);
    return after_create(gf_cu.cuArrayCreate(pHandle, desc), (void **)pHandle, &arrays);
}

GF_EXPORT CUresult cuArray3DCreate(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR_v1 *desc)
{
    GF_HOOK_ENTER(cu, cuArray3DCreate);
    return after_create(gf_cu.cuArray3DCreate(pHandle, desc), (void **)pHandle, &arrays);
}

GF_EXPORT CUresult cuArrayDestroy(CUarray hArray)
{
    CUresult rc;
    GF_HOOK_ENTER(cu, cuArrayDestroy);
    rc = gf_cu.cuArrayDestroy(hArray);
    if (rc == CUDA_SUCCESS)
        untrack((uint64_t)(uintptr_t)hArray);
    return rc;
}

GF_EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray *pHandle,
                                          const CUDA_ARRAY3D_DESCRIPTOR *desc,
                                          unsigned int numMipmapLevels)
{
    GF_HOOK_ENTER(cu, cuMipmappedArrayCreate);
    return after_create(gf_cu.cuMipmappedArrayCreate(pHandle, desc, numMipmapLevels),
                        (void **)pHandle, &mipmaps);
}

GF_EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray)
{
    CUresult rc;
    GF_HOOK_ENTER(cu, cuMipmappedArrayDestroy);
    rc = gf_cu.cuMipmappedArrayDestroy(hMipmappedArray);
    if (rc == CUDA_SUCCESS)
        untrack((uint64_t)(uintptr_t)hMipmappedArray);
    return rc;
}

static void objects_after_fork(void)
{
    gf_table_reset(&objects);
}

GF_HIDDEN const gf_family gf_family_objects = {.name = "objects", .after_fork = objects_after_fork};
