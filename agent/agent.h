/* SPDX-License-Identifier: Apache-2.0 */
/* gpufracd internals: the pieces of the node agent and what they share.
 *
 * Trusted (the agent's own, root-only):
 *   <state>/agent/journal                               (loans, supervisors, counters;
 *                                                        see journal.c)
 *   <state>/agent/lock                                  (held while an agent serves the
 *                                                        directory; singleton.c)
 *   <state>/agent.sock                                  (root's socket, see core/proto.h)
 *   the fraction configs, read once when a fraction appears
 * Tenant-written (untrusted, read only through bounded copies):
 *   <state>/fractions/<name>/ledger                     (see ledger_view.h)
 *   <state>/fractions/<name>/supervisor                 (never read by the agent)
 * Written by the agent for others:
 *   <state>/users.sock                                  (every local user's gpufrac run;
 *                                                        only ping/run/end, user_admit.h)
 *   <state>/fractions/<name>/agent.sock                 (the fraction's socket)
 *   <state>/fractions/<name>/terminated                 (why it terminated a process)
 *   <state>/ended/<name>.<pid>/                         (users' ended fractions, for status)
 *   <state>/mps/<short-uuid>/                           (MPS pipe dirs, sm-sharing)
 *   <state>/events.log, events.log.1                    (one line per reclaim/eviction/kill;
 *                                                        bounded, rotated: events.c)
 * Every pid the agent keeps is a host pid with its start time, and every
 * signal goes through a pidfd (proc.h). */
#ifndef GPUFRAC_AGENT_H
#define GPUFRAC_AGENT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "config.h"
#include "error.h"
#include "gpus.h"
#include "ledger.h"
#include "ledger_view.h"
#include "loop.h"
#include "proc.h"

#define GF_AGENT_FRACTIONS_MAX 4096
#define GF_AGENT_GPUS_MAX 16
#define GF_AGENT_LOANS_MAX 16384
#define GF_AGENT_CLIENTS_MAX 16384         /* connections of the whole node */
#define GF_AGENT_CLIENTS_PER_FRACTION 1024 /* of one fraction's socket (and of root's) */
#define GF_AGENT_CLIENT_IDLE_S 60          /* an idle connection is closed after this */
#define GF_AGENT_RECLAIMS_MAX 64           /* reclaims waiting for their victims to exit */
#define GF_AGENT_RECLAIM_WAIT_MS 5000      /* the longest a reclaim waits for them */
#define GF_AGENT_ATTACH_TIMEOUT_S 60       /* an admitted container's init attaches within this */
#define GF_EVENTS_MAX_BYTES (4ULL << 20)   /* events.log's bound unless --events-max-bytes */

/* A loan the agent granted: the truth about burst memory. */
typedef struct gf_loan {
    bool used;
    char fraction[GF_NAME_MAX];
    int gpu;
    pid_t pid;      /* host pid of the borrower (SO_PEERCRED) */
    uint64_t start; /* its start time: pid + start is its identity */
    uint64_t bytes, seq;
    int pidfd;     /* -1 once it is gone */
    bool evicting; /* SIGKILLed to take it back; finished when the pidfd fires */
} gf_loan;

/* The agent's record of one GPU: the device and what the agent keeps on it. */
typedef struct gf_agent_gpu {
    gf_gpu dev;
    gf_mode mode; /* the mode of the fractions on it (valid when n_fractions > 0) */
    int n_fractions;
    uint64_t guaranteed; /* sum of requests of fractions on it */
    uint64_t lent;       /* sum of burst loans on it */
    bool mps_running;
    bool mps_fault;
    uint64_t mps_restarts;
} gf_agent_gpu;

/* What the agent keeps of a fraction's config (trusted: root's or checked at
 * admission, read once when the fraction appears), sized to what it holds:
 * the shim's own ledger path is not kept. */
typedef struct gf_aconfig {
    char name[GF_NAME_MAX];
    gf_mode mode;
    size_t n_devices;
    gf_config_device *devices; /* n_devices of them */
    char *ledger;              /* the agent's: <dir>/ledger */
    char *agent;               /* the agent's socket the config names, "" = no burst */
} gf_aconfig;

/* One fraction known to the agent. Its strings and arrays are its own heap
 * blocks (gf_fraction_free), so a fraction costs what it uses. */
typedef struct gf_afraction {
    char *dir; /* <state>/fractions/<name> */
    gf_aconfig cfg;
    int ledger_fd;       /* opened O_NOFOLLOW, never mapped */
    uint64_t fid;        /* unique per fraction the agent opened (never reused) */
    pid_t supervisor;    /* host pid the agent attached itself; 0 when none */
    uint64_t sup_start;  /* its start time */
    int sup_pidfd;       /* -1 when none or gone */
    bool sup_admitted;   /* a container's init, attached by the runtime */
    bool sup_seen;       /* a supervisor was attached once (stale when gone) */
    uid_t owner;         /* owner of the ledger file at open */
    gf_ledger_view view; /* last copy of the ledger's entries of the fraction's GPUs
                          * (tenant data; tag: the node GPU) */
    uint64_t evictions[GF_CONFIG_DEVICES_MAX]; /* the agent's own counts, per config device */
    char ns[64], pod[128], container[64];      /* Kubernetes identity, "" on one host */
    bool has_identity;  /* an identity record (a container's), read at open */
    time_t admitted_at; /* a container's: when the agent admitted it (identity) */
    time_t made_at;     /* when its directory (root's) was last changed, at open */
    bool ledger_grew;   /* its ledger was found past its size (cut back; logged once) */
    char *termlog;      /* host file of the container's termination message (root's
                         * runtime named it at admit), NULL when none */
    uint64_t driver_used[GF_CONFIG_DEVICES_MAX]; /* watchdog: NVML per-process sum */
    uint64_t watchdog_kills;
    uint64_t watchdog_kills_gpu[GF_CONFIG_DEVICES_MAX]; /* per config device, since start */
    bool seen;                                          /* mark for rescans */
    int listen_fd; /* <dir>/agent.sock: the fraction's own socket, -1 if none */
} gf_afraction;

typedef struct gf_agent {
    pthread_mutex_t lock; /* the loop's; never taken by the metrics threads */
    char state_dir[GF_PATH_MAX];
    char socket_path[GF_PATH_MAX];
    char metrics_listen[128];    /* "127.0.0.1:9400", "" = off */
    int watchdog_period_ms;      /* default 500 */
    uint64_t watchdog_tolerance; /* bytes per GPU over the limit; 0 = gf_watchdog_tolerance() */
    int client_idle_s;           /* GF_AGENT_CLIENT_IDLE_S unless --client-idle-s */
    int attach_timeout_s;        /* GF_AGENT_ATTACH_TIMEOUT_S unless --attach-timeout-s */
    uint64_t events_max_bytes;   /* events.log's bound (--events-max-bytes) */
    int state_dfd, priv_dfd, frac_dfd; /* <state>, <state>/agent (0700), <state>/fractions */
    char mps_control[GF_PATH_MAX];     /* nvidia-cuda-mps-control to run */
    gf_agent_gpu gpus[GF_AGENT_GPUS_MAX];
    int n_gpus;
    gf_afraction *fractions; /* GF_AGENT_FRACTIONS_MAX entries */
    int n_fractions;
    uint64_t loan_seq; /* newest loan number handed out (journaled) */
    uint64_t next_fid;
    gf_loan *loans; /* GF_AGENT_LOANS_MAX entries */
    int loans_high; /* entries at or above this were never used */
    int journal_fd; /* <state>/agent/journal, append-only */
    size_t journal_bytes;
    _Atomic bool journal_full;     /* no room: nothing new is granted (/healthz reads it) */
    _Atomic int journal_errno;     /* why */
    struct timespec scanned_mtime; /* of <state>/fractions at the last scan */
    /* publishing the GPU inventory on the Node (for gpufrac-scheduler) */
    char node_name[256], api_server[512], token_file[GF_PATH_MAX];
    bool api_insecure, published;
    char api_ca_file[GF_PATH_MAX]; /* --ca-file; "" = in-cluster ca.crt */
    time_t publish_next;
    uint64_t requests_total, requests_bad;
    uint64_t evictions_total, watchdog_kills_total; /* journaled */
    uint64_t ticks; /* rounds of the loop, for "is the agent alive" alerts */
    time_t last_tick;
    int log_fd;
    gf_loop loop;                             /* every descriptor the agent polls (zeroed: none) */
    _Atomic int64_t loop_beat, watchdog_beat; /* CLOCK_MONOTONIC ms of the last pass */
    struct gf_msnap *msnap;                   /* what /metrics shows (metrics_snapshot.h) */
} gf_agent;

/* The kinds of descriptors the loop watches (loop.h), with their ids. */
enum {
    GF_EV_SIG = 1,  /* the signalfd */
    GF_EV_TIMER,    /* the tick's timerfd */
    GF_EV_DIR,      /* inotify of <state>/fractions */
    GF_EV_ROOT,     /* root's listening socket */
    GF_EV_USERS,    /* users.sock's */
    GF_EV_FRACTION, /* a fraction's listening socket (id: its fid) */
    GF_EV_CLIENT,   /* a connection (id: its slot, conn.c) */
    GF_EV_LOAN,     /* a loan's pidfd (id: its slot, loans.h) */
    GF_EV_SUP,      /* a supervisor's pidfd (id: its fraction's fid) */
};

#endif
