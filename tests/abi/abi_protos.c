/* SPDX-License-Identifier: Apache-2.0 */
/* Compiled against the CUDA toolkit's cuda.h (never against ours): every
 * prototype in shim/hooks.def must be exactly the toolkit's. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#define CU_HOOK(name, base, since, ptsz, ret, params)                              \
    _Static_assert(__builtin_types_compatible_p(__typeof__(&name), ret(*) params), \
                   "hooks.def prototype of " #name " differs from cuda.h");
#include "hooks.def"

int main(void)
{
    return 0;
}
