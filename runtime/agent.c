/* SPDX-License-Identifier: Apache-2.0 */
/* The agent's verbs the wrapper uses: admit, attach, release (root only),
 * one SOCK_SEQPACKET datagram each way, with a time limit so a stuck agent
 * fails a create instead of hanging it. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent_client.h"
#include "runtime.h"
#include "statedir.h"

#define RT_AGENT_TIMEOUT_S 20
/* release is best effort: the agent reaps a fraction whose processes are gone
 * by itself, so a hung or restarting agent must not hold a delete (and
 * containerd, and the kubelet's pod deletion) for 20 s in the poststop hook
 * and 20 s more in delete */
#define RT_AGENT_RELEASE_TIMEOUT_S 2

static void sock_path(const rt_settings *s, char *out, size_t len)
{
    snprintf(out, len, "%s/" GF_STATE_AGENT_SOCK, s->state);
}

static int devices_value(const rt_devices *d, char *buf, size_t len, gf_error *err)
{
    size_t off = 0;

    for (size_t i = 0; i < d->n; i++) {
        int w = snprintf(buf + off, len - off, "%s%s/%llu/%llu", i ? "," : "", d->dev[i].uuid,
                         (unsigned long long)d->dev[i].request,
                         (unsigned long long)d->dev[i].limit);
        if (w < 0 || (size_t)w >= len - off)
            return gf_error_set(err, GF_ENOSPACE,
                                "%zu GPUs do not fit in one admit request (at most %zu bytes)",
                                d->n, len - 1);
        off += (size_t)w;
    }
    return 0;
}

static int copy_reply(const gf_msg *r, const char *key, char *out, size_t len, gf_error *err)
{
    const char *v = gf_msg_get(r, key);

    if (!v || !*v)
        return gf_error_set(err, GF_EINVAL, "gpufracd's admit reply lacks %s=", key);
    snprintf(out, len, "%s", strcmp(v, "-") == 0 ? "" : v);
    return 0;
}

/* An amount as the agent's placement reads it: bytes, or a portion. */
static void amount_value(const gf_amount *am, char *buf, size_t len)
{
    if (am->is_portion)
        snprintf(buf, len, "%.17g", am->portion);
    else
        snprintf(buf, len, "%llu", (unsigned long long)am->bytes);
}

static int placement(const gf_pod_fraction *pf, const rt_devices *d, gf_msg *req)
{
    char request[48], limit[48];

    amount_value(&pf->spec.request, request, sizeof(request));
    amount_value(&pf->spec.limit, limit, sizeof(limit));
    return gf_msg_add_u64(req, "place", (uint64_t)d->place) < 0 ||
                   gf_msg_add(req, "request", request) < 0 || gf_msg_add(req, "limit", limit) < 0
               ? -1
               : 0;
}

/* The devices the agent placed the fraction on: "uuid/request/limit,...". */
static int placed_devices(const gf_msg *r, rt_devices *d, gf_error *err)
{
    char buf[GF_PROTO_VAL_MAX], *save = NULL;
    const char *v = gf_msg_get(r, "devices");
    size_t off = 0;

    snprintf(buf, sizeof(buf), "%s", v ? v : "");
    d->n = 0;
    for (char *it = strtok_r(buf, ",", &save); it; it = strtok_r(NULL, ",", &save)) {
        rt_device *dev = &d->dev[d->n];
        unsigned long long rq, lm;
        char *slash = strchr(it, '/');
        if (d->n == GF_CONFIG_DEVICES_MAX || !slash || sscanf(slash, "/%llu/%llu", &rq, &lm) != 2)
            return gf_error_set(err, GF_EINVAL, "gpufracd's admit reply has devices=\"%s\"",
                                v ? v : "");
        *slash = '\0';
        snprintf(dev->uuid, sizeof(dev->uuid), "%s", it);
        dev->request = rq;
        dev->limit = lm;
        off += (size_t)snprintf(d->visible + off, sizeof(d->visible) - off, "%s%s", d->n ? "," : "",
                                dev->uuid);
        d->n++;
    }
    if (!d->n)
        return gf_error_set(err, GF_EINVAL, "gpufracd placed the fraction on no GPU");
    return 0;
}

/* What an ok to admit must say. */
static int admitted(const gf_msg *reply, rt_devices *d, rt_admitted *out, gf_error *err)
{
    if (d->place && placed_devices(reply, d, err) < 0)
        return -1;
    return copy_reply(reply, "config", out->config, sizeof(out->config), err) < 0 ||
                   copy_reply(reply, "ledger", out->ledger, sizeof(out->ledger), err) < 0 ||
                   copy_reply(reply, "socket", out->socket, sizeof(out->socket), err) < 0 ||
                   copy_reply(reply, "mps", out->mps, sizeof(out->mps), err) < 0
               ? -1
               : 0;
}

int rt_agent_admit(const rt_settings *s, const rt_identity *id, const gf_pod_fraction *pf,
                   rt_devices *d, rt_admitted *out, gf_error *err)
{
    char sock[GF_PATH_MAX + 16], devs[GF_PROTO_VAL_MAX];
    int percent = pf->spec.has_compute ? gf_compute_percent(pf->spec.compute) : 100;
    gf_msg req, reply;

    sock_path(s, sock, sizeof(sock));
    if (!d->place && devices_value(d, devs, sizeof(devs), err) < 0)
        return -1;
    gf_msg_init(&req, "admit");
    if (gf_msg_add(&req, "name", id->name) < 0 || gf_msg_add(&req, "ns", id->ns) < 0 ||
        gf_msg_add(&req, "pod", id->pod) < 0 || gf_msg_add(&req, "container", id->container) < 0 ||
        gf_msg_add(&req, "mode", gf_mode_name(pf->spec.mode)) < 0 ||
        gf_msg_add_u64(&req, "compute", (uint64_t)percent) < 0 ||
        (id->termlog && gf_msg_add(&req, "termlog", id->termlog) < 0) ||
        (d->place ? placement(pf, d, &req) : gf_msg_add(&req, "devices", devs)) < 0)
        return gf_error_set(err, GF_EINVAL,
                            "the pod's identity cannot be sent to gpufracd (a value with spaces "
                            "or control characters?)");
    if (gf_agent_request(sock, RT_AGENT_TIMEOUT_S, &req, &reply, err) < 0)
        return -1;
    if (admitted(&reply, d, out, err) < 0) {
        gf_error ignored;
        rt_agent_release(s, id->name, &ignored);
        return -1;
    }
    return 0;
}

int rt_agent_attach(const rt_settings *s, const char *name, long pid, gf_error *err)
{
    char sock[GF_PATH_MAX + 16];
    gf_msg req, reply;

    sock_path(s, sock, sizeof(sock));
    gf_msg_init(&req, "attach");
    gf_msg_add(&req, "name", name);
    gf_msg_add_u64(&req, "pid", (uint64_t)pid);
    return gf_agent_request(sock, RT_AGENT_TIMEOUT_S, &req, &reply, err);
}

int rt_agent_release(const rt_settings *s, const char *name, gf_error *err)
{
    char sock[GF_PATH_MAX + 16];
    gf_msg req, reply;

    sock_path(s, sock, sizeof(sock));
    gf_msg_init(&req, "release");
    gf_msg_add(&req, "name", name);
    gf_msg_add(&req, "remove", "1");
    return gf_agent_request(sock, RT_AGENT_RELEASE_TIMEOUT_S, &req, &reply, err);
}
