/* SPDX-License-Identifier: Apache-2.0 */
/* What `gpufrac status` knows: the host's GPUs, the fractions on them (live,
 * and ended in the last GF_ENDED_KEEP_S), their processes. */
#ifndef GPUFRAC_CLI_STATUS_H
#define GPUFRAC_CLI_STATUS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <time.h>

#include "config.h"
#include "fraction.h"
#include "gpus.h"

#define STATUS_PIDS_MAX 64
#define STATUS_PROCS_MAX 1024

typedef struct status_device {
    char uuid[GF_UUID_MAX];
    uint64_t request, limit, used, peak, denied, lent, evictions;
    uint64_t driver_used; /* NVML per-process figures of the fraction's pids on it */
} status_device;

typedef struct status_fraction {
    char name[GF_NAME_MAX];
    char dir[GF_PATH_MAX];
    bool readable; /* config and ledger could be read */
    char error[GF_ERROR_MSG_MAX];
    gf_fraction_state state;
    bool ended; /* in <state>/ended: its run is over */
    time_t ended_at;
    int exit_code;
    size_t n_terminated; /* processes the agent terminated */
    bool last_by_watchdog;
    char last_reason[768]; /* the agent's reason for the last one */
    uid_t uid;             /* owner: who holds the fraction's ledger */
    char owner[33];
    char ns[64], pod[128], container[64]; /* Kubernetes identity, "" on one host */
    pid_t supervisor;
    gf_mode mode;
    int compute_percent;
    size_t n_devices;
    status_device devices[GF_CONFIG_DEVICES_MAX];
    uint64_t used, denied, lent, evictions;
    size_t n_pids; /* may exceed STATUS_PIDS_MAX */
    pid_t pids[STATUS_PIDS_MAX];
} status_fraction;

typedef struct status_view {
    char state[GF_PATH_MAX];
    bool agent;     /* gpufracd serves this state directory */
    bool all_users; /* root: every owner's fractions; else only ours */
    bool have_gpus;
    gf_gpu_list gpus;
    size_t n_procs;
    gf_gpu_proc procs[STATUS_PROCS_MAX];
    status_fraction *f;
    size_t n;
} status_view;

/* Reads every fraction under <state>/fractions (and, with ended, those in
 * <state>/ended), sorted by name, with the GPUs and their processes. */
int status_collect(const char *state, bool ended, status_view *v, gf_error *err);
void status_view_free(status_view *v);

/* The process's name (/proc/<pid>/comm) into buf; "?" when gone. */
void status_proc_name(pid_t pid, char *buf, size_t len);

/* How the table is drawn. rows: the lines it may take (0: no limit). */
typedef struct status_opts {
    int cols, rows;
    bool brief;        /* one line per ended row, no blank line, no agent events */
    bool cut;          /* rows is a hard limit: drop processes, then cut with a line saying so */
    bool ended;        /* list ended fractions even when they do not fit */
    bool hide_ended;   /* collapse ended fractions into one count line */
    int only_gpu;      /* the one GPU (its index) to show; -1: all */
    const char *hint;  /* how to list what was collapsed or cut */
    const char *title; /* a first line (gpufrac top's) or NULL */
} status_opts;

/* Live fractions first; the ended ones, when they do not fit in rows (or
 * hide_ended), as one count line. */
void status_print_table(const status_view *v, const status_opts *o, FILE *out);
int status_print_json(const status_view *v, gf_error *err);

/* What the text view calls the fraction's state: running, orphaned, stale,
 * ended, evicted, killed or unreadable (status --json says the same). */
const char *status_state_name(const status_fraction *f);

/* Prints text in lines of at most cols, broken at spaces; first and rest
 * lead the first and the following lines. */
void status_wrap(const char *text, int cols, const char *first, const char *rest);

/* The width to draw for: the terminal's, else $COLUMNS, else 80. */
int status_columns(void);
/* The terminal's height, else $LINES, else 0 (unknown). */
int status_rows(void);

#endif
