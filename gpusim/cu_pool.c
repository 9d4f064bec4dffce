/* SPDX-License-Identifier: Apache-2.0 */
/* gpusim stream-ordered allocation: memory pools with reserved/used
 * accounting like the driver's (see README.md). Work completes at once, so a
 * free makes the memory reusable immediately; reserved memory above the
 * release threshold goes back to the device at synchronisation points. */
#include "gs.h"
#include "gs_api.h"

static pthread_mutex_t pools_mu = PTHREAD_MUTEX_INITIALIZER;
static gs_pool *pools[4096];
static int npools;

static gs_pool *pool_new(int pdev, bool is_default)
{
    gs_pool *pl = gs_obj_new(sizeof *pl, GS_MAGIC_POOL);
    if (!pl)
        return NULL;
    pl->pdev = pdev;
    pl->is_default = is_default;
    pthread_mutex_init(&pl->mu, NULL);
    pl->reuse[0] = pl->reuse[1] = pl->reuse[2] = 1;
    pthread_mutex_lock(&pools_mu);
    /* slots of pools from before a fork, or destroyed and drained, are reused */
    bool placed = false;
    for (int i = 0; i < npools && !placed; i++) {
        if (!gs_obj_ok(pools[i], GS_MAGIC_POOL) || (pools[i]->destroyed && !pools[i]->used)) {
            pools[i] = pl;
            placed = true;
        }
    }
    if (!placed && npools < (int)(sizeof pools / sizeof pools[0]))
        pools[npools++] = pl;
    pthread_mutex_unlock(&pools_mu);
    return pl;
}

static bool pool_ok(gs_pool *pl)
{
    return gs_obj_ok(pl, GS_MAGIC_POOL) && !pl->destroyed;
}

static gs_pool *default_pool(int p)
{
    gs_pdev *d = &gsp.pdev[p];
    gs_pool *pl;
    pthread_mutex_lock(&d->mu);
    if (!d->default_pool)
        d->default_pool = pool_new(p, true);
    if (!d->cur_pool)
        d->cur_pool = d->default_pool;
    pl = d->default_pool;
    pthread_mutex_unlock(&d->mu);
    return pl;
}

static gs_pool *current_pool(int p)
{
    gs_pool *pl;
    default_pool(p);
    pthread_mutex_lock(&gsp.pdev[p].mu);
    pl = gsp.pdev[p].cur_pool;
    pthread_mutex_unlock(&gsp.pdev[p].mu);
    return pl;
}

static void shrink(gs_pool *pl, uint64_t keep)
{
    uint64_t target = pl->used > keep ? pl->used : keep;
    target = gs_round_up(target, GS_GRAN);
    if (pl->reserved > target) {
        if (pl->pdev >= 0)
            gs_uncharge(pl->pdev, pl->reserved - target);
        pl->reserved = target;
    }
}

static CUresult pool_take(gs_pool *pl, uint64_t size)
{
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&pl->mu);
    if (pl->destroyed) {
        rc = CUDA_ERROR_INVALID_VALUE;
        goto out;
    }
    if (size > pl->reserved - pl->used) {
        uint64_t grow = gs_round_up(size - (pl->reserved - pl->used), GS_GRAN);
        if (pl->pdev >= 0 && gs_charge_retry(pl->pdev, grow) != 0) {
            rc = CUDA_ERROR_OUT_OF_MEMORY;
            goto out;
        }
        pl->reserved += grow;
    }
    pl->used += size;
    if (pl->used > pl->used_high)
        pl->used_high = pl->used;
    if (pl->reserved > pl->reserved_high)
        pl->reserved_high = pl->reserved;
out:
    pthread_mutex_unlock(&pl->mu);
    return rc;
}

static void pool_give(gs_pool *pl, uint64_t size)
{
    pthread_mutex_lock(&pl->mu);
    pl->used -= size;
    if (pl->destroyed) {
        /* a destroyed pool keeps only what is still allocated */
        pl->reserved -= size;
        if (pl->pdev >= 0)
            gs_uncharge(pl->pdev, size);
    }
    pthread_mutex_unlock(&pl->mu);
}

void gs_pool_free_entry(gs_entry *e);
void gs_pool_free_entry(gs_entry *e)
{
    pool_give(e->owner, e->size);
}

static CUresult pool_alloc(gs_pool *pl, CUdeviceptr *dptr, uint64_t size)
{
    CUresult rc = pool_take(pl, size);
    uint64_t a;
    if (rc)
        return rc;
    a = gs_fake_addr(size);
    if (gs_table_put(&gs_ptrs, a, size, pl->pdev, GS_KIND_POOL, pl) != 0) {
        pool_give(pl, size);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (gs_range_add(a, size, pl->pdev, GS_RANGE_POOL, NULL, 0) != 0) {
        gs_entry_free(gs_table_take(&gs_ptrs, a));
        pool_give(pl, size);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *dptr = a;
    return CUDA_SUCCESS;
}

void gs_pools_sync(int p)
{
    pthread_mutex_lock(&pools_mu);
    for (int i = 0; i < npools; i++) {
        gs_pool *pl = pools[i];
        if (!pool_ok(pl) || pl->pdev != p)
            continue;
        pthread_mutex_lock(&pl->mu);
        if (!pl->destroyed)
            shrink(pl, pl->threshold);
        pthread_mutex_unlock(&pl->mu);
    }
    pthread_mutex_unlock(&pools_mu);
}

static CUresult alloc_async(CUdeviceptr *dptr, size_t size, CUstream s)
{
    int p;
    gs_pool *pl;
    CUresult rc = gs_need_init();
    if (rc)
        return rc;
    if (!dptr || size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    rc = gs_stream_pdev(s, &p);
    if (rc)
        return rc;
    pl = current_pool(p);
    if (!pl)
        return CUDA_ERROR_OUT_OF_MEMORY;
    return pool_alloc(pl, dptr, size);
}

GS_API CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    GS_FAILPOINT("cuMemAllocAsync");
    return alloc_async(dptr, bytesize, hStream);
}

GS_API CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    GS_FAILPOINT("cuMemAllocAsync_ptsz");
    return alloc_async(dptr, bytesize, hStream);
}

static CUresult alloc_from_pool(CUdeviceptr *dptr, size_t size, CUmemoryPool pool, CUstream s)
{
    int p;
    gs_pool *pl = (gs_pool *)pool;
    CUresult rc = gs_need_init();
    if (rc)
        return rc;
    if (!dptr || size == 0 || !pool_ok(pl))
        return CUDA_ERROR_INVALID_VALUE;
    rc = gs_stream_pdev(s, &p);
    if (rc)
        return rc;
    return pool_alloc(pl, dptr, size);
}

GS_API CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                        CUstream hStream)
{
    GS_FAILPOINT("cuMemAllocFromPoolAsync");
    return alloc_from_pool(dptr, bytesize, pool, hStream);
}

GS_API CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                             CUstream hStream)
{
    GS_FAILPOINT("cuMemAllocFromPoolAsync_ptsz");
    return alloc_from_pool(dptr, bytesize, pool, hStream);
}

/* frees pool memory back to its pool; memory from cuMemAlloc is freed too,
 * as the driver allows */
static CUresult free_async(CUdeviceptr dptr, CUstream s)
{
    int p;
    CUresult rc = gs_need_init();
    if (rc)
        return rc;
    rc = gs_stream_pdev(s, &p);
    if (rc)
        return rc;
    gs_free_async_hold();
    return gs_free_ptr(dptr);
}

GS_API CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    GS_FAILPOINT("cuMemFreeAsync");
    return free_async(dptr, hStream);
}

GS_API CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    GS_FAILPOINT("cuMemFreeAsync_ptsz");
    return free_async(dptr, hStream);
}

/* the device's default pool, or (current) the one cuDeviceSetMemPool chose */
static CUresult device_pool(CUmemoryPool *pool, CUdevice dev, bool current)
{
    int p;
    CUresult rc = gs_need_init();
    if (rc)
        return rc;
    if (!pool)
        return CUDA_ERROR_INVALID_VALUE;
    rc = gs_ordinal(dev, &p);
    if (rc)
        return rc;
    *pool = (CUmemoryPool)(current ? current_pool(p) : default_pool(p));
    return *pool ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

GS_API CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice dev)
{
    GS_FAILPOINT("cuDeviceGetDefaultMemPool");
    return device_pool(pool, dev, false);
}

GS_API CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
    GS_FAILPOINT("cuDeviceGetMemPool");
    return device_pool(pool, dev, true);
}

GS_API CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
    int p;
    gs_pool *pl = (gs_pool *)pool;
    CUresult rc;
    GS_FAILPOINT("cuDeviceSetMemPool");
    rc = gs_need_init();
    if (rc)
        return rc;
    rc = gs_ordinal(dev, &p);
    if (rc)
        return rc;
    if (!pool_ok(pl) || pl->pdev != p)
        return CUDA_ERROR_INVALID_VALUE;
    default_pool(p);
    pthread_mutex_lock(&gsp.pdev[p].mu);
    gsp.pdev[p].cur_pool = pl;
    pthread_mutex_unlock(&gsp.pdev[p].mu);
    return CUDA_SUCCESS;
}

#if GS_DRIVER_VERSION >= 13000
/* 13.0's form of cuDeviceSetMemPool: a device location's pinned allocations */
GS_API CUresult cuMemSetMemPool(CUmemLocation *location, CUmemAllocationType type,
                                CUmemoryPool pool)
{
    GS_FAILPOINT("cuMemSetMemPool");
    if (!location || location->type != CU_MEM_LOCATION_TYPE_DEVICE ||
        type != CU_MEM_ALLOCATION_TYPE_PINNED)
        return CUDA_ERROR_NOT_SUPPORTED;
    return cuDeviceSetMemPool(location->id, pool);
}
#endif

GS_API CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props)
{
    int p = -1;
    gs_pool *pl;
    CUresult rc;
    GS_FAILPOINT("cuMemPoolCreate");
    rc = gs_need_init();
    if (rc)
        return rc;
    if (!pool || !props || props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED)
        return CUDA_ERROR_INVALID_VALUE;
    switch (props->location.type) {
    case CU_MEM_LOCATION_TYPE_DEVICE:
        rc = gs_ordinal(props->location.id, &p);
        if (rc)
            return CUDA_ERROR_INVALID_VALUE;
        break;
    case CU_MEM_LOCATION_TYPE_HOST:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA: break; /* host memory: never charged to a device */
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    pl = pool_new(p, false);
    if (!pl)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *pool = (CUmemoryPool)pl;
    return CUDA_SUCCESS;
}

GS_API CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
    gs_pool *pl = (gs_pool *)pool;
    CUresult rc;
    GS_FAILPOINT("cuMemPoolDestroy");
    rc = gs_need_init();
    if (rc)
        return rc;
    if (!pool_ok(pl) || pl->is_default)
        return CUDA_ERROR_INVALID_VALUE;
    if (pl->pdev >= 0) {
        pthread_mutex_lock(&gsp.pdev[pl->pdev].mu);
        if (gsp.pdev[pl->pdev].cur_pool == pl)
            gsp.pdev[pl->pdev].cur_pool = gsp.pdev[pl->pdev].default_pool;
        pthread_mutex_unlock(&gsp.pdev[pl->pdev].mu);
    }
    pthread_mutex_lock(&pl->mu);
    pl->destroyed = true;
    if (pl->pdev >= 0)
        gs_uncharge(pl->pdev, pl->reserved - pl->used);
    pl->reserved = pl->used;
    pthread_mutex_unlock(&pl->mu);
    return CUDA_SUCCESS;
}

GS_API CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
    gs_pool *pl = (gs_pool *)pool;
    CUresult rc;
    GS_FAILPOINT("cuMemPoolTrimTo");
    rc = gs_need_init();
    if (rc)
        return rc;
    if (!pool_ok(pl))
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&pl->mu);
    shrink(pl, minBytesToKeep);
    pthread_mutex_unlock(&pl->mu);
    return CUDA_SUCCESS;
}

static CUresult set_attr(gs_pool *pl, int attr, const void *value)
{
    cuuint64_t v;
    switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
        pl->reuse[attr - 1] = *(const int *)value;
        return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
        pl->threshold = *(const cuuint64_t *)value;
        return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
        v = *(const cuuint64_t *)value;
        if (v != 0)
            return CUDA_ERROR_INVALID_VALUE;
        if (attr == CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH)
            pl->reserved_high = pl->reserved;
        else
            pl->used_high = pl->used;
        return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
}

static CUresult get_attr(gs_pool *pl, int attr, void *value)
{
    cuuint64_t *v = value;
    switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
        *(int *)value = pl->reuse[attr - 1];
        return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: *v = pl->threshold; return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: *v = pl->reserved; return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: *v = pl->reserved_high; return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: *v = pl->used; return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH: *v = pl->used_high; return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
}

/* sets (set) or reads one attribute under the pool's lock */
static CUresult pool_attr(CUmemoryPool pool, CUmemPool_attribute attr, void *value, bool set)
{
    gs_pool *pl = (gs_pool *)pool;
    CUresult rc = gs_need_init();
    if (rc)
        return rc;
    if (!pool_ok(pl) || !value)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&pl->mu);
    rc = set ? set_attr(pl, (int)attr, value) : get_attr(pl, (int)attr, value);
    pthread_mutex_unlock(&pl->mu);
    return rc;
}

GS_API CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    GS_FAILPOINT("cuMemPoolSetAttribute");
    return pool_attr(pool, attr, value, true);
}

GS_API CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    GS_FAILPOINT("cuMemPoolGetAttribute");
    return pool_attr(pool, attr, value, false);
}

/* fork child: the lock may have been held by another thread */
void gs_pools_reset(void)
{
    pthread_mutex_init(&pools_mu, NULL);
}
