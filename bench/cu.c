/* SPDX-License-Identifier: Apache-2.0 */
#include "cu.h"

#include <dlfcn.h>
#include <stdio.h>

int bench_cu_fail(const bench_cu *cu, const char *what, CUresult r)
{
    const char *name = NULL;
    if (cu->cuGetErrorName)
        cu->cuGetErrorName(r, &name);
    fprintf(stderr, "gpufrac-bench worker: %s failed: %s (%d)\n", what, name ? name : "?", r);
    return -1;
}

int bench_cu_load(bench_cu *cu)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
        fprintf(stderr, "gpufrac-bench worker: cannot load libcuda.so.1: %s\n", dlerror());
        return -1;
    }
#define X(name, params)                                                           \
    *(void **)&cu->name = dlsym(h, #name);                                        \
    if (!cu->name) {                                                              \
        fprintf(stderr, "gpufrac-bench worker: libcuda.so.1 has no %s\n", #name); \
        return -1;                                                                \
    }
    BENCH_CU_REQUIRED(X)
#undef X
#define X(name, params) *(void **)&cu->name = dlsym(h, #name);
    BENCH_CU_OPTIONAL(X)
#undef X
    return 0;
}

int bench_cu_context(bench_cu *cu)
{
    CUresult r;
    if ((r = cu->cuInit(0)) != CUDA_SUCCESS)
        return bench_cu_fail(cu, "cuInit", r);
    if ((r = cu->cuDeviceGet(&cu->dev, 0)) != CUDA_SUCCESS)
        return bench_cu_fail(cu, "cuDeviceGet(0)", r);
    if ((r = cu->cuDevicePrimaryCtxRetain(&cu->ctx, cu->dev)) != CUDA_SUCCESS)
        return bench_cu_fail(cu, "cuDevicePrimaryCtxRetain", r);
    if ((r = cu->cuCtxSetCurrent(cu->ctx)) != CUDA_SUCCESS)
        return bench_cu_fail(cu, "cuCtxSetCurrent", r);
    return 0;
}
