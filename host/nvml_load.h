/* SPDX-License-Identifier: Apache-2.0 */
/* NVML loaded at run time with dlopen, so that every host tool builds and
 * starts without the driver. The one place that knows NVML's symbol names and
 * which versioned query falls back to which: the newest first, the
 * unversioned ones being the NVML 1.x ABI. */
#ifndef GPUFRAC_HOST_NVML_LOAD_H
#define GPUFRAC_HOST_NVML_LOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "gpufrac/nvml_abi.h"
#include "gpus.h"

#define GF_NVML_LIB "libnvidia-ml.so.1"
#define GF_NVML_PROCS_MAX 1024 /* per GPU per query; more is INSUFFICIENT_SIZE */

typedef nvmlReturn_t (*gf_nvml_procs_fn)(nvmlDevice_t, unsigned int *, void *);

typedef struct gf_nvml {
    void *lib;
    nvmlReturn_t (*init)(void);
    nvmlReturn_t (*shutdown)(void);
    nvmlReturn_t (*count)(unsigned int *);
    nvmlReturn_t (*handle)(unsigned int, nvmlDevice_t *);
    nvmlReturn_t (*uuid)(nvmlDevice_t, char *, unsigned int);
    nvmlReturn_t (*name)(nvmlDevice_t, char *, unsigned int);
    nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t *);
    const char *(*errstr)(nvmlReturn_t);
    gf_nvml_procs_fn procs[3]; /* _v3, _v2, v1; NULL where the library lacks it */
} gf_nvml;

/* What a caller needs beyond init, count, handle, UUID and memory. */
enum {
    GF_NVML_NEED_SHUTDOWN = 1 << 0,
    GF_NVML_NEED_NAME = 1 << 1,
    GF_NVML_NEED_PROCS = 1 << 2, /* at least one of the process queries */
};

typedef enum gf_nvml_status {
    GF_NVML_LOADED,
    GF_NVML_NO_LIBRARY, /* dlopen failed: why holds dlerror() */
    GF_NVML_TOO_OLD,    /* a needed query is missing; the library is closed again */
} gf_nvml_status;

/* Opens GF_NVML_LIB and looks its queries up. Callers word the failure. */
gf_nvml_status gf_nvml_load(gf_nvml *n, unsigned needs, char *why, size_t len);
void gf_nvml_close(gf_nvml *n);

/* NVML's own text for r, NULL when the library has no nvmlErrorString. */
const char *gf_nvml_errstr(const gf_nvml *n, nvmlReturn_t r);

/* Reads device i into g (index, UUID, memory, then name) and its handle into
 * *dev. The name is "" when NVML gives none, unless name_required. On failure
 * *what names the query: "" (the handle), " UUID", " memory" or " name". */
nvmlReturn_t gf_nvml_device(const gf_nvml *n, unsigned i, bool name_required, nvmlDevice_t *dev,
                            gf_gpu *g, const char **what);

/* A process NVML lists on a GPU; known is false where NVML has no figure
 * for its memory (e.g. no permission), used is 0 then. */
typedef struct gf_nvml_proc {
    pid_t pid;
    uint64_t used;
    bool known;
} gf_nvml_proc;

/* The compute processes on dev into out (GF_NVML_PROCS_MAX entries), *count
 * of them: _v3, else _v2, else v1, a query being passed over where the
 * library lacks it or the driver answers FUNCTION_NOT_FOUND or NOT_SUPPORTED.
 * INSUFFICIENT_SIZE (with *count the driver's figure) when more than fit. */
nvmlReturn_t gf_nvml_procs(const gf_nvml *n, nvmlDevice_t dev, gf_nvml_proc *out, unsigned *count);

#endif
