/* SPDX-License-Identifier: Apache-2.0 */
/* Compiled against the CUDA toolkit's cuda.h (never against ours): every
 * prototype in shim/hooks.def and gpusim/gs_api.h must be exactly the toolkit's. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <cudaProfiler.h>

#define CU_HOOK(name, base, since, ptsz, ret, params)                              \
    _Static_assert(__builtin_types_compatible_p(__typeof__(&name), ret(*) params), \
                   "hooks.def prototype of " #name " differs from cuda.h");
#include "hooks.def"

/* and every export of gpusim, the driver the tests run on, is the toolkit's */
#define GPUFRAC_CUDA_ABI_H /* the toolkit's types stand in for ours */
#define GS_NO_PROTOTYPES
#include "gs_api.h"
#define X(name, base, since, ptsz, params)                                              \
    _Static_assert(__builtin_types_compatible_p(__typeof__(&name), CUresult(*) params), \
                   "gpusim prototype of " #name " differs from cuda.h");
GS_CU_EXPORTS(X)
#undef X

int main(void)
{
    return 0;
}
