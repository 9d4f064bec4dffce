/* gpufracd: the node agent. One loop: the socket, a timer for the watchdog
 * and MPS health, signals. Metrics are served from their own thread. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
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
#include "log.h"
#include "server.h"
#include "user_admit.h"

#define CLIENTS_MAX 256

static const char usage[] =
    "Usage: gpufracd [--state-dir DIR] [--socket PATH] [--metrics-listen HOST:PORT]\n"
    "                [--watchdog-period-ms N] [--mps-control PATH]\n"
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
    "  --mps-control PATH       nvidia-cuda-mps-control to run (default: from PATH)\n"
    "  --policy FILE            what each local user may ask (default " GF_USER_POLICY_DEFAULT ";\n"
    "                           missing: no limits); users reach the agent through\n"
    "                           <state-dir>/users.sock\n"
    "  --node-name NAME         publish the GPU inventory as annotation gpufrac.io/gpus of\n"
    "                           this Node (default: $NODE_NAME; unset = do not publish)\n"
    "  --api-server URL         Kubernetes API (default: in-cluster); --token-file F,\n"
    "                           --insecure-skip-tls-verify as for gpufrac-scheduler\n"
    "\n"
    "Runs in the foreground; stop it with SIGTERM. State lives in the fractions'\n"
    "ledgers, so the agent can be restarted at any moment without losing anything.\n";

void gf_agent_event(gf_agent *a, const char *fmt, ...)
{
    char line[1024], path[GF_PATH_MAX + 16];
    va_list ap;
    time_t now = time(NULL);
    struct tm tm;
    int n, fd;

    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    gf_log_write(a->log_fd, GF_LOG_INFO, "gpufracd", "%s", line);
    snprintf(path, sizeof(path), "%s/events.log", a->state_dir);
    fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    gmtime_r(&now, &tm);
    char stamp[32];
    strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", &tm);
    char out[1100];
    n = snprintf(out, sizeof(out), "%s %s\n", stamp, line);
    if (n > 0 && write(fd, out, (size_t)n) < 0) {
        /* the log line above already carries it */
    }
    close(fd);
}

static char policy[GF_PATH_MAX] = GF_USER_POLICY_DEFAULT; /* --policy */

static int parse_args(gf_agent *a, int argc, char **argv)
{
    static const struct option opts[] = {
        {"state-dir", required_argument, NULL, 's'},
        {"socket", required_argument, NULL, 'k'},
        {"metrics-listen", required_argument, NULL, 'm'},
        {"watchdog-period-ms", required_argument, NULL, 'w'},
        {"mps-control", required_argument, NULL, 'c'},
        {"node-name", required_argument, NULL, 'n'},
        {"api-server", required_argument, NULL, 'a'},
        {"token-file", required_argument, NULL, 't'},
        {"insecure-skip-tls-verify", no_argument, NULL, 'i'},
        {"policy", required_argument, NULL, 'p'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;
    char *end;

    snprintf(a->state_dir, sizeof(a->state_dir), "/run/gpufrac");
    snprintf(a->metrics_listen, sizeof(a->metrics_listen), "127.0.0.1:9464");
    snprintf(a->mps_control, sizeof(a->mps_control), "nvidia-cuda-mps-control");
    if (getenv("NODE_NAME"))
        snprintf(a->node_name, sizeof(a->node_name), "%s", getenv("NODE_NAME"));
    a->watchdog_period_ms = 500;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
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
        case 'p': snprintf(policy, sizeof(policy), "%s", optarg); break;
        case 'w':
            a->watchdog_period_ms = (int)strtol(optarg, &end, 10);
            if (*end || a->watchdog_period_ms < 10 || a->watchdog_period_ms > 60000) {
                fprintf(stderr, "gpufracd: --watchdog-period-ms: \"%s\" is not a number of "
                                "milliseconds from 10 to 60000\n", optarg);
                return 2;
            }
            break;
        case 'h': fputs(usage, stdout); return 0;
        default: fputs("Try 'gpufracd --help'.\n", stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "gpufracd: unexpected argument \"%s\"\nTry 'gpufracd --help'.\n",
                argv[optind]);
        return 2;
    }
    if (!a->socket_path[0] && (size_t)snprintf(a->socket_path, sizeof(a->socket_path),
                                               "%s/agent.sock", a->state_dir) >=
                                      sizeof(a->socket_path)) {
        fprintf(stderr, "gpufracd: --state-dir: \"%s\" is too long\n", a->state_dir);
        return 2;
    }
    return -1;
}

static int make_dirs(gf_agent *a, gf_error *err)
{
    char path[GF_PATH_MAX + 16];
    if (mkdir(a->state_dir, 0755) < 0 && errno != EEXIST)
        return gf_error_sys(err, "creating %s", a->state_dir);
    snprintf(path, sizeof(path), "%s/fractions", a->state_dir);
    if (mkdir(path, 0755) < 0 && errno != EEXIST)
        return gf_error_sys(err, "creating %s", path);
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
    for (int g = 0; g < a->n_gpus; g++)
        if (a->gpus[g].mps_running && gf_mps_check(a, g, &err) < 0)
            gf_log_write(a->log_fd, GF_LOG_WARN, "gpufracd", "%s", err.msg);
    gf_reconcile_containers(a);
    gf_user_reconcile(a);
    gf_publish_tick(a);
    gf_mps_stop_idle(a, &err);
    pthread_mutex_unlock(&a->lock);
}

static void accept_one(int lfd, int *clients, int *n_clients)
{
    int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (c >= 0 && *n_clients < CLIENTS_MAX)
        clients[(*n_clients)++] = c;
    else if (c >= 0)
        close(c); /* full: the client sees the connection close */
}

/* Fixed slots: the root socket, signals, the timer, the fractions directory's
 * inotify, the epoll of the fractions' sockets; then the clients. */
enum { P_ROOT, P_SIG, P_TIMER, P_DIR, P_FRAC, P_FIXED };

static void accept_fractions(gf_agent *a, int *clients, int *n_clients)
{
    struct epoll_event ev[64];
    int n = epoll_wait(a->epfd, ev, 64, 0);
    for (int i = 0; i < n; i++)
        accept_one(ev[i].data.fd, clients, n_clients);
}

static int loop(gf_agent *a, int lfd, int sfd, int tfd, int ifd)
{
    static struct pollfd p[P_FIXED + CLIENTS_MAX];
    static int clients[CLIENTS_MAX];
    int n_clients = 0;

    for (;;) {
        int n = P_FIXED;
        p[P_ROOT] = (struct pollfd){.fd = lfd, .events = POLLIN};
        p[P_SIG] = (struct pollfd){.fd = sfd, .events = POLLIN};
        p[P_TIMER] = (struct pollfd){.fd = tfd, .events = POLLIN};
        p[P_DIR] = (struct pollfd){.fd = ifd, .events = POLLIN};
        p[P_FRAC] = (struct pollfd){.fd = a->epfd, .events = POLLIN};
        for (int i = 0; i < n_clients; i++)
            p[n++] = (struct pollfd){.fd = clients[i], .events = POLLIN};
        if (poll(p, (nfds_t)n, -1) < 0 && errno != EINTR)
            return 1;
        if (p[P_SIG].revents & POLLIN)
            return 0; /* SIGTERM/SIGINT/SIGHUP: state is already on disk */
        if (p[P_TIMER].revents & POLLIN) {
            uint64_t x;
            if (read(tfd, &x, sizeof(x)) == sizeof(x))
                tick(a);
        }
        if (p[P_DIR].revents & POLLIN) {
            char buf[4096];
            gf_error err;
            while (read(ifd, buf, sizeof(buf)) > 0)
                ;
            /* a fraction came or went: its socket opens (or closes) at once */
            pthread_mutex_lock(&a->lock);
            gf_registry_scan_if_changed(a, &err);
            pthread_mutex_unlock(&a->lock);
        }
        for (int i = 0, k = P_FIXED; i < n_clients; i++, k++) {
            if (!p[k].revents)
                continue;
            if ((p[k].revents & (POLLHUP | POLLERR)) || gf_server_serve(a, clients[i]) < 0) {
                close(clients[i]);
                clients[i] = -1;
            }
        }
        int kept = 0;
        for (int i = 0; i < n_clients; i++)
            if (clients[i] >= 0)
                clients[kept++] = clients[i];
        n_clients = kept;
        if (p[P_ROOT].revents & POLLIN)
            accept_one(lfd, clients, &n_clients);
        if (p[P_FRAC].revents & POLLIN)
            accept_fractions(a, clients, &n_clients);
    }
}

static int watch_fractions_dir(gf_agent *a)
{
    char dir[GF_PATH_MAX + 16];
    int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    snprintf(dir, sizeof(dir), "%s/fractions", a->state_dir);
    if (fd >= 0)
        inotify_add_watch(fd, dir, IN_CREATE | IN_DELETE | IN_MOVED_TO | IN_MOVED_FROM);
    return fd;
}

int main(int argc, char **argv)
{
    static gf_agent agent;
    gf_agent *a = &agent;
    gf_error err;
    int rc, lfd = -1, sfd = -1, tfd = -1, ifd = -1;

    struct rlimit nofile;
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    /* recursive: the MPS manager takes it around its own updates, and is
     * called both from the loop (holding it) and on its own */
    pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&a->lock, &ma);
    a->log_fd = 2;
    a->epfd = epoll_create1(EPOLL_CLOEXEC);
    if ((rc = parse_args(a, argc, argv)) >= 0)
        return rc;
    /* one open ledger per fraction: let the descriptor limit not be the cap */
    if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
        nofile.rlim_cur = nofile.rlim_max;
        setrlimit(RLIMIT_NOFILE, &nofile);
    }
    a->fractions = calloc(GF_AGENT_FRACTIONS_MAX, sizeof(*a->fractions));
    if (!a->fractions) {
        fputs("gpufracd: out of memory\n", stderr);
        return 1;
    }
    if (make_dirs(a, &err) < 0)
        goto fail;
    gf_counters_load(a);
    if (gf_agent_nvml_init(a, &err) < 0 ||
        gf_registry_scan(a, &err) < 0 || (lfd = gf_server_listen(a, &err)) < 0)
        goto fail;
    /* without it only root's gpufrac run and containers get fractions */
    if (gf_user_listen(a, policy, &err) < 0)
        gf_log_write(a->log_fd, GF_LOG_WARN, "gpufracd", "no fractions for local users: %s",
                     err.msg);
    /* signals are blocked before any thread starts, so every thread inherits
     * the mask and only the loop's signalfd sees SIGTERM */
    sfd = make_signalfd();
    if (a->metrics_listen[0] && gf_metrics_start(a, &err) < 0)
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
    rc = loop(a, lfd, sfd, tfd, ifd);
    gf_metrics_stop(a);
    unlink(a->socket_path);
    {
        char users[GF_PATH_MAX + 16];
        snprintf(users, sizeof(users), "%s/users.sock", a->state_dir);
        unlink(users);
    }
    return rc;
fail:
    fprintf(stderr, "gpufracd: %s\n", err.msg);
    return 1;
}
