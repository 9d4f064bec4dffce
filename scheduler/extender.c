/* SPDX-License-Identifier: Apache-2.0 */
/* The extender's state. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "annotations.h"
#include "extender.h"

int gf_extender_init(gf_extender *x, gf_model *model, gf_policy policy, bool cdi,
                     const char *prefix, const gf_ext_kube *kube, gf_error *err)
{
    memset(x, 0, sizeof(*x));
    if (!prefix || !*prefix)
        prefix = GF_NVFRACTIONS_PREFIX;
    if (strlen(prefix) >= sizeof(x->prefix))
        return gf_error_set(err, GF_EINVAL, "annotation prefix \"%.40s...\" is too long", prefix);
    snprintf(x->prefix, sizeof(x->prefix), "%s", prefix);
    x->model = model;
    x->policy = policy;
    x->cdi = cdi;
    x->filter_best = true;
    x->kube = *kube;
    atomic_init(&x->synced, false);
    x->sync_wait_ms = GF_EXT_SYNC_WAIT_MS;
    return gf_ext_cache_init(&x->cache, err);
}

void gf_extender_fini(gf_extender *x)
{
    gf_ext_cache_fini(&x->cache);
}

bool gf_ext_await_synced_ms(gf_extender *x, unsigned wait_ms)
{
    struct timespec ts = {0, 10 * 1000 * 1000};

    for (unsigned waited = 0; !atomic_load(&x->synced); waited += 10) {
        if (waited >= wait_ms)
            return false;
        nanosleep(&ts, NULL);
    }
    return true;
}

bool gf_ext_await_synced(gf_extender *x)
{
    return gf_ext_await_synced_ms(x, x->sync_wait_ms);
}
