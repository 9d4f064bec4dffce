/* SPDX-License-Identifier: Apache-2.0 */
/* gpusim functions' attributes and occupancy, and the JIT linker.
 *
 * No code runs on gpusim, so these are a model: every function has the same
 * attributes (1024 threads per block, 32 registers, no static shared memory),
 * occupancy is bounded by 2048 resident threads, 32 blocks and 228 KiB of
 * shared memory per SM, and linking yields a gpusim image
 * ("gpusim-module <bytes>", see cu_module.c) of the inputs' total size, which
 * cuModuleLoadData then charges like any module. */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "gs.h"
#include "gs_api.h"

#define GS_MAX_BLOCK 1024
#define GS_BLOCKS_PER_SM 32
#define GS_SMEM_PER_SM (228 * 1024)
#define GS_SMEM_PER_BLOCK (227 * 1024)

GS_API CUresult cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc)
{
    static const int values[] = {
        [CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK] = GS_MAX_BLOCK,
        [CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES] = 0,
        [CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES] = 0,
        [CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES] = 0,
        [CU_FUNC_ATTRIBUTE_NUM_REGS] = 32,
        [CU_FUNC_ATTRIBUTE_PTX_VERSION] = 90,
        [CU_FUNC_ATTRIBUTE_BINARY_VERSION] = 90,
        [CU_FUNC_ATTRIBUTE_CACHE_MODE_CA] = 0,
        [CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES] = 48 * 1024,
        [CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT] = -1,
    };
    GS_FAILPOINT("cuFuncGetAttribute");
    NEED_INIT();
    if (!pi || (unsigned)attrib >= sizeof values / sizeof values[0])
        return CUDA_ERROR_INVALID_VALUE;
    if (!gs_func_ok(hfunc))
        return CUDA_ERROR_INVALID_HANDLE;
    *pi = values[attrib];
    return CUDA_SUCCESS;
}

GS_API CUresult cuFuncSetCacheConfig(CUfunction hfunc, CUfunc_cache config)
{
    GS_FAILPOINT("cuFuncSetCacheConfig");
    NEED_INIT();
    if ((unsigned)config > CU_FUNC_CACHE_PREFER_EQUAL)
        return CUDA_ERROR_INVALID_VALUE;
    return gs_func_ok(hfunc) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/* resident blocks of blockSize threads with smem bytes of dynamic shared memory */
static int blocks_per_sm(int block, size_t smem)
{
    int warps = (block + 31) / 32, by_threads = 2048 / (warps * 32);
    int n = by_threads < GS_BLOCKS_PER_SM ? by_threads : GS_BLOCKS_PER_SM;
    if (smem > GS_SMEM_PER_BLOCK)
        return 0;
    if (smem && (int)(GS_SMEM_PER_SM / smem) < n)
        n = (int)(GS_SMEM_PER_SM / smem);
    return n;
}

static CUresult max_active(int *numBlocks, CUfunction func, int blockSize, size_t smem,
                           unsigned flags)
{
    NEED_INIT();
    if (!numBlocks || blockSize <= 0 || blockSize > GS_MAX_BLOCK || flags > 1)
        return CUDA_ERROR_INVALID_VALUE;
    if (!gs_func_ok(func))
        return CUDA_ERROR_INVALID_HANDLE;
    *numBlocks = blocks_per_sm(blockSize, smem);
    return CUDA_SUCCESS;
}

GS_API CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, CUfunction func,
                                                            int blockSize, size_t dynamicSMemSize)
{
    GS_FAILPOINT("cuOccupancyMaxActiveBlocksPerMultiprocessor");
    return max_active(numBlocks, func, blockSize, dynamicSMemSize, 0);
}

GS_API CUresult cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *numBlocks,
                                                                     CUfunction func, int blockSize,
                                                                     size_t dynamicSMemSize,
                                                                     unsigned int flags)
{
    GS_FAILPOINT("cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags");
    return max_active(numBlocks, func, blockSize, dynamicSMemSize, flags);
}

/* the block size (a multiple of 32, at most the limit) with the most resident threads */
static CUresult potential(int *minGrid, int *blockSize, CUfunction func, CUoccupancyB2DSize b2d,
                          size_t smem, int limit, unsigned flags)
{
    int best = 0, best_blocks = 0, top;
    NEED_INIT();
    if (!minGrid || !blockSize || limit < 0 || flags > 1)
        return CUDA_ERROR_INVALID_VALUE;
    if (!gs_func_ok(func))
        return CUDA_ERROR_INVALID_HANDLE;
    top = limit && limit < GS_MAX_BLOCK ? limit : GS_MAX_BLOCK;
    for (int bs = top / 32 * 32; bs >= 32; bs -= 32) {
        int n = blocks_per_sm(bs, b2d ? b2d(bs) : smem);
        if (n * bs > best_blocks * best)
            best = bs, best_blocks = n;
    }
    if (!best)
        return CUDA_ERROR_INVALID_VALUE; /* no block size fits its shared memory */
    *blockSize = best;
    *minGrid = best_blocks * GS_SM_COUNT;
    return CUDA_SUCCESS;
}

GS_API CUresult cuOccupancyMaxPotentialBlockSize(int *minGridSize, int *blockSize, CUfunction func,
                                                 CUoccupancyB2DSize blockSizeToDynamicSMemSize,
                                                 size_t dynamicSMemSize, int blockSizeLimit)
{
    GS_FAILPOINT("cuOccupancyMaxPotentialBlockSize");
    return potential(minGridSize, blockSize, func, blockSizeToDynamicSMemSize, dynamicSMemSize,
                     blockSizeLimit, 0);
}

GS_API CUresult cuOccupancyMaxPotentialBlockSizeWithFlags(
    int *minGridSize, int *blockSize, CUfunction func,
    CUoccupancyB2DSize blockSizeToDynamicSMemSize, size_t dynamicSMemSize, int blockSizeLimit,
    unsigned int flags)
{
    GS_FAILPOINT("cuOccupancyMaxPotentialBlockSizeWithFlags");
    return potential(minGridSize, blockSize, func, blockSizeToDynamicSMemSize, dynamicSMemSize,
                     blockSizeLimit, flags);
}

/* ---- the linker ------------------------------------------------------------------------ */
typedef struct gs_link {
    gs_obj h;
    bool alive;
    uint64_t bytes;  /* of every input */
    unsigned inputs; /* how many */
    char image[48];  /* what cuLinkComplete hands out, valid until cuLinkDestroy */
} gs_link;

static gs_link *link_of(CUlinkState s)
{
    gs_link *l = (gs_link *)(void *)s;
    return gs_obj_ok(l, GS_MAGIC_LINK) && l->alive ? l : NULL;
}

static bool options_ok(unsigned n, CUjit_option *options, void **values)
{
    return n == 0 || (options && values);
}

GS_API CUresult cuLinkCreate_v2(unsigned int numOptions, CUjit_option *options, void **optionValues,
                                CUlinkState *stateOut)
{
    gs_link *l;
    GS_FAILPOINT("cuLinkCreate_v2");
    NEED_INIT();
    if (!stateOut || !options_ok(numOptions, options, optionValues))
        return CUDA_ERROR_INVALID_VALUE;
    l = gs_obj_new(sizeof *l, GS_MAGIC_LINK);
    if (!l)
        return CUDA_ERROR_OUT_OF_MEMORY;
    l->alive = true;
    *stateOut = (CUlinkState)(void *)l;
    return CUDA_SUCCESS;
}

static CUresult link_add(CUlinkState state, CUjitInputType type, uint64_t size)
{
    gs_link *l = link_of(state);
    if (!l)
        return CUDA_ERROR_INVALID_HANDLE;
    if ((unsigned)type >= CU_JIT_NUM_INPUT_TYPES || size == 0 || l->bytes > UINT64_MAX - size)
        return CUDA_ERROR_INVALID_VALUE;
    l->bytes += size;
    l->inputs++;
    return CUDA_SUCCESS;
}

GS_API CUresult cuLinkAddData_v2(CUlinkState state, CUjitInputType type, void *data, size_t size,
                                 const char *name, unsigned int numOptions, CUjit_option *options,
                                 void **optionValues)
{
    GS_FAILPOINT("cuLinkAddData_v2");
    NEED_INIT();
    (void)name;
    if (!data || !options_ok(numOptions, options, optionValues))
        return CUDA_ERROR_INVALID_VALUE;
    return link_add(state, type, size);
}

GS_API CUresult cuLinkAddFile_v2(CUlinkState state, CUjitInputType type, const char *path,
                                 unsigned int numOptions, CUjit_option *options,
                                 void **optionValues)
{
    struct stat st;
    gf_cleanup_close int fd = -1;
    GS_FAILPOINT("cuLinkAddFile_v2");
    NEED_INIT();
    if (!path || !options_ok(numOptions, options, optionValues))
        return CUDA_ERROR_INVALID_VALUE;
    if (!link_of(state))
        return CUDA_ERROR_INVALID_HANDLE;
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return CUDA_ERROR_FILE_NOT_FOUND;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        return CUDA_ERROR_INVALID_SOURCE;
    return link_add(state, type, (uint64_t)st.st_size);
}

GS_API CUresult cuLinkComplete(CUlinkState state, void **cubinOut, size_t *sizeOut)
{
    gs_link *l;
    int n;
    GS_FAILPOINT("cuLinkComplete");
    NEED_INIT();
    if (!cubinOut || !sizeOut)
        return CUDA_ERROR_INVALID_VALUE;
    l = link_of(state);
    if (!l)
        return CUDA_ERROR_INVALID_HANDLE;
    if (l->inputs == 0)
        return CUDA_ERROR_INVALID_VALUE; /* nothing to link */
    n = snprintf(l->image, sizeof l->image, "gpusim-module %llu", (unsigned long long)l->bytes);
    *cubinOut = l->image;
    *sizeOut = (size_t)n + 1;
    return CUDA_SUCCESS;
}

GS_API CUresult cuLinkDestroy(CUlinkState state)
{
    gs_link *l;
    GS_FAILPOINT("cuLinkDestroy");
    NEED_INIT();
    l = link_of(state);
    if (!l)
        return CUDA_ERROR_INVALID_HANDLE;
    l->alive = false;
    return CUDA_SUCCESS;
}
