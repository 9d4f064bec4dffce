/* SPDX-License-Identifier: Apache-2.0 */
/* NVML by dlopen: the symbols, the fallback between query versions and the
 * per-device and per-process reads every host tool shares. Holds no state:
 * a caller keeps its gf_nvml (and its device handles) as long as it likes. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "nvml_load.h"

static void *sym(void *lib, const char *name, const char *fallback)
{
    void *p = dlsym(lib, name);
    return p || !fallback ? p : dlsym(lib, fallback);
}

static bool has_all(const gf_nvml *n, unsigned needs)
{
    if (!n->init || !n->count || !n->handle || !n->uuid || !n->memory)
        return false;
    if ((needs & GF_NVML_NEED_SHUTDOWN) && !n->shutdown)
        return false;
    if ((needs & GF_NVML_NEED_NAME) && !n->name)
        return false;
    return !(needs & GF_NVML_NEED_PROCS) || n->procs[0] || n->procs[1] || n->procs[2];
}

gf_nvml_status gf_nvml_load(gf_nvml *n, unsigned needs, char *why, size_t len)
{
    memset(n, 0, sizeof(*n));
    if (!(n->lib = dlopen(GF_NVML_LIB, RTLD_NOW | RTLD_LOCAL))) {
        snprintf(why, len, "%s", dlerror());
        return GF_NVML_NO_LIBRARY;
    }
    *(void **)&n->init = sym(n->lib, "nvmlInit_v2", "nvmlInit");
    *(void **)&n->shutdown = sym(n->lib, "nvmlShutdown", NULL);
    *(void **)&n->count = sym(n->lib, "nvmlDeviceGetCount_v2", "nvmlDeviceGetCount");
    *(void **)&n->handle = sym(n->lib, "nvmlDeviceGetHandleByIndex_v2",
                               "nvmlDeviceGetHandleByIndex");
    *(void **)&n->uuid = sym(n->lib, "nvmlDeviceGetUUID", NULL);
    *(void **)&n->name = sym(n->lib, "nvmlDeviceGetName", NULL);
    *(void **)&n->memory = sym(n->lib, "nvmlDeviceGetMemoryInfo", NULL);
    *(void **)&n->errstr = sym(n->lib, "nvmlErrorString", NULL);
    *(void **)&n->procs[0] = sym(n->lib, "nvmlDeviceGetComputeRunningProcesses_v3", NULL);
    *(void **)&n->procs[1] = sym(n->lib, "nvmlDeviceGetComputeRunningProcesses_v2", NULL);
    *(void **)&n->procs[2] = sym(n->lib, "nvmlDeviceGetComputeRunningProcesses", NULL);
    if (has_all(n, needs))
        return GF_NVML_LOADED;
    gf_nvml_close(n);
    return GF_NVML_TOO_OLD;
}

void gf_nvml_close(gf_nvml *n)
{
    if (n->lib)
        dlclose(n->lib);
    memset(n, 0, sizeof(*n));
}

const char *gf_nvml_errstr(const gf_nvml *n, nvmlReturn_t r)
{
    return n->errstr ? n->errstr(r) : NULL;
}

nvmlReturn_t gf_nvml_device(const gf_nvml *n, unsigned i, bool name_required, nvmlDevice_t *dev,
                            gf_gpu *g, const char **what)
{
    nvmlMemory_t mem;
    nvmlReturn_t r;

    g->index = i;
    *what = "";
    if ((r = n->handle(i, dev)) != NVML_SUCCESS)
        return r;
    *what = " UUID";
    if ((r = n->uuid(*dev, g->uuid, sizeof(g->uuid))) != NVML_SUCCESS)
        return r;
    *what = " memory";
    if ((r = n->memory(*dev, &mem)) != NVML_SUCCESS)
        return r;
    g->total = mem.total;
    g->used = mem.used;
    *what = " name";
    g->name[0] = '\0';
    r = n->name ? n->name(*dev, g->name, sizeof(g->name)) : NVML_ERROR_FUNCTION_NOT_FOUND;
    if (r != NVML_SUCCESS)
        g->name[0] = '\0';
    return name_required ? r : NVML_SUCCESS;
}

typedef union proc_buf {
    nvmlProcessInfo_t v2[GF_NVML_PROCS_MAX]; /* _v2 and _v3 share the element */
    nvmlProcessInfo_v1_t v1[GF_NVML_PROCS_MAX];
} proc_buf;

/* One query with the INSUFFICIENT_SIZE protocol: the count grows between the
 * size answer and the next call only when processes start, so retry a few
 * times while the list still fits the buffer. */
static nvmlReturn_t query(gf_nvml_procs_fn fn, nvmlDevice_t dev, proc_buf *b, unsigned int *n)
{
    nvmlReturn_t r = NVML_ERROR_INSUFFICIENT_SIZE;

    for (int tries = 0; tries < 3 && r == NVML_ERROR_INSUFFICIENT_SIZE; tries++) {
        *n = GF_NVML_PROCS_MAX;
        r = fn(dev, n, b);
        if (r == NVML_ERROR_INSUFFICIENT_SIZE && *n > GF_NVML_PROCS_MAX)
            break;
    }
    return r;
}

nvmlReturn_t gf_nvml_procs(const gf_nvml *n, nvmlDevice_t dev, gf_nvml_proc *out, unsigned *count)
{
    nvmlReturn_t r = NVML_ERROR_FUNCTION_NOT_FOUND;
    proc_buf b;
    int v;

    *count = 0;
    for (v = 0; v < 3; v++) {
        if (!n->procs[v])
            continue;
        r = query(n->procs[v], dev, &b, count);
        if (r != NVML_ERROR_FUNCTION_NOT_FOUND && r != NVML_ERROR_NOT_SUPPORTED)
            break;
    }
    if (r != NVML_SUCCESS)
        return r;
    for (unsigned i = 0; i < *count && i < GF_NVML_PROCS_MAX; i++) {
        unsigned long long used = v == 2 ? b.v1[i].usedGpuMemory : b.v2[i].usedGpuMemory;
        bool known = used != NVML_VALUE_NOT_AVAILABLE;
        out[i] = (gf_nvml_proc){.pid = (pid_t)(v == 2 ? b.v1[i].pid : b.v2[i].pid),
                                .used = known ? used : 0,
                                .known = known};
    }
    return NVML_SUCCESS;
}
