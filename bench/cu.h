/* SPDX-License-Identifier: Apache-2.0 */
/* The driver entry points the workers call, found at run time with
 * dlopen("libcuda.so.1") + dlsym: no link-time libcuda, and a preloaded shim
 * answers these lookups with its hooks exactly as it would for a framework. */
#ifndef GPUFRAC_BENCH_CU_H
#define GPUFRAC_BENCH_CU_H

#include "gpufrac/cuda_abi.h"

typedef struct CUmod_st *CUmodule;

#define BENCH_CU_REQUIRED(X)                                 \
    X(cuInit, (unsigned int flags))                          \
    X(cuDeviceGet, (CUdevice * d, int ordinal))              \
    X(cuDevicePrimaryCtxRetain, (CUcontext * c, CUdevice d)) \
    X(cuCtxSetCurrent, (CUcontext c))                        \
    X(cuMemAlloc_v2, (CUdeviceptr * p, size_t bytes))        \
    X(cuMemFree_v2, (CUdeviceptr p))

#define BENCH_CU_OPTIONAL(X)                                                                   \
    X(cuCtxSynchronize, (void))                                                                \
    X(cuDeviceGetName, (char *name, int len, CUdevice d))                                      \
    X(cuDeviceTotalMem_v2, (size_t * bytes, CUdevice d))                                       \
    X(cuDriverGetVersion, (int *v))                                                            \
    X(cuMemGetInfo_v2, (size_t * free, size_t * total))                                        \
    X(cuMemAllocAsync, (CUdeviceptr * p, size_t bytes, CUstream s))                            \
    X(cuMemAllocFromPoolAsync, (CUdeviceptr * p, size_t bytes, CUmemoryPool pool, CUstream s)) \
    X(cuMemFreeAsync, (CUdeviceptr p, CUstream s))                                             \
    X(cuDeviceGetMemPool, (CUmemoryPool * pool, CUdevice d))                                   \
    X(cuGetErrorName, (CUresult r, const char **s))                                            \
    X(cuModuleLoadData, (CUmodule * m, const void *image))                                     \
    X(cuModuleGetFunction, (CUfunction * f, CUmodule m, const char *name))                     \
    X(cuLaunchKernel, (CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,        \
                       unsigned int bx, unsigned int by, unsigned int bz, unsigned int shmem,  \
                       CUstream s, void **params, void **extra))

typedef struct bench_cu {
#define X(name, params) CUresult(*name) params;
    BENCH_CU_REQUIRED(X)
    BENCH_CU_OPTIONAL(X)
#undef X
    CUdevice dev;
    CUcontext ctx;
} bench_cu;

/* Loads the driver and resolves every entry point. Returns 0, or -1 after
 * printing why on stderr. */
int bench_cu_load(bench_cu *cu);
/* cuInit + device 0 + its primary context, made current. */
int bench_cu_context(bench_cu *cu);
/* Prints "gpufrac-bench worker: <what> failed: <error name>" and returns -1. */
int bench_cu_fail(const bench_cu *cu, const char *what, CUresult r);

#endif
