/* What a fractional process sees: total = its limit, free = min(limit - used
 * by the whole fraction, physical free), never negative, never an error. */
#include <limits.h>
#include <pthread.h>
#include <string.h>

#include "shim.h"

static uint64_t fraction_free(const gf_ordinal *o, uint64_t physical_free)
{
    uint64_t used = gf_used(o);
    uint64_t room = used >= o->limit ? 0 : o->limit - used;
    return room < physical_free ? room : physical_free;
}

static const gf_ordinal *current_view(void)
{
    int ord = gf_current_ordinal();
    if (ord < 0)
        return NULL;
    const gf_ordinal *o = gf_ordinal_get(ord);
    if (o && o->dev >= 0) {
        gf_pools_reconcile(ord);
        gf_graphs_reconcile(ord);
    }
    return o;
}

GF_EXPORT CUresult cuMemGetInfo_v2(size_t *free, size_t *total)
{
    size_t pf = 0, pt = 0;
    CUresult rc;
    const gf_ordinal *o;

    gf_shim_init();
    if (!gf_cu.cuMemGetInfo_v2)
        return CUDA_ERROR_NOT_INITIALIZED;
    rc = gf_cu.cuMemGetInfo_v2(&pf, &pt);
    if (rc != CUDA_SUCCESS || !(o = current_view())) {
        if (free)
            *free = pf;
        if (total)
            *total = pt;
        return rc;
    }
    if (free)
        *free = fraction_free(o, pf);
    if (total)
        *total = o->limit;
    return rc;
}

static unsigned int clamp32(uint64_t v)
{
    return v > UINT_MAX ? UINT_MAX : (unsigned int)v;
}

GF_EXPORT CUresult cuMemGetInfo(unsigned int *free, unsigned int *total)
{
    unsigned int pf = 0, pt = 0;
    CUresult rc;
    const gf_ordinal *o;

    gf_shim_init();
    if (!gf_cu.cuMemGetInfo)
        return CUDA_ERROR_NOT_INITIALIZED;
    rc = gf_cu.cuMemGetInfo(&pf, &pt);
    if (rc != CUDA_SUCCESS || !(o = current_view())) {
        if (free)
            *free = pf;
        if (total)
            *total = pt;
        return rc;
    }
    /* the legacy call saturates at 4 GiB: so does the physical free it gave us */
    if (free)
        *free = clamp32(fraction_free(o, pf == UINT_MAX ? UINT64_MAX : pf));
    if (total)
        *total = clamp32(o->limit);
    return rc;
}

GF_EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    CUresult rc;
    const gf_ordinal *o;

    gf_shim_init();
    if (!gf_cu.cuDeviceTotalMem_v2)
        return CUDA_ERROR_NOT_INITIALIZED;
    rc = gf_cu.cuDeviceTotalMem_v2(bytes, dev);
    if (rc == CUDA_SUCCESS && bytes && (o = gf_ordinal_get(dev)))
        *bytes = o->limit;
    return rc;
}

GF_EXPORT CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
    CUresult rc;
    const gf_ordinal *o;

    gf_shim_init();
    if (!gf_cu.cuDeviceTotalMem)
        return CUDA_ERROR_NOT_INITIALIZED;
    rc = gf_cu.cuDeviceTotalMem(bytes, dev);
    if (rc == CUDA_SUCCESS && bytes && (o = gf_ordinal_get(dev)))
        *bytes = clamp32(o->limit);
    return rc;
}

/* NVML names devices by handle and ignores CUDA_VISIBLE_DEVICES: match by
 * UUID against the fraction's devices, whatever the ordinals are. */
static const gf_ordinal *nvml_view(nvmlDevice_t device, gf_ordinal *out)
{
    char uuid[GF_UUID_MAX];
    const gf_config_device *cd;
    gf_error err;

    if (!gf_state.active)
        return gf_state.env_limit == 0 ? (out->dev = -1, out->limit = 0, out) : NULL;
    if (!gf_nvml.nvmlDeviceGetUUID ||
        gf_nvml.nvmlDeviceGetUUID(device, uuid, sizeof(uuid)) != NVML_SUCCESS)
        return NULL;
    cd = gf_config_find_device(&gf_state.cfg, uuid);
    out->dev = -1;
    out->limit = 0;
    if (cd) {
        out->dev = gf_ledger_device_index(&gf_state.ledger, uuid, cd->request, cd->limit, &err);
        out->limit = cd->limit < gf_state.env_limit ? cd->limit : gf_state.env_limit;
        if (out->dev < 0)
            out->limit = 0;
    }
    return out;
}

GF_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    gf_ordinal view;
    const gf_ordinal *o;
    nvmlReturn_t rc;

    gf_shim_init_nvml();
    if (!gf_nvml.nvmlDeviceGetMemoryInfo)
        return NVML_ERROR_UNINITIALIZED;
    rc = gf_nvml.nvmlDeviceGetMemoryInfo(device, memory);
    if (rc != NVML_SUCCESS || !memory || !(o = nvml_view(device, &view)))
        return rc;
    memory->free = fraction_free(o, memory->free);
    memory->total = o->limit;
    memory->used = memory->total - memory->free;
    return rc;
}

GF_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    gf_ordinal view;
    const gf_ordinal *o;
    nvmlReturn_t rc;

    gf_shim_init_nvml();
    if (!gf_nvml.nvmlDeviceGetMemoryInfo_v2)
        return NVML_ERROR_UNINITIALIZED;
    rc = gf_nvml.nvmlDeviceGetMemoryInfo_v2(device, memory);
    if (rc != NVML_SUCCESS || !memory || !(o = nvml_view(device, &view)))
        return rc;
    memory->free = fraction_free(o, memory->free);
    memory->total = o->limit;
    memory->reserved = 0;
    memory->used = memory->total - memory->free;
    return rc;
}
