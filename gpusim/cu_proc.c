/* SPDX-License-Identifier: Apache-2.0 */
/* gpusim entry-point lookup (cuGetProcAddress) and error
 * strings. The pointer returned for a name is the library's own export
 * (linked with -Bsymbolic-functions, so it equals dlsym(libcuda, name) even
 * when a preloaded library defines the same name). */
#include <string.h>

#include "gs.h"
#include "gs_api.h"

typedef struct proc_entry {
    const char *base;
    const char *name;
    int since;
    int ptsz;
    void *fn;
} proc_entry;

#define GS_ENTRY(n, b, s, p, params) {#b, #n, s, p, (void *)n},
static const proc_entry entries[] = {GS_CU_EXPORTS(GS_ENTRY) GS_CU_ALIASES(GS_ENTRY)};
#undef GS_ENTRY

enum { FOUND, NOT_FOUND, TOO_OLD };

static int lookup(const char *sym, int ver, cuuint64_t flags, void **pfn)
{
    const proc_entry *best = NULL, *best_ptsz = NULL;
    bool known = false;

    for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++) {
        const proc_entry *e = &entries[i];
        if (strcmp(e->base, sym) != 0)
            continue;
        known = true;
        if (e->since > ver)
            continue;
        if (e->ptsz && (!best_ptsz || e->since > best_ptsz->since))
            best_ptsz = e;
        if (!e->ptsz && (!best || e->since > best->since))
            best = e;
    }
    if ((flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && best_ptsz)
        best = best_ptsz;
    if (!best)
        return known ? TOO_OLD : NOT_FOUND;
    *pfn = best->fn;
    return FOUND;
}

static CUresult check_args(const char *symbol, void **pfn, int ver, cuuint64_t flags)
{
    if (!symbol || !pfn || ver <= 0 || ver > GS_DRIVER_VERSION || (flags & ~(cuuint64_t)3))
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

GS_API CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                    cuuint64_t flags, CUdriverProcAddressQueryResult *symbolStatus)
{
    CUresult rc;
    int r;
    GS_FAILPOINT("cuGetProcAddress_v2");
    rc = check_args(symbol, pfn, cudaVersion, flags);
    if (rc)
        return rc;
    *pfn = NULL;
    r = lookup(symbol, cudaVersion, flags, pfn);
    if (symbolStatus)
        *symbolStatus = r == FOUND     ? CU_GET_PROC_ADDRESS_SUCCESS
                        : r == TOO_OLD ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                                       : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_SUCCESS;
}

/* the CUDA 11.3-11.8 form: no status, a miss is CUDA_ERROR_NOT_FOUND */
GS_API CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    CUresult rc;
    GS_FAILPOINT("cuGetProcAddress");
    rc = check_args(symbol, pfn, cudaVersion, flags);
    if (rc)
        return rc;
    *pfn = NULL;
    return lookup(symbol, cudaVersion, flags, pfn) == FOUND ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

GS_API CUresult cuGetExportTable(const void **ppExportTable, const CUuuid *pExportTableId)
{
    GS_FAILPOINT("cuGetExportTable");
    if (!ppExportTable || !pExportTableId)
        return CUDA_ERROR_INVALID_VALUE;
    *ppExportTable = NULL;
    return CUDA_ERROR_NOT_SUPPORTED;
}

/* ---- errors ---------------------------------------------------------------- */
static const struct {
    int code;
    const char *name, *text;
} errors[] = {
    {0, "CUDA_SUCCESS", "no error"},
    {1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {4, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {200, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {201, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {217, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED",
     "peer access is not supported between these two devices"},
    {300, "CUDA_ERROR_INVALID_SOURCE", "device kernel image is invalid"},
    {301, "CUDA_ERROR_FILE_NOT_FOUND", "file not found"},
    {400, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {401, "CUDA_ERROR_ILLEGAL_STATE", "the operation cannot be performed in the present state"},
    {500, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {600, "CUDA_ERROR_NOT_READY", "device not ready"},
    {700, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {704, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED", "peer access is already enabled"},
    {709, "CUDA_ERROR_CONTEXT_IS_DESTROYED", "context is destroyed"},
    {712, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
     "part or all of the requested memory range is already mapped"},
    {713, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
     "pointer does not correspond to a registered memory region"},
    {800, "CUDA_ERROR_NOT_PERMITTED", "operation not permitted"},
    {801, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {999, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

static int error_index(CUresult e)
{
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].code == (int)e)
            return (int)i;
    return -1;
}

/* the error's description, or (name) its enum name; NULL for unknown codes */
static CUresult error_text(CUresult error, const char **pStr, bool name)
{
    int i;
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    i = error_index(error);
    *pStr = i < 0 ? NULL : name ? errors[i].name : errors[i].text;
    return i < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

GS_API CUresult cuGetErrorString(CUresult error, const char **pStr)
{
    GS_FAILPOINT("cuGetErrorString");
    return error_text(error, pStr, false);
}

GS_API CUresult cuGetErrorName(CUresult error, const char **pStr)
{
    GS_FAILPOINT("cuGetErrorName");
    return error_text(error, pStr, true);
}
