/* SPDX-License-Identifier: Apache-2.0 */
/* Every CUDA entry point gpusim exports, one line each:
 *   X(export, base name for cuGetProcAddress, CUDA version that introduced it,
 *     per-thread-default-stream variant, parameters)
 * Used for the prototypes and for the cuGetProcAddress table. */
#ifndef GPUSIM_GS_API_H
#define GPUSIM_GS_API_H

#include "gpufrac/cuda_abi.h"

/* the driver version gpusim is (the gpusim-cuda12 build is 12.8: it lacks
 * what 13.0 introduced, as clients written before 13.0 expect) */
#ifndef GS_DRIVER_VERSION
#define GS_DRIVER_VERSION 13000
#endif

#if GS_DRIVER_VERSION >= 13000
#define GS_CU_EXPORTS_13(X)                                                            \
    X(cuCtxGetDevice_v2, cuCtxGetDevice, 13000, 0, (CUdevice * device, CUcontext ctx)) \
    X(cuCtxSynchronize_v2, cuCtxSynchronize, 13000, 0, (CUcontext ctx))                \
    X(cuMemSetMemPool, cuMemSetMemPool, 13000, 0,                                      \
      (CUmemLocation * location, CUmemAllocationType type, CUmemoryPool pool))
#else
#define GS_CU_EXPORTS_13(X)
#endif

#define GS_CU_EXPORTS(X)                                                                           \
    X(cuInit, cuInit, 2000, 0, (unsigned int flags))                                               \
    X(cuDriverGetVersion, cuDriverGetVersion, 2020, 0, (int *version))                             \
    X(cuDeviceGet, cuDeviceGet, 2000, 0, (CUdevice * device, int ordinal))                         \
    X(cuDeviceGetCount, cuDeviceGetCount, 2000, 0, (int *count))                                   \
    X(cuDeviceGetName, cuDeviceGetName, 2000, 0, (char *name, int len, CUdevice dev))              \
    X(cuDeviceGetUuid, cuDeviceGetUuid, 9020, 0, (CUuuid * uuid, CUdevice dev))                    \
    X(cuDeviceGetUuid_v2, cuDeviceGetUuid, 11040, 0, (CUuuid * uuid, CUdevice dev))                \
    X(cuDeviceGetAttribute, cuDeviceGetAttribute, 2000, 0,                                         \
      (int *pi, CUdevice_attribute attrib, CUdevice dev))                                          \
    X(cuDeviceTotalMem_v2, cuDeviceTotalMem, 3020, 0, (size_t * bytes, CUdevice dev))              \
    X(cuDeviceTotalMem, cuDeviceTotalMem, 2000, 0, (unsigned int *bytes, CUdevice dev))            \
    X(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, 7000, 0,                                 \
      (CUcontext * pctx, CUdevice dev))                                                            \
    X(cuDevicePrimaryCtxRelease_v2, cuDevicePrimaryCtxRelease, 11000, 0, (CUdevice dev))           \
    X(cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease, 7000, 0, (CUdevice dev))               \
    X(cuDevicePrimaryCtxReset_v2, cuDevicePrimaryCtxReset, 11000, 0, (CUdevice dev))               \
    X(cuDevicePrimaryCtxReset, cuDevicePrimaryCtxReset, 7000, 0, (CUdevice dev))                   \
    X(cuDevicePrimaryCtxGetState, cuDevicePrimaryCtxGetState, 7000, 0,                             \
      (CUdevice dev, unsigned int *flags, int *active))                                            \
    X(cuCtxCreate, cuCtxCreate, 2000, 0, (CUcontext * pctx, unsigned int flags, CUdevice dev))     \
    X(cuCtxCreate_v2, cuCtxCreate, 3020, 0, (CUcontext * pctx, unsigned int flags, CUdevice dev))  \
    X(cuCtxCreate_v3, cuCtxCreate, 11040, 0,                                                       \
      (CUcontext * pctx, CUexecAffinityParam * params, int n, unsigned int flags, CUdevice dev))   \
    X(cuCtxCreate_v4, cuCtxCreate, 12050, 0,                                                       \
      (CUcontext * pctx, CUctxCreateParams * params, unsigned int flags, CUdevice dev))            \
    X(cuCtxDestroy, cuCtxDestroy, 2000, 0, (CUcontext ctx))                                        \
    X(cuCtxDestroy_v2, cuCtxDestroy, 4000, 0, (CUcontext ctx))                                     \
    X(cuCtxSetLimit, cuCtxSetLimit, 3010, 0, (CUlimit limit, size_t value))                        \
    X(cuCtxGetLimit, cuCtxGetLimit, 3010, 0, (size_t * pvalue, CUlimit limit))                     \
    X(cuModuleLoad, cuModuleLoad, 2000, 0, (CUmodule * module, const char *fname))                 \
    X(cuModuleLoadData, cuModuleLoadData, 2000, 0, (CUmodule * module, const void *image))         \
    X(cuModuleLoadDataEx, cuModuleLoadDataEx, 2010, 0,                                             \
      (CUmodule * module, const void *image, unsigned int numOptions, CUjit_option *options,       \
       void **optionValues))                                                                       \
    X(cuModuleLoadFatBinary, cuModuleLoadFatBinary, 2000, 0,                                       \
      (CUmodule * module, const void *fatCubin))                                                   \
    X(cuModuleUnload, cuModuleUnload, 2000, 0, (CUmodule hmod))                                    \
    X(cuModuleGetFunction, cuModuleGetFunction, 2000, 0,                                           \
      (CUfunction * hfunc, CUmodule hmod, const char *name))                                       \
    X(cuLibraryLoadData, cuLibraryLoadData, 12000, 0,                                              \
      (CUlibrary * library, const void *code, CUjit_option *jitOptions, void **jitOptionsValues,   \
       unsigned int numJitOptions, CUlibraryOption *libraryOptions, void **libraryOptionValues,    \
       unsigned int numLibraryOptions))                                                            \
    X(cuLibraryLoadFromFile, cuLibraryLoadFromFile, 12000, 0,                                      \
      (CUlibrary * library, const char *fileName, CUjit_option *jitOptions,                        \
       void **jitOptionsValues, unsigned int numJitOptions, CUlibraryOption *libraryOptions,       \
       void **libraryOptionValues, unsigned int numLibraryOptions))                                \
    X(cuLibraryUnload, cuLibraryUnload, 12000, 0, (CUlibrary library))                             \
    X(cuCtxSetCurrent, cuCtxSetCurrent, 4000, 0, (CUcontext ctx))                                  \
    X(cuCtxGetCurrent, cuCtxGetCurrent, 4000, 0, (CUcontext * pctx))                               \
    X(cuCtxPushCurrent_v2, cuCtxPushCurrent, 4000, 0, (CUcontext ctx))                             \
    X(cuCtxPopCurrent_v2, cuCtxPopCurrent, 4000, 0, (CUcontext * pctx))                            \
    X(cuCtxPushCurrent, cuCtxPushCurrent, 2000, 0, (CUcontext ctx))                                \
    X(cuCtxPopCurrent, cuCtxPopCurrent, 2000, 0, (CUcontext * pctx))                               \
    X(cuCtxGetDevice, cuCtxGetDevice, 2000, 0, (CUdevice * device))                                \
    X(cuCtxSynchronize, cuCtxSynchronize, 2000, 0, (void))                                         \
    GS_CU_EXPORTS_13(X)                                                                            \
    X(cuStreamCreate, cuStreamCreate, 2000, 0, (CUstream * phStream, unsigned int flags))          \
    X(cuStreamDestroy_v2, cuStreamDestroy, 4000, 0, (CUstream s))                                  \
    X(cuStreamSynchronize, cuStreamSynchronize, 2000, 0, (CUstream s))                             \
    X(cuStreamSynchronize_ptsz, cuStreamSynchronize, 7000, 1, (CUstream s))                        \
    X(cuStreamGetDevice, cuStreamGetDevice, 12080, 0, (CUstream s, CUdevice * device))             \
    X(cuGraphCreate, cuGraphCreate, 10000, 0, (CUgraph * phGraph, unsigned int flags))             \
    X(cuGraphDestroy, cuGraphDestroy, 10000, 0, (CUgraph hGraph))                                  \
    X(cuGraphAddMemAllocNode, cuGraphAddMemAllocNode, 11040, 0,                                    \
      (CUgraphNode * phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,                 \
       size_t numDependencies, CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams))                            \
    X(cuGraphAddMemFreeNode, cuGraphAddMemFreeNode, 11040, 0,                                      \
      (CUgraphNode * phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,                 \
       size_t numDependencies, CUdeviceptr dptr))                                                  \
    X(cuGraphInstantiateWithFlags, cuGraphInstantiateWithFlags, 11040, 0,                          \
      (CUgraphExec * phGraphExec, CUgraph hGraph, unsigned long long flags))                       \
    X(cuGraphLaunch, cuGraphLaunch, 10000, 0, (CUgraphExec hGraphExec, CUstream hStream))          \
    X(cuGraphLaunch_ptsz, cuGraphLaunch, 10000, 1, (CUgraphExec hGraphExec, CUstream hStream))     \
    X(cuGraphUpload, cuGraphUpload, 11010, 0, (CUgraphExec hGraphExec, CUstream hStream))          \
    X(cuGraphUpload_ptsz, cuGraphUpload, 11010, 1, (CUgraphExec hGraphExec, CUstream hStream))     \
    X(cuGraphExecDestroy, cuGraphExecDestroy, 10000, 0, (CUgraphExec hGraphExec))                  \
    X(cuDeviceGetGraphMemAttribute, cuDeviceGetGraphMemAttribute, 11040, 0,                        \
      (CUdevice device, CUgraphMem_attribute attr, void *value))                                   \
    X(cuDeviceSetGraphMemAttribute, cuDeviceSetGraphMemAttribute, 11040, 0,                        \
      (CUdevice device, CUgraphMem_attribute attr, void *value))                                   \
    X(cuDeviceGraphMemTrim, cuDeviceGraphMemTrim, 11040, 0, (CUdevice device))                     \
    X(cuLaunchKernel, cuLaunchKernel, 4000, 0,                                                     \
      (CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,           \
       unsigned int by, unsigned int bz, unsigned int sharedMemBytes, CUstream hStream,            \
       void **kernelParams, void **extra))                                                         \
    X(cuLaunchKernel_ptsz, cuLaunchKernel, 7000, 1,                                                \
      (CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,           \
       unsigned int by, unsigned int bz, unsigned int sharedMemBytes, CUstream hStream,            \
       void **kernelParams, void **extra))                                                         \
    X(cuMemAlloc_v2, cuMemAlloc, 3020, 0, (CUdeviceptr * dptr, size_t bytesize))                   \
    X(cuMemFree_v2, cuMemFree, 3020, 0, (CUdeviceptr dptr))                                        \
    X(cuMemAllocPitch_v2, cuMemAllocPitch, 3020, 0,                                                \
      (CUdeviceptr * dptr, size_t * pitch, size_t width, size_t height, unsigned int elemsize))    \
    X(cuMemAllocManaged, cuMemAllocManaged, 6000, 0,                                               \
      (CUdeviceptr * dptr, size_t bytesize, unsigned int flags))                                   \
    X(cuMemGetInfo_v2, cuMemGetInfo, 3020, 0, (size_t * free, size_t * total))                     \
    X(cuMemGetInfo, cuMemGetInfo, 2000, 0, (unsigned int *free, unsigned int *total))              \
    X(cuMemAlloc, cuMemAlloc, 2000, 0, (CUdeviceptr_v1 * dptr, unsigned int bytesize))             \
    X(cuMemFree, cuMemFree, 2000, 0, (CUdeviceptr_v1 dptr))                                        \
    X(cuMemAllocPitch, cuMemAllocPitch, 2000, 0,                                                   \
      (CUdeviceptr_v1 * dptr, unsigned int *pitch, unsigned int width, unsigned int height,        \
       unsigned int elemsize))                                                                     \
    X(cuMemAllocAsync, cuMemAllocAsync, 11020, 0,                                                  \
      (CUdeviceptr * dptr, size_t bytesize, CUstream hStream))                                     \
    X(cuMemAllocAsync_ptsz, cuMemAllocAsync, 11020, 1,                                             \
      (CUdeviceptr * dptr, size_t bytesize, CUstream hStream))                                     \
    X(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync, 11020, 0,                                  \
      (CUdeviceptr * dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream))                  \
    X(cuMemAllocFromPoolAsync_ptsz, cuMemAllocFromPoolAsync, 11020, 1,                             \
      (CUdeviceptr * dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream))                  \
    X(cuMemFreeAsync, cuMemFreeAsync, 11020, 0, (CUdeviceptr dptr, CUstream hStream))              \
    X(cuMemFreeAsync_ptsz, cuMemFreeAsync, 11020, 1, (CUdeviceptr dptr, CUstream hStream))         \
    X(cuDeviceGetDefaultMemPool, cuDeviceGetDefaultMemPool, 11020, 0,                              \
      (CUmemoryPool * pool, CUdevice dev))                                                         \
    X(cuDeviceGetMemPool, cuDeviceGetMemPool, 11020, 0, (CUmemoryPool * pool, CUdevice dev))       \
    X(cuDeviceSetMemPool, cuDeviceSetMemPool, 11020, 0, (CUdevice dev, CUmemoryPool pool))         \
    X(cuMemPoolCreate, cuMemPoolCreate, 11020, 0,                                                  \
      (CUmemoryPool * pool, const CUmemPoolProps *props))                                          \
    X(cuMemPoolDestroy, cuMemPoolDestroy, 11020, 0, (CUmemoryPool pool))                           \
    X(cuMemPoolTrimTo, cuMemPoolTrimTo, 11020, 0, (CUmemoryPool pool, size_t minBytesToKeep))      \
    X(cuMemPoolSetAttribute, cuMemPoolSetAttribute, 11020, 0,                                      \
      (CUmemoryPool pool, CUmemPool_attribute attr, void *value))                                  \
    X(cuMemPoolGetAttribute, cuMemPoolGetAttribute, 11020, 0,                                      \
      (CUmemoryPool pool, CUmemPool_attribute attr, void *value))                                  \
    X(cuMemCreate, cuMemCreate, 10020, 0,                                                          \
      (CUmemGenericAllocationHandle * handle, size_t size, const CUmemAllocationProp *prop,        \
       unsigned long long flags))                                                                  \
    X(cuMemRelease, cuMemRelease, 10020, 0, (CUmemGenericAllocationHandle handle))                 \
    X(cuMemGetAllocationGranularity, cuMemGetAllocationGranularity, 10020, 0,                      \
      (size_t * granularity, const CUmemAllocationProp *prop,                                      \
       CUmemAllocationGranularity_flags option))                                                   \
    X(cuMemAddressReserve, cuMemAddressReserve, 10020, 0,                                          \
      (CUdeviceptr * ptr, size_t size, size_t alignment, CUdeviceptr addr,                         \
       unsigned long long flags))                                                                  \
    X(cuMemAddressFree, cuMemAddressFree, 10020, 0, (CUdeviceptr ptr, size_t size))                \
    X(cuMemMap, cuMemMap, 10020, 0,                                                                \
      (CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,           \
       unsigned long long flags))                                                                  \
    X(cuMemUnmap, cuMemUnmap, 10020, 0, (CUdeviceptr ptr, size_t size))                            \
    X(cuMemSetAccess, cuMemSetAccess, 10020, 0,                                                    \
      (CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count))                   \
    X(cuArrayCreate_v2, cuArrayCreate, 3020, 0,                                                    \
      (CUarray * pHandle, const CUDA_ARRAY_DESCRIPTOR *desc))                                      \
    X(cuArray3DCreate_v2, cuArray3DCreate, 3020, 0,                                                \
      (CUarray * pHandle, const CUDA_ARRAY3D_DESCRIPTOR *desc))                                    \
    X(cuArrayCreate, cuArrayCreate, 2000, 0,                                                       \
      (CUarray * pHandle, const CUDA_ARRAY_DESCRIPTOR_v1 *desc))                                   \
    X(cuArray3DCreate, cuArray3DCreate, 2000, 0,                                                   \
      (CUarray * pHandle, const CUDA_ARRAY3D_DESCRIPTOR_v1 *desc))                                 \
    X(cuArrayDestroy, cuArrayDestroy, 2000, 0, (CUarray hArray))                                   \
    X(cuMipmappedArrayCreate, cuMipmappedArrayCreate, 5000, 0,                                     \
      (CUmipmappedArray * pHandle, const CUDA_ARRAY3D_DESCRIPTOR *desc, unsigned int levels))      \
    X(cuMipmappedArrayDestroy, cuMipmappedArrayDestroy, 5000, 0, (CUmipmappedArray h))             \
    X(cuArrayGetMemoryRequirements, cuArrayGetMemoryRequirements, 11060, 0,                        \
      (CUDA_ARRAY_MEMORY_REQUIREMENTS * memoryRequirements, CUarray array, CUdevice device))       \
    X(cuMipmappedArrayGetMemoryRequirements, cuMipmappedArrayGetMemoryRequirements, 11060, 0,      \
      (CUDA_ARRAY_MEMORY_REQUIREMENTS * memoryRequirements, CUmipmappedArray mipmap,               \
       CUdevice device))                                                                           \
    X(cuDeviceComputeCapability, cuDeviceComputeCapability, 2000, 0,                               \
      (int *major, int *minor, CUdevice dev))                                                      \
    X(cuDevicePrimaryCtxSetFlags_v2, cuDevicePrimaryCtxSetFlags, 11000, 0,                         \
      (CUdevice dev, unsigned int flags))                                                          \
    X(cuDevicePrimaryCtxSetFlags, cuDevicePrimaryCtxSetFlags, 7000, 0,                             \
      (CUdevice dev, unsigned int flags))                                                          \
    X(cuDeviceCanAccessPeer, cuDeviceCanAccessPeer, 4000, 0,                                       \
      (int *canAccessPeer, CUdevice dev, CUdevice peerDev))                                        \
    X(cuCtxEnablePeerAccess, cuCtxEnablePeerAccess, 4000, 0,                                       \
      (CUcontext peerContext, unsigned int Flags))                                                 \
    X(cuModuleGetGlobal_v2, cuModuleGetGlobal, 3020, 0,                                            \
      (CUdeviceptr * dptr, size_t * bytes, CUmodule hmod, const char *name))                       \
    X(cuFuncGetAttribute, cuFuncGetAttribute, 2020, 0,                                             \
      (int *pi, CUfunction_attribute attrib, CUfunction hfunc))                                    \
    X(cuFuncSetCacheConfig, cuFuncSetCacheConfig, 3000, 0,                                         \
      (CUfunction hfunc, CUfunc_cache config))                                                     \
    X(cuOccupancyMaxActiveBlocksPerMultiprocessor, cuOccupancyMaxActiveBlocksPerMultiprocessor,    \
      6050, 0, (int *numBlocks, CUfunction func, int blockSize, size_t dynamicSMemSize))           \
    X(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags,                                        \
      cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags, 7000, 0,                               \
      (int *numBlocks, CUfunction func, int blockSize, size_t dynamicSMemSize,                     \
       unsigned int flags))                                                                        \
    X(cuOccupancyMaxPotentialBlockSize, cuOccupancyMaxPotentialBlockSize, 6050, 0,                 \
      (int *minGridSize, int *blockSize, CUfunction func,                                          \
       CUoccupancyB2DSize blockSizeToDynamicSMemSize, size_t dynamicSMemSize, int blockSizeLimit)) \
    X(cuOccupancyMaxPotentialBlockSizeWithFlags, cuOccupancyMaxPotentialBlockSizeWithFlags, 7000,  \
      0,                                                                                           \
      (int *minGridSize, int *blockSize, CUfunction func,                                          \
       CUoccupancyB2DSize blockSizeToDynamicSMemSize, size_t dynamicSMemSize, int blockSizeLimit,  \
       unsigned int flags))                                                                        \
    X(cuLinkCreate_v2, cuLinkCreate, 6050, 0,                                                      \
      (unsigned int numOptions, CUjit_option *options, void **optionValues,                        \
       CUlinkState *stateOut))                                                                     \
    X(cuLinkAddData_v2, cuLinkAddData, 6050, 0,                                                    \
      (CUlinkState state, CUjitInputType type, void *data, size_t size, const char *name,          \
       unsigned int numOptions, CUjit_option *options, void **optionValues))                       \
    X(cuLinkAddFile_v2, cuLinkAddFile, 6050, 0,                                                    \
      (CUlinkState state, CUjitInputType type, const char *path, unsigned int numOptions,          \
       CUjit_option *options, void **optionValues))                                                \
    X(cuLinkComplete, cuLinkComplete, 5050, 0,                                                     \
      (CUlinkState state, void **cubinOut, size_t *sizeOut))                                       \
    X(cuLinkDestroy, cuLinkDestroy, 5050, 0, (CUlinkState state))                                  \
    X(cuLaunchCooperativeKernel, cuLaunchCooperativeKernel, 9000, 0,                               \
      (CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,           \
       unsigned int by, unsigned int bz, unsigned int sharedMemBytes, CUstream hStream,            \
       void **kernelParams))                                                                       \
    X(cuProfilerStart, cuProfilerStart, 4000, 0, (void))                                           \
    X(cuProfilerStop, cuProfilerStop, 4000, 0, (void))                                             \
    X(cuMemcpyHtoD_v2, cuMemcpyHtoD, 3020, 0,                                                      \
      (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount))                              \
    X(cuMemcpyDtoH_v2, cuMemcpyDtoH, 3020, 0,                                                      \
      (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount))                                    \
    X(cuMemcpyDtoD_v2, cuMemcpyDtoD, 3020, 0,                                                      \
      (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount))                            \
    X(cuMemcpyHtoDAsync_v2, cuMemcpyHtoDAsync, 3020, 0,                                            \
      (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount, CUstream hStream))            \
    X(cuMemcpyDtoHAsync_v2, cuMemcpyDtoHAsync, 3020, 0,                                            \
      (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream))                  \
    X(cuMemcpyDtoDAsync_v2, cuMemcpyDtoDAsync, 3020, 0,                                            \
      (CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount, CUstream hStream))          \
    X(cuMemsetD8_v2, cuMemsetD8, 3020, 0, (CUdeviceptr dstDevice, unsigned char uc, size_t N))     \
    X(cuMemsetD8Async, cuMemsetD8Async, 3020, 0,                                                   \
      (CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream))                       \
    X(cuMemHostAlloc, cuMemHostAlloc, 2020, 0, (void **pp, size_t bytesize, unsigned int Flags))   \
    X(cuMemFreeHost, cuMemFreeHost, 2000, 0, (void *p))                                            \
    X(cuMemHostRegister_v2, cuMemHostRegister, 6050, 0,                                            \
      (void *p, size_t bytesize, unsigned int Flags))                                              \
    X(cuMemHostUnregister, cuMemHostUnregister, 4000, 0, (void *p))                                \
    X(cuMemHostGetDevicePointer_v2, cuMemHostGetDevicePointer, 3020, 0,                            \
      (CUdeviceptr * pdptr, void *p, unsigned int Flags))                                          \
    X(cuMemHostGetFlags, cuMemHostGetFlags, 2030, 0, (unsigned int *pFlags, void *p))              \
    X(cuMemGetAddressRange_v2, cuMemGetAddressRange, 3020, 0,                                      \
      (CUdeviceptr * pbase, size_t * psize, CUdeviceptr dptr))                                     \
    X(cuPointerGetAttribute, cuPointerGetAttribute, 4000, 0,                                       \
      (void *data, CUpointer_attribute attribute, CUdeviceptr ptr))                                \
    X(cuIpcGetMemHandle, cuIpcGetMemHandle, 4010, 0, (CUipcMemHandle * pHandle, CUdeviceptr dptr)) \
    X(cuIpcOpenMemHandle_v2, cuIpcOpenMemHandle, 11000, 0,                                         \
      (CUdeviceptr * pdptr, CUipcMemHandle handle, unsigned int Flags))                            \
    X(cuIpcCloseMemHandle, cuIpcCloseMemHandle, 4010, 0, (CUdeviceptr dptr))                       \
    X(cuEventCreate, cuEventCreate, 2000, 0, (CUevent * phEvent, unsigned int Flags))              \
    X(cuEventDestroy_v2, cuEventDestroy, 4000, 0, (CUevent hEvent))                                \
    X(cuEventDestroy, cuEventDestroy, 2000, 0, (CUevent hEvent))                                   \
    X(cuEventRecord, cuEventRecord, 2000, 0, (CUevent hEvent, CUstream hStream))                   \
    X(cuEventQuery, cuEventQuery, 2000, 0, (CUevent hEvent))                                       \
    X(cuEventSynchronize, cuEventSynchronize, 2000, 0, (CUevent hEvent))                           \
    X(cuEventElapsedTime_v2, cuEventElapsedTime, 12080, 0,                                         \
      (float *pMilliseconds, CUevent hStart, CUevent hEnd))                                        \
    X(cuEventElapsedTime, cuEventElapsedTime, 2000, 0,                                             \
      (float *pMilliseconds, CUevent hStart, CUevent hEnd))                                        \
    X(cuStreamWaitEvent, cuStreamWaitEvent, 3020, 0,                                               \
      (CUstream hStream, CUevent hEvent, unsigned int Flags))                                      \
    X(cuStreamAddCallback, cuStreamAddCallback, 5000, 0,                                           \
      (CUstream hStream, CUstreamCallback callback, void *userData, unsigned int flags))           \
    X(cuGetErrorString, cuGetErrorString, 6000, 0, (CUresult error, const char **pStr))            \
    X(cuGetErrorName, cuGetErrorName, 6000, 0, (CUresult error, const char **pStr))                \
    X(cuGetExportTable, cuGetExportTable, 3000, 0,                                                 \
      (const void **ppExportTable, const CUuuid *pExportTableId))                                  \
    X(cuGetProcAddress, cuGetProcAddress, 11030, 0,                                                \
      (const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags))                         \
    X(cuGetProcAddress_v2, cuGetProcAddress, 12000, 0,                                             \
      (const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,                          \
       CUdriverProcAddressQueryResult *symbolStatus))

#ifndef GS_NO_PROTOTYPES /* tests/abi checks the list against cuda.h's own */
#define GS_PROTO(name, base, since, ptsz, params) CUresult name params;
GS_CU_EXPORTS(GS_PROTO)
#undef GS_PROTO
#endif

/* cuGetProcAddress("cuGraphInstantiate") from 12.0 on is the 3-argument form */
#define GS_CU_ALIASES(X) X(cuGraphInstantiateWithFlags, cuGraphInstantiate, 12000, 0, ())

#endif
