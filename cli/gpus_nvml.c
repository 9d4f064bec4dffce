#include <dlfcn.h>
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

typedef struct nvml {
    void *lib;
    nvml_init_fn init;
    nvml_init_fn shutdown;
    nvml_count_fn count;
    nvml_handle_fn handle;
    nvml_uuid_fn uuid;
    nvml_mem_fn mem;
    nvml_errstr_fn errstr;
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
