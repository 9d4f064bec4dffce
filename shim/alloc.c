/* Plain, legacy, pitched and managed allocations and their frees. */
#include <limits.h>

#include "shim.h"
#include "table.h"

enum { KIND_PLAIN = 1, KIND_PITCH, KIND_MANAGED, KIND_LEGACY };

/* All-zero is an empty table with unlocked (glibc) mutexes, so the tables
 * work before any constructor has run. */
GF_HIDDEN gf_table gf_ptrs;

static void remember(CUdeviceptr p, uint64_t bytes, int ordinal, int kind)
{
    gf_entry e = {.key = p, .bytes = bytes, .ordinal = ordinal, .kind = kind};
    if (!gf_table_put(&gf_ptrs, &e))
        gf_log(GF_LOG_ERROR, "out of host memory tracking %#llx: its %llu bytes stay counted",
               (unsigned long long)p, (unsigned long long)bytes);
}

typedef CUresult (*alloc_call)(void *dptr, size_t bytes, unsigned int flags);

/* Reserve first, then ask the driver: the fraction can never pass its limit,
 * not even for the duration of one call. */
static CUresult alloc_admitted(void *dptr, size_t bytes, int kind, alloc_call call,
                               unsigned int flags)
{
    int ord = gf_current_ordinal();
    const gf_ordinal *o = ord >= 0 ? gf_ordinal_get(ord) : NULL;
    CUresult rc;

    if (!o)
        return call(dptr, bytes, flags);
    if (!gf_admit(o, bytes))
        return CUDA_ERROR_OUT_OF_MEMORY;
    rc = call(dptr, bytes, flags);
    if (rc == CUDA_ERROR_OUT_OF_MEMORY && gf_reclaim_for(o, bytes))
        rc = call(dptr, bytes, flags); /* borrowers were made to give it back */
    if (rc != CUDA_SUCCESS) {
        gf_unadmit(o, bytes);
        return rc;
    }
    remember(kind == KIND_LEGACY ? *(CUdeviceptr_v1 *)dptr : *(CUdeviceptr *)dptr, bytes, ord,
             kind);
    return rc;
}

static CUresult call_alloc(void *dptr, size_t bytes, unsigned int flags)
{
    (void)flags;
    return gf_cu.cuMemAlloc_v2(dptr, bytes);
}

static CUresult call_managed(void *dptr, size_t bytes, unsigned int flags)
{
    return gf_cu.cuMemAllocManaged(dptr, bytes, flags);
}

static CUresult call_legacy(void *dptr, size_t bytes, unsigned int flags)
{
    (void)flags;
    return gf_cu.cuMemAlloc(dptr, (unsigned int)bytes);
}

GF_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    gf_shim_init();
    if (!gf_cu.cuMemAlloc_v2)
        return CUDA_ERROR_NOT_INITIALIZED;
    return alloc_admitted(dptr, bytesize, KIND_PLAIN, call_alloc, 0);
}

GF_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    gf_shim_init();
    if (!gf_cu.cuMemAllocManaged)
        return CUDA_ERROR_NOT_INITIALIZED;
    return alloc_admitted(dptr, bytesize, KIND_MANAGED, call_managed, flags);
}

GF_EXPORT CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize)
{
    gf_shim_init();
    if (!gf_cu.cuMemAlloc)
        return CUDA_ERROR_NOT_INITIALIZED;
    return alloc_admitted(dptr, bytesize, KIND_LEGACY, call_legacy, 0);
}

/* The pitch is the driver's choice, so the charge comes after the call; a
 * refusal gives the memory straight back. */
GF_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width,
                                      size_t height, unsigned int elemsize)
{
    int ord;
    const gf_ordinal *o;
    CUresult rc;
    uint64_t bytes;

    gf_shim_init();
    if (!gf_cu.cuMemAllocPitch_v2)
        return CUDA_ERROR_NOT_INITIALIZED;
    ord = gf_current_ordinal();
    o = ord >= 0 ? gf_ordinal_get(ord) : NULL;
    if (o && !gf_admit(o, (uint64_t)width * height)) /* the least it can take */
        return CUDA_ERROR_OUT_OF_MEMORY;
    rc = gf_cu.cuMemAllocPitch_v2(dptr, pitch, width, height, elemsize);
    if (!o)
        return rc;
    gf_unadmit(o, (uint64_t)width * height);
    if (rc != CUDA_SUCCESS)
        return rc;
    bytes = (uint64_t)*pitch * height;
    if (!gf_admit(o, bytes)) {
        gf_cu.cuMemFree_v2(*dptr);
        *dptr = 0;
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    remember(*dptr, bytes, ord, KIND_PITCH);
    return rc;
}

/* Frees always reach the driver, tracked or not; the charge is returned only
 * when the driver accepted the free. */
GF_HIDDEN CUresult gf_free_tracked(CUdeviceptr dptr, CUresult (*call)(CUdeviceptr, void *),
                                   void *arg)
{
    gf_entry e;
    bool tracked = gf_table_take(&gf_ptrs, dptr, &e);
    CUresult rc = call(dptr, arg);

    if (!tracked)
        return rc;
    if (rc != CUDA_SUCCESS) {
        gf_table_put(&gf_ptrs, &e);
        return rc;
    }
    const gf_ordinal *o = gf_ordinal_get(e.ordinal);
    if (o)
        gf_unadmit(o, e.bytes);
    return rc;
}

static CUresult call_free(CUdeviceptr p, void *arg)
{
    (void)arg;
    return gf_cu.cuMemFree_v2(p);
}

static CUresult call_free_legacy(CUdeviceptr p, void *arg)
{
    (void)arg;
    return gf_cu.cuMemFree((CUdeviceptr_v1)p);
}

GF_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    gf_shim_init();
    if (!gf_cu.cuMemFree_v2)
        return CUDA_ERROR_NOT_INITIALIZED;
    return gf_free_tracked(dptr, call_free, NULL);
}

GF_EXPORT CUresult cuMemFree(CUdeviceptr_v1 dptr)
{
    gf_shim_init();
    if (!gf_cu.cuMemFree)
        return CUDA_ERROR_NOT_INITIALIZED;
    return gf_free_tracked(dptr, call_free_legacy, NULL);
}


/* In a forked child the parent's device memory is not ours to free. */
GF_HIDDEN void gf_tables_after_fork(void)
{
    gf_table_reset(&gf_ptrs);
    gf_pools_after_fork();
    gf_graphs_after_fork();
    gf_objects_after_fork();
}
