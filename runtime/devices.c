/* SPDX-License-Identifier: Apache-2.0 */
/* The GPUs of a fractional container, as UUIDs with their amounts in bytes.
 * NVML (libnvidia-ml.so.1 through dlopen) knows the UUIDs and the totals. */
#include <stdio.h>
#include <string.h>

#include "gpus.h"
#include "runtime.h"

/* NVIDIA_VISIBLE_DEVICES values that do not list devices. */
static bool is_list(const char *v)
{
    return v && *v && strcmp(v, "all") != 0 && strcmp(v, "none") != 0 && strcmp(v, "void") != 0;
}

static int choose(const gf_gpu_list *all, const gf_pod_fraction *pf, const char *key,
                  const char *spec_visible, gf_gpu_list *out, gf_error *err)
{
    size_t want = pf->num_devices > 0 ? (size_t)pf->num_devices : 1;

    if (pf->spec.devices[0])
        return gf_gpus_select(all, pf->spec.devices, key, out, err);
    if (is_list(spec_visible))
        return gf_gpus_select(all, spec_visible, "NVIDIA_VISIBLE_DEVICES", out, err);
    if (want > all->n || want > GF_CONFIG_DEVICES_MAX)
        return gf_error_set(err, GF_ERANGE,
                            "the fraction asks for %zu GPUs; this node has %zu (and a fraction "
                            "at most %d)",
                            want, all->n, GF_CONFIG_DEVICES_MAX);
    out->n = 0; /* no assignment: the agent places it */
    return 0;
}

static void visible_list(const gf_gpu_list *sel, char *buf, size_t len)
{
    size_t off = 0;

    buf[0] = '\0';
    for (size_t i = 0; i < sel->n && off < len; i++) {
        int w = snprintf(buf + off, len - off, "%s%s", i ? "," : "", sel->gpus[i].uuid);
        off += w > 0 ? (size_t)w : 0;
    }
}

int rt_devices_resolve(const gf_pod_fraction *pf, const char *key, const char *spec_visible,
                       rt_devices *out, gf_error *err)
{
    gf_gpu_list all, sel;

    memset(out, 0, sizeof(*out));
    if (gf_gpus_probe(&all, err) < 0 || choose(&all, pf, key, spec_visible, &sel, err) < 0)
        return -1;
    if (sel.n == 0) {
        out->place = pf->num_devices > 0 ? pf->num_devices : 1;
        return 0;
    }
    for (size_t i = 0; i < sel.n; i++) {
        rt_device *d = &out->dev[out->n++];
        snprintf(d->uuid, sizeof(d->uuid), "%s", sel.gpus[i].uuid);
        if (gf_spec_resolve(&pf->spec, sel.gpus[i].total, &d->request, &d->limit, err) < 0)
            return gf_error_wrap(err, "GPU %s", d->uuid);
    }
    if (pf->spec.devices[0])
        snprintf(out->visible, sizeof(out->visible), "%s", pf->spec.devices);
    else
        visible_list(&sel, out->visible, sizeof(out->visible));
    return 0;
}
