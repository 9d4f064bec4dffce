/* SPDX-License-Identifier: Apache-2.0 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "admit.h"
#include "cli.h"
#include "install_paths.h"
#include "quantity.h"
#include "run.h"
#include "statedir.h"

void run_plan_notices(const run_plan *p)
{
    char req[32], lim[32];
    bool burst = false;

    if (p->cfg.agent[0])
        return;
    for (size_t i = 0; i < p->cfg.n_devices; i++)
        if (p->cfg.devices[i].limit > p->cfg.devices[i].request) {
            gf_bytes_human(p->cfg.devices[i].request, req, sizeof(req));
            gf_bytes_human(p->cfg.devices[i].limit, lim, sizeof(lim));
            burst = true;
            break;
        }
    fprintf(stderr,
            "gpufrac run: note: no gpufracd serves %s, so nothing is guaranteed: the limit "
            "holds, but only fractions started in this state directory are counted (not other "
            "users', not containers')",
            p->state);
    if (burst)
        fprintf(stderr,
                "; --limit (%s) is a hard cap, since lending memory above --memory "
                "(%s) needs the agent",
                lim, req);
    fputs("\n", stderr);
    if (p->cfg.mode == GF_MODE_SM_SHARING)
        fprintf(stderr,
                "gpufrac run: note: --mode sm-sharing needs an NVIDIA MPS control daemon "
                "already running for GPU %s (gpufracd would manage MPS itself)\n",
                p->cfg.devices[0].uuid);
}

static int set_preload(const char *shim, gf_error *err)
{
    const char *old = getenv("LD_PRELOAD");
    char val[PATH_MAX * 4];

    if (strpbrk(shim, " :"))
        return gf_error_set(err, GF_EINVAL,
                            "shim path %s holds a space or colon, which LD_PRELOAD cannot carry",
                            shim);
    if (snprintf(val, sizeof(val), "%s%s%s", shim, old && *old ? ":" : "", old ? old : "") >=
        (int)sizeof(val))
        return gf_error_set(err, GF_EINVAL, "LD_PRELOAD too long");
    return setenv("LD_PRELOAD", val, 1) < 0 ? gf_error_sys(err, "setting LD_PRELOAD") : 0;
}

/* Appends "<fmt>" to buf with a comma between entries. */
static int list_add(char *buf, size_t len, const char *text)
{
    size_t off = strlen(buf);
    int n = snprintf(buf + off, len - off, "%s%s", off ? "," : "", text);
    return n < 0 || (size_t)n >= len - off ? -1 : 0;
}

static int set_devices(const run_plan *p, gf_error *err)
{
    char uuids[GF_CONFIG_DEVICES_MAX * GF_UUID_MAX] = "";
    char pinned[GF_CONFIG_DEVICES_MAX * 32] = "";
    char item[64];

    for (size_t i = 0; i < p->cfg.n_devices; i++) {
        snprintf(item, sizeof(item), "%zu=%lluM", i,
                 (unsigned long long)gf_bytes_to_mib_ceil(p->cfg.devices[i].limit));
        if (list_add(uuids, sizeof(uuids), p->cfg.devices[i].uuid) < 0 ||
            list_add(pinned, sizeof(pinned), item) < 0)
            return gf_error_set(err, GF_ENOSPACE, "device list too long");
    }
    if (p->set_visible && setenv("CUDA_VISIBLE_DEVICES", uuids, 1) < 0)
        return gf_error_sys(err, "setting CUDA_VISIBLE_DEVICES");
    if (p->cfg.mode != GF_MODE_SM_SHARING)
        return 0;
    if (setenv("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", pinned, 1) < 0)
        return gf_error_sys(err, "setting CUDA_MPS_PINNED_DEVICE_MEM_LIMIT");
    if (p->spec.has_compute) {
        snprintf(item, sizeof(item), "%d", p->cfg.compute_percent);
        if (setenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", item, 1) < 0)
            return gf_error_sys(err, "setting CUDA_MPS_ACTIVE_THREAD_PERCENTAGE");
    }
    return 0;
}

/* sm-sharing with the agent: it runs the GPU's MPS daemon; the client needs
 * only the pipe directory (one daemon per GPU, so one GPU per fraction). */
int run_env_mps(const run_plan *p, gf_error *err)
{
    gf_msg req, reply;
    const char *pipe;

    if (p->cfg.mode != GF_MODE_SM_SHARING || !p->cfg.agent[0])
        return 0;
    if (p->gpus.n != 1)
        return gf_error_set(err, GF_EINVAL,
                            "--mode sm-sharing: a fraction can use MPS on one GPU only (%zu "
                            "chosen); pick one with --devices",
                            p->gpus.n);
    gf_msg_init(&req, "mps");
    gf_msg_add(&req, "dev", p->gpus.gpus[0].uuid);
    if (gf_agent_wait_socket(p->cfg.agent, err) < 0 ||
        gf_agent_request_retry(p->cfg.agent, 0, GF_RUN_AGENT_RESTART_MS, &req, &reply, err) < 0)
        return -1;
    if (!(pipe = gf_msg_get(&reply, "pipe")) || setenv("CUDA_MPS_PIPE_DIRECTORY", pipe, 1) < 0)
        return gf_error_set(err, GF_ESTATE, "gpufracd gave no MPS pipe directory");
    return 0;
}

int run_env_apply(const run_plan *p, const char *fraction_dir, gf_error *err)
{
    char shim[PATH_MAX], config[GF_PATH_MAX + 16];

    if (gf_find_shim(shim, sizeof(shim), err) < 0 || set_preload(shim, err) < 0)
        return -1;
    snprintf(config, sizeof(config), "%s/" GF_FRAC_CONFIG, fraction_dir);
    if (setenv("GPUFRAC_CONFIG", config, 1) < 0)
        return gf_error_sys(err, "setting GPUFRAC_CONFIG");
    return set_devices(p, err);
}
