/* SPDX-License-Identifier: Apache-2.0 */
/* gpusim modules and libraries: loading code takes device memory, as on a
 * real driver. No code is simulated: an image is the text
 * "gpusim-module <bytes>" (file or memory), and loading it charges <bytes>
 * (rounded up to 2 MiB) to the current context's device until it is
 * unloaded or the process dies. Any other image is CUDA_ERROR_INVALID_IMAGE. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gs.h"
#include "gs_api.h"

#define GS_IMAGE_TAG "gpusim-module "

typedef struct gs_code {
    gs_obj h;
    int pdev;
    bool alive;
    uint64_t size;
} gs_code;

static CUresult image_bytes(const void *image, uint64_t *out)
{
    const char *s = image;
    char *end;
    unsigned long long v;
    if (!s || strncmp(s, GS_IMAGE_TAG, strlen(GS_IMAGE_TAG)) != 0)
        return CUDA_ERROR_INVALID_IMAGE;
    v = strtoull(s + strlen(GS_IMAGE_TAG), &end, 10);
    if (end == s + strlen(GS_IMAGE_TAG) || (*end && *end != '\n'))
        return CUDA_ERROR_INVALID_IMAGE;
    *out = gs_round_up(v, GS_GRAN);
    return CUDA_SUCCESS;
}

static CUresult code_load(void **out, const void *image, uint32_t magic)
{
    int p;
    uint64_t bytes;
    gs_code *m;
    CUresult rc = gs_need_init();
    if (rc)
        return rc;
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    rc = image_bytes(image, &bytes);
    if (rc)
        return rc;
    rc = gs_cur_pdev(&p, NULL);
    if (rc)
        return rc;
    if (gs_charge_retry(p, bytes) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    m = gs_obj_new(sizeof *m, magic);
    if (!m) {
        gs_uncharge(p, bytes);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    m->pdev = p;
    m->size = bytes;
    m->alive = true;
    *out = m;
    return CUDA_SUCCESS;
}

/* reads a small image file (NUL-terminated) */
static CUresult code_load_file(void **out, const char *path, uint32_t magic)
{
    char buf[256];
    ssize_t n;
    int fd;
    if (!path)
        return CUDA_ERROR_INVALID_VALUE;
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return CUDA_ERROR_NOT_FOUND;
    n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n < 0)
        return CUDA_ERROR_NOT_FOUND;
    buf[n] = 0;
    return code_load(out, buf, magic);
}

static CUresult code_unload(void *h, uint32_t magic)
{
    gs_code *m = h;
    CUresult rc = gs_need_init();
    if (rc)
        return rc;
    if (!gs_obj_ok(m, magic) || !m->alive)
        return CUDA_ERROR_INVALID_HANDLE;
    m->alive = false;
    gs_uncharge(m->pdev, m->size);
    return CUDA_SUCCESS;
}

GS_API CUresult cuModuleLoad(CUmodule *module, const char *fname)
{
    GS_FAILPOINT("cuModuleLoad");
    return code_load_file((void **)module, fname, GS_MAGIC_MODULE);
}

GS_API CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
    GS_FAILPOINT("cuModuleLoadData");
    return code_load((void **)module, image, GS_MAGIC_MODULE);
}

GS_API CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
                                   CUjit_option *options, void **optionValues)
{
    GS_FAILPOINT("cuModuleLoadDataEx");
    (void)numOptions, (void)options, (void)optionValues;
    return code_load((void **)module, image, GS_MAGIC_MODULE);
}

GS_API CUresult cuModuleLoadFatBinary(CUmodule *module, const void *fatCubin)
{
    GS_FAILPOINT("cuModuleLoadFatBinary");
    return code_load((void **)module, fatCubin, GS_MAGIC_MODULE);
}

GS_API CUresult cuModuleUnload(CUmodule hmod)
{
    GS_FAILPOINT("cuModuleUnload");
    return code_unload(hmod, GS_MAGIC_MODULE);
}

/* any name resolves to a function that cuLaunchKernel accepts */
GS_API CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
    gs_code *m = (gs_code *)hmod;
    GS_FAILPOINT("cuModuleGetFunction");
    if (!hfunc || !name)
        return CUDA_ERROR_INVALID_VALUE;
    if (!gs_obj_ok(m, GS_MAGIC_MODULE) || !m->alive)
        return CUDA_ERROR_INVALID_HANDLE;
    *hfunc = (CUfunction)(void *)m;
    return CUDA_SUCCESS;
}

GS_API CUresult cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions,
                                  void **jitOptionsValues, unsigned int numJitOptions,
                                  CUlibraryOption *libraryOptions, void **libraryOptionValues,
                                  unsigned int numLibraryOptions)
{
    GS_FAILPOINT("cuLibraryLoadData");
    (void)jitOptions, (void)jitOptionsValues, (void)numJitOptions;
    (void)libraryOptions, (void)libraryOptionValues, (void)numLibraryOptions;
    return code_load((void **)library, code, GS_MAGIC_LIBRARY);
}

GS_API CUresult cuLibraryLoadFromFile(CUlibrary *library, const char *fileName,
                                      CUjit_option *jitOptions, void **jitOptionsValues,
                                      unsigned int numJitOptions, CUlibraryOption *libraryOptions,
                                      void **libraryOptionValues, unsigned int numLibraryOptions)
{
    GS_FAILPOINT("cuLibraryLoadFromFile");
    (void)jitOptions, (void)jitOptionsValues, (void)numJitOptions;
    (void)libraryOptions, (void)libraryOptionValues, (void)numLibraryOptions;
    return code_load_file((void **)library, fileName, GS_MAGIC_LIBRARY);
}

GS_API CUresult cuLibraryUnload(CUlibrary library)
{
    GS_FAILPOINT("cuLibraryUnload");
    return code_unload(library, GS_MAGIC_LIBRARY);
}

bool gs_func_ok(CUfunction f)
{
    const gs_code *m = (const gs_code *)(void *)f;
    return gs_obj_ok(m, GS_MAGIC_MODULE) && m->alive;
}

/* gpusim images define no variables: every name is CUDA_ERROR_NOT_FOUND */
GS_API CUresult cuModuleGetGlobal_v2(CUdeviceptr *dptr, size_t *bytes, CUmodule hmod,
                                     const char *name)
{
    GS_FAILPOINT("cuModuleGetGlobal_v2");
    NEED_INIT();
    (void)dptr, (void)bytes;
    if (!name)
        return CUDA_ERROR_INVALID_VALUE;
    if (!gs_func_ok((CUfunction)(void *)hmod))
        return CUDA_ERROR_INVALID_HANDLE;
    return CUDA_ERROR_NOT_FOUND;
}
