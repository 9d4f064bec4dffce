/* SPDX-License-Identifier: Apache-2.0 */
/* The host's GPUs as NVML reports them, and choosing among them (gfhost:
 * the CLI's, the runtime's and the agent's one GPU type). */
#ifndef GPUFRAC_HOST_GPUS_H
#define GPUFRAC_HOST_GPUS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "config.h"
#include "error.h"

#define GF_GPUS_MAX 64

/* One GPU as NVML reports it. */
typedef struct gf_gpu {
    unsigned index; /* NVML index (nvidia-smi order) */
    char uuid[GF_UUID_MAX];
    uint64_t total; /* bytes */
    uint64_t used;  /* bytes in use, as NVML reported at the last read */
    char name[96];  /* NVML product name, "" when NVML gave none */
} gf_gpu;

typedef struct gf_gpu_list {
    size_t n;
    gf_gpu gpus[GF_GPUS_MAX];
} gf_gpu_list;

/* Loads libnvidia-ml.so.1 with dlopen and lists every device. Fails with a
 * message that points at `gpufrac demo` when there is no NVML or no GPU. */
int gf_gpus_probe(gf_gpu_list *out, gf_error *err);

/* A process using a GPU, with the memory the driver measures for it. */
typedef struct gf_gpu_proc {
    unsigned gpu; /* NVML index */
    pid_t pid;
    uint64_t used;
} gf_gpu_proc;

/* Every compute process on every GPU, as NVML lists them; *n may stay 0. */
int gf_gpus_processes(gf_gpu_proc *out, size_t max, size_t *n, gf_error *err);

/* Picks devices from a comma list of NVML indices, UUIDs (a unique prefix
 * is enough) or CDI names. `what` names the source in messages. Fails on an
 * unknown or repeated entry and on more than GF_CONFIG_DEVICES_MAX. */
int gf_gpus_select(const gf_gpu_list *all, const char *list, const char *what, gf_gpu_list *out,
                   gf_error *err);

/* The default choice: CUDA_VISIBLE_DEVICES, else NVIDIA_VISIBLE_DEVICES,
 * else every device. */
int gf_gpus_select_default(const gf_gpu_list *all, gf_gpu_list *out, gf_error *err);

#endif
