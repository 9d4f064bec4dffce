/* SPDX-License-Identifier: Apache-2.0 */
/* Placement of a container fraction that came without a device assignment
 * (no fraction-aware scheduler wrote gpus.devices): the agent
 * picks the GPUs itself, from its own view of the node (trusted: NVML's
 * totals and the guarantees of the fractions it admitted).
 *
 * Binpack: among the GPUs whose unguaranteed memory holds the request and
 * that run no fractions of the other compute mode, the fullest ones that
 * still fit, so whole GPUs stay free for large requests. Ties go to the
 * lower index. The request: place=<count> request=<amount> limit=<amount>,
 * an amount being bytes or a portion of each GPU ("0.25"). */
#include "place.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "quantity.h"

typedef struct candidate {
    int gpu;
    uint64_t request, limit, left; /* left: unguaranteed after placing */
} candidate;

static int amounts(const gf_msg *in, gf_amount *req, gf_amount *lim, uint64_t *count, gf_error *err)
{
    const char *r = gf_msg_get(in, "request"), *l = gf_msg_get(in, "limit");

    if (gf_msg_get_u64(in, "place", count, err) < 0 || *count == 0 ||
        *count > GF_CONFIG_DEVICES_MAX)
        return gf_error_set(err, GF_EINVAL, "place= must be a GPU count from 1 to %d",
                            GF_CONFIG_DEVICES_MAX);
    if (!r || gf_amount_parse(r, "request", req, err) < 0)
        return gf_error_set(err, GF_EINVAL, "place needs request= (bytes or a portion)");
    if (!l || gf_amount_parse(l, "limit", lim, err) < 0)
        return gf_error_set(err, GF_EINVAL, "place needs limit= (bytes or a portion)");
    return 0;
}

static void describe_ask(const gf_amount *a, char *buf, size_t len)
{
    if (a->is_portion)
        snprintf(buf, len, "%g of a GPU", a->portion);
    else
        gf_bytes_human(a->bytes, buf, len);
}

/* "GPU 0 (GPU-...): 1Gi not guaranteed, time-slicing; ..." */
static void describe_free(const gf_agent *a, char *buf, size_t len)
{
    size_t off = 0;

    buf[0] = '\0';
    for (int g = 0; g < a->n_gpus && off < len; g++) {
        const gf_agent_gpu *gpu = &a->gpus[g];
        char h[32];
        int w;

        gf_bytes_human(gpu->dev.total > gpu->guaranteed ? gpu->dev.total - gpu->guaranteed : 0, h,
                       sizeof(h));
        w = snprintf(buf + off, len - off, "%sGPU %d (%s): %s not guaranteed%s%s", g ? "; " : "",
                     gpu->dev.index, gpu->dev.uuid, h, gpu->n_fractions ? ", runs " : "",
                     gpu->n_fractions ? gf_mode_name(gpu->mode) : "");
        off += w > 0 ? (size_t)w : 0;
    }
    if (a->n_gpus == 0)
        snprintf(buf, len, "this node has no GPU");
}

int gf_place(gf_agent *a, const gf_msg *in, gf_fraction_config *cfg, gf_error *err)
{
    candidate c[GF_AGENT_GPUS_MAX];
    gf_amount req, lim;
    uint64_t count;
    int n = 0;

    if (amounts(in, &req, &lim, &count, err) < 0)
        return -1;
    for (int g = 0; g < a->n_gpus; g++) {
        const gf_agent_gpu *gpu = &a->gpus[g];
        uint64_t free = gpu->dev.total > gpu->guaranteed ? gpu->dev.total - gpu->guaranteed : 0;
        candidate k = {.gpu = g};
        gf_error ignored;

        if (gpu->n_fractions && gpu->mode != cfg->mode)
            continue; /* modes never share a GPU */
        if (gf_amount_resolve(&req, gpu->dev.total, "request", &k.request, &ignored) < 0 ||
            gf_amount_resolve(&lim, gpu->dev.total, "limit", &k.limit, &ignored) < 0 ||
            k.limit < k.request || k.request > free)
            continue;
        k.left = free - k.request;
        /* insertion by (left, index): the fullest fitting GPU first */
        int i = n++;
        while (i > 0 && c[i - 1].left > k.left)
            c[i] = c[i - 1], i--;
        c[i] = k;
    }
    if ((uint64_t)n < count) {
        char ask[48], freetext[GF_ERROR_MSG_MAX];
        describe_ask(&req, ask, sizeof(ask));
        describe_free(a, freetext, sizeof(freetext));
        return gf_error_set(err, GF_ESTATE,
                            "no GPU of this node fits the container: it asks for %llu GPU(s) "
                            "with %s guaranteed each (%s), %d fit; free: %s",
                            (unsigned long long)count, ask, gf_mode_name(cfg->mode), n, freetext);
    }
    cfg->n_devices = 0;
    for (uint64_t i = 0; i < count; i++) {
        gf_config_device *d = &cfg->devices[cfg->n_devices++];
        snprintf(d->uuid, sizeof(d->uuid), "%s", a->gpus[c[i].gpu].dev.uuid);
        d->request = c[i].request;
        d->limit = c[i].limit;
    }
    return 0;
}

void gf_place_reply(gf_msg *out, const gf_config_device *devices, size_t n_devices)
{
    char devs[GF_PROTO_VAL_MAX] = "";
    size_t off = 0;

    for (size_t i = 0; i < n_devices; i++) {
        int w = snprintf(devs + off, sizeof(devs) - off, "%s%s/%" PRIu64 "/%" PRIu64, i ? "," : "",
                         devices[i].uuid, devices[i].request, devices[i].limit);
        if (w < 0 || (size_t)w >= sizeof(devs) - off)
            return; /* no devices= at all: the runtime refuses a placed admit without it */
        off += (size_t)w;
    }
    gf_msg_add(out, "devices", devs);
}
