/* SPDX-License-Identifier: Apache-2.0 */
/* MPS (mps.c).
 *
 * One legacy (v2) MPS control daemon per GPU in sm-sharing use, pipe dir
 * <state>/mps/<first 8 hex of the GPU uuid>, logs in <pipe dir>/log. Every
 * exchange with a daemon runs `nvidia-cuda-mps-control` with the command on
 * its stdin and is bounded by GF_MPS_TIMEOUT_MS, so a wedged daemon costs the
 * agent at most that long. Call these without holding a->lock: they take it
 * briefly when they update a->gpus[]. */
#ifndef GPUFRAC_AGENT_MPS_H
#define GPUFRAC_AGENT_MPS_H

#include <stddef.h>

#include "agent.h"
#include "conn.h"

#define GF_MPS_TIMEOUT_MS 5000 /* one command; also daemon start and quit */
#define GF_MPS_PIPE_DIR_MAX 83 /* NVIDIA's cap: sun_path 108 - reserve */
#define GF_MPS_CONTROL_DEFAULT "nvidia-cuda-mps-control"

/* Writes GPU gpu's pipe dir into buf. Fails for an unknown GPU, a uuid
 * without 8 leading hex digits, or a path over GF_MPS_PIPE_DIR_MAX. */
int gf_mps_pipe_dir(const gf_agent *a, int gpu, char *buf, size_t len, gf_error *err);

/* Sends one command (no newline) to GPU gpu's daemon; its answer (stdout) lands
 * NUL-terminated in out. Fails when the tool cannot be run, exits non-zero
 * (no daemon, rejected command), the answer does not fit, or nothing comes
 * back within GF_MPS_TIMEOUT_MS (the tool is then SIGKILLed). */
int gf_mps_command(gf_agent *a, int gpu, const char *cmd, char *out, size_t outlen, gf_error *err);

/* one MPS control daemon per GPU in sm-sharing use. */
int gf_mps_ensure(gf_agent *a, int gpu, char *pipe_dir, size_t len, gf_error *err);
int gf_mps_terminate_clients(gf_agent *a, int gpu, const pid_t *pids, int n, gf_error *err);
int gf_mps_check(gf_agent *a, int gpu, gf_error *err); /* fault detection + recovery */
int gf_mps_stop_idle(gf_agent *a,
                     gf_error *err); /* stop daemons of GPUs with no sm-sharing fraction */

/* The verb mps (verbs.c): root, or the supervisor of an sm-sharing fraction
 * on the GPU, gets the pipe directory of its daemon, started if need be. */
void gf_serve_mps(gf_agent *a, gf_request *r, const gf_msg *in, gf_msg *out);

#endif
