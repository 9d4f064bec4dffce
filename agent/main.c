/* SPDX-License-Identifier: Apache-2.0 */
/* gpufracd: the node agent. One loop: the socket, a timer for the watchdog
 * and MPS health, signals. Metrics are served from their own threads, from a
 * snapshot the loop publishes at each tick and soon after fractions change. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "admit.h"
#include "agent.h"
#include "conn.h"
#include "events.h"
#include "fraction.h"
#include "journal.h"
#include "lender.h"
#include "log.h"
#include "loop.h"
#include "metrics.h"
#include "metrics_snapshot.h"
#include "mps.h"
#include "nvml.h"
#include "proc.h"
#include "publish.h"
#include "registry.h"
#include "singleton.h"
#include "sock.h"
#include "stale.h"
#include "statedir.h"
#include "supervisors.h"
#include "user_admit.h"
#include "usernames.h"
#include "verbs.h"
#include "version.h"
#include "watchdog.h"

static const char usage[] =
    "Usage: gpufracd [--state-dir DIR] [--socket PATH] [--metrics-listen HOST:PORT]\n"
    "                [--watchdog-period-ms N] [--watchdog-tolerance BYTES]\n"
    "                [--client-idle-s N] [--mps-control PATH] [--policy FILE]\n"
    "                [--events-max-bytes N] [--attach-timeout-s N]\n"
    "                [--log-level error|warn|info|debug]\n"
    "       gpufracd --check-config [flags]    gpufracd --version\n"
    "\n"
    "The gpufrac node agent: lends burst memory between a fraction's request and\n"
    "its limit and takes it back when a guaranteed owner needs it, runs one MPS\n"
    "control daemon per GPU in sm-sharing use, terminates processes whose driver-\n"
    "measured memory passes their fraction's limit, and serves Prometheus metrics.\n"
    "\n"
    "  --state-dir DIR          fractions and agent state (default /run/gpufrac)\n"
    "  --socket PATH            the agent socket (default <state-dir>/agent.sock)\n"
    "  --metrics-listen H:P     metrics address (default 127.0.0.1:9464; \"off\" disables;\n"
    "                           port 0 picks a free one and logs it)\n"
    "  --watchdog-period-ms N   watchdog period (default 500)\n"
    "  --watchdog-tolerance B   bytes a fraction's driver footprint may pass its bound by,\n"
    "                           per GPU (default: 64 MiB or 1/512 of the GPU, the larger)\n"
    "  --client-idle-s N        close a connection idle this long (default 60)\n"
    "  --mps-control PATH       nvidia-cuda-mps-control to run (default: from PATH)\n"
    "  --events-max-bytes N     <state-dir>/events.log is renamed to events.log.1 (one\n"
    "                           old file kept) before it would pass N bytes (default\n"
    "                           4194304, at least 4096); lines of one kind past 50, then\n"
    "                           10 a second, are counted in one \"suppressed\" line\n"
    "  --attach-timeout-s N     a container admitted but not attached within N s is\n"
    "                           released (default 60)\n"
    "  --policy FILE            what each local user may ask (default " GF_USER_POLICY_DEFAULT ";\n"
    "                           missing: at most 32 fractions a user); users reach the agent "
    "through\n"
    "                           <state-dir>/users.sock\n"
    "  --log-level L            error, warn, info or debug (default info): lines less\n"
    "                           severe than L are not written\n"
    "  --check-config           read the flags and the policy, print what is in force\n"
    "                           and exit 0, or exit 1 (2: a bad flag) with the message\n"
    "                           the agent would stop with; starts nothing\n"
    "  --version                print the version and exit\n"
    "  --node-name NAME         publish the GPU inventory as annotation gpufrac.io/gpus of\n"
    "                           this Node (default: $NODE_NAME; unset = do not publish)\n"
    "  --api-server URL         Kubernetes API (default: in-cluster); --token-file F,\n"
    "                           --ca-file F, --insecure-skip-tls-verify as for\n"
    "                           gpufrac-scheduler\n"
    "\n"
    "Runs in the foreground; stop it with SIGTERM. Its own state (loans, supervisors,\n"
    "counters) is journaled in <state-dir>/agent, so the agent can be SIGKILLed and\n"
    "restarted at any moment without losing anything. One agent serves a state\n"
    "directory (<state-dir>/agent/lock): a second one exits, naming the first.\n";

static char policy[GF_PATH_MAX] = GF_USER_POLICY_DEFAULT; /* --policy */
static bool check_config;                                 /* --check-config */
static gf_log_level log_level = GF_LOG_INFO;              /* --log-level */

static int parse_args(gf_agent *a, int argc, char **argv)
{
    static const struct option opts[] = {
        {"state-dir", required_argument, NULL, 's'},
        {"socket", required_argument, NULL, 'k'},
        {"metrics-listen", required_argument, NULL, 'm'},
        {"watchdog-period-ms", required_argument, NULL, 'w'},
        {"mps-control", required_argument, NULL, 'c'},
        {"watchdog-tolerance", required_argument, NULL, 'T'},
        {"client-idle-s", required_argument, NULL, 'I'},
        {"node-name", required_argument, NULL, 'n'},
        {"api-server", required_argument, NULL, 'a'},
        {"token-file", required_argument, NULL, 't'},
        {"insecure-skip-tls-verify", no_argument, NULL, 'i'},
        {"ca-file", required_argument, NULL, 'C'},
        {"policy", required_argument, NULL, 'p'},
        {"events-max-bytes", required_argument, NULL, 'E'},
        {"attach-timeout-s", required_argument, NULL, 'A'},
        {"check-config", no_argument, NULL, 'K'},
        {"log-level", required_argument, NULL, 'L'},
        {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;
    char *end;

    snprintf(a->state_dir, sizeof(a->state_dir), GF_STATE_DIR_DEFAULT);
    snprintf(a->metrics_listen, sizeof(a->metrics_listen), "127.0.0.1:9464");
    snprintf(a->mps_control, sizeof(a->mps_control), "nvidia-cuda-mps-control");
    if (getenv("NODE_NAME"))
        snprintf(a->node_name, sizeof(a->node_name), "%s", getenv("NODE_NAME"));
    a->watchdog_period_ms = 500;
    a->client_idle_s = GF_AGENT_CLIENT_IDLE_S;
    a->events_max_bytes = GF_EVENTS_MAX_BYTES;
    a->attach_timeout_s = GF_AGENT_ATTACH_TIMEOUT_S;
    while ((c = getopt_long(argc, argv, "hV", opts, NULL)) != -1) {
        switch (c) {
        case 's': snprintf(a->state_dir, sizeof(a->state_dir), "%s", optarg); break;
        case 'k': snprintf(a->socket_path, sizeof(a->socket_path), "%s", optarg); break;
        case 'm':
            snprintf(a->metrics_listen, sizeof(a->metrics_listen), "%s",
                     strcmp(optarg, "off") == 0 ? "" : optarg);
            break;
        case 'c': snprintf(a->mps_control, sizeof(a->mps_control), "%s", optarg); break;
        case 'n': snprintf(a->node_name, sizeof(a->node_name), "%s", optarg); break;
        case 'a': snprintf(a->api_server, sizeof(a->api_server), "%s", optarg); break;
        case 't': snprintf(a->token_file, sizeof(a->token_file), "%s", optarg); break;
        case 'i': a->api_insecure = true; break;
        case 'C': snprintf(a->api_ca_file, sizeof(a->api_ca_file), "%s", optarg); break;
        case 'p': snprintf(policy, sizeof(policy), "%s", optarg); break;
        case 'w':
            a->watchdog_period_ms = (int)strtol(optarg, &end, 10);
            if (*end || a->watchdog_period_ms < 10 || a->watchdog_period_ms > 60000) {
                fprintf(stderr,
                        "gpufracd: --watchdog-period-ms: \"%s\" is not a number of "
                        "milliseconds from 10 to 60000\n",
                        optarg);
                return 2;
            }
            break;
        case 'T':
            a->watchdog_tolerance = strtoull(optarg, &end, 10);
            if (*end || !a->watchdog_tolerance) {
                fprintf(stderr,
                        "gpufracd: --watchdog-tolerance: \"%s\" is not a positive number "
                        "of bytes\n",
                        optarg);
                return 2;
            }
            break;
        case 'I':
            a->client_idle_s = (int)strtol(optarg, &end, 10);
            if (*end || a->client_idle_s < 1 || a->client_idle_s > 86400) {
                fprintf(stderr,
                        "gpufracd: --client-idle-s: \"%s\" is not a number of seconds "
                        "from 1 to 86400\n",
                        optarg);
                return 2;
            }
            break;
        case 'E':
            a->events_max_bytes = strtoull(optarg, &end, 10);
            if (*end || a->events_max_bytes < 4096 || a->events_max_bytes > (1ULL << 40)) {
                fprintf(stderr,
                        "gpufracd: --events-max-bytes: \"%s\" is not a number of bytes "
                        "from 4096 to 2^40\n",
                        optarg);
                return 2;
            }
            break;
        case 'A':
            a->attach_timeout_s = (int)strtol(optarg, &end, 10);
            if (*end || a->attach_timeout_s < 1 || a->attach_timeout_s > 86400) {
                fprintf(stderr,
                        "gpufracd: --attach-timeout-s: \"%s\" is not a number of "
                        "seconds from 1 to 86400\n",
                        optarg);
                return 2;
            }
            break;
        case 'K': check_config = true; break;
        case 'L':
            if (gf_log_level_parse(optarg, &log_level) < 0 || log_level == GF_LOG_OFF) {
                fprintf(stderr,
                        "gpufracd: --log-level: \"%s\" is not one of error, warn, info, "
                        "debug\n",
                        optarg);
                return 2;
            }
            break;
        case 'V': printf("gpufracd %s\n", GPUFRAC_VERSION); return 0;
        case 'h': fputs(usage, stdout); return 0;
        default: fputs("Try 'gpufracd --help'.\n", stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "gpufracd: unexpected argument \"%s\"\nTry 'gpufracd --help'.\n",
                argv[optind]);
        return 2;
    }
    if (!a->socket_path[0] &&
        (size_t)snprintf(a->socket_path, sizeof(a->socket_path), "%s/" GF_STATE_AGENT_SOCK,
                         a->state_dir) >= sizeof(a->socket_path)) {
        fprintf(stderr, "gpufracd: --state-dir: \"%s\" is too long\n", a->state_dir);
        return 2;
    }
    return -1;
}

/* A directory the agent made or was given, opened once without following a
 * link; later files are made relative to the descriptor. */
static int open_dir(int at, const char *name, mode_t mode, bool private_, const char *shown,
                    gf_error *err)
{
    struct stat st;
    int fd;

    if (mkdirat(at, name, mode) < 0 && errno != EEXIST)
        return gf_error_sys(err, "creating %s", shown);
    fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return gf_error_sys(err, "opening %s (a directory, not a link)", shown);
    if (private_ && (fstat(fd, &st) < 0 || st.st_uid != geteuid() || (st.st_mode & 077))) {
        /* someone else's, or open to others: make it ours, as the agent made it */
        if (fchown(fd, geteuid(), getegid()) < 0 || fchmod(fd, 0700) < 0) {
            close(fd);
            return gf_error_sys(err, "%s must be the agent's alone", shown);
        }
    }
    return fd;
}

static int make_dirs(gf_agent *a, gf_error *err)
{
    char shown[GF_PATH_MAX + 16];
    if ((a->state_dfd = open_dir(AT_FDCWD, a->state_dir, 0755, false, a->state_dir, err)) < 0)
        return -1;
    snprintf(shown, sizeof(shown), "%s/" GF_STATE_AGENT_DIR, a->state_dir);
    if ((a->priv_dfd = open_dir(a->state_dfd, GF_STATE_AGENT_DIR, 0700, true, shown, err)) < 0)
        return -1;
    if (gf_agent_lock(a, err) < 0) /* before anything of a running agent is touched */
        return -1;
    snprintf(shown, sizeof(shown), "%s/" GF_STATE_FRACTIONS, a->state_dir);
    if ((a->frac_dfd = open_dir(a->state_dfd, GF_STATE_FRACTIONS, 0755, false, shown, err)) < 0)
        return -1;
    return 0;
}

static int make_signalfd(void)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGPIPE);
    sigprocmask(SIG_BLOCK, &set, NULL);
    sigdelset(&set, SIGPIPE);
    return signalfd(-1, &set, SFD_CLOEXEC);
}

static int make_timer(int ms)
{
    int fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    struct itimerspec its = {
        .it_interval = {ms / 1000, (ms % 1000) * 1000000L},
        .it_value = {ms / 1000, (ms % 1000) * 1000000L},
    };
    if (fd >= 0)
        timerfd_settime(fd, 0, &its, NULL);
    return fd;
}

static void tick(gf_agent *a)
{
    gf_error err;
    pthread_mutex_lock(&a->lock);
    a->ticks++;
    a->last_tick = time(NULL);
    if (gf_registry_scan(a, &err) < 0)
        gf_log_write(a->log_fd, GF_LOG_WARN, "gpufracd", "%s", err.msg);
    gf_agent_nvml_refresh(a, &err);
    if (gf_watchdog_tick(a, &err) < 0)
        gf_log_write(a->log_fd, GF_LOG_WARN, "gpufracd", "watchdog: %s", err.msg);
    atomic_store(&a->watchdog_beat, gf_now_ms());
    for (int g = 0; g < a->n_gpus; g++)
        if (a->gpus[g].mps_running && gf_mps_check(a, g, &err) < 0)
            gf_log_write(a->log_fd, GF_LOG_WARN, "gpufracd", "%s", err.msg);
    gf_user_reconcile(a);
    gf_release_stale(a);
    gf_reclaim_expire(a);
    gf_conn_sweep(a);
    gf_journal_counters(a);
    gf_journal_reserve(a);
    gf_events_flush(a);
    for (int i = 0; i < a->n_fractions; i++)
        gf_loans_publish(a, &a->fractions[i]); /* the shim's copy, restored if a tenant wrote it */
    gf_publish_tick(a);
    gf_mps_stop_idle(a, &err);
    if (gf_metrics_publish(a, &err) < 0)
        gf_log_write(a->log_fd, GF_LOG_WARN, "gpufracd", "%s", err.msg);
    pthread_mutex_unlock(&a->lock);
}

static void on_signal(void *agent, uint64_t fd, uint32_t events)
{
    gf_agent *a = agent;

    (void)fd, (void)events;
    gf_loop_stop(&a->loop); /* SIGTERM/SIGINT/SIGHUP: state is already on disk */
}

static void on_timer(void *agent, uint64_t fd, uint32_t events)
{
    uint64_t x;

    (void)events;
    if (read((int)fd, &x, sizeof(x)) == sizeof(x))
        tick(agent);
}

/* A fraction came or went: its socket opens (or closes) at once, the page
 * shows it soon. */
static void on_fractions_dir(void *agent, uint64_t fd, uint32_t events)
{
    gf_agent *a = agent;
    char buf[4096];
    gf_error err;

    (void)events;
    while (read((int)fd, buf, sizeof(buf)) > 0)
        ;
    pthread_mutex_lock(&a->lock);
    gf_registry_scan_if_changed(a, &err);
    gf_metrics_publish_soon(a, true);
    pthread_mutex_unlock(&a->lock);
}

static void on_root_socket(void *agent, uint64_t fd, uint32_t events)
{
    (void)events;
    gf_conn_accept(agent, (int)fd, GF_SOCKET_ROOT, 0);
}

static void on_users_socket(void *agent, uint64_t fd, uint32_t events)
{
    (void)events;
    gf_conn_accept(agent, (int)fd, GF_SOCKET_USERS, 0);
}

static void on_fraction_socket(void *agent, uint64_t fid, uint32_t events)
{
    gf_afraction *f = gf_fraction_find_fid(agent, fid);

    (void)events;
    if (f && f->listen_fd >= 0)
        gf_conn_accept(agent, f->listen_fd, GF_SOCKET_FRACTION, fid);
}

static void on_sup_exit(void *agent, uint64_t fid, uint32_t events)
{
    gf_agent *a = agent;
    gf_afraction *f;

    (void)events;
    pthread_mutex_lock(&a->lock);
    if ((f = gf_fraction_find_fid(a, fid)))
        gf_sup_lost(a, f);
    gf_release_stale(a);
    pthread_mutex_unlock(&a->lock);
}

static void on_wake(void *agent)
{
    gf_agent *a = agent;

    atomic_store(&a->loop_beat, gf_now_ms());
    if (gf_metrics_publish_pending()) { /* the lock only when a change waits: not per request */
        pthread_mutex_lock(&a->lock);
        gf_metrics_publish_soon(a, false);
        pthread_mutex_unlock(&a->lock);
    }
}

static void wire_loop(gf_agent *a)
{
    gf_loop *l = &a->loop;

    gf_loop_on(l, GF_EV_SIG, on_signal, a);
    gf_loop_on(l, GF_EV_TIMER, on_timer, a);
    gf_loop_on(l, GF_EV_DIR, on_fractions_dir, a);
    gf_loop_on(l, GF_EV_ROOT, on_root_socket, a);
    gf_loop_on(l, GF_EV_USERS, on_users_socket, a);
    gf_loop_on(l, GF_EV_FRACTION, on_fraction_socket, a);
    gf_loop_on(l, GF_EV_CLIENT, gf_conn_ready, a);
    gf_loop_on(l, GF_EV_LOAN, gf_loan_exited, a);
    gf_loop_on(l, GF_EV_SUP, on_sup_exit, a);
    gf_conn_init(gf_verbs_serve);
}

static int loop(gf_agent *a, int lfd, int ufd, int sfd, int tfd, int ifd)
{
    gf_error err;

    gf_loop_watch(&a->loop, sfd, GF_EV_SIG, (uint64_t)sfd);
    gf_loop_watch(&a->loop, tfd, GF_EV_TIMER, (uint64_t)tfd);
    gf_loop_watch(&a->loop, ifd, GF_EV_DIR, (uint64_t)ifd);
    gf_loop_watch(&a->loop, lfd, GF_EV_ROOT, (uint64_t)lfd);
    gf_loop_watch(&a->loop, ufd, GF_EV_USERS, (uint64_t)ufd);
    if (gf_loop_run(&a->loop, a->watchdog_period_ms, on_wake, a, &err) < 0) {
        fprintf(stderr, "gpufracd: %s\n", err.msg);
        return 1;
    }
    return 0;
}

static int watch_fractions_dir(gf_agent *a)
{
    char dir[64];
    int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    snprintf(dir, sizeof(dir), "/proc/self/fd/%d", a->frac_dfd); /* the one opened, no link */
    if (fd >= 0)
        inotify_add_watch(fd, dir, IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM);
    return fd;
}

/* "none: defaults (...)" or the file and what each of its sections sets. */
static void describe_policy(const gf_user_policy *p, bool present, char *buf, size_t len)
{
    size_t n;

    if (!present) {
        snprintf(buf, len, "none: defaults (no %s; at most %d fractions a user)", policy,
                 GF_USER_POLICY_MAX_FRACTIONS_DEFAULT);
        return;
    }
    n = (size_t)snprintf(buf, len, "%s: %zu section(s):", policy, p->n);
    for (size_t i = 0; i < p->n && n < len; i++) {
        const gf_user_policy_section *sec = &p->s[i];
        const char *scope = sec->scope == GF_POL_USER    ? "user "
                            : sec->scope == GF_POL_GROUP ? "group "
                                                         : "default";
        n += (size_t)snprintf(buf + n, len - n, "%s [%s%s] sets", i ? ";" : "", scope, sec->name);
        for (int k = 0; k < GF_POL_KEYS && n < len; k++)
            if (sec->v[k].set)
                n += (size_t)snprintf(buf + n, len - n, " %s",
                                      gf_user_policy_key_name((gf_user_policy_key)k));
    }
}

/* The policy in force, read once before anything starts: a broken or
 * untrusted file stops the agent here, not every user later. */
static int read_policy(char *shown, size_t len, gf_error *err)
{
    static gf_user_policy p; /* large */
    bool present;

    if (gf_user_load_policy(policy, &p, &present, err) < 0)
        return -1;
    describe_policy(&p, present, shown, len);
    return 0;
}

static int print_config(const gf_agent *a, const char *shown_policy)
{
    printf("gpufracd %s: the configuration is valid\n", GPUFRAC_VERSION);
    printf("state-dir           %s\n", a->state_dir);
    printf("socket              %s\n", a->socket_path);
    printf("metrics-listen      %s\n", a->metrics_listen[0] ? a->metrics_listen : "off");
    printf("watchdog-period-ms  %d\n", a->watchdog_period_ms);
    if (a->watchdog_tolerance)
        printf("watchdog-tolerance  %llu\n", (unsigned long long)a->watchdog_tolerance);
    else
        printf("watchdog-tolerance  default (64 MiB or 1/512 of the GPU, the larger)\n");
    printf("client-idle-s       %d\n", a->client_idle_s);
    printf("mps-control         %s\n", a->mps_control);
    printf("events-max-bytes    %llu\n", (unsigned long long)a->events_max_bytes);
    printf("attach-timeout-s    %d\n", a->attach_timeout_s);
    printf("node-name           %s\n", a->node_name[0] ? a->node_name : "none: not published");
    printf("api-server          %s\n", a->api_server[0] ? a->api_server : "in-cluster");
    printf("log-level           %s\n", log_level == GF_LOG_ERROR  ? "error"
                                       : log_level == GF_LOG_WARN ? "warn"
                                       : log_level == GF_LOG_INFO ? "info"
                                                                  : "debug");
    printf("policy              %s\n", shown_policy);
    return 0;
}

int main(int argc, char **argv)
{
    static gf_agent agent;
    gf_agent *a = &agent;
    gf_error err;
    int rc, lfd = -1, ufd = -1, sfd = -1, tfd = -1, ifd = -1;
    char shown_policy[2048];

    struct rlimit nofile;
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    /* recursive: the MPS manager takes it around its own updates, and is
     * called both from the loop (holding it) and on its own */
    pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&a->lock, &ma);
    a->log_fd = 2;
    a->state_dfd = a->priv_dfd = a->frac_dfd = a->journal_fd = -1;
    if (gf_loop_init(&a->loop, &err) < 0)
        goto fail;
    wire_loop(a);
    if ((rc = parse_args(a, argc, argv)) >= 0)
        return rc;
    gf_log_set_threshold(log_level);
    if (read_policy(shown_policy, sizeof(shown_policy), &err) < 0)
        goto fail;
    if (check_config)
        return print_config(a, shown_policy);
    gf_log_write(a->log_fd, GF_LOG_INFO, "gpufracd", "gpufracd %s starting; policy %s",
                 GPUFRAC_VERSION, shown_policy);
    /* one open ledger per fraction: let the descriptor limit not be the cap */
    if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
        nofile.rlim_cur = nofile.rlim_max;
        setrlimit(RLIMIT_NOFILE, &nofile);
    }
    a->fractions = calloc(GF_AGENT_FRACTIONS_MAX, sizeof(*a->fractions));
    a->loans = calloc(GF_AGENT_LOANS_MAX, sizeof(*a->loans));
    if (!a->fractions || !a->loans) {
        fputs("gpufracd: out of memory\n", stderr);
        return 1;
    }
    if (make_dirs(a, &err) < 0 || gf_agent_nvml_init(a, &err) < 0 || gf_journal_open(a, &err) < 0 ||
        gf_registry_scan(a, &err) < 0)
        goto fail;
    gf_loans_recover(a); /* evictions a killed agent began are finished here */
    gf_journal_compact(a);
    if ((lfd = gf_socket_listen_root(a, &err)) < 0)
        goto fail;
    atomic_store(&a->loop_beat, gf_now_ms());
    atomic_store(&a->watchdog_beat, gf_now_ms());
    /* without it only root's gpufrac run and containers get fractions */
    if ((ufd = gf_user_listen(a, policy, &err)) < 0)
        gf_log_write(a->log_fd, GF_LOG_WARN, "gpufracd", "no fractions for local users: %s",
                     err.msg);
    /* signals are blocked before any thread starts, so every thread inherits
     * the mask and only the loop's signalfd sees SIGTERM */
    sfd = make_signalfd();
    if (gf_metrics_publish(a, &err) < 0 || (a->metrics_listen[0] && gf_metrics_start(a, &err) < 0))
        goto fail;
    /* the owners' names before the first scrape (bounded): a series keeps
     * its labels across a restart, so Prometheus never sees it begin again */
    if (a->metrics_listen[0] &&
        (gf_metrics_publish(a, &err) < 0 || !(gf_usernames_settle(GF_USERNAMES_START_WAIT_MS), 1) ||
         gf_metrics_publish(a, &err) < 0))
        goto fail;
    tfd = make_timer(a->watchdog_period_ms);
    ifd = watch_fractions_dir(a);
    if (sfd < 0 || tfd < 0 || ifd < 0) {
        gf_error_sys(&err, "setting up signals and the timer");
        goto fail;
    }
    gf_log_write(a->log_fd, GF_LOG_INFO, "gpufracd",
                 "ready: %d GPU(s), %d fraction(s), socket %s, metrics %s", a->n_gpus,
                 a->n_fractions, a->socket_path, a->metrics_listen[0] ? a->metrics_listen : "off");
    rc = loop(a, lfd, ufd, sfd, tfd, ifd);
    gf_log_write(a->log_fd, rc ? GF_LOG_ERROR : GF_LOG_INFO, "gpufracd", "stopping: %s",
                 rc ? "its loop failed" : "asked to by a signal; its state is on disk");
    gf_metrics_stop(a);
    gf_journal_exposed(a); /* all of them, ticks too */
    unlink(a->socket_path);
    unlinkat(a->state_dfd, GF_STATE_USERS_SOCK, 0);
    return rc;
fail:
    fprintf(stderr, "gpufracd: %s\n", err.msg);
    return 1;
}
