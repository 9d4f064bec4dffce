/* SPDX-License-Identifier: Apache-2.0 */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "gpufrac/nvml_abi.h"
#include "gpus.h"

#define NO_GPU "no NVIDIA GPU found: "
#define TRY_DEMO "; run `gpufrac demo` to try gpufrac on a simulated GPU"

typedef nvmlReturn_t (*nvml_init_fn)(void);
typedef nvmlReturn_t (*nvml_count_fn)(unsigned int *);
typedef nvmlReturn_t (*nvml_handle_fn)(unsigned int, nvmlDevice_t *);
typedef nvmlReturn_t (*nvml_uuid_fn)(nvmlDevice_t, char *, unsigned int);
typedef nvmlReturn_t (*nvml_mem_fn)(nvmlDevice_t, nvmlMemory_t *);
typedef const char *(*nvml_errstr_fn)(nvmlReturn_t);
typedef nvmlReturn_t (*nvml_name_fn)(nvmlDevice_t, char *, unsigned int);
typedef nvmlReturn_t (*nvml_procs_fn)(nvmlDevice_t, unsigned int *, void *);

typedef struct nvml {
    void *lib;
    nvml_init_fn init;
    nvml_init_fn shutdown;
    nvml_count_fn count;
    nvml_handle_fn handle;
    nvml_uuid_fn uuid;
    nvml_mem_fn mem;
    nvml_errstr_fn errstr;
    nvml_name_fn name;        /* optional */
    nvml_procs_fn procs;      /* optional: _v2/_v3 element (nvmlProcessInfo_t) */
    nvml_procs_fn procs_v1;   /* optional: the original element */
} nvml;

/* The newest name first: the unversioned ones are the NVML 1.x ABI. */
static void *sym2(void *lib, const char *newer, const char *older)
{
    void *p = dlsym(lib, newer);
    return p ? p : dlsym(lib, older);
}

static int nvml_load(nvml *n, gf_error *err)
{
    memset(n, 0, sizeof(*n));
    n->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!n->lib)
        return gf_error_set(err, GF_ENOTFOUND,
                            NO_GPU "libnvidia-ml.so.1 could not be loaded (%s)" TRY_DEMO,
                            dlerror());
    n->init = (nvml_init_fn)sym2(n->lib, "nvmlInit_v2", "nvmlInit");
    n->shutdown = (nvml_init_fn)dlsym(n->lib, "nvmlShutdown");
    n->count = (nvml_count_fn)sym2(n->lib, "nvmlDeviceGetCount_v2", "nvmlDeviceGetCount");
    n->handle = (nvml_handle_fn)sym2(n->lib, "nvmlDeviceGetHandleByIndex_v2",
                                     "nvmlDeviceGetHandleByIndex");
    n->uuid = (nvml_uuid_fn)dlsym(n->lib, "nvmlDeviceGetUUID");
    n->mem = (nvml_mem_fn)dlsym(n->lib, "nvmlDeviceGetMemoryInfo");
    n->errstr = (nvml_errstr_fn)dlsym(n->lib, "nvmlErrorString");
    n->name = (nvml_name_fn)dlsym(n->lib, "nvmlDeviceGetName");
    n->procs = (nvml_procs_fn)sym2(n->lib, "nvmlDeviceGetComputeRunningProcesses_v3",
                                   "nvmlDeviceGetComputeRunningProcesses_v2");
    n->procs_v1 = (nvml_procs_fn)dlsym(n->lib, "nvmlDeviceGetComputeRunningProcesses");
    if (!n->init || !n->shutdown || !n->count || !n->handle || !n->uuid || !n->mem) {
        dlclose(n->lib);
        return gf_error_set(err, GF_ENOTFOUND,
                            NO_GPU "libnvidia-ml.so.1 lacks the device queries gpufrac needs "
                                   "(driver too old?)" TRY_DEMO);
    }
    return 0;
}

static const char *nvml_str(const nvml *n, nvmlReturn_t r)
{
    static char buf[32];
    const char *s = n->errstr ? n->errstr(r) : NULL;
    if (s)
        return s;
    snprintf(buf, sizeof(buf), "NVML error %d", r);
    return buf;
}

static int nvml_device(const nvml *n, unsigned i, gf_gpu *g, gf_error *err)
{
    nvmlDevice_t dev;
    nvmlMemory_t mem;
    nvmlReturn_t r;

    g->index = i;
    if ((r = n->handle(i, &dev)) != NVML_SUCCESS)
        return gf_error_set(err, GF_ESYS, "NVML: device %u: %s", i, nvml_str(n, r));
    if ((r = n->uuid(dev, g->uuid, sizeof(g->uuid))) != NVML_SUCCESS)
        return gf_error_set(err, GF_ESYS, "NVML: device %u UUID: %s", i, nvml_str(n, r));
    if ((r = n->mem(dev, &mem)) != NVML_SUCCESS)
        return gf_error_set(err, GF_ESYS, "NVML: device %u memory: %s", i, nvml_str(n, r));
    g->total = mem.total;
    g->used = mem.used;
    g->name[0] = '\0';
    if (n->name && n->name(dev, g->name, sizeof(g->name)) != NVML_SUCCESS)
        g->name[0] = '\0';
    return 0;
}

#define PROCS_PER_GPU 256

/* Appends GPU i's compute processes to out. */
static void device_procs(const nvml *n, unsigned i, gf_gpu_proc *out, size_t max, size_t *k)
{
    static union {
        nvmlProcessInfo_t v2[PROCS_PER_GPU];
        nvmlProcessInfo_v1_t v1[PROCS_PER_GPU];
    } b;
    unsigned int count = PROCS_PER_GPU;
    nvmlDevice_t dev;
    bool v1 = !n->procs;

    if (n->handle(i, &dev) != NVML_SUCCESS || (!n->procs && !n->procs_v1))
        return;
    if ((v1 ? n->procs_v1 : n->procs)(dev, &count, &b) != NVML_SUCCESS)
        return;
    for (unsigned int j = 0; j < count && j < PROCS_PER_GPU && *k < max; j++) {
        unsigned long long used = v1 ? b.v1[j].usedGpuMemory : b.v2[j].usedGpuMemory;
        out[(*k)++] = (gf_gpu_proc){.gpu = i, .pid = (pid_t)(v1 ? b.v1[j].pid : b.v2[j].pid),
                                    .used = used == NVML_VALUE_NOT_AVAILABLE ? 0 : used};
    }
}

int gf_gpus_processes(gf_gpu_proc *out, size_t max, size_t *n_out, gf_error *err)
{
    unsigned count = 0;
    nvml n;

    *n_out = 0;
    if (nvml_load(&n, err) < 0)
        return -1;
    if (n.init() != NVML_SUCCESS) {
        dlclose(n.lib);
        return gf_error_set(err, GF_ENOTFOUND, NO_GPU "NVML did not start");
    }
    if (n.count(&count) == NVML_SUCCESS)
        for (unsigned i = 0; i < count && i < GF_GPUS_MAX; i++)
            device_procs(&n, i, out, max, n_out);
    n.shutdown();
    dlclose(n.lib);
    return 0;
}

int gf_gpus_probe(gf_gpu_list *out, gf_error *err)
{
    unsigned count = 0;
    nvmlReturn_t r;
    nvml n;
    int rc = -1;

    out->n = 0;
    if (nvml_load(&n, err) < 0)
        return -1;
    if ((r = n.init()) != NVML_SUCCESS) {
        gf_error_set(err, GF_ENOTFOUND, NO_GPU "NVML did not start (%s)" TRY_DEMO,
                     nvml_str(&n, r));
        goto out_close;
    }
    if ((r = n.count(&count)) != NVML_SUCCESS || count == 0) {
        gf_error_set(err, GF_ENOTFOUND, NO_GPU "NVML reports %s" TRY_DEMO,
                     r != NVML_SUCCESS ? nvml_str(&n, r) : "no devices");
        goto out_shutdown;
    }
    if (count > GF_GPUS_MAX)
        count = GF_GPUS_MAX;
    for (unsigned i = 0; i < count; i++)
        if (nvml_device(&n, i, &out->gpus[out->n++], err) < 0)
            goto out_shutdown;
    rc = 0;
out_shutdown:
    n.shutdown();
out_close:
    dlclose(n.lib);
    return rc;
}
