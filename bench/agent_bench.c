/* SPDX-License-Identifier: Apache-2.0 */
/* gpufracd-bench: what the node agent costs, measured in one run against a
 * real gpufracd (see docs/benchmarks.md, "The agent"):
 *
 *   1. burst: borrow + return round trips on the agent socket, beside the
 *      bare `ping` round trip (and again with many fractions registered);
 *   2. /metrics with many fractions, beside /healthz and an empty agent;
 *   3. the agent's VmRSS / VmHWM with many fractions, beside 0 fractions;
 *   4. the watchdog's reaction: a process that bypasses the shim allocates
 *      past its fraction's limit; time from its allocation to its death;
 *   5. admission through users.sock: one local user's `run`s one after
 *      another, each from its own process that stays as the supervisor,
 *      the last ones' round trip beside the first ones' (as root only);
 *   6. borrow round trips while a second process scrapes /metrics in a
 *      loop, beside the same round trips without it (many fractions).
 *
 * Everything is timed here in C with CLOCK_MONOTONIC. On gpusim (no GPU, or
 * --sim) the agent and the allocating children get gpusim's environment; on a
 * GPU nothing is set. The allocating child is this executable again
 * (`--hog BYTES SECONDS`), loading the driver with dlopen: shimprobe cannot
 * serve there, it carries a run path to gpusim. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <libgen.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "config.h"
#include "cu.h"
#include "ledger.h"
#include "proto.h"

#define AB_SIM_DEVICES "16Gi"
#define AB_PERIOD_MS 500
#define AB_BORROW_BYTES (1ULL << 20)
#define AB_WD_LIMIT (256ULL << 20)
#define AB_WD_ALLOC (1ULL << 30) /* past 256 MiB + the watchdog's 512 MiB allowance */
#define AB_MANY_REQUEST (4ULL << 20)
#define AB_MANY_LIMIT (8ULL << 20)
#define AB_HTTP_MAX (64 << 20)
#define AB_RSS_TARGET_KIB (16 * 1024)
#define AB_NOPW_UID 3999900 /* owners without a passwd entry start here */
#define AB_NOPW_UIDS 3
#define AB_SCRAPE_OVER_QUIET 1.5 /* borrow p99 while scraping, at most this x without */

typedef struct ab_opts {
    bool quick, force_sim;
    const char *build, *json;
    long borrow_n, borrow_many_n, borrow_scrape_n;
    int scrapes, fractions, wd_runs, admissions;
} ab_opts;

typedef struct ab_env {
    bool sim;
    char exe[GF_PATH_MAX], build[GF_PATH_MAX], agent_bin[GF_PATH_MAX], tmp[GF_PATH_MAX];
} ab_env;

typedef struct ab_agent {
    pid_t pid;
    int port;
    char state[GF_PATH_MAX], sock[GF_PATH_MAX + 16], log[GF_PATH_MAX + 16];
    char policy[GF_PATH_MAX + 16]; /* --policy FILE, "" for the default */
} ab_agent;

static double ns_us(uint64_t ns)
{
    return (double)ns / 1e3;
}
static double ns_ms(uint64_t ns)
{
    return (double)ns / 1e6;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
    }
}

/* ---- files -------------------------------------------------------------- */

static int write_file(const char *path, const char *text, gf_error *err)
{
    FILE *fp = fopen(path, "we");
    if (!fp)
        return gf_error_sys(err, "creating %s", path);
    if (fputs(text, fp) < 0 || fclose(fp) != 0)
        return gf_error_sys(err, "writing %s", path);
    return 0;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    return flag == FTW_DP ? rmdir(path) : unlink(path);
}

/* A fraction as `gpufrac run` leaves it, made in a dot-directory (which the
 * agent skips) and renamed into place, so the agent never sees half of one. */
static int make_fraction(const char *state, const char *name, uint64_t request, uint64_t limit,
                         const char *sock, pid_t supervisor, gf_error *err)
{
    char tmp[GF_PATH_MAX], dir[GF_PATH_MAX], path[GF_PATH_MAX + 16], text[GF_CONFIG_TEXT_MAX];
    gf_fraction_config c = {.version = GF_CONFIG_VERSION,
                            .mode = GF_MODE_TIME_SLICING,
                            .compute_percent = 100,
                            .n_devices = 1};

    snprintf(tmp, sizeof(tmp), "%s/fractions/.%s", state, name);
    snprintf(dir, sizeof(dir), "%s/fractions/%s", state, name);
    snprintf(c.name, sizeof(c.name), "%s", name);
    snprintf(c.ledger, sizeof(c.ledger), "%.1000s/ledger", dir);
    snprintf(c.agent, sizeof(c.agent), "%s", sock);
    c.devices[0] = (gf_config_device){.uuid = "*", .request = request, .limit = limit};
    if (mkdir(tmp, 0755) < 0)
        return gf_error_sys(err, "creating %s", tmp);
    snprintf(path, sizeof(path), "%s/ledger", tmp);
    if (gf_ledger_create(path, name, 0644, err) < 0 || gf_config_format(&c, text, sizeof(text)) < 0)
        return gf_error_wrap(err, "fraction %s", name);
    snprintf(path, sizeof(path), "%s/config", tmp);
    if (write_file(path, text, err) < 0)
        return -1;
    snprintf(path, sizeof(path), "%s/supervisor", tmp);
    snprintf(text, sizeof(text), "%d\n", (int)supervisor);
    if (supervisor > 0 && write_file(path, text, err) < 0)
        return -1;
    if (rename(tmp, dir) < 0)
        return gf_error_sys(err, "installing %s", dir);
    return 0;
}

/* VmRSS:, VmHWM: ... of /proc/<pid>/status, in KiB. */
static int proc_kib(pid_t pid, const char *field, uint64_t *kib, gf_error *err)
{
    char path[64], line[256];
    size_t n = strlen(field);
    FILE *fp;

    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    if (!(fp = fopen(path, "re")))
        return gf_error_sys(err, "reading %s", path);
    *kib = 0;
    bool found = false;
    while (!found && fgets(line, sizeof(line), fp))
        if (strncmp(line, field, n) == 0)
            found = sscanf(line + n, " %llu", (unsigned long long *)kib) == 1;
    fclose(fp);
    return found ? 0 : gf_error_set(err, GF_ENOTFOUND, "%s has no %s", path, field);
}

/* The CPU time (user + system) process pid has used, in ms. */
static int proc_cpu_ms(pid_t pid, double *ms, gf_error *err)
{
    char path[64], text[1024];
    unsigned long long ut, st;
    int fd;
    ssize_t n;
    const char *p;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    n = fd >= 0 ? read(fd, text, sizeof(text) - 1) : -1;
    if (fd >= 0)
        close(fd);
    if (n <= 0)
        return gf_error_sys(err, "reading %s", path);
    text[n] = '\0';
    /* fields 14 and 15 (utime, stime), counted past the command's ")" */
    if (!(p = strrchr(text, ')')) ||
        sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return gf_error_set(err, GF_ESTATE, "%s: no utime/stime", path);
    *ms = (double)(ut + st) * 1e3 / (double)sysconf(_SC_CLK_TCK);
    return 0;
}

/* ---- the agent ---------------------------------------------------------- */

static int read_ready(ab_agent *ag, bool *ready)
{
    char text[8192];
    int fd = open(ag->log, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, text, sizeof(text) - 1) : -1;
    const char *m;

    if (fd >= 0)
        close(fd);
    *ready = false;
    if (n <= 0)
        return 0;
    text[n] = '\0';
    if (!strstr(text, "ready:") || !(m = strstr(text, " metrics 127.0.0.1:")))
        return 0;
    ag->port = atoi(m + strlen(" metrics 127.0.0.1:"));
    *ready = ag->port > 0;
    return 0;
}

static void log_tail(const char *path, char *out, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, out, len - 1) : 0;
    if (fd >= 0)
        close(fd);
    out[n > 0 ? n : 0] = '\0';
}

static void agent_child(const ab_env *e, const ab_agent *ag)
{
    int fd = open(ag->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
        _exit(127);
    execl(e->agent_bin, e->agent_bin, "--state-dir", ag->state, "--metrics-listen", "127.0.0.1:0",
          "--watchdog-period-ms", "500", "--mps-control", "/bin/false",
          ag->policy[0] ? "--policy" : (char *)NULL, ag->policy, (char *)NULL);
    _exit(127);
}

static int agent_start(const ab_env *e, ab_agent *ag, const char *tag, gf_error *err)
{
    char tail[2048];
    bool ready = false;
    int st;

    snprintf(ag->log, sizeof(ag->log), "%s/agent-%s.log", e->tmp, tag);
    snprintf(ag->sock, sizeof(ag->sock), "%s/agent.sock", ag->state);
    if ((ag->pid = fork()) < 0)
        return gf_error_sys(err, "fork");
    if (ag->pid == 0)
        agent_child(e, ag);
    for (int i = 0; i < 600 && !ready; i++) {
        if (waitpid(ag->pid, &st, WNOHANG) == ag->pid) {
            ag->pid = 0;
            log_tail(ag->log, tail, sizeof(tail));
            return gf_error_set(err, GF_ESTATE, "gpufracd exited at start:\n%s", tail);
        }
        read_ready(ag, &ready);
        if (!ready)
            sleep_ms(50);
    }
    return ready ? 0 : gf_error_set(err, GF_ESTATE, "gpufracd did not log ready in 30 s");
}

/* SIGTERM; how it ended goes to r (a clean stop is "exit 0"). */
static void agent_stop(ab_agent *ag, const char *key, bench_results *r)
{
    char how[32];
    int st = 0;

    if (ag->pid <= 0)
        return;
    kill(ag->pid, SIGTERM);
    waitpid(ag->pid, &st, 0);
    ag->pid = 0;
    if (WIFSIGNALED(st))
        snprintf(how, sizeof(how), "signal %d", WTERMSIG(st));
    else
        snprintf(how, sizeof(how), "exit %d", WEXITSTATUS(st));
    bench_put_str(r, key, how);
}

/* ---- HTTP (plain, over TCP) ---------------------------------------------- */

static int http_connect(int port, gf_error *err)
{
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct timeval tv = {10, 0};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd < 0)
        return gf_error_sys(err, "socket");
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        gf_error_sys(err, "connecting to 127.0.0.1:%d", port);
        close(fd);
        return -1;
    }
    return fd;
}

/* GET path until the server closes; *body points into *buf (caller frees). */
static int http_get(int port, const char *path, char **buf, const char **body, size_t *body_len,
                    gf_error *err)
{
    char req[256];
    size_t len = 0, cap = 1 << 16;
    int fd = http_connect(port, err), n;
    ssize_t got = 1;

    if (fd < 0)
        return -1;
    n = snprintf(req, sizeof(req),
                 "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", path);
    *buf = malloc(cap);
    if (!*buf || write(fd, req, (size_t)n) != n) {
        close(fd);
        return gf_error_sys(err, "GET %s", path);
    }
    while (got > 0 && len + 1 < AB_HTTP_MAX) {
        if (len + 1 == cap && !(*buf = realloc(*buf, cap *= 2)))
            break;
        got = *buf ? read(fd, *buf + len, cap - 1 - len) : -1;
        len += got > 0 ? (size_t)got : 0;
    }
    close(fd);
    if (!*buf || got < 0)
        return gf_error_sys(err, "reading GET %s", path);
    (*buf)[len] = '\0';
    const char *sep = strstr(*buf, "\r\n\r\n");
    if (strncmp(*buf, "HTTP/1.1 200", 12) != 0 || !sep)
        return gf_error_set(err, GF_ESTATE, "GET %s: not a 200 reply: %.80s", path, *buf);
    *body = sep + 4;
    *body_len = len - (size_t)(*body - *buf);
    return 0;
}

/* One timed GET; the page size goes to *size. */
static int http_time(int port, const char *path, uint64_t *ns, size_t *size, gf_error *err)
{
    char *buf = NULL;
    const char *body;
    uint64_t t0 = bench_now_ns();
    int rc = http_get(port, path, &buf, &body, size, err);

    *ns = bench_now_ns() - t0;
    free(buf);
    return rc;
}

/* The value of an unlabelled sample `name <v>` on the page, or -1. */
static long long page_value(const char *page, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = page; (p = strstr(p, name)); p += n) {
        const char *close = p[n] == '{' ? strstr(p + n, "} ") : NULL; /* {Hostname="…"} */
        if ((p == page || p[-1] == '\n') && p[n] == ' ')
            return atoll(p + n + 1);
        if ((p == page || p[-1] == '\n') && close && !memchr(p, '\n', (size_t)(close - p)))
            return atoll(close + 2);
    }
    return -1;
}

static int wait_fractions(const ab_agent *ag, long want, gf_error *err)
{
    long long have = -1;

    for (int i = 0; i < 600 && have != want; i++) {
        char *buf = NULL;
        const char *body;
        size_t len;
        if (http_get(ag->port, "/metrics", &buf, &body, &len, err) < 0) {
            free(buf);
            return -1;
        }
        have = page_value(body, "gpufrac_agent_fractions");
        free(buf);
        if (have != want)
            sleep_ms(50);
    }
    if (have != want)
        return gf_error_set(err, GF_ESTATE, "gpufracd reports %lld fractions, not %ld, after 30 s",
                            have, want);
    return 0;
}

/* GPU 0's UUID from the gpu="0" samples on the page. */
static int gpu0_uuid(const ab_agent *ag, char *uuid, size_t len, gf_error *err)
{
    char *buf = NULL;
    const char *body, *p;
    size_t n;
    int rc = http_get(ag->port, "/metrics", &buf, &body, &n, err);

    if (rc == 0 && (p = strstr(body, "gpu=\"0\",UUID=\""))) {
        p += strlen("gpu=\"0\",UUID=\"");
        n = strcspn(p, "\"");
        snprintf(uuid, len, "%.*s", (int)(n < len ? n : len - 1), p);
    } else if (rc == 0) {
        rc = gf_error_set(err, GF_ENOTFOUND, "/metrics names no GPU 0 (gpu=\"0\",UUID=...)");
    }
    free(buf);
    return rc;
}

/* ---- figure helpers ----------------------------------------------------- */

static void put_dist(bench_results *r, const char *prefix, const char *unit, uint64_t *v, size_t n)
{
    char key[48];
    bool us = strcmp(unit, "us") == 0;

    bench_sort_u64(v, n);
    snprintf(key, sizeof(key), "%s_median_%s", prefix, unit);
    bench_put_num(r, key, us ? 1 : 3,
                  us ? ns_us(bench_quantile(v, n, 0.5)) : ns_ms(bench_quantile(v, n, 0.5)));
    snprintf(key, sizeof(key), "%s_p99_%s", prefix, unit);
    bench_put_num(r, key, us ? 1 : 3,
                  us ? ns_us(bench_quantile(v, n, 0.99)) : ns_ms(bench_quantile(v, n, 0.99)));
}

static void put_verdict(bench_results *r, const char *key, bool met)
{
    bench_put_str(r, key, met ? "met" : "missed");
}

/* ---- 1. burst borrow round trip ----------------------------------------- */

static int seq_connect(const char *path, gf_error *err)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

    if (strlen(path) >= sizeof(sa.sun_path)) {
        if (fd >= 0)
            close(fd);
        return gf_error_set(err, GF_EINVAL, "socket path too long: %s", path);
    }
    memcpy(sa.sun_path, path, strlen(path) + 1);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        gf_error_sys(err, "connecting to %s", path);
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

static int encode(char *buf, size_t len, const char *verb, const char *uuid, uint64_t bytes)
{
    gf_msg m;
    gf_msg_init(&m, verb);
    if (uuid) {
        gf_msg_add(&m, "dev", uuid);
        gf_msg_add_u64(&m, "bytes", bytes);
    }
    return gf_msg_encode(&m, buf, len);
}

/* One request, its reply checked to be `ok`; the round trip in *ns. */
static int ask(int fd, const char *req, int len, char *reply, size_t cap, uint64_t *ns,
               gf_error *err)
{
    uint64_t t0 = bench_now_ns();
    ssize_t n = send(fd, req, (size_t)len, 0) == len ? recv(fd, reply, cap - 1, 0) : -1;

    *ns = bench_now_ns() - t0;
    if (n <= 0)
        return gf_error_sys(err, "the agent socket (%.*s)", len, req);
    reply[n] = '\0';
    if (strncmp(reply, GF_PROTO_MAGIC " ok", sizeof(GF_PROTO_MAGIC " ok") - 1) != 0)
        return gf_error_set(err, GF_ESTATE, "%.*s: %s", len, req, reply);
    return 0;
}

typedef struct ab_burst {
    int fd, borrow_len, return_len, ping_len;
    char borrow[256], ret[256], ping[64];
    uint64_t *ping_ns, *borrow_ns, *return_ns;
} ab_burst;

/* The first loan must be the full 1 MiB: a refusal would time an error path. */
static int check_grant(ab_burst *b, gf_error *err)
{
    char reply[GF_PROTO_MAX + 1], want[64];
    uint64_t ns;

    snprintf(want, sizeof(want), "granted=%llu", (unsigned long long)AB_BORROW_BYTES);
    if (ask(b->fd, b->borrow, b->borrow_len, reply, sizeof(reply), &ns, err) < 0)
        return -1;
    if (!strstr(reply, want))
        return gf_error_set(err, GF_ESTATE, "borrow: %s (wanted %s)", reply, want);
    return ask(b->fd, b->ret, b->return_len, reply, sizeof(reply), &ns, err);
}

/* Pairs from .. to-1: ping, borrow, return, interleaved, so the baseline
 * sees the same machine state as the figure. */
static int burst_pairs(ab_burst *b, long from, long to, gf_error *err)
{
    char reply[GF_PROTO_MAX + 1];

    for (long i = from; i < to; i++)
        if (ask(b->fd, b->ping, b->ping_len, reply, sizeof(reply), &b->ping_ns[i], err) < 0 ||
            ask(b->fd, b->borrow, b->borrow_len, reply, sizeof(reply), &b->borrow_ns[i], err) < 0 ||
            ask(b->fd, b->ret, b->return_len, reply, sizeof(reply), &b->return_ns[i], err) < 0)
            return -1;
    return 0;
}

static int burst_warm_up(ab_burst *b, long n, gf_error *err)
{
    char reply[GF_PROTO_MAX + 1];
    uint64_t ns;

    for (long i = 0; i < n / 10 + 1; i++)
        if (ask(b->fd, b->ping, b->ping_len, reply, sizeof(reply), &ns, err) < 0)
            return -1;
    return 0;
}

static int burst_loop(ab_burst *b, long n, gf_error *err)
{
    return burst_warm_up(b, n, err) < 0 ? -1 : burst_pairs(b, 0, n, err);
}

static void burst_report(ab_burst *b, long n, const char *prefix, bench_results *r)
{
    char p[48];

    snprintf(p, sizeof(p), "%s_n", prefix);
    bench_put_u64(r, p, (uint64_t)n);
    snprintf(p, sizeof(p), "%s_ping", prefix);
    put_dist(r, p, "us", b->ping_ns, (size_t)n);
    snprintf(p, sizeof(p), "%s_borrow", prefix);
    put_dist(r, p, "us", b->borrow_ns, (size_t)n);
    snprintf(p, sizeof(p), "%s_return", prefix);
    put_dist(r, p, "us", b->return_ns, (size_t)n);
}

/* The agent attributes a borrower from the kernel only: this process becomes
 * the fraction's supervisor (as the runtime attaches a container's init). */
static int attach_self(const ab_agent *ag, const char *name, gf_error *err)
{
    char req[256], reply[GF_PROTO_MAX + 1];
    uint64_t ns;
    int fd = seq_connect(ag->sock, err), len, rc;

    if (fd < 0)
        return -1;
    len = snprintf(req, sizeof(req), GF_PROTO_MAGIC " attach name=%s pid=%d", name, (int)getpid());
    rc = ask(fd, req, len, reply, sizeof(reply), &ns, err);
    close(fd);
    return rc;
}

/* This process takes a slot in the fraction's ledger (as the shim would),
 * attaches itself as the fraction's supervisor and connects; room for n
 * pairs. */
static int burst_open(const ab_agent *ag, const char *name, const char *uuid, long n, ab_burst *b,
                      gf_ledger *lg, gf_error *err)
{
    char path[GF_PATH_MAX + 64];

    snprintf(path, sizeof(path), "%s/fractions/%s/ledger", ag->state, name);
    b->ping_ns = calloc((size_t)n, sizeof(uint64_t));
    b->borrow_ns = calloc((size_t)n, sizeof(uint64_t));
    b->return_ns = calloc((size_t)n, sizeof(uint64_t));
    b->ping_len = encode(b->ping, sizeof(b->ping), "ping", NULL, 0);
    b->borrow_len = encode(b->borrow, sizeof(b->borrow), "borrow", uuid, AB_BORROW_BYTES);
    b->return_len = encode(b->ret, sizeof(b->ret), "return", uuid, AB_BORROW_BYTES);
    if (!b->ping_ns || !b->borrow_ns || !b->return_ns || b->borrow_len < 0 || b->return_len < 0)
        return gf_error_set(err, GF_ENOSPACE, "out of memory or a request too long");
    if (gf_ledger_open(path, lg, err) < 0 || gf_ledger_claim_slot(lg, err) < 0 ||
        attach_self(ag, name, err) < 0 || (b->fd = seq_connect(ag->sock, err)) < 0)
        return -1;
    return check_grant(b, err);
}

static void burst_close(ab_burst *b, gf_ledger *lg)
{
    if (b->fd >= 0)
        close(b->fd);
    if (lg->hdr)
        gf_ledger_close(lg);
    free(b->ping_ns);
    free(b->borrow_ns);
    free(b->return_ns);
}

/* n ping round trips and n borrow + return pairs in fraction name. */
static int measure_burst(const ab_agent *ag, const char *name, const char *uuid, long n,
                         const char *prefix, bench_results *r, gf_error *err)
{
    ab_burst b = {.fd = -1};
    gf_ledger lg = {.fd = -1, .slot = -1};
    int rc = -1;

    if (burst_open(ag, name, uuid, n, &b, &lg, err) == 0 && burst_loop(&b, n, err) == 0) {
        burst_report(&b, n, prefix, r);
        rc = 0;
    }
    burst_close(&b, &lg);
    return rc;
}

/* ---- 2 + 3. /metrics and resident memory --------------------------------- */

/* n GETs of /metrics, each after one of /healthz (the bare HTTP exchange);
 * with healthz, also the agent's CPU time per pair. */
static int measure_scrapes(const ab_agent *ag, int n, const char *prefix, bool healthz,
                           bench_results *r, gf_error *err)
{
    uint64_t *m = calloc((size_t)n, sizeof(uint64_t)), *h = calloc((size_t)n, sizeof(uint64_t));
    size_t size = 0, hsize;
    char key[48];
    double cpu0 = 0, cpu1 = 0;
    int rc = m && h ? 0 : gf_error_set(err, GF_ENOSPACE, "out of memory");

    if (rc == 0 && healthz)
        rc = proc_cpu_ms(ag->pid, &cpu0, err);
    for (int i = 0; rc == 0 && i < n; i++)
        if (http_time(ag->port, "/healthz", &h[i], &hsize, err) < 0 ||
            http_time(ag->port, "/metrics", &m[i], &size, err) < 0)
            rc = -1;
    if (rc == 0) {
        snprintf(key, sizeof(key), "%s_scrapes", prefix);
        bench_put_u64(r, key, (uint64_t)n);
        put_dist(r, prefix, "ms", m, (size_t)n);
        snprintf(key, sizeof(key), "%s_bytes", prefix);
        bench_put_u64(r, key, size);
        if (healthz)
            put_dist(r, "healthz", "ms", h, (size_t)n);
    }
    if (rc == 0 && healthz && (rc = proc_cpu_ms(ag->pid, &cpu1, err)) == 0)
        bench_put_num(r, "metrics_agent_cpu_ms", 2, (cpu1 - cpu0) / n);
    free(m);
    free(h);
    return rc;
}

static int measure_rss(const ab_agent *ag, const char *suffix, bench_results *r, gf_error *err)
{
    static const char *const fields[][2] = {{"VmRSS:", "rss_kib"},
                                            {"VmHWM:", "hwm_kib"},
                                            {"RssAnon:", "rss_anon_kib"},
                                            {"RssFile:", "rss_file_kib"},
                                            {"RssShmem:", "rss_shmem_kib"}};
    char key[48];
    uint64_t kib;

    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        if (proc_kib(ag->pid, fields[i][0], &kib, err) < 0)
            return -1;
        snprintf(key, sizeof(key), "agent_%s%s", fields[i][1], suffix);
        bench_put_u64(r, key, kib);
    }
    return 0;
}

/* ---- 4. watchdog reaction ------------------------------------------------- */

/* `--hog BYTES SECONDS`: allocates with the driver directly (no shim),
 * prints alloc=ok|<error> and holding=<pid>, then holds. */
static int hog_main(int argc, char **argv)
{
    bench_cu cu;
    CUdeviceptr p;
    CUresult rc;

    if (argc < 4 || bench_cu_load(&cu) < 0 || bench_cu_context(&cu) < 0)
        return 1;
    rc = cu.cuMemAlloc_v2(&p, (size_t)strtoull(argv[2], NULL, 10));
    if (rc != CUDA_SUCCESS) {
        bench_cu_fail(&cu, "cuMemAlloc_v2", rc);
        return 1;
    }
    printf("alloc=ok\nholding=%d\n", (int)getpid());
    fflush(stdout);
    sleep((unsigned)atoi(argv[3]));
    return 0;
}

static pid_t hog_start(const ab_env *e, int *out_fd, gf_error *err)
{
    char bytes[32];
    int p[2];
    pid_t pid;

    snprintf(bytes, sizeof(bytes), "%llu", (unsigned long long)AB_WD_ALLOC);
    if (pipe2(p, O_CLOEXEC) < 0 || (pid = fork()) < 0)
        return gf_error_sys(err, "starting the allocating process");
    if (pid == 0) {
        dup2(p[1], 1);
        unsetenv("LD_PRELOAD"); /* it bypasses the shim: only the driver sees it */
        execl(e->exe, e->exe, "--hog", bytes, "60", (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    *out_fd = p[0];
    return pid;
}

/* Reads the child's stdout until `holding=`; false on EOF or 30 s. */
static bool hog_holding(int fd, bool *alloc_ok)
{
    char buf[512];
    size_t len = 0;
    struct pollfd pf = {.fd = fd, .events = POLLIN};

    *alloc_ok = false;
    while (len + 1 < sizeof(buf) && poll(&pf, 1, 30000) > 0) {
        ssize_t n = read(fd, buf + len, sizeof(buf) - 1 - len);
        if (n <= 0)
            return false;
        len += (size_t)n;
        buf[len] = '\0';
        *alloc_ok = strstr(buf, "alloc=ok\n") != NULL;
        if (strstr(buf, "holding=") && strchr(strstr(buf, "holding="), '\n'))
            return true;
    }
    return false;
}

/* Waits up to ms for pid to die; the wait in *ns, its status in *st. */
static bool hog_wait(pid_t pid, uint64_t t0, long ms, uint64_t *ns, int *st)
{
    for (;;) {
        pid_t w = waitpid(pid, st, WNOHANG);
        *ns = bench_now_ns() - t0;
        if (w == pid)
            return true;
        if (*ns > (uint64_t)ms * 1000000ULL)
            return false;
        struct timespec ts = {0, 100 * 1000};
        nanosleep(&ts, NULL);
    }
}

static bool event_names(const char *events_path, pid_t pid)
{
    char *text = NULL, needle[64];
    size_t len = 0;
    FILE *fp = fopen(events_path, "re");
    bool hit = false;

    if (!fp)
        return false;
    snprintf(needle, sizeof(needle), "watchdog: killed pid %d ", (int)pid);
    if (getdelim(&text, &len, '\0', fp) > 0)
        hit = strstr(text, needle) != NULL;
    free(text);
    fclose(fp);
    return hit;
}

/* One run: the reaction in *ns (0 when it was never killed), *killed. */
static int wd_run(const ab_env *e, const ab_agent *ag, uint64_t *ns, bool *killed, gf_error *err)
{
    char events[GF_PATH_MAX + 16];
    bool alloc_ok, holding;
    int fd = -1, st = 0;
    pid_t pid = hog_start(e, &fd, err);

    if (pid < 0)
        return -1;
    holding = hog_holding(fd, &alloc_ok);
    uint64_t t0 = bench_now_ns();
    close(fd);
    *killed = false;
    if (!holding || !alloc_ok) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return gf_error_set(err, GF_ESTATE,
                            "the allocating process did not report alloc=ok "
                            "and holding= (killed before it could, or the "
                            "driver refused %llu bytes)",
                            (unsigned long long)AB_WD_ALLOC);
    }
    if (!hog_wait(pid, t0, 10 * AB_PERIOD_MS, ns, &st)) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return 0;
    }
    snprintf(events, sizeof(events), "%s/events.log", ag->state);
    *killed = WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL;
    for (int i = 0; *killed && i < 200 && !event_names(events, pid); i++)
        sleep_ms(10); /* the agent writes its event line after the kill */
    *killed = *killed && event_names(events, pid);
    return 0;
}

static int measure_watchdog(const ab_env *e, const ab_agent *ag, int runs, bench_results *r,
                            gf_error *err)
{
    uint64_t v[64], max = 0;
    int n = 0, missed = 0;
    bool killed;

    char burst[GF_PATH_MAX + 32];
    snprintf(burst, sizeof(burst), "%s/fractions/burst", ag->state);
    nftw(burst, rm_one, 8, FTW_DEPTH | FTW_PHYS); /* its supervisor is this process too */
    if (make_fraction(ag->state, "wd", AB_WD_LIMIT, AB_WD_LIMIT, ag->sock, getpid(), err) < 0)
        return -1;
    sleep_ms(2 * AB_PERIOD_MS); /* the agent sees the fraction */
    if (attach_self(ag, "wd", err) < 0)
        return -1;
    sleep_ms(2 * AB_PERIOD_MS); /* a tick reads its supervisor */
    for (int i = 0; i < runs && i < 64; i++) {
        sleep_ms((i * 137) % AB_PERIOD_MS); /* spread the start over the tick's phase */
        if (wd_run(e, ag, &v[n], &killed, err) < 0)
            return -1;
        if (!killed) {
            missed++;
            continue;
        }
        max = v[n] > max ? v[n] : max;
        n++;
    }
    bench_put_u64(r, "watchdog_runs", (uint64_t)runs);
    bench_put_u64(r, "watchdog_kills", (uint64_t)n);
    bench_put_u64(r, "watchdog_period_ms", AB_PERIOD_MS);
    bench_put_u64(r, "watchdog_alloc_bytes", AB_WD_ALLOC);
    bench_put_u64(r, "watchdog_limit_bytes", AB_WD_LIMIT);
    char each[160] = "";
    for (int i = 0; i < n && strlen(each) + 12 < sizeof(each); i++)
        snprintf(each + strlen(each), sizeof(each) - strlen(each), "%s%.0f", i ? "," : "",
                 ns_ms(v[i]));
    bench_put_str(r, "watchdog_each_ms", n ? each : "none");
    put_dist(r, "watchdog", "ms", v, (size_t)n);
    bench_put_num(r, "watchdog_max_ms", 1, ns_ms(max));
    put_verdict(r, "watchdog_target", missed == 0 && n > 0 && ns_ms(max) < AB_PERIOD_MS);
    return 0;
}

/* ---- the two agents ------------------------------------------------------- */

static int state_dir(const ab_env *e, ab_agent *ag, const char *tag, gf_error *err)
{
    char path[GF_PATH_MAX + 16];

    memset(ag, 0, sizeof(*ag));
    snprintf(ag->state, sizeof(ag->state), "%.900s/state-%s", e->tmp, tag);
    snprintf(path, sizeof(path), "%s/fractions", ag->state);
    if (mkdir(ag->state, 0755) < 0 || mkdir(path, 0755) < 0)
        return gf_error_sys(err, "creating %s", path);
    return 0;
}

/* Agent A: empty (baselines), then one burst fraction, then the watchdog. */
static int run_small(const ab_env *e, const ab_opts *o, char *uuid, size_t ulen, bench_results *r,
                     gf_error *err)
{
    ab_agent ag;
    int rc = -1;

    if (state_dir(e, &ag, "empty", err) < 0 || agent_start(e, &ag, "empty", err) < 0)
        return -1;
    if (measure_scrapes(&ag, o->scrapes, "metrics_0f", false, r, err) == 0 &&
        measure_rss(&ag, "_0f", r, err) == 0 && gpu0_uuid(&ag, uuid, ulen, err) == 0 &&
        make_fraction(ag.state, "burst", 1ULL << 30, 2ULL << 30, ag.sock, 0, err) == 0 &&
        measure_burst(&ag, "burst", uuid, o->borrow_n, "burst", r, err) == 0 &&
        measure_watchdog(e, &ag, o->wd_runs, r, err) == 0)
        rc = 0;
    agent_stop(&ag, "agent_stop_status_0f", r);
    return rc;
}

/* The k-th uid from AB_NOPW_UID up that has no passwd entry. */
static uid_t nopw_uid(int k)
{
    uid_t u = AB_NOPW_UID;

    for (int found = -1;; u++)
        if (!getpwuid(u) && ++found == k)
            return u;
}

/* n fractions; as root, every odd one's ledger is given to one of
 * AB_NOPW_UIDS owners without a passwd entry (users' fractions, whose user
 * label the agent must look up); fraction 0 stays root's. */
static int make_many(const ab_agent *ag, int n, bench_results *r, gf_error *err)
{
    char name[32], path[GF_PATH_MAX + 64];
    uid_t owners[AB_NOPW_UIDS];
    uint64_t nopw = 0;

    for (int k = 0; k < AB_NOPW_UIDS; k++)
        owners[k] = nopw_uid(k);
    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof(name), "f%04d", i);
        if (make_fraction(ag->state, name, AB_MANY_REQUEST, AB_MANY_LIMIT, ag->sock, 0, err) < 0)
            return -1;
        snprintf(path, sizeof(path), "%s/fractions/%s/ledger", ag->state, name);
        if (geteuid() != 0 || i % 2 == 0)
            continue;
        if (chown(path, owners[(i / 2) % AB_NOPW_UIDS], (gid_t)-1) < 0)
            return gf_error_sys(err, "giving %s to uid %u", path,
                                (unsigned)owners[(i / 2) % AB_NOPW_UIDS]);
        nopw++;
    }
    bench_put_u64(r, "fractions_nopw", nopw);
    return 0;
}

/* The scraping process and the bench: `pause` asks it to stop between two
 * scrapes, `idle` says it has. */
typedef struct ab_scraper {
    _Atomic uint64_t scrapes;
    _Atomic int pause, idle;
} ab_scraper;

/* GETs /metrics in a loop until killed, but for while paused. */
static void scrape_forever(int port, ab_scraper *sc)
{
    for (;;) {
        char *buf = NULL;
        const char *body;
        size_t len;
        gf_error err;
        if (atomic_load(&sc->pause)) {
            atomic_store(&sc->idle, 1);
            sleep_ms(1);
            continue;
        }
        atomic_store(&sc->idle, 0);
        if (http_get(port, "/metrics", &buf, &body, &len, &err) == 0)
            atomic_fetch_add(&sc->scrapes, 1);
        free(buf);
    }
}

/* Pauses the scraper (true once it is between scrapes) or lets it go on
 * (true once it is scraping again). */
static bool scraper_set(ab_scraper *sc, bool pause)
{
    atomic_store(&sc->pause, pause);
    for (int i = 0; i < 30000 && atomic_load(&sc->idle) != pause; i++)
        sleep_ms(1);
    return atomic_load(&sc->idle) == pause;
}

#define AB_SCRAPE_BLOCKS 10

/* Borrow round trips in fraction 0, in AB_SCRAPE_BLOCKS alternating blocks
 * with a second process scraping /metrics in a loop and with it paused
 * between two scrapes, so both see the same machine. */
static int scrape_blocks(ab_burst *quiet, ab_burst *busy, ab_scraper *sc, long n, gf_error *err)
{
    for (int k = 0; k < AB_SCRAPE_BLOCKS; k++) {
        long from = n * k / AB_SCRAPE_BLOCKS, to = n * (k + 1) / AB_SCRAPE_BLOCKS;
        if (!scraper_set(sc, true))
            return gf_error_set(err, GF_ESTATE, "the scraping process did not pause in 30 s");
        if (burst_pairs(quiet, from, to, err) < 0)
            return -1;
        if (!scraper_set(sc, false))
            return gf_error_set(err, GF_ESTATE, "the scraping process did not start in 30 s");
        if (burst_pairs(busy, from, to, err) < 0)
            return -1;
    }
    return 0;
}

static int measure_while_scraping(const ab_agent *ag, const char *uuid, long n, bench_results *r,
                                  gf_error *err)
{
    ab_scraper *sc = mmap(NULL, sizeof(*sc), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1,
                          0);
    ab_burst quiet = {.fd = -1}, busy;
    gf_ledger lg = {.fd = -1, .slot = -1};
    pid_t pid = -1;
    int rc = -1;

    if (sc == MAP_FAILED)
        return gf_error_sys(err, "mmap");
    atomic_store(&sc->pause, 1);
    if (burst_open(ag, "f0000", uuid, n, &quiet, &lg, err) < 0 || burst_warm_up(&quiet, n, err) < 0)
        goto out;
    busy = quiet;
    busy.ping_ns = calloc((size_t)n, sizeof(uint64_t));
    busy.borrow_ns = calloc((size_t)n, sizeof(uint64_t));
    busy.return_ns = calloc((size_t)n, sizeof(uint64_t));
    if (!busy.ping_ns || !busy.borrow_ns || !busy.return_ns)
        gf_error_set(err, GF_ENOSPACE, "out of memory");
    else if ((pid = fork()) < 0)
        gf_error_sys(err, "fork (scraper)");
    else if (pid == 0)
        scrape_forever(ag->port, sc);
    else if (scrape_blocks(&quiet, &busy, sc, n, err) == 0)
        rc = 0;
    if (rc == 0) {
        burst_report(&quiet, n, "burst_quiet", r);
        burst_report(&busy, n, "burst_scrape", r);
        bench_put_u64(r, "burst_scrape_scrapes", atomic_load(&sc->scrapes));
        bench_put_num(r, "burst_scrape_over_quiet", 2,
                      atof(bench_get(r, "burst_scrape_borrow_p99_us")) /
                          atof(bench_get(r, "burst_quiet_borrow_p99_us")));
    }
    free(busy.ping_ns);
    free(busy.borrow_ns);
    free(busy.return_ns);
out:
    if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
    burst_close(&quiet, &lg);
    munmap(sc, sizeof(*sc));
    return rc;
}

/* Agent B: n fractions from its start. */
static int run_many(const ab_env *e, const ab_opts *o, const char *uuid, bench_results *r,
                    gf_error *err)
{
    ab_agent ag;
    int rc = -1;

    if (state_dir(e, &ag, "many", err) < 0 || make_many(&ag, o->fractions, r, err) < 0 ||
        agent_start(e, &ag, "many", err) < 0)
        return -1;
    bench_put_u64(r, "fractions", (uint64_t)o->fractions);
    if (wait_fractions(&ag, o->fractions, err) == 0 &&
        measure_scrapes(&ag, o->scrapes, "metrics", true, r, err) == 0 &&
        measure_rss(&ag, "", r, err) == 0 &&
        measure_burst(&ag, "f0000", uuid, o->borrow_many_n, "burst_many", r, err) == 0 &&
        measure_while_scraping(&ag, uuid, o->borrow_scrape_n, r, err) == 0)
        rc = 0;
    agent_stop(&ag, "agent_stop_status", r);
    return rc;
}

/* ---- admissions through users.sock ---------------------------------------- */

#define AB_USER_UID 65534

/* One admission from a process of its own (uid AB_USER_UID): connect, run,
 * reply; its round trip goes to fd, then it stays the fraction's supervisor
 * until it is killed. */
static void user_child(const char *sock, const char *uuid, int i, int fd)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    char req[512], reply[GF_PROTO_MAX];
    uint64_t t0, ns = 0;
    int s;

    if (setgid(AB_USER_UID) < 0 || setuid(AB_USER_UID) < 0 || strlen(sock) >= sizeof(sa.sun_path))
        _exit(1);
    memcpy(sa.sun_path, sock, strlen(sock) + 1);
    snprintf(req, sizeof(req),
             GF_PROTO_MAGIC " run name=u%05d mode=time-slicing compute=100 "
                            "devices=%s/%llu/%llu",
             i, uuid, (unsigned long long)AB_MANY_REQUEST, (unsigned long long)AB_MANY_REQUEST);
    t0 = bench_now_ns();
    s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (s >= 0 && connect(s, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
        send(s, req, strlen(req), 0) > 0) {
        ssize_t n = recv(s, reply, sizeof(reply) - 1, 0);
        if (n > 0 && strncmp(reply, GF_PROTO_MAGIC " ok", strlen(GF_PROTO_MAGIC " ok")) == 0)
            ns = bench_now_ns() - t0;
    }
    if (write(fd, &ns, sizeof(ns)) != (ssize_t)sizeof(ns))
        _exit(1);
    close(s);
    close(fd);
    pause();
    _exit(0);
}

/* n admissions, one after another; ns[i] is admission i's round trip. */
static int admit_users(const ab_agent *ag, const char *uuid, int n, uint64_t *ns, pid_t *kids,
                       gf_error *err)
{
    char sock[GF_PATH_MAX + 16];
    int p[2], rc = 0;

    snprintf(sock, sizeof(sock), "%s/users.sock", ag->state);
    if (pipe2(p, O_CLOEXEC) < 0)
        return gf_error_sys(err, "pipe");
    for (int i = 0; i < n && rc == 0; i++) {
        if ((kids[i] = fork()) < 0) {
            kids[i] = 0;
            rc = gf_error_sys(err, "fork (admission %d)", i);
        } else if (kids[i] == 0) {
            user_child(sock, uuid, i, p[1]);
        } else if (read(p[0], &ns[i], sizeof(ns[i])) != (ssize_t)sizeof(ns[i]) || ns[i] == 0) {
            rc = gf_error_set(err, GF_ESTATE, "admission %d through users.sock was refused", i);
        }
    }
    close(p[0]);
    close(p[1]);
    return rc;
}

static void kill_kids(pid_t *kids, int n)
{
    for (int i = 0; i < n && kids[i] > 0; i++)
        kill(kids[i], SIGKILL);
    for (int i = 0; i < n && kids[i] > 0; i++)
        waitpid(kids[i], NULL, 0);
}

/* Agent D: one user's admissions, the first tenth beside the last tenth. */
static int run_users(const ab_env *e, const ab_opts *o, const char *uuid, bench_results *r,
                     gf_error *err)
{
    char text[64];
    int n = o->admissions, tenth = n / 10 > 0 ? n / 10 : 1, rc = -1;
    uint64_t *ns = calloc((size_t)n, sizeof(*ns));
    pid_t *kids = calloc((size_t)n + 1, sizeof(*kids));
    ab_agent ag;

    bench_put_u64(r, "users_admissions", (uint64_t)n);
    if (!ns || !kids) {
        free(ns);
        free(kids);
        return gf_error_sys(err, "allocating");
    }
    if (state_dir(e, &ag, "users", err) < 0)
        goto out;
    snprintf(ag.policy, sizeof(ag.policy), "%s/policy.conf", e->tmp);
    snprintf(text, sizeof(text), "[default]\nmax-fractions = %d\n", n);
    if (chmod(e->tmp, 0755) < 0 || chmod(ag.state, 0755) < 0 ||
        write_file(ag.policy, text, err) < 0 || agent_start(e, &ag, "users", err) < 0)
        goto out;
    if (admit_users(&ag, uuid, n, ns, kids, err) == 0) {
        put_dist(r, "users_first", "us", ns, (size_t)tenth);
        put_dist(r, "users_last", "us", ns + n - tenth, (size_t)tenth);
        bench_put_num(r, "users_last_over_first", 2,
                      atof(bench_get(r, "users_last_median_us")) /
                          atof(bench_get(r, "users_first_median_us")));
        rc = 0;
    }
    kill_kids(kids, n);
    agent_stop(&ag, "users_agent_stop_status", r);
out:
    free(ns);
    free(kids);
    return rc;
}

/* ---- set-up, report, main ------------------------------------------------- */

static bool real_gpu_present(void)
{
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    int (*init)(void), (*count)(unsigned int *);
    unsigned int n = 0;

    if (!lib)
        return false;
    *(void **)&init = dlsym(lib, "nvmlInit_v2");
    *(void **)&count = dlsym(lib, "nvmlDeviceGetCount_v2");
    bool ok = init && count && init() == 0 && count(&n) == 0 && n > 0;
    dlclose(lib);
    return ok;
}

static int sim_env(const ab_env *e, gf_error *err)
{
    char lib[GF_PATH_MAX + 32], state[GF_PATH_MAX + 32];
    const char *old = getenv("LD_LIBRARY_PATH");
    char *path = NULL;

    snprintf(lib, sizeof(lib), "%s/lib/gpusim", e->build);
    snprintf(state, sizeof(state), "%s/gpusim.state", e->tmp);
    if (access(lib, R_OK) < 0)
        return gf_error_sys(err, "gpusim (%s)", lib);
    if (asprintf(&path, "%s%s%s", lib, old && *old ? ":" : "", old ? old : "") < 0)
        return gf_error_set(err, GF_ENOSPACE, "out of memory");
    setenv("LD_LIBRARY_PATH", path, 1);
    free(path);
    setenv("GPUSIM_DEVICES", AB_SIM_DEVICES, 1);
    setenv("GPUSIM_STATE", state, 1);
    setenv("GPUSIM_CTX_OVERHEAD", "0", 1);
    return 0;
}

/* The agent's state lives on tmpfs (/run/gpufrac) in production: measure it
 * there (/dev/shm) unless TMPDIR says otherwise; on a disk file system the
 * kernel's readahead and fault-around map far more ledger pages. */
static const char *state_parent(void)
{
    const char *t = getenv("TMPDIR");
    if (t && *t)
        return t;
    return access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
}

static int env_init(ab_env *e, const ab_opts *o, gf_error *err)
{
    const char *t = state_parent();
    char dir[GF_PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", e->exe, sizeof(e->exe) - 1);

    if (n <= 0)
        return gf_error_sys(err, "reading /proc/self/exe");
    e->exe[n] = '\0';
    snprintf(dir, sizeof(dir), "%s", e->exe);
    snprintf(e->build, sizeof(e->build), "%s", o->build ? o->build : dirname(dirname(dir)));
    snprintf(e->agent_bin, sizeof(e->agent_bin), "%.*s/bin/gpufracd", GF_PATH_MAX - 16, e->build);
    if (access(e->agent_bin, X_OK) < 0)
        return gf_error_sys(err, "gpufracd (%s; --build DIR names the build)", e->agent_bin);
    snprintf(e->tmp, sizeof(e->tmp), "%s/gpufracd-bench.XXXXXX", t);
    if (!mkdtemp(e->tmp))
        return gf_error_sys(err, "creating a directory under %s", t);
    e->sim = o->force_sim || !real_gpu_present();
    unsetenv("LD_PRELOAD");
    return e->sim ? sim_env(e, err) : 0;
}

typedef struct ab_row {
    const char *label, *figure, *baseline, *target, *verdict;
} ab_row;

static const ab_row rows[] = {
    {"borrow round trip, median us", "burst_borrow_median_us", "burst_ping_median_us", "< 50 us",
     "burst_target"},
    {"borrow round trip, p99 us", "burst_borrow_p99_us", "burst_ping_p99_us", "", NULL},
    {"return round trip, median us", "burst_return_median_us", "burst_ping_median_us", "", NULL},
    {"borrow, many fractions, median us", "burst_many_borrow_median_us",
     "burst_many_ping_median_us", "(50 us)", "burst_many_target"},
    {"borrow, many fractions, p99 us", "burst_many_borrow_p99_us", "burst_many_ping_p99_us", "",
     NULL},
    {"/metrics, many fractions, median ms", "metrics_median_ms", "healthz_median_ms", "< 5 ms",
     "metrics_target"},
    {"/metrics, many fractions, p99 ms", "metrics_p99_ms", "healthz_p99_ms", "", NULL},
    {"/metrics page, bytes", "metrics_bytes", "metrics_0f_bytes", "", NULL},
    {"/metrics agent CPU per scrape, ms", "metrics_agent_cpu_ms", "metrics_median_ms", "", NULL},
    {"borrow while scraping, median us", "burst_scrape_borrow_median_us",
     "burst_quiet_borrow_median_us", "", NULL},
    {"borrow while scraping, p99 us", "burst_scrape_borrow_p99_us", "burst_quiet_borrow_p99_us",
     "<= 1.5 x without", "burst_scrape_target"},
    {"/metrics, 0 fractions, median ms", "metrics_0f_median_ms", "healthz_median_ms", "", NULL},
    {"agent VmRSS, KiB", "agent_rss_kib", "agent_rss_kib_0f", "< 16384 KiB", NULL},
    {"agent VmHWM, KiB", "agent_hwm_kib", "agent_hwm_kib_0f", "< 16384 KiB", "rss_target"},
    {"watchdog reaction, median ms", "watchdog_median_ms", "watchdog_period_ms", "", NULL},
    {"watchdog reaction, max ms", "watchdog_max_ms", "watchdog_period_ms", "< 500 ms (1 period)",
     "watchdog_target"},
    {"users.sock admission, last tenth, us", "users_last_median_us", "users_first_median_us",
     "<= 1.25 x first", "users_flat_target"},
    {"users.sock admission, last tenth p99", "users_last_p99_us", "users_first_p99_us", "", NULL},
};

static void print_table(const bench_results *r)
{
    printf("%-38s %12s %12s %-20s %s\n", "measure", "figure", "baseline", "target", "");
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
        printf("%-38s %12s %12s %-20s %s\n", rows[i].label, bench_get(r, rows[i].figure),
               bench_get(r, rows[i].baseline), rows[i].target,
               rows[i].verdict ? bench_get(r, rows[i].verdict) : "");
    printf("baselines: ping round trip (same socket), /healthz GET (same agent), the same agent\n"
           "with 0 fractions, the watchdog period, the first tenth of users_admissions=%s,\n"
           "the same borrows without the scraping process. \"many\" = fractions=%s (%s of them\n"
           "owned by uids without a passwd entry).\n\n",
           bench_get(r, "users_admissions"), bench_get(r, "fractions"),
           bench_get(r, "fractions_nopw"));
}

static void verdicts(bench_results *r)
{
    const char *hwm = bench_get(r, "agent_hwm_kib");
    put_verdict(r, "burst_target", atof(bench_get(r, "burst_borrow_median_us")) < 50.0);
    put_verdict(r, "burst_many_target", atof(bench_get(r, "burst_many_borrow_median_us")) < 50.0);
    put_verdict(r, "metrics_target", atof(bench_get(r, "metrics_median_ms")) < 5.0);
    put_verdict(r, "burst_scrape_target",
                atof(bench_get(r, "burst_scrape_over_quiet")) <= AB_SCRAPE_OVER_QUIET);
    put_verdict(r, "rss_target", strcmp(hwm, "-") != 0 && atof(hwm) < AB_RSS_TARGET_KIB);
    if (strcmp(bench_get(r, "users_last_over_first"), "-") != 0)
        put_verdict(r, "users_flat_target", atof(bench_get(r, "users_last_over_first")) <= 1.25);
}

static const char usage[] =
    "Usage: gpufracd-bench [--quick] [--sim] [--build DIR] [--json FILE]\n"
    "Measures gpufracd: borrow round trip, /metrics with many fractions, resident\n"
    "memory, watchdog reaction, borrows while /metrics is scraped (docs/benchmarks.md). --build: "
    "the build tree holding\n"
    "bin/gpufracd and lib/gpusim (default: the executable's directory/..).\n";

static int parse_opts(int argc, char **argv, ab_opts *o)
{
    static const struct option opts[] = {
        {"quick", no_argument, NULL, 'q'},       {"sim", no_argument, NULL, 's'},
        {"build", required_argument, NULL, 'b'}, {"json", required_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},        {NULL, 0, NULL, 0}};
    int c;

    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'q': o->quick = true; break;
        case 's': o->force_sim = true; break;
        case 'b': o->build = optarg; break;
        case 'j': o->json = optarg; break;
        case 'h': fputs(usage, stdout); return 0;
        default: fputs(usage, stderr); return 2;
        }
    }
    o->borrow_n = o->quick ? 200 : 2000;
    o->borrow_many_n = o->quick ? 20 : 200;
    o->borrow_scrape_n = o->quick ? 200 : 2000;
    o->scrapes = o->quick ? 10 : 50;
    o->fractions = o->quick ? 200 : 1000;
    o->wd_runs = o->quick ? 3 : 10;
    o->admissions = o->quick ? 50 : 4000;
    return optind < argc ? (fputs(usage, stderr), 2) : -1;
}

static int run(const ab_env *e, const ab_opts *o, bench_results *r, gf_error *err)
{
    char uuid[GF_UUID_MAX] = "";

    bench_put_str(r, "platform", e->sim ? "gpusim" : "gpu");
    bench_put_str(r, "quick", o->quick ? "yes" : "no");
    bench_put_u64(r, "cpus", (uint64_t)sysconf(_SC_NPROCESSORS_ONLN));
    bench_put_u64(r, "borrow_bytes", AB_BORROW_BYTES);
    if (run_small(e, o, uuid, sizeof(uuid), r, err) < 0 || run_many(e, o, uuid, r, err) < 0)
        return -1;
    if (geteuid() != 0) {
        bench_put_str(r, "users_admissions",
                      "skipped (needs root: the admissions run as uid "
                      "65534)");
    } else if (run_users(e, o, uuid, r, err) < 0) {
        return -1;
    }
    bench_put_str(r, "gpu_uuid", uuid);
    verdicts(r);
    return 0;
}

int main(int argc, char **argv)
{
    static bench_results r;
    ab_opts o = {0};
    ab_env e = {0};
    gf_error err = {0};
    int rc;

    if (argc > 1 && strcmp(argv[1], "--hog") == 0)
        return hog_main(argc, argv);
    if ((rc = parse_opts(argc, argv, &o)) >= 0)
        return rc;
    signal(SIGPIPE, SIG_IGN);
    rc = env_init(&e, &o, &err) == 0 && run(&e, &o, &r, &err) == 0 ? 0 : 1;
    if (rc == 0) {
        print_table(&r);
        bench_print_kv(&r);
        if (o.json && bench_write_json(&r, o.json, &err) < 0)
            rc = 1;
    }
    if (rc)
        fprintf(stderr, "gpufracd-bench: %s\n", err.msg);
    if (e.tmp[0] && !getenv("GPUFRACD_BENCH_KEEP"))
        nftw(e.tmp, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return rc;
}
