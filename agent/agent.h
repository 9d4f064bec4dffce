/* gpufracd internals: the pieces of the node agent and what they share.
 *
 * The agent's registry is the state directory itself:
 *   <state>/fractions/<name>/{config,ledger,supervisor}   (as `gpufrac run` makes them)
 *   <state>/agent.sock                                   (the socket, see core/proto.h)
 *   <state>/mps/<short-uuid>/                            (MPS pipe dirs, sm-sharing)
 *   <state>/events.log                                   (one line per reclaim/eviction/kill)
 * Everything that must survive a restart (fractions, loans, counters) lives
 * in the fractions' ledgers, so a SIGKILLed agent loses nothing. */
#ifndef GPUFRAC_AGENT_H
#define GPUFRAC_AGENT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "config.h"
#include "error.h"
#include "ledger.h"

#define GF_AGENT_FRACTIONS_MAX 4096
#define GF_AGENT_GPUS_MAX 16

/* One GPU of the node, as NVML reports it. */
typedef struct gf_gpu {
    int index;
    char uuid[GF_UUID_MAX];
    char name[96];
    uint64_t total;   /* NVML total */
    uint64_t used;    /* NVML used, last sample */
    gf_mode mode;     /* the mode of the fractions on it (valid when n_fractions > 0) */
    int n_fractions;
    uint64_t guaranteed; /* sum of requests of fractions on it */
    uint64_t lent;       /* sum of burst loans on it */
    bool mps_running;
    bool mps_fault;
    uint64_t mps_restarts;
} gf_gpu;

/* One fraction known to the agent. */
typedef struct gf_afraction {
    char dir[GF_PATH_MAX];
    gf_fraction_config cfg;
    gf_ledger ledger;          /* opened, no slot claimed */
    pid_t supervisor;          /* 0 when none */
    char ns[64], pod[128], container[64]; /* Kubernetes identity, "" on one host */
    uint64_t driver_used[GF_CONFIG_DEVICES_MAX]; /* watchdog: NVML per-process sum */
    uint64_t watchdog_kills;
    uint64_t watchdog_kills_gpu[GF_CONFIG_DEVICES_MAX]; /* per config device, since start */
    bool seen;                 /* mark for rescans */
    int listen_fd;             /* <dir>/agent.sock: the fraction's own socket, -1 if none */
} gf_afraction;

typedef struct gf_agent {
    pthread_mutex_t lock;       /* the metrics thread reads under it */
    char state_dir[GF_PATH_MAX];
    char socket_path[GF_PATH_MAX];
    char metrics_listen[128];   /* "127.0.0.1:9400", "" = off */
    int watchdog_period_ms;     /* default 500 */
    uint64_t watchdog_ctx_allowance; /* bytes per process over the limit; 0 = GF_WATCHDOG_CTX_ALLOWANCE */
    char mps_control[GF_PATH_MAX]; /* nvidia-cuda-mps-control to run */
    gf_gpu gpus[GF_AGENT_GPUS_MAX];
    int n_gpus;
    gf_afraction *fractions;   /* GF_AGENT_FRACTIONS_MAX entries */
    int n_fractions;
    uint64_t loan_seq;         /* newest loan number handed out */
    struct timespec scanned_mtime; /* of <state>/fractions at the last scan */
    /* publishing the GPU inventory on the Node (for gpufrac-scheduler) */
    char node_name[256], api_server[512], token_file[GF_PATH_MAX];
    bool api_insecure, published;
    time_t publish_next;
    uint64_t requests_total, requests_bad;
    uint64_t evictions_total, watchdog_kills_total; /* kept in <state>/counters */
    uint64_t ticks;            /* rounds of the loop, for "is the agent alive" alerts */
    time_t last_tick;
    int log_fd;
    int epfd;                  /* epoll of the fractions' listening sockets, -1 before main */
} gf_agent;

/* registry.c: (re)reads <state>/fractions, opening ledgers of new fractions
 * and closing those that are gone; recomputes per-GPU sums. */
int gf_registry_scan(gf_agent *a, gf_error *err);
/* As gf_registry_scan, but skipped when the fractions directory has not
 * changed since the last scan (what requests use). The tick does the full one. */
int gf_registry_scan_if_changed(gf_agent *a, gf_error *err);
gf_afraction *gf_registry_find_pid(gf_agent *a, pid_t pid, int *slot);
gf_afraction *gf_registry_find_name(gf_agent *a, const char *name);
/* The same, rescanning once on a miss (a fraction made since the last scan):
 * for requests, not for the watchdog's per-process lookups. */
gf_afraction *gf_registry_find_pid_fresh(gf_agent *a, pid_t pid, int *slot);
gf_afraction *gf_registry_find_name_fresh(gf_agent *a, const char *name);
int gf_gpu_index(const gf_agent *a, const char *uuid);

/* nvml.c: the agent's NVML (dlopen). */
int gf_agent_nvml_init(gf_agent *a, gf_error *err);
typedef struct gf_proc_mem {
    pid_t pid;
    uint64_t used;
} gf_proc_mem;
/* Per-process device memory of GPU i; returns the count or -1. */
int gf_agent_nvml_procs(gf_agent *a, int gpu, gf_proc_mem *out, int max, gf_error *err);
int gf_agent_nvml_refresh(gf_agent *a, gf_error *err); /* updates gpus[].used */

/* lender.c: burst loans and reclaim. */
int gf_lend(gf_agent *a, gf_afraction *f, int slot, int dev, uint64_t bytes, uint64_t *granted,
            gf_error *err);
int gf_return_loan(gf_agent *a, gf_afraction *f, int slot, int dev, uint64_t bytes);
/* Frees `bytes` on GPU uuid by terminating borrowers, newest loan first. */
int gf_reclaim(gf_agent *a, const char *uuid, uint64_t bytes, int *evicted, gf_error *err);

/* watchdog.c: compares NVML per-process memory with each fraction's limit;
 * terminates a process of a fraction whose true usage passes its limit.
 * The driver counts each process's context (hundreds of MiB) that the shim
 * does not charge, so a fraction is over when its driver figure on a GPU
 * passes limit + SLACK + allowance x its processes there. Call with a->lock
 * held (it writes driver_used and watchdog_kills, which metrics read). */
#define GF_WATCHDOG_SLACK 0ULL
#define GF_WATCHDOG_CTX_ALLOWANCE (512ULL << 20)
int gf_watchdog_tick(gf_agent *a, gf_error *err);

/* mps.c: one MPS control daemon per GPU in sm-sharing use. */
int gf_mps_ensure(gf_agent *a, int gpu, char *pipe_dir, size_t len, gf_error *err);
int gf_mps_terminate_clients(gf_agent *a, int gpu, const pid_t *pids, int n, gf_error *err);
int gf_mps_check(gf_agent *a, int gpu, gf_error *err);   /* fault detection + recovery */
int gf_mps_stop_idle(gf_agent *a, gf_error *err);        /* stop daemons of GPUs with no sm-sharing fraction */

/* metrics.c: Prometheus text format 0.0.4 (DESIGN 3.6). */
int gf_metrics_render(gf_agent *a, char **out, size_t *len, gf_error *err);
int gf_metrics_start(gf_agent *a, gf_error *err); /* HTTP server on metrics_listen */
void gf_metrics_stop(gf_agent *a);

/* counters.c: the agent-wide counters survive restarts in <state>/counters. */
void gf_counters_load(gf_agent *a);
void gf_counters_save(gf_agent *a);

/* publish.c: the node annotation gpufrac.io/gpus (when --node-name is set). */
void gf_publish_tick(gf_agent *a);

/* events: one line per reclaim/eviction/kill in the log and events.log. */
void gf_agent_event(gf_agent *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
