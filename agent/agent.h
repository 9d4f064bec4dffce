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
#include "proc.h"

#define GF_AGENT_FRACTIONS_MAX 4096
#define GF_AGENT_GPUS_MAX 16
#define GF_AGENT_LOANS_MAX 16384
#define GF_AGENT_CLIENTS_MAX 16384      /* connections of the whole node */
#define GF_AGENT_CLIENTS_PER_FRACTION 1024 /* of one fraction's socket (and of root's) */
#define GF_AGENT_CLIENT_IDLE_S 60        /* an idle connection is closed after this */
#define GF_AGENT_RECLAIMS_MAX 64         /* reclaims waiting for their victims to exit */
#define GF_AGENT_RECLAIM_WAIT_MS 5000    /* the longest a reclaim waits for them */
#define GF_AGENT_ATTACH_TIMEOUT_S 60     /* an admitted container's init attaches within this */
#define GF_EVENTS_MAX_BYTES (4ULL << 20) /* events.log's bound unless --events-max-bytes */

/* A loan the agent granted: the truth about burst memory. */
typedef struct gf_loan {
    bool used;
    char fraction[GF_NAME_MAX];
    int gpu;
    pid_t pid;        /* host pid of the borrower (SO_PEERCRED) */
    uint64_t start;   /* its start time: pid + start is its identity */
    uint64_t bytes, seq;
    int pidfd;        /* -1 once it is gone */
    bool evicting;    /* SIGKILLed to take it back; finished when the pidfd fires */
} gf_loan;

/* The agent's record of one GPU: the device and what the agent keeps on it. */
typedef struct gf_node_gpu {
    gf_gpu dev;
    gf_mode mode;     /* the mode of the fractions on it (valid when n_fractions > 0) */
    int n_fractions;
    uint64_t guaranteed; /* sum of requests of fractions on it */
    uint64_t lent;       /* sum of burst loans on it */
    bool mps_running;
    bool mps_fault;
    uint64_t mps_restarts;
} gf_node_gpu;

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
    char *dir;                 /* <state>/fractions/<name> */
    gf_aconfig cfg;
    int ledger_fd;             /* opened O_NOFOLLOW, never mapped */
    uint64_t fid;              /* unique per fraction the agent opened (never reused) */
    pid_t supervisor;          /* host pid the agent attached itself; 0 when none */
    uint64_t sup_start;        /* its start time */
    int sup_pidfd;             /* -1 when none or gone */
    bool sup_admitted;         /* a container's init, attached by the runtime */
    bool sup_seen;             /* a supervisor was attached once (stale when gone) */
    uid_t owner;               /* owner of the ledger file at open */
    gf_ledger_view view;       /* last copy of the ledger's entries of the fraction's GPUs
                                * (tenant data; tag: the node GPU) */
    uint64_t evictions[GF_CONFIG_DEVICES_MAX]; /* the agent's own counts, per config device */
    char ns[64], pod[128], container[64]; /* Kubernetes identity, "" on one host */
    bool has_identity;         /* an identity record (a container's), read at open */
    time_t admitted_at;        /* a container's: when the agent admitted it (identity) */
    bool ledger_grew;          /* its ledger was found past its size (cut back; logged once) */
    char *termlog;             /* host file of the container's termination message (root's
                                * runtime named it at admit), NULL when none */
    uint64_t driver_used[GF_CONFIG_DEVICES_MAX]; /* watchdog: NVML per-process sum */
    uint64_t watchdog_kills;
    uint64_t watchdog_kills_gpu[GF_CONFIG_DEVICES_MAX]; /* per config device, since start */
    bool seen;                 /* mark for rescans */
    int listen_fd;             /* <dir>/agent.sock: the fraction's own socket, -1 if none */
} gf_afraction;

/* fraction.c: a fraction's own heap parts. */
/* Fills c from a parsed config and the agent's ledger path. */
int gf_aconfig_set(gf_aconfig *c, const gf_fraction_config *cfg, const char *ledger,
                   gf_error *err);
/* The entry for uuid: an exact match first, else "*", else NULL (as
 * gf_config_find_device). */
const gf_config_device *gf_aconfig_device(const gf_aconfig *c, const char *uuid);
/* Frees what f holds (not its descriptors) and clears the pointers. */
void gf_fraction_free(gf_afraction *f);

typedef struct gf_agent {
    pthread_mutex_t lock;       /* the loop's; never taken by the metrics threads */
    char state_dir[GF_PATH_MAX];
    char socket_path[GF_PATH_MAX];
    char metrics_listen[128];   /* "127.0.0.1:9400", "" = off */
    int watchdog_period_ms;     /* default 500 */
    uint64_t watchdog_tolerance; /* bytes per GPU over the limit; 0 = gf_watchdog_tolerance() */
    int client_idle_s;          /* GF_AGENT_CLIENT_IDLE_S unless --client-idle-s */
    int attach_timeout_s;       /* GF_AGENT_ATTACH_TIMEOUT_S unless --attach-timeout-s */
    uint64_t events_max_bytes;  /* events.log's bound (--events-max-bytes) */
    int state_dfd, priv_dfd, frac_dfd; /* <state>, <state>/agent (0700), <state>/fractions */
    char mps_control[GF_PATH_MAX]; /* nvidia-cuda-mps-control to run */
    gf_node_gpu gpus[GF_AGENT_GPUS_MAX];
    int n_gpus;
    gf_afraction *fractions;   /* GF_AGENT_FRACTIONS_MAX entries */
    int n_fractions;
    uint64_t loan_seq;         /* newest loan number handed out (journaled) */
    uint64_t next_fid;
    gf_loan *loans;            /* GF_AGENT_LOANS_MAX entries */
    int loans_high;            /* entries at or above this were never used */
    int journal_fd;            /* <state>/agent/journal, append-only */
    size_t journal_bytes;
    _Atomic bool journal_full; /* no room: nothing new is granted (/healthz reads it) */
    _Atomic int journal_errno; /* why */
    struct timespec scanned_mtime; /* of <state>/fractions at the last scan */
    /* publishing the GPU inventory on the Node (for gpufrac-scheduler) */
    char node_name[256], api_server[512], token_file[GF_PATH_MAX];
    bool api_insecure, published;
    char api_ca_file[GF_PATH_MAX]; /* --ca-file; "" = in-cluster ca.crt */
    time_t publish_next;
    uint64_t requests_total, requests_bad;
    uint64_t evictions_total, watchdog_kills_total; /* journaled */
    uint64_t ticks;            /* rounds of the loop, for "is the agent alive" alerts */
    time_t last_tick;
    int log_fd;
    int epfd;                  /* epoll of the fractions' listening sockets, -1 before main */
    int loop_epfd;             /* the loop's epoll (pidfds of loans and supervisors too) */
    _Atomic int64_t loop_beat, watchdog_beat; /* CLOCK_MONOTONIC ms of the last pass */
    struct gf_msnap *msnap;    /* what /metrics shows (metrics_snapshot.h) */
} gf_agent;

/* What an event in the loop's epoll is (data.u64 = kind << 56 | id). */
enum { GF_EV_SIG = 1, GF_EV_TIMER, GF_EV_DIR, GF_EV_ROOT, GF_EV_FRACS, GF_EV_CLIENT,
       GF_EV_LOAN, GF_EV_SUP, GF_EV_USERS };
/* The fid of connections through <state>/users.sock: no fraction's (fids
 * count up from 1 and never get here), and never 0, which is root's socket. */
#define GF_FID_USERS UINT64_MAX
#define GF_EV(kind, id) (((uint64_t)(kind) << 56) | ((uint64_t)(id) & ((1ULL << 56) - 1)))
/* Adds fd to the loop's epoll (when the loop runs) for EPOLLIN. */
void gf_loop_watch(gf_agent *a, int fd, uint64_t data);

/* registry.c: (re)reads <state>/fractions, opening new fractions (config
 * once, ledger O_NOFOLLOW, never mapped) and closing those that are gone;
 * refreshes each ledger's view and recomputes per-GPU sums (guarantees from
 * the configs, loans from the agent's own record). */
int gf_registry_scan(gf_agent *a, gf_error *err);
/* As gf_registry_scan, but skipped when the fractions directory has not
 * changed since the last scan (what requests use). The tick does the full one. */
int gf_registry_scan_if_changed(gf_agent *a, gf_error *err);
gf_afraction *gf_registry_find_name(gf_agent *a, const char *name);
gf_afraction *gf_registry_find_fid(gf_agent *a, uint64_t fid);
/* The same, rescanning once on a miss (a fraction made since the last scan). */
gf_afraction *gf_registry_find_name_fresh(gf_agent *a, const char *name);
/* Opens the one fraction the agent just made at <state>/fractions/name (no
 * full scan: an admission costs the same however many fractions there are);
 * NULL with why when it cannot be opened. */
gf_afraction *gf_registry_open_new(gf_agent *a, const char *name, gf_error *err);
/* Forgets f, whose directory is gone (released or ended): closes what it
 * holds, without a rescan of every fraction. f's slot then holds another. */
void gf_registry_forget(gf_agent *a, gf_afraction *f);
void gf_registry_sums(gf_agent *a);
/* Sizes f's ledger view to the node GPUs its config covers (after f->cfg is
 * set), then reads it. */
int gf_fraction_view_init(gf_agent *a, gf_afraction *f, gf_error *err);
/* Reads f's ledger again into its view. */
void gf_fraction_view_read(gf_agent *a, gf_afraction *f);
/* The private copy of f's ledger entry for node GPU gpu and its index in the
 * ledger, or NULL (exact: only an entry named by the GPU's own uuid). */
const gf_ledger_device *gf_fraction_ledger_device(const gf_afraction *f, int gpu, bool exact,
                                                 int *index);
int gf_gpu_index(const gf_agent *a, const char *uuid);

/* attrib.c: which fraction a host pid belongs to, from the kernel only: its
 * ancestry up to init (a supervisor the agent attached), else, for container
 * fractions, the supervisor's cgroup. -1: none. gf_attrib_dirty after the
 * supervisors or the fractions change. */
int gf_attribute(gf_agent *a, pid_t pid);
/* Whether a process found to be f's still runs (not its supervisor): a
 * fraction is not stale while one does, slot lock or not. */
bool gf_attrib_has_member(gf_agent *a, const gf_afraction *f);
void gf_attrib_dirty(void);
/* Fraction i's supervisor is new (no other fraction's slot moved): added
 * to the lookup without a rebuild. */
void gf_attrib_added(gf_agent *a, int i);

/* nvml.c: the agent's NVML (dlopen). */
int gf_agent_nvml_init(gf_agent *a, gf_error *err);
typedef struct gf_proc_mem {
    pid_t pid;
    uint64_t used;
} gf_proc_mem;
/* Per-process device memory of GPU i; returns the count or -1. */
int gf_agent_nvml_procs(gf_agent *a, int gpu, gf_proc_mem *out, int max, gf_error *err);
int gf_agent_nvml_refresh(gf_agent *a, gf_error *err); /* updates gpus[].dev.used */

/* lender.c: burst loans and reclaim, from the agent's own loan record. */
/* Lends to the process pid (host pid, attributed to f by the caller), whose
 * pidfd the loan takes over (closed on failure). */
int gf_lend(gf_agent *a, gf_afraction *f, pid_t pid, int pidfd, int gpu, uint64_t bytes,
            uint64_t *granted, gf_error *err);
int gf_return_loan(gf_agent *a, gf_afraction *f, pid_t pid, int gpu, uint64_t bytes);
/* Starts taking back `bytes` on GPU gpu, newest loan first: SIGKILLs the
 * victims through their pidfds and returns at once. The reply goes to the
 * client (slot, gen) once they are gone (or after GF_AGENT_RECLAIM_WAIT_MS). */
int gf_reclaim_start(gf_agent *a, int gpu, uint64_t bytes, int client, uint64_t gen,
                     gf_error *err);
/* The loop saw loan i's pidfd fire: the borrower is gone. */
void gf_loan_exited(gf_agent *a, int i);
/* Reclaims past their deadline answer now. */
void gf_reclaim_expire(gf_agent *a);
uint64_t gf_loans_of(const gf_agent *a, const gf_afraction *f, int gpu);
/* The live loan of (fraction, GPU, host pid + start time), or NULL. */
gf_loan *gf_loan_find(gf_agent *a, const char *frac, int gpu, pid_t pid, uint64_t start);
/* Writes the agent's loans and evictions into f's ledger (the shim's copy). */
void gf_loans_publish(gf_agent *a, gf_afraction *f);
/* After the journal was replayed: reopens the borrowers' pidfds, finishes
 * evictions a killed agent left half done, drops loans of dead borrowers. */
void gf_loans_recover(gf_agent *a);
void gf_loan_watch(gf_agent *a, int i);

/* journal.c: the agent's durable state in <state>/agent/journal, one line per
 * change (append + fdatasync), compacted at start and when it grows. */
int gf_journal_open(gf_agent *a, gf_error *err);
/* Appends one record; -1 when it could not be made durable (the journal is
 * then full until gf_journal_reserve finds room). */
int gf_journal(gf_agent *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Keeps space allocated past the journal's end, so records that give back
 * (return, evict, unsup) fit when the file system fills; when it cannot, or
 * the file system has less free than that reserve, the journal is full and
 * nothing new is granted. From the tick. */
void gf_journal_reserve(gf_agent *a);
/* -1 with why (and an event) when the journal is full: `what` (a loan, an
 * admission, a run) is not granted. */
int gf_journal_refuses(gf_agent *a, const char *what, gf_error *err);
void gf_journal_compact(gf_agent *a);
/* Journals the agent-wide and per-GPU counters when they changed since the
 * last time (ticks alone excepted: an idle agent writes nothing). */
void gf_journal_counters(gf_agent *a);
/* Journals every counter the metrics page shows that the journal does not
 * hold yet, so no value a scrape saw is lost to a SIGKILL (counters never go
 * down across a restart). Call under a->lock, before the page is rendered. */
void gf_journal_exposed(gf_agent *a);
/* A fraction's own counters (watchdog kills, evictions per device): journaled
 * when they change, restored when the fraction is opened again. */
void gf_journal_fraction_counts(gf_agent *a, const gf_afraction *f);
void gf_journal_restore_counts(gf_agent *a, gf_afraction *f);
/* The supervisor the journal recorded for a fraction (consumed on open). */
bool gf_journal_supervisor(gf_agent *a, const char *name, pid_t *pid, uint64_t *start,
                           bool *admitted);

/* server.c: the clients of the agent's sockets. */
/* A listening socket at name in directory dfd, owned by owner, mode 0600: made
 * in <state>/agent (root's alone) and renamed into place, so nothing a user
 * put at that name is followed or chowned. */
int gf_socket_listen_in(gf_agent *a, int dfd, const char *name, uid_t owner, gf_error *err);
/* The same with another mode (users.sock: 0666, each request judged by SO_PEERCRED). */
int gf_socket_listen_in_mode(gf_agent *a, int dfd, const char *name, uid_t owner, mode_t mode,
                             gf_error *err);
void gf_server_reply_to(gf_agent *a, int client, uint64_t gen, const char *text);

/* test builds only: GPUFRAC_TEST_CRASH_AT=<step> SIGKILLs the agent there */
#ifdef GF_TEST_HOOKS
void gf_test_crash_point(const char *step);
#else
#define gf_test_crash_point(step) ((void)0)
#endif

/* watchdog.c: compares NVML per-process memory with each fraction's bound;
 * terminates a process of a fraction whose driver-measured footprint on a
 * GPU passes it. The bound is the config's limit (or, for a fraction that
 * borrows from this agent, request + what the agent lent it), plus one
 * tolerance per GPU (gf_watchdog_tolerance). Call with a->lock held. */
#define GF_WATCHDOG_TOLERANCE_MIN (64ULL << 20)
uint64_t gf_watchdog_tolerance(const gf_agent *a, int gpu);
int gf_watchdog_tick(gf_agent *a, gf_error *err);

/* mps.c: one MPS control daemon per GPU in sm-sharing use. */
int gf_mps_ensure(gf_agent *a, int gpu, char *pipe_dir, size_t len, gf_error *err);
int gf_mps_terminate_clients(gf_agent *a, int gpu, const pid_t *pids, int n, gf_error *err);
int gf_mps_check(gf_agent *a, int gpu, gf_error *err);   /* fault detection + recovery */
int gf_mps_stop_idle(gf_agent *a, gf_error *err);        /* stop daemons of GPUs with no sm-sharing fraction */

/* metrics.c: Prometheus text format 0.0.4, formatted from the latest
 * snapshot (GF_ESTATE before the first), without a->lock. */
int gf_metrics_render(gf_agent *a, char **out, size_t *len, gf_error *err);
int gf_metrics_start(gf_agent *a, gf_error *err); /* HTTP server on metrics_listen */
void gf_metrics_stop(gf_agent *a);

/* metrics_snapshot.c: copies what /metrics shows out of a (a->lock held:
 * the loop, at every tick and when fractions came or went) and makes it the
 * page's; a page is at most one watchdog period (plus a tick) old. */
int gf_metrics_publish(gf_agent *a, gf_error *err);
void gf_metrics_unpublish(gf_agent *a); /* drops the agent's reference */

/* usernames.c: uid -> user name for the page, from a cache a thread of its
 * own fills (never the caller: a slow name service blocks nobody else).
 * gf_username writes the cached name, else the numeric uid, and has a
 * missing or expired entry looked up. */
#define GF_USERNAME_MAX 64
#define GF_USERNAME_TTL_S 300    /* a resolved name is looked up again after this */
#define GF_USERNAME_NEG_TTL_S 60 /* the same for a uid without a passwd entry */
int gf_usernames_start(gf_error *err); /* once per process; later calls do nothing */
void gf_username(uid_t uid, char *out, size_t len);
/* Waits until no lookup is pending (at most timeout_ms); true when none is. */
bool gf_usernames_settle(int timeout_ms);
#define GF_USERNAMES_START_WAIT_MS 2000 /* at start, before the first page */

/* counters.c: the agent-wide counters survive restarts in the journal. */
void gf_counters_save(gf_agent *a);

/* singleton.c: takes <state>/agent/lock for the process' life (after the
 * private directory is opened, before anything else in the state directory is
 * touched); fails naming the pid of the agent that holds it. */
int gf_agent_lock(gf_agent *a, gf_error *err);

/* publish.c: the node annotation gpufrac.io/gpus (when --node-name is set). */
void gf_publish_tick(gf_agent *a);

/* events.c: one line per reclaim/eviction/kill in the log and events.log
 * (bounded and rotated; lines of one fmt rate-limited). gf_events_flush, at
 * every tick, says how many lines were suppressed. */
void gf_agent_event(gf_agent *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void gf_events_flush(gf_agent *a);
int64_t gf_now_ms(void);

#endif
