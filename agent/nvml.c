/* SPDX-License-Identifier: Apache-2.0 */
/* The agent's NVML (gfhost's loader), loaded at run time so that gpufracd
 * builds and starts without the driver. One library per process: the handle
 * and the device handles are module state. */
#include "nvml.h"

#include <stdio.h>
#include <string.h>

#include "agent.h"
#include "nvml_load.h"

static gf_nvml nv;
static nvmlDevice_t nv_dev[GF_AGENT_GPUS_MAX];

static const char *nv_err(nvmlReturn_t r)
{
    const char *s = gf_nvml_errstr(&nv, r);
    return s ? s : "unknown NVML error";
}

static int load(gf_error *err)
{
    char why[256];

    if (nv.lib)
        return 0;
    switch (gf_nvml_load(&nv, GF_NVML_NEED_NAME | GF_NVML_NEED_PROCS, why, sizeof(why))) {
    case GF_NVML_LOADED: return 0;
    case GF_NVML_NO_LIBRARY:
        return gf_error_set(err, GF_ENOTFOUND,
                            "no NVIDIA GPU found: cannot load %s (%s); install the NVIDIA "
                            "driver or run gpufracd on a GPU node",
                            GF_NVML_LIB, why);
    case GF_NVML_TOO_OLD: break;
    }
    return gf_error_set(err, GF_ENOTFOUND,
                        "no NVIDIA GPU found: %s lacks the device and process queries "
                        "gpufracd needs (driver too old?)",
                        GF_NVML_LIB);
}

static int read_gpu(gf_agent_gpu *ng, unsigned int i, gf_error *err)
{
    const char *what;
    nvmlReturn_t r;

    memset(ng, 0, sizeof(*ng));
    if ((r = gf_nvml_device(&nv, i, true, &nv_dev[i], &ng->dev, &what)) != NVML_SUCCESS)
        return gf_error_set(err, GF_ESYS, "NVML: reading GPU %u: %s", i, nv_err(r));
    return 0;
}

int gf_agent_nvml_init(gf_agent *a, gf_error *err)
{
    unsigned int n = 0;
    nvmlReturn_t r;

    a->n_gpus = 0;
    if (load(err) < 0)
        return -1;
    if ((r = nv.init()) != NVML_SUCCESS)
        return gf_error_set(err, GF_ENOTFOUND, "no NVIDIA GPU found: NVML init failed: %s",
                            nv_err(r));
    if ((r = nv.count(&n)) != NVML_SUCCESS)
        return gf_error_set(err, GF_ENOTFOUND, "no NVIDIA GPU found: NVML device count: %s",
                            nv_err(r));
    if (n == 0)
        return gf_error_set(err, GF_ENOTFOUND, "no NVIDIA GPU found: NVML reports 0 devices");
    if (n > GF_AGENT_GPUS_MAX)
        return gf_error_set(err, GF_ERANGE, "NVML reports %u GPUs; gpufracd handles at most %d", n,
                            GF_AGENT_GPUS_MAX);
    for (unsigned int i = 0; i < n; i++)
        if (read_gpu(&a->gpus[i], i, err) < 0)
            return -1;
    a->n_gpus = (int)n;
    return 0;
}

int gf_agent_nvml_refresh(gf_agent *a, gf_error *err)
{
    for (int i = 0; i < a->n_gpus; i++) {
        nvmlMemory_t mem;
        nvmlReturn_t r = nv.memory(nv_dev[i], &mem);
        if (r != NVML_SUCCESS)
            return gf_error_set(err, GF_ESYS, "NVML: memory of GPU %d: %s", i, nv_err(r));
        a->gpus[i].dev.total = mem.total;
        a->gpus[i].dev.used = mem.used;
    }
    return 0;
}

int gf_agent_nvml_procs(gf_agent *a, int gpu, gf_proc_mem *out, int max, gf_error *err)
{
    gf_nvml_proc p[GF_NVML_PROCS_MAX];
    unsigned int n = 0;
    nvmlReturn_t r;
    int k = 0;

    if (gpu < 0 || gpu >= a->n_gpus || !nv.lib)
        return gf_error_set(err, GF_EINVAL, "NVML: no GPU %d", gpu);
    r = gf_nvml_procs(&nv, nv_dev[gpu], p, &n);
    if (r == NVML_ERROR_INSUFFICIENT_SIZE)
        return gf_error_set(err, GF_ENOSPACE, "NVML: GPU %d runs %u processes, more than %d", gpu,
                            n, GF_NVML_PROCS_MAX);
    if (r != NVML_SUCCESS)
        return gf_error_set(err, GF_ESYS, "NVML: processes of GPU %d: %s", gpu, nv_err(r));
    if ((int)n > max)
        return gf_error_set(err, GF_ENOSPACE, "NVML: GPU %d runs %u processes, more than %d", gpu,
                            n, max);
    for (unsigned int i = 0; i < n && k < max; i++)
        if (p[i].known) /* no figure to compare (e.g. no permission): passed over */
            out[k++] = (gf_proc_mem){.pid = p[i].pid, .used = p[i].used};
    return k;
}

int gf_gpu_index(const gf_agent *a, const char *uuid)
{
    for (int g = 0; g < a->n_gpus; g++)
        if (strcmp(a->gpus[g].dev.uuid, uuid) == 0)
            return g;
    return -1;
}
