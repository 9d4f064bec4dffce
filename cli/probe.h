/* SPDX-License-Identifier: Apache-2.0 */
/* gpufrac-probe: the CUDA driver and NVML, loaded at run time (no link-time
 * dependency, so it runs on gpusim, the real driver, or under the shim). */
#ifndef GPUFRAC_CLI_PROBE_H
#define GPUFRAC_CLI_PROBE_H

#include "gpufrac/cuda_abi.h"
#include "gpufrac/nvml_abi.h"

typedef struct probe_cuda {
    void *lib;
    CUresult (*init)(unsigned int);
    CUresult (*device_get)(CUdevice *, int);
    CUresult (*total_mem)(size_t *, CUdevice);
    CUresult (*primary_retain)(CUcontext *, CUdevice);
    CUresult (*ctx_set)(CUcontext);
    CUresult (*ctx_create)(CUcontext *, unsigned int, CUdevice);
    CUresult (*mem_info)(size_t *, size_t *);
    CUresult (*alloc)(CUdeviceptr *, size_t);
    CUresult (*free)(CUdeviceptr);
    CUresult (*error_name)(CUresult, const char **);
    CUresult (*get_uuid)(CUuuid *, CUdevice);
} probe_cuda;

typedef struct probe_nvml {
    void *lib;
    nvmlReturn_t (*init)(void);
    nvmlReturn_t (*by_index)(unsigned int, nvmlDevice_t *);
    nvmlReturn_t (*by_uuid)(const char *, nvmlDevice_t *);
    nvmlReturn_t (*mem)(nvmlDevice_t, nvmlMemory_t *);
    const char *(*error_string)(nvmlReturn_t);
} probe_nvml;

/* Loads libcuda.so.1, initialises it and makes device's context current.
 * Prints the reason and returns -1 on failure. */
int probe_cuda_open(probe_cuda *cu, int device, CUdevice *dev);
const char *probe_cuda_error(const probe_cuda *cu, CUresult r);
/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", or "" when unknown. */
void probe_cuda_uuid(const probe_cuda *cu, CUdevice dev, char *buf, size_t len);

/* Loads NVML; returns -1 (with why) when it cannot. */
int probe_nvml_open(probe_nvml *nv, const char **why);

#endif
