/* SPDX-License-Identifier: Apache-2.0 */
/* gpufrac-bench: the shim against no shim, measured in one run.
 *
 * The parent (main.c, measure.c) never touches the driver itself: every
 * measurement runs in child processes of this same executable
 * (`gpufrac-bench --worker KIND ...`, worker.c), started with one of two
 * environments that differ only in LD_PRELOAD / GPUFRAC_CONFIG. Workers print
 * `key=value` lines on stdout; the parent collects them (spawn.c), turns them
 * into figures (stats.c) and prints a table, key=value lines and optionally
 * JSON (report.c). */
#ifndef GPUFRAC_BENCH_H
#define GPUFRAC_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "config.h"
#include "error.h"

#define BENCH_PROCS 8                 /* contending processes */
#define BENCH_PAIR_SIZE (1ULL << 20)  /* alloc+free pair size */
#define BENCH_BIG_SIZE (256ULL << 20) /* "256 MB allocation" size */
#define BENCH_SIM_DEVICE "16Gi"
#define BENCH_OUT_MAX (1 << 20) /* most output one worker may print */
#define BENCH_KEYS_MAX 192

/* ---- run settings (main.c) ------------------------------------------------ */
typedef struct bench_opts {
    bool quick;
    bool force_sim;
    const char *json_path;
    long pairs_n; /* 0: default for the platform */
    int runs;     /* best-of count for single-process timings */
    int startup_runs;
    bool no_callgrind;
    bool instructions_only; /* --instructions: callgrind counts, no timings */
} bench_opts;

/* ---- where things are and the two environments (setup.c) ------------------ */
typedef enum bench_side { SIDE_BASE = 0, SIDE_SHIM = 1 } bench_side;

typedef struct bench_env {
    bool sim;
    char exe[GF_PATH_MAX];
    char shim[GF_PATH_MAX];
    char gpusim_dir[GF_PATH_MAX];
    char tmp[GF_PATH_MAX];
    char state[GF_PATH_MAX]; /* GPUSIM_STATE (sim only) */
    char ledger[GF_PATH_MAX];
    char config[GF_PATH_MAX];
    char **envp[2]; /* per side, NULL-terminated */
} bench_env;

int bench_env_init(bench_env *e, bool force_sim, gf_error *err);
/* Writes the fraction (ledger + config) with this per-device limit. */
int bench_env_fraction(bench_env *e, uint64_t limit, gf_error *err);
void bench_env_cleanup(bench_env *e);
bool bench_real_gpu_present(void);

/* ---- child processes (spawn.c) -------------------------------------------- */
typedef struct bench_child {
    pid_t pid;
    int out_fd; /* its stdout */
    char *out;  /* everything it printed (after bench_child_finish) */
    size_t out_len;
} bench_child;

/* Starts `exe --worker argv...` on a side. go_fd, when >= 0, becomes its
 * stdin (the start signal: EOF). */
int bench_spawn(const bench_env *e, bench_side side, const char *const *argv, int go_fd,
                bench_child *c, gf_error *err);
/* Reads one line (up to '\n') from the child, e.g. its "ready". */
int bench_child_line(bench_child *c, char *buf, size_t len, gf_error *err);
/* Reads the rest of its output and reaps it; fails when it failed. */
int bench_child_finish(bench_child *c, gf_error *err);
void bench_child_kill(bench_child *c);
void bench_child_free(bench_child *c);
/* Runs a worker to the end and keeps its output in c. */
int bench_run_worker(const bench_env *e, bench_side side, const char *const *argv, bench_child *c,
                     gf_error *err);
/* The value of `key=` in a child's output (a pointer into it, up to '\n'),
 * copied into buf. Returns -1 when missing. */
int bench_kv(const bench_child *c, const char *key, char *buf, size_t len);
int bench_kv_u64(const bench_child *c, const char *key, uint64_t *out, gf_error *err);
int bench_kv_double(const bench_child *c, const char *key, double *out, gf_error *err);

/* ---- statistics (stats.c) ------------------------------------------------- */
uint64_t bench_now_ns(void);
uint64_t bench_cpu_ns(void); /* this process's CPU time */
void bench_sort_u64(uint64_t *v, size_t n);
/* q in [0,1], nearest rank on sorted values. */
uint64_t bench_quantile(const uint64_t *sorted, size_t n, double q);
/* Parses "a,b,c" into v (appending, at most cap). Returns how many were added. */
size_t bench_parse_list(const char *s, uint64_t *v, size_t n, size_t cap);

/* ---- results (report.c) --------------------------------------------------- */
typedef struct bench_key {
    char key[48];
    char val[160];
    bool number;
} bench_key;

typedef struct bench_results {
    bench_key keys[BENCH_KEYS_MAX];
    size_t n;
} bench_results;

void bench_put_str(bench_results *r, const char *key, const char *val);
void bench_put_num(bench_results *r, const char *key, int decimals, double v);
void bench_put_u64(bench_results *r, const char *key, uint64_t v);
const char *bench_get(const bench_results *r, const char *key);
void bench_print_table(const bench_results *r);
void bench_print_kv(const bench_results *r);
int bench_write_json(const bench_results *r, const char *path, gf_error *err);

/* ---- the measurements, parent side (measure.c) ---------------------------- */
typedef struct bench_plan {
    long pairs_n;   /* pairs per process */
    int runs;       /* best of */
    long contend_n; /* pairs per process under contention */
    int big_iters;  /* 256 MiB allocations per process */
    long launch_n;  /* launches per run */
    int startup_runs;
    long threads_n; /* pairs per thread */
    long async_n;   /* stream-ordered pairs per run */
    long info_n;    /* cuMemGetInfo calls per run */
    long churn_n;   /* operations per churning process */
    bool callgrind; /* count instructions under valgrind when it is installed */
} bench_plan;

int bench_measure_info(const bench_env *e, bench_results *r, uint64_t *total, gf_error *err);
int bench_measure_pairs(const bench_env *e, const bench_plan *p, bench_results *r, gf_error *err);
int bench_measure_contended(const bench_env *e, const bench_plan *p, bench_results *r,
                            gf_error *err);
int bench_measure_big(const bench_env *e, const bench_plan *p, bench_results *r, gf_error *err);
int bench_measure_launch(const bench_env *e, const bench_plan *p, bench_results *r, gf_error *err);
int bench_measure_startup(const bench_env *e, const bench_plan *p, bench_results *r, gf_error *err);
/* measure_more.c: threads, stream-ordered pairs, memory queries, devices,
 * churn and instructions per pair */
int bench_measure_threads(const bench_env *e, const bench_plan *p, bench_results *r, gf_error *err);
int bench_measure_async(const bench_env *e, const bench_plan *p, bench_results *r, gf_error *err);
int bench_measure_getinfo(const bench_env *e, const bench_plan *p, bench_results *r, gf_error *err);
int bench_measure_devices(const bench_env *e, const bench_plan *p, bench_results *r, gf_error *err);
int bench_measure_churn(const bench_env *e, const bench_plan *p, bench_results *r, gf_error *err);
int bench_measure_instructions(const bench_env *e, const bench_plan *p, bench_results *r,
                               gf_error *err);

/* helpers of both */
void bench_put_side(bench_results *r, const char *prefix, bench_side s, int dec, double v);
void bench_put_verdict(bench_results *r, const char *key, bool met);
typedef struct group {
    bench_child c[BENCH_PROCS];
    int n;
    int go; /* write end of the start pipe; closing it starts everyone */
} group;
/* Starts BENCH_PROCS workers and waits until each is set up and waiting. */
int bench_group_start(const bench_env *e, bench_side s, const char *const *argv, group *g,
                      gf_error *err);
/* Starts them all and reaps them. */
int bench_group_run(group *g, gf_error *err);
void bench_group_free(group *g);

/* ---- the child side (worker.c) -------------------------------------------- */
int bench_worker_main(int argc, char **argv);

#endif
