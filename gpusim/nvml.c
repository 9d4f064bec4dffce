/* SPDX-License-Identifier: Apache-2.0 */
/* gpusim NVML (libnvidia-ml.so.1): the same devices and host-wide memory
 * figures as the CUDA side, read from the shared state. Like the real NVML
 * it ignores CUDA_VISIBLE_DEVICES and shows every device. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpufrac/nvml_abi.h"
#include "gs.h"

#define NV_API GS_API nvmlReturn_t
#define NV_GPU_INSTANCE_NONE 0xFFFFFFFFU

NV_API nvmlInit(void);
NV_API nvmlInit_v2(void);
NV_API nvmlInitWithFlags(unsigned int flags);
NV_API nvmlShutdown(void);
GS_API const char *nvmlErrorString(nvmlReturn_t result);
NV_API nvmlSystemGetDriverVersion(char *version, unsigned int length);
NV_API nvmlSystemGetCudaDriverVersion(int *v);
NV_API nvmlSystemGetCudaDriverVersion_v2(int *v);
NV_API nvmlDeviceGetCount(unsigned int *count);
NV_API nvmlDeviceGetCount_v2(unsigned int *count);
NV_API nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device);
NV_API nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device);
NV_API nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device);
NV_API nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length);
NV_API nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length);
NV_API nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index);
NV_API nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory);
NV_API nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory);
NV_API nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int *infoCount,
                                            nvmlProcessInfo_v1_t *infos);
NV_API nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int *infoCount,
                                               nvmlProcessInfo_t *infos);
NV_API nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
                                               nvmlProcessInfo_t *infos);

static _Atomic int refs;
static struct nvml_dev {
    int idx;
} devs[GS_MAX_DEV];

static nvmlReturn_t init(void)
{
    if (gs_boot() != 0)
        return NVML_ERROR_UNKNOWN;
    for (int i = 0; i < GS_MAX_DEV; i++)
        devs[i].idx = i;
    atomic_fetch_add(&refs, 1);
    return NVML_SUCCESS;
}

NV_API nvmlInit(void)
{
    GS_FAILPOINT("nvmlInit");
    return init();
}

NV_API nvmlInit_v2(void)
{
    GS_FAILPOINT("nvmlInit_v2");
    return init();
}

NV_API nvmlInitWithFlags(unsigned int flags)
{
    GS_FAILPOINT("nvmlInitWithFlags");
    (void)flags;
    return init();
}

NV_API nvmlShutdown(void)
{
    int r = atomic_load(&refs);
    GS_FAILPOINT("nvmlShutdown");
    do {
        if (r <= 0)
            return NVML_ERROR_UNINITIALIZED;
    } while (!atomic_compare_exchange_weak(&refs, &r, r - 1));
    return NVML_SUCCESS;
}

GS_API const char *nvmlErrorString(nvmlReturn_t result)
{
    switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument Version Mismatch";
    default: return "Unknown Error";
    }
}

#define NEED_NVML()                          \
    do {                                     \
        if (atomic_load(&refs) <= 0)         \
            return NVML_ERROR_UNINITIALIZED; \
    } while (0)

static int dev_index(nvmlDevice_t d)
{
    struct nvml_dev *p = (struct nvml_dev *)d;
    if (p < devs || p >= devs + gs.ndev)
        return -1;
    return p->idx;
}

#define DEV(d, i)                               \
    do {                                        \
        NEED_NVML();                            \
        if ((i = dev_index(d)) < 0)             \
            return NVML_ERROR_INVALID_ARGUMENT; \
    } while (0)

static nvmlReturn_t copy_str(char *dst, unsigned int len, const char *src)
{
    if (!dst)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(src) + 1 > len)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(dst, src, strlen(src) + 1);
    return NVML_SUCCESS;
}

NV_API nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    GS_FAILPOINT("nvmlSystemGetDriverVersion");
    NEED_NVML();
    return copy_str(version, length, "580.00-gpusim");
}

NV_API nvmlSystemGetCudaDriverVersion(int *v)
{
    GS_FAILPOINT("nvmlSystemGetCudaDriverVersion");
    NEED_NVML();
    if (!v)
        return NVML_ERROR_INVALID_ARGUMENT;
    *v = GS_DRIVER_VERSION;
    return NVML_SUCCESS;
}

NV_API nvmlSystemGetCudaDriverVersion_v2(int *v)
{
    return nvmlSystemGetCudaDriverVersion(v);
}

static nvmlReturn_t get_count(unsigned int *count)
{
    NEED_NVML();
    if (!count)
        return NVML_ERROR_INVALID_ARGUMENT;
    *count = (unsigned int)gs.ndev;
    return NVML_SUCCESS;
}

NV_API nvmlDeviceGetCount(unsigned int *count)
{
    GS_FAILPOINT("nvmlDeviceGetCount");
    return get_count(count);
}

NV_API nvmlDeviceGetCount_v2(unsigned int *count)
{
    GS_FAILPOINT("nvmlDeviceGetCount_v2");
    return get_count(count);
}

static nvmlReturn_t by_index(unsigned int index, nvmlDevice_t *device)
{
    NEED_NVML();
    if (!device || index >= (unsigned int)gs.ndev)
        return NVML_ERROR_INVALID_ARGUMENT;
    *device = (nvmlDevice_t)&devs[index];
    return NVML_SUCCESS;
}

NV_API nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device)
{
    GS_FAILPOINT("nvmlDeviceGetHandleByIndex");
    return by_index(index, device);
}

NV_API nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    GS_FAILPOINT("nvmlDeviceGetHandleByIndex_v2");
    return by_index(index, device);
}

NV_API nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)
{
    GS_FAILPOINT("nvmlDeviceGetHandleByUUID");
    NEED_NVML();
    if (!uuid || !device)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < gs.ndev; i++) {
        if (strcmp(gs.dev[i].uuid_str, uuid) == 0) {
            *device = (nvmlDevice_t)&devs[i];
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

NV_API nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
    int i;
    GS_FAILPOINT("nvmlDeviceGetUUID");
    DEV(device, i);
    return copy_str(uuid, length, gs.dev[i].uuid_str);
}

NV_API nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
    int i;
    GS_FAILPOINT("nvmlDeviceGetName");
    DEV(device, i);
    return copy_str(name, length, gs.dev[i].name);
}

NV_API nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)
{
    int i;
    GS_FAILPOINT("nvmlDeviceGetIndex");
    DEV(device, i);
    if (!index)
        return NVML_ERROR_INVALID_ARGUMENT;
    *index = (unsigned int)i;
    return NVML_SUCCESS;
}

/* device i's total, used (at most total) and free (avail) bytes */
static void mem_counts(int i, unsigned long long *total, unsigned long long *used,
                       unsigned long long *avail)
{
    uint64_t u = gs_used(i);
    *total = gs.dev[i].size;
    *used = u > *total ? *total : u;
    *avail = *total - *used;
}

NV_API nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    int i;
    GS_FAILPOINT("nvmlDeviceGetMemoryInfo");
    DEV(device, i);
    if (!memory)
        return NVML_ERROR_INVALID_ARGUMENT;
    mem_counts(i, &memory->total, &memory->used, &memory->free);
    return NVML_SUCCESS;
}

/* reserved is 0: total = used + free, as with the v1 call */
NV_API nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    int i;
    GS_FAILPOINT("nvmlDeviceGetMemoryInfo_v2");
    DEV(device, i);
    if (!memory)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (memory->version != nvmlMemory_v2)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    mem_counts(i, &memory->total, &memory->used, &memory->free);
    memory->reserved = 0;
    return NVML_SUCCESS;
}

/* processes with memory on device i; *infoCount protocol as NVML's */
static nvmlReturn_t processes(int i, unsigned int *count, void *infos, int ver)
{
    unsigned *pids = malloc(GS_MAX_SLOTS * sizeof *pids);
    uint64_t *used = malloc(GS_MAX_SLOTS * sizeof *used);
    unsigned n;
    nvmlReturn_t rc = NVML_SUCCESS;

    if (!pids || !used) {
        rc = NVML_ERROR_UNKNOWN;
        goto out;
    }
    n = gs_processes(i, pids, used, GS_MAX_SLOTS);
    if (n > *count || (n && !infos)) {
        *count = n;
        rc = NVML_ERROR_INSUFFICIENT_SIZE;
        goto out;
    }
    for (unsigned k = 0; k < n; k++) {
        if (ver == 1)
            ((nvmlProcessInfo_v1_t *)infos)[k] = (nvmlProcessInfo_v1_t){.pid = pids[k],
                                                                        .usedGpuMemory = used[k]};
        else
            ((nvmlProcessInfo_t *)infos)[k] =
                (nvmlProcessInfo_t){.pid = pids[k],
                                    .usedGpuMemory = used[k],
                                    .gpuInstanceId = NV_GPU_INSTANCE_NONE,
                                    .computeInstanceId = NV_GPU_INSTANCE_NONE};
    }
    *count = n;
out:
    free(pids);
    free(used);
    return rc;
}

/* the device and count checks the three versions share */
static nvmlReturn_t running_processes(nvmlDevice_t device, unsigned int *infoCount, void *infos,
                                      int ver)
{
    int i;
    DEV(device, i);
    if (!infoCount)
        return NVML_ERROR_INVALID_ARGUMENT;
    return processes(i, infoCount, infos, ver);
}

NV_API nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int *infoCount,
                                            nvmlProcessInfo_v1_t *infos)
{
    GS_FAILPOINT("nvmlDeviceGetComputeRunningProcesses");
    return running_processes(device, infoCount, infos, 1);
}

NV_API nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int *infoCount,
                                               nvmlProcessInfo_t *infos)
{
    GS_FAILPOINT("nvmlDeviceGetComputeRunningProcesses_v2");
    return running_processes(device, infoCount, infos, 2);
}

NV_API nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
                                               nvmlProcessInfo_t *infos)
{
    GS_FAILPOINT("nvmlDeviceGetComputeRunningProcesses_v3");
    return running_processes(device, infoCount, infos, 3);
}
