/* SPDX-License-Identifier: Apache-2.0 */
/* The host's GPUs and their processes for the CLI and the runtime: NVML is
 * loaded, started, read and closed again on every call. */
#include <stdio.h>
#include <string.h>

#include "gpus.h"
#include "nvml_load.h"

#define NO_GPU "no NVIDIA GPU found: "
#define TRY_DEMO "; run `gpufrac demo` to try gpufrac on a simulated GPU"

static int nvml_open(gf_nvml *n, gf_error *err)
{
    char why[256];

    switch (gf_nvml_load(n, GF_NVML_NEED_SHUTDOWN, why, sizeof(why))) {
    case GF_NVML_LOADED: return 0;
    case GF_NVML_NO_LIBRARY:
        return gf_error_set(err, GF_ENOTFOUND,
                            NO_GPU GF_NVML_LIB " could not be loaded (%s)" TRY_DEMO, why);
    case GF_NVML_TOO_OLD: break;
    }
    return gf_error_set(err, GF_ENOTFOUND,
                        NO_GPU GF_NVML_LIB " lacks the device queries gpufrac needs "
                                           "(driver too old?)" TRY_DEMO);
}

static const char *nvml_str(const gf_nvml *n, nvmlReturn_t r)
{
    static char buf[32];
    const char *s = gf_nvml_errstr(n, r);
    if (s)
        return s;
    snprintf(buf, sizeof(buf), "NVML error %d", r);
    return buf;
}

static void close_all(gf_nvml *n)
{
    n->shutdown();
    gf_nvml_close(n);
}

/* Appends GPU i's compute processes to out. */
static void device_procs(const gf_nvml *n, unsigned i, gf_gpu_proc *out, size_t max, size_t *k)
{
    static gf_nvml_proc p[GF_NVML_PROCS_MAX];
    unsigned int count = 0;
    nvmlDevice_t dev;

    if (n->handle(i, &dev) != NVML_SUCCESS || gf_nvml_procs(n, dev, p, &count) != NVML_SUCCESS)
        return;
    for (unsigned int j = 0; j < count && *k < max; j++)
        out[(*k)++] = (gf_gpu_proc){.gpu = i, .pid = p[j].pid, .used = p[j].used};
}

int gf_gpus_processes(gf_gpu_proc *out, size_t max, size_t *n_out, gf_error *err)
{
    unsigned count = 0;
    gf_nvml n;

    *n_out = 0;
    if (nvml_open(&n, err) < 0)
        return -1;
    if (n.init() != NVML_SUCCESS) {
        gf_nvml_close(&n);
        return gf_error_set(err, GF_ENOTFOUND, NO_GPU "NVML did not start");
    }
    if (n.count(&count) == NVML_SUCCESS)
        for (unsigned i = 0; i < count && i < GF_GPUS_MAX; i++)
            device_procs(&n, i, out, max, n_out);
    close_all(&n);
    return 0;
}

int gf_gpus_probe(gf_gpu_list *out, gf_error *err)
{
    unsigned count = 0;
    const char *what;
    nvmlDevice_t dev;
    nvmlReturn_t r;
    gf_nvml n;

    out->n = 0;
    if (nvml_open(&n, err) < 0)
        return -1;
    if ((r = n.init()) != NVML_SUCCESS) {
        gf_error_set(err, GF_ENOTFOUND, NO_GPU "NVML did not start (%s)" TRY_DEMO, nvml_str(&n, r));
        gf_nvml_close(&n);
        return -1;
    }
    if ((r = n.count(&count)) != NVML_SUCCESS || count == 0) {
        gf_error_set(err, GF_ENOTFOUND, NO_GPU "NVML reports %s" TRY_DEMO,
                     r != NVML_SUCCESS ? nvml_str(&n, r) : "no devices");
        close_all(&n);
        return -1;
    }
    if (count > GF_GPUS_MAX)
        count = GF_GPUS_MAX;
    for (unsigned i = 0; i < count; i++)
        if ((r = gf_nvml_device(&n, i, false, &dev, &out->gpus[out->n++], &what)) != NVML_SUCCESS) {
            gf_error_set(err, GF_ESYS, "NVML: device %u%s: %s", i, what, nvml_str(&n, r));
            close_all(&n);
            return -1;
        }
    close_all(&n);
    return 0;
}
