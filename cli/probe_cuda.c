/* SPDX-License-Identifier: Apache-2.0 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "probe.h"

#define LOAD(lib, field, name) (*(void **)&(field) = dlsym(lib, name))

const char *probe_cuda_error(const probe_cuda *cu, CUresult r)
{
    static char buf[32];
    const char *name = NULL;

    if (cu->error_name && cu->error_name(r, &name) == CUDA_SUCCESS && name)
        return name;
    snprintf(buf, sizeof(buf), "CUresult %d", r);
    return buf;
}

static int load_cuda(probe_cuda *cu)
{
    memset(cu, 0, sizeof(*cu));
    cu->lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!cu->lib) {
        fprintf(stderr, "gpufrac-probe: cannot load libcuda.so.1: %s\n", dlerror());
        return -1;
    }
    LOAD(cu->lib, cu->init, "cuInit");
    LOAD(cu->lib, cu->device_get, "cuDeviceGet");
    LOAD(cu->lib, cu->total_mem, "cuDeviceTotalMem_v2");
    LOAD(cu->lib, cu->primary_retain, "cuDevicePrimaryCtxRetain");
    LOAD(cu->lib, cu->ctx_set, "cuCtxSetCurrent");
    LOAD(cu->lib, cu->ctx_create, "cuCtxCreate_v2");
    LOAD(cu->lib, cu->mem_info, "cuMemGetInfo_v2");
    LOAD(cu->lib, cu->alloc, "cuMemAlloc_v2");
    LOAD(cu->lib, cu->free, "cuMemFree_v2");
    LOAD(cu->lib, cu->error_name, "cuGetErrorName");
    if (!LOAD(cu->lib, cu->get_uuid, "cuDeviceGetUuid_v2"))
        LOAD(cu->lib, cu->get_uuid, "cuDeviceGetUuid");
    if (!cu->init || !cu->device_get || !cu->total_mem || !cu->mem_info || !cu->alloc ||
        !cu->free || !((cu->primary_retain && cu->ctx_set) || cu->ctx_create)) {
        fprintf(stderr, "gpufrac-probe: libcuda.so.1 lacks the entry points this probe uses\n");
        return -1;
    }
    return 0;
}

static int check(const probe_cuda *cu, CUresult r, const char *what)
{
    if (r == CUDA_SUCCESS)
        return 0;
    fprintf(stderr, "gpufrac-probe: %s: %s\n", what, probe_cuda_error(cu, r));
    return -1;
}

int probe_cuda_open(probe_cuda *cu, int device, CUdevice *dev)
{
    CUcontext ctx = NULL;

    if (load_cuda(cu) < 0 || check(cu, cu->init(0), "cuInit") < 0 ||
        check(cu, cu->device_get(dev, device), "cuDeviceGet") < 0)
        return -1;
    /* the primary context, as the CUDA runtime uses */
    if (cu->primary_retain && cu->ctx_set)
        return check(cu, cu->primary_retain(&ctx, *dev), "cuDevicePrimaryCtxRetain") < 0 ||
                       check(cu, cu->ctx_set(ctx), "cuCtxSetCurrent") < 0
                   ? -1
                   : 0;
    return check(cu, cu->ctx_create(&ctx, 0, *dev), "cuCtxCreate_v2");
}

void probe_cuda_uuid(const probe_cuda *cu, CUdevice dev, char *buf, size_t len)
{
    const unsigned char *b;
    CUuuid u;

    buf[0] = '\0';
    if (!cu->get_uuid || cu->get_uuid(&u, dev) != CUDA_SUCCESS)
        return;
    b = (const unsigned char *)u.bytes;
    snprintf(buf, len, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
             b[14], b[15]);
}

int probe_nvml_open(probe_nvml *nv, const char **why)
{
    memset(nv, 0, sizeof(*nv));
    nv->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    if (!nv->lib) {
        *why = "libnvidia-ml.so.1 could not be loaded";
        return -1;
    }
    if (!LOAD(nv->lib, nv->init, "nvmlInit_v2"))
        LOAD(nv->lib, nv->init, "nvmlInit");
    if (!LOAD(nv->lib, nv->by_index, "nvmlDeviceGetHandleByIndex_v2"))
        LOAD(nv->lib, nv->by_index, "nvmlDeviceGetHandleByIndex");
    LOAD(nv->lib, nv->by_uuid, "nvmlDeviceGetHandleByUUID");
    LOAD(nv->lib, nv->mem, "nvmlDeviceGetMemoryInfo");
    LOAD(nv->lib, nv->error_string, "nvmlErrorString");
    if (!nv->init || !nv->by_index || !nv->mem) {
        *why = "libnvidia-ml.so.1 lacks nvmlInit/nvmlDeviceGetHandleByIndex/"
               "nvmlDeviceGetMemoryInfo";
        return -1;
    }
    if (nv->init() != NVML_SUCCESS) {
        *why = "nvmlInit failed";
        return -1;
    }
    return 0;
}
