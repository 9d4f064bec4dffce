/* SPDX-License-Identifier: Apache-2.0 */
/* The node's GPUs as NVML reports them (nvml.c), and the GPU table. */
#ifndef GPUFRAC_AGENT_NVML_H
#define GPUFRAC_AGENT_NVML_H

#include <stdint.h>
#include <sys/types.h>

#include "agent.h"

/* the agent's NVML (dlopen). */
int gf_agent_nvml_init(gf_agent *a, gf_error *err);
typedef struct gf_proc_mem {
    pid_t pid;
    uint64_t used;
} gf_proc_mem;
/* Per-process device memory of GPU i; returns the count or -1. */
int gf_agent_nvml_procs(gf_agent *a, int gpu, gf_proc_mem *out, int max, gf_error *err);
int gf_agent_nvml_refresh(gf_agent *a, gf_error *err); /* updates gpus[].dev.used */

/* The node GPU with this uuid, or -1. */
int gf_gpu_index(const gf_agent *a, const char *uuid);

#endif
