/* SPDX-License-Identifier: Apache-2.0 */
/* Entry points reached by lookup (cuGetProcAddress, dlsym) get the same hooks
 * as the direct symbols. The real lookup always runs first with the caller's
 * exact arguments (so its result code and symbolStatus are the driver's), and
 * the pointer it returns is swapped for the hook wrapping that very export. */
#include <string.h>

#include "shim.h"

typedef struct hook_row {
    const char *name;
    const char *base;
    size_t name_len, base_len; /* a lookup compares lengths before bytes */
    int since;
    int ptsz;
    void *hook;
    void **real; /* where init stored the driver's own pointer */
} hook_row;

static const hook_row cu_rows[] = {
#define CU_HOOK(name, base, since, ptsz, ret, params)    \
    {#name, #base, sizeof(#name) - 1, sizeof(#base) - 1, \
     since, ptsz,  (void *)name,      (void **)&gf_cu.name},
#include "hooks.def"
};

static const hook_row nvml_rows[] = {
#define NVML_HOOK(name, ret, params)                     \
    {#name, #name, sizeof(#name) - 1, sizeof(#name) - 1, \
     0,     0,     (void *)name,      (void **)&gf_nvml.name},
#include "hooks.def"
};

#define N_CU (sizeof(cu_rows) / sizeof(cu_rows[0]))
#define N_NVML (sizeof(nvml_rows) / sizeof(nvml_rows[0]))

GF_HIDDEN void *gf_hook_for_real(void *fn)
{
    if (!fn)
        return NULL;
    for (size_t i = 0; i < N_CU; i++)
        if (*cu_rows[i].real == fn)
            return cu_rows[i].hook;
    return NULL;
}

static bool row_is(const char *row, size_t row_len, const char *name, size_t len)
{
    return row_len == len && memcmp(row, name, len) == 0;
}

GF_HIDDEN void *gf_hook_for_name(const char *name, void ***real)
{
    size_t len = strlen(name);
    if (name[0] == 'c' && name[1] == 'u') {
        for (size_t i = 0; i < N_CU; i++)
            if (row_is(cu_rows[i].name, cu_rows[i].name_len, name, len)) {
                *real = cu_rows[i].real;
                return cu_rows[i].hook;
            }
    } else if (strncmp(name, "nvml", 4) == 0) {
        for (size_t i = 0; i < N_NVML; i++)
            if (row_is(nvml_rows[i].name, nvml_rows[i].name_len, name, len)) {
                *real = NULL; /* init_nvml_fn's handle is not kept */
                return nvml_rows[i].hook;
            }
    }
    return NULL;
}

/* Fallback when a driver hands out a pointer that is not one of its exports:
 * the newest hooked variant of `base` introduced at or before `version`,
 * per-thread-stream flavour when the flags ask for it and one exists. */
GF_HIDDEN void *gf_hook_for_version(const char *base, int version, cuuint64_t flags)
{
    int want_ptsz = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
    const hook_row *best = NULL;
    bool has_ptsz = false;
    size_t len = strlen(base);

    for (size_t i = 0; i < N_CU; i++)
        if (cu_rows[i].ptsz && row_is(cu_rows[i].base, cu_rows[i].base_len, base, len))
            has_ptsz = true;
    for (size_t i = 0; i < N_CU; i++) {
        const hook_row *r = &cu_rows[i];
        if (!row_is(r->base, r->base_len, base, len) || r->since > version)
            continue;
        if (r->ptsz != (want_ptsz && has_ptsz))
            continue;
        if (!best || r->since > best->since)
            best = r;
    }
    return best ? best->hook : NULL;
}

static void swap_in_hook(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
    void *hook;
    if (!pfn || !*pfn)
        return;
    hook = gf_hook_for_real(*pfn);
    if (!hook && (hook = gf_hook_for_version(symbol, version, flags)))
        gf_log(GF_LOG_DEBUG, "%s v%d: driver pointer is not an export; matched by version", symbol,
               version);
    if (hook)
        *pfn = hook;
}

GF_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
                                    cuuint64_t flags)
{
    CUresult rc;
    GF_HOOK_ENTER(cu, cuGetProcAddress);
    rc = gf_cu.cuGetProcAddress(symbol, pfn, cudaVersion, flags);
    if (rc == CUDA_SUCCESS && symbol)
        swap_in_hook(symbol, pfn, cudaVersion, flags);
    return rc;
}

GF_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                       cuuint64_t flags,
                                       CUdriverProcAddressQueryResult *symbolStatus)
{
    CUresult rc;
    GF_HOOK_ENTER(cu, cuGetProcAddress_v2);
    rc = gf_cu.cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, symbolStatus);
    if (rc == CUDA_SUCCESS && symbol)
        swap_in_hook(symbol, pfn, cudaVersion, flags);
    return rc;
}
