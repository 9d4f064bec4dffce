/* SPDX-License-Identifier: Apache-2.0 */
/* dlsym interposition. Frameworks dlopen libcuda/libnvidia-ml and look entry
 * points up by name, which a preloaded definition alone does not catch. The
 * exported dlsym is a few instructions of assembly (dlsym_x86_64.S): it asks
 * gf_dlsym_lookup, and for anything not hooked tail-jumps to the real dlsym
 * with the caller's return address intact, so RTLD_NEXT keeps its meaning. */
#include <dlfcn.h>
#include <string.h>

#include "shim.h"

GF_HIDDEN void *gf_dlsym_lookup(void *handle, const char *name)
{
    void *hook, **real = NULL;

    gf_find_real_dlsym();
    if (!name || handle == RTLD_NEXT || gf_shim_initialising())
        return NULL;
    hook = gf_hook_for_name(name, &real);
    if (!hook)
        return NULL;
    /* hook only what the handle really provides: a CUDA/NVML export. For the
     * driver's own handle, init asked that very question already. */
    if (atomic_load_explicit(&gf_init_done, memory_order_acquire) && handle == gf_state.cuda &&
        real) {
        if (!*real)
            return NULL;
    } else if (!gf_real_dlsym(handle, name)) {
        return NULL;
    }
    if (strncmp(name, "nvml", 4) == 0)
        gf_shim_init_nvml();
    else
        gf_shim_init();
    return hook;
}
