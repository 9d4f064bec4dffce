/* SPDX-License-Identifier: Apache-2.0 */
/* `gpufrac run`, in steps: flags -> plan (spec, GPUs, config) -> fraction
 * on disk -> child environment -> supervised child. */
#ifndef GPUFRAC_CLI_RUN_H
#define GPUFRAC_CLI_RUN_H

#include <stdbool.h>
#include <sys/types.h>
#include <time.h>

#include "config.h"
#include "error.h"
#include "gpus.h"
#include "ledger.h"
#include "spec.h"

typedef struct run_opts {
    const char *memory, *limit, *devices, *mode, *compute, *name, *state_dir;
    char **cmd; /* NULL-terminated */
} run_opts;

typedef struct run_plan {
    gf_spec spec;
    gf_gpu_list gpus; /* chosen, in config order */
    bool set_visible; /* export CUDA_VISIBLE_DEVICES=<uuids> */
    gf_fraction_config cfg;
    char state[GF_PATH_MAX];
} run_plan;

/* Parses argv (argv[0] = "run"). Returns 0, or an exit code after printing
 * help (GF_EXIT_OK via *done) or a usage error. */
int run_parse(int argc, char **argv, run_opts *o, bool *done);

/* Checks every value and resolves it against the GPUs. Returns 0 or the
 * exit code (usage: 2, other: 1) with the message in err. */
int run_plan_make(const run_opts *o, run_plan *p, gf_error *err);

/* sm-sharing with gpufracd: asks it for the GPU's MPS daemon and sets
 * CUDA_MPS_PIPE_DIRECTORY. Call once the fraction exists, so the agent never
 * sees a daemon without its fraction. */
int run_env_mps(const run_plan *p, gf_error *err);

/* Prints the honest notices (burst without the agent, MPS). */
void run_plan_notices(const run_plan *p);

/* Sets the child's variables in our own environment (we exec nothing else). */
int run_env_apply(const run_plan *p, const char *fraction_dir, gf_error *err);

/* Forks and execs cmd as a subreaper, forwards signals, reaps every
 * descendant and returns its memory through lg. Returns the exit code;
 * *child (may be NULL) receives COMMAND's pid. */
int run_supervise(char **cmd, gf_ledger *lg, pid_t *child);

/* A user other than root with gpufracd serving the state directory: the
 * agent makes, admits and ends the fraction (cli/user_run.c). */
/* How long a run waits for an agent that is restarting (its socket refuses,
 * or the connection was cut before the answer), asking again every 50 ms. */
#define GF_RUN_AGENT_RESTART_MS 5000
struct gf_fraction;
bool run_via_agent(const char *state);
int run_via_agent_create(run_plan *p, struct gf_fraction *f, gf_error *err);
void run_via_agent_end(const run_plan *p, struct gf_fraction *f, int code);

/* One line of <fraction>/terminated (agent/terminated.h). */
typedef struct run_termination {
    pid_t pid;
    int gpu;
    bool watchdog; /* else a reclaim */
    time_t when;
    char reason[768];
} run_termination;
int run_ended_parse_line(char *line, run_termination *t);

/* Prints the agent's reason for every process of the fraction it terminated;
 * returns the exit code (GF_EXIT_EVICTED / GF_EXIT_WATCHDOG when it was
 * COMMAND itself, else rc). */
int run_report_terminated(const char *fraction_dir, pid_t child, int rc, bool agent);

/* fn runs once, before the first stop signal is passed on to the fraction. */
void run_supervise_on_stop(void (*fn)(void *), void *arg);
/* fn(arg) on every tick of the supervisor (250 ms), e.g. to attach to an
 * agent that started after the run. */
void run_supervise_on_tick(void (*fn)(void *), void *arg);

#endif
