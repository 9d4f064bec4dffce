/* SPDX-License-Identifier: Apache-2.0 */
/* The agent's NVML, loaded at run time so that gpufracd builds and starts
 * without the driver. One library per process: the handle and the device
 * handles are module state. */
#include "nvml.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "agent.h"
#include "gpufrac/nvml_abi.h"

#define NVML_LIB "libnvidia-ml.so.1"
#define NVML_PROCS_MAX 1024 /* per GPU per query; more is an error, not a truncation */

typedef nvmlReturn_t (*procs_fn)(nvmlDevice_t, unsigned int *, void *);

static struct {
    void *lib;
    nvmlReturn_t (*init)(void);
    nvmlReturn_t (*count)(unsigned int *);
    nvmlReturn_t (*handle)(unsigned int, nvmlDevice_t *);
    nvmlReturn_t (*uuid)(nvmlDevice_t, char *, unsigned int);
    nvmlReturn_t (*name)(nvmlDevice_t, char *, unsigned int);
    nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t *);
    const char *(*errstr)(nvmlReturn_t);
    procs_fn procs[3]; /* _v3, _v2, v1; NULL where the library lacks it */
    nvmlDevice_t dev[GF_AGENT_GPUS_MAX];
} nv;

static const char *nv_err(nvmlReturn_t r)
{
    const char *s = nv.errstr ? nv.errstr(r) : NULL;
    return s ? s : "unknown NVML error";
}

static void *sym(const char *name, const char *fallback)
{
    void *p = dlsym(nv.lib, name);
    return p || !fallback ? p : dlsym(nv.lib, fallback);
}

static int load(gf_error *err)
{
    if (nv.lib)
        return 0;
    if (!(nv.lib = dlopen(NVML_LIB, RTLD_NOW | RTLD_LOCAL)))
        return gf_error_set(err, GF_ENOTFOUND,
                            "no NVIDIA GPU found: cannot load %s (%s); install the NVIDIA "
                            "driver or run gpufracd on a GPU node",
                            NVML_LIB, dlerror());
    *(void **)&nv.init = sym("nvmlInit_v2", "nvmlInit");
    *(void **)&nv.count = sym("nvmlDeviceGetCount_v2", "nvmlDeviceGetCount");
    *(void **)&nv.handle = sym("nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex");
    *(void **)&nv.uuid = sym("nvmlDeviceGetUUID", NULL);
    *(void **)&nv.name = sym("nvmlDeviceGetName", NULL);
    *(void **)&nv.memory = sym("nvmlDeviceGetMemoryInfo", NULL);
    *(void **)&nv.errstr = sym("nvmlErrorString", NULL);
    *(void **)&nv.procs[0] = sym("nvmlDeviceGetComputeRunningProcesses_v3", NULL);
    *(void **)&nv.procs[1] = sym("nvmlDeviceGetComputeRunningProcesses_v2", NULL);
    *(void **)&nv.procs[2] = sym("nvmlDeviceGetComputeRunningProcesses", NULL);
    if (nv.init && nv.count && nv.handle && nv.uuid && nv.name && nv.memory &&
        (nv.procs[0] || nv.procs[1] || nv.procs[2]))
        return 0;
    dlclose(nv.lib);
    nv.lib = NULL;
    return gf_error_set(err, GF_ENOTFOUND,
                        "no NVIDIA GPU found: %s lacks the device and process queries "
                        "gpufracd needs (driver too old?)",
                        NVML_LIB);
}

static int read_gpu(gf_node_gpu *ng, unsigned int i, gf_error *err)
{
    gf_gpu *g = &ng->dev;
    nvmlMemory_t mem;
    nvmlReturn_t r;

    memset(ng, 0, sizeof(*ng));
    g->index = (int)i;
    if ((r = nv.handle(i, &nv.dev[i])) != NVML_SUCCESS ||
        (r = nv.uuid(nv.dev[i], g->uuid, sizeof(g->uuid))) != NVML_SUCCESS ||
        (r = nv.name(nv.dev[i], g->name, sizeof(g->name))) != NVML_SUCCESS ||
        (r = nv.memory(nv.dev[i], &mem)) != NVML_SUCCESS)
        return gf_error_set(err, GF_ESYS, "NVML: reading GPU %u: %s", i, nv_err(r));
    g->total = mem.total;
    g->used = mem.used;
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
        return gf_error_set(err, GF_ERANGE, "NVML reports %u GPUs; gpufracd handles at most %d",
                            n, GF_AGENT_GPUS_MAX);
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
        nvmlReturn_t r = nv.memory(nv.dev[i], &mem);
        if (r != NVML_SUCCESS)
            return gf_error_set(err, GF_ESYS, "NVML: memory of GPU %d: %s", i, nv_err(r));
        a->gpus[i].dev.total = mem.total;
        a->gpus[i].dev.used = mem.used;
    }
    return 0;
}

typedef union proc_buf {
    nvmlProcessInfo_t v2[NVML_PROCS_MAX]; /* _v2 and _v3 share the element */
    nvmlProcessInfo_v1_t v1[NVML_PROCS_MAX];
} proc_buf;

/* One query with the INSUFFICIENT_SIZE protocol: the count grows between the
 * size answer and the next call only when processes start, so retry a few
 * times while the list still fits the buffer. */
static nvmlReturn_t query(procs_fn fn, nvmlDevice_t dev, proc_buf *b, unsigned int *n)
{
    nvmlReturn_t r = NVML_ERROR_INSUFFICIENT_SIZE;

    for (int tries = 0; tries < 3 && r == NVML_ERROR_INSUFFICIENT_SIZE; tries++) {
        *n = NVML_PROCS_MAX;
        r = fn(dev, n, b);
        if (r == NVML_ERROR_INSUFFICIENT_SIZE && *n > NVML_PROCS_MAX)
            break;
    }
    return r;
}

static int copy_procs(const proc_buf *b, unsigned int n, bool v1, gf_proc_mem *out, int max)
{
    int k = 0;

    for (unsigned int i = 0; i < n && k < max; i++) {
        unsigned int pid = v1 ? b->v1[i].pid : b->v2[i].pid;
        unsigned long long used = v1 ? b->v1[i].usedGpuMemory : b->v2[i].usedGpuMemory;
        if (used == NVML_VALUE_NOT_AVAILABLE)
            continue; /* no figure to compare (e.g. no permission) */
        out[k++] = (gf_proc_mem){.pid = (pid_t)pid, .used = used};
    }
    return k;
}

int gf_agent_nvml_procs(gf_agent *a, int gpu, gf_proc_mem *out, int max, gf_error *err)
{
    proc_buf b;
    unsigned int n = 0;
    nvmlReturn_t r = NVML_ERROR_FUNCTION_NOT_FOUND;
    int v;

    if (gpu < 0 || gpu >= a->n_gpus || !nv.lib)
        return gf_error_set(err, GF_EINVAL, "NVML: no GPU %d", gpu);
    for (v = 0; v < 3; v++) {
        if (!nv.procs[v])
            continue;
        r = query(nv.procs[v], nv.dev[gpu], &b, &n);
        if (r != NVML_ERROR_FUNCTION_NOT_FOUND && r != NVML_ERROR_NOT_SUPPORTED)
            break;
    }
    if (r == NVML_ERROR_INSUFFICIENT_SIZE)
        return gf_error_set(err, GF_ENOSPACE, "NVML: GPU %d runs %u processes, more than %d",
                            gpu, n, NVML_PROCS_MAX);
    if (r != NVML_SUCCESS)
        return gf_error_set(err, GF_ESYS, "NVML: processes of GPU %d: %s", gpu, nv_err(r));
    if ((int)n > max)
        return gf_error_set(err, GF_ENOSPACE, "NVML: GPU %d runs %u processes, more than %d",
                            gpu, n, max);
    return copy_procs(&b, n, v == 2, out, max);
}

int gf_gpu_index(const gf_agent *a, const char *uuid)
{
    for (int g = 0; g < a->n_gpus; g++)
        if (strcmp(a->gpus[g].dev.uuid, uuid) == 0)
            return g;
    return -1;
}
