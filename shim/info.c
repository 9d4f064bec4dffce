/* SPDX-License-Identifier: Apache-2.0 */
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
    if (o && o->dev >= 0)
        gf_reconcile(ord, GF_RECONCILE_VIEW);
    return o;
}

/* Turns the driver's physical figures into the fraction's, in place. */
static void fraction_view(uint64_t *free, uint64_t *total)
{
    const gf_ordinal *o = current_view();
    if (!o)
        return;
    *free = fraction_free(o, *free);
    *total = o->limit;
}

GF_EXPORT CUresult cuMemGetInfo_v2(size_t *free, size_t *total)
{
    size_t pf = 0, pt = 0;
    uint64_t f, t;
    CUresult rc;

    GF_HOOK_ENTER(cu, cuMemGetInfo_v2);
    rc = gf_cu.cuMemGetInfo_v2(&pf, &pt);
    f = pf;
    t = pt;
    if (rc == CUDA_SUCCESS)
        fraction_view(&f, &t);
    if (free)
        *free = f;
    if (total)
        *total = t;
    return rc;
}

static unsigned int clamp32(uint64_t v)
{
    return v > UINT_MAX ? UINT_MAX : (unsigned int)v;
}

GF_EXPORT CUresult cuMemGetInfo(unsigned int *free, unsigned int *total)
{
    unsigned int pf = 0, pt = 0;
    uint64_t f, t;
    CUresult rc;

    GF_HOOK_ENTER(cu, cuMemGetInfo);
    rc = gf_cu.cuMemGetInfo(&pf, &pt);
    /* the legacy call saturates at 4 GiB: so does the physical free it gave us */
    f = pf == UINT_MAX ? UINT64_MAX : pf;
    t = pt;
    if (rc == CUDA_SUCCESS)
        fraction_view(&f, &t);
    if (free)
        *free = clamp32(f);
    if (total)
        *total = clamp32(t);
    return rc;
}

GF_EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    CUresult rc;
    const gf_ordinal *o;

    GF_HOOK_ENTER(cu, cuDeviceTotalMem_v2);
    rc = gf_cu.cuDeviceTotalMem_v2(bytes, dev);
    if (rc == CUDA_SUCCESS && bytes && (o = gf_ordinal_get(dev)))
        *bytes = o->limit;
    return rc;
}

GF_EXPORT CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
    CUresult rc;
    const gf_ordinal *o;

    GF_HOOK_ENTER(cu, cuDeviceTotalMem);
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

/* NVML's total/free/used for a fraction: the same numbers as CUDA's. */
static bool nvml_apply(nvmlDevice_t device, unsigned long long *total, unsigned long long *free,
                       unsigned long long *used)
{
    gf_ordinal view;
    const gf_ordinal *o = nvml_view(device, &view);
    if (!o)
        return false;
    *free = fraction_free(o, *free);
    *total = o->limit;
    *used = *total - *free;
    return true;
}

GF_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    nvmlReturn_t rc;

    GF_HOOK_ENTER(nvml, nvmlDeviceGetMemoryInfo);
    rc = gf_nvml.nvmlDeviceGetMemoryInfo(device, memory);
    if (rc == NVML_SUCCESS && memory)
        nvml_apply(device, &memory->total, &memory->free, &memory->used);
    return rc;
}

GF_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    nvmlReturn_t rc;

    GF_HOOK_ENTER(nvml, nvmlDeviceGetMemoryInfo_v2);
    rc = gf_nvml.nvmlDeviceGetMemoryInfo_v2(device, memory);
    if (rc == NVML_SUCCESS && memory &&
        nvml_apply(device, &memory->total, &memory->free, &memory->used))
        memory->reserved = 0;
    return rc;
}
