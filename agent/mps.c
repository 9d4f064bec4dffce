/* SPDX-License-Identifier: Apache-2.0 */
/* One legacy MPS control daemon per GPU in sm-sharing use. The daemon is
 * driven only through its documented interface:
 * `nvidia-cuda-mps-control` with one command on stdin, answer on stdout. */
#include "mps.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "conn.h"
#include "events.h"
#include "fraction.h"
#include "gate.h"
#include "statedir.h"

extern char **environ;

#define MPS_POLL_MS 10
#define MPS_PIDS_MAX 256
#define MPS_ANSWER_MAX 8192
#define MPS_PIDFILE "nvidia-cuda-mps-control.pid"

/* ---- small helpers ---------------------------------------------------- */

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
        ;
}

static const char *mps_bin(const gf_agent *a)
{
    return a->mps_control[0] ? a->mps_control : GF_MPS_CONTROL_DEFAULT;
}

static void gpu_set(gf_agent *a, int gpu, int running, int fault, int restart)
{
    pthread_mutex_lock(&a->lock);
    if (running >= 0)
        a->gpus[gpu].mps_running = running;
    if (fault >= 0)
        a->gpus[gpu].mps_fault = fault;
    if (restart)
        a->gpus[gpu].mps_restarts++;
    pthread_mutex_unlock(&a->lock);
}

static int path_join(char *buf, size_t len, const char *dir, const char *name, gf_error *err)
{
    int n = snprintf(buf, len, "%s/%s", dir, name);

    if (n < 0 || (size_t)n >= len)
        return gf_error_set(err, GF_ERANGE, "path %s/%s is too long", dir, name);
    return 0;
}

/* First line of s (at most 200 bytes) for messages. */
static const char *first_line(const char *s, char *buf, size_t len)
{
    size_t n = strcspn(s, "\n");

    if (n >= len)
        n = len - 1;
    if (n > 200)
        n = 200;
    memcpy(buf, s, n);
    buf[n] = '\0';
    return buf;
}

int gf_mps_pipe_dir(const gf_agent *a, int gpu, char *buf, size_t len, gf_error *err)
{
    const char *u;
    char shortid[9];
    int i, n;

    if (gpu < 0 || gpu >= a->n_gpus)
        return gf_error_set(err, GF_EINVAL, "MPS: no GPU %d (the node has %d)", gpu, a->n_gpus);
    u = a->gpus[gpu].dev.uuid;
    if (strncmp(u, "GPU-", 4) == 0)
        u += 4;
    for (i = 0; i < 8; i++) {
        if (!isxdigit((unsigned char)u[i]))
            return gf_error_set(err, GF_EINVAL,
                                "MPS: GPU %d: uuid \"%s\" does not start with 8 hex digits", gpu,
                                a->gpus[gpu].dev.uuid);
        shortid[i] = (char)tolower((unsigned char)u[i]);
    }
    shortid[8] = '\0';
    n = snprintf(buf, len, "%s/" GF_STATE_MPS "/%s", a->state_dir, shortid);
    if (n < 0 || (size_t)n >= len || n > GF_MPS_PIPE_DIR_MAX)
        return gf_error_set(err, GF_ERANGE,
                            "MPS: GPU %d: pipe dir %s/" GF_STATE_MPS "/%s is longer than %d "
                            "characters "
                            "(unix socket paths are limited); use a shorter state directory",
                            gpu, a->state_dir, shortid, GF_MPS_PIPE_DIR_MAX);
    return 0;
}

/* ---- processes -------------------------------------------------------- */

/* environ without the MPS/visibility variables, plus ours. *envp is malloc'd
 * (the strings point into vars and environ). */
static int mps_env(const gf_agent *a, int gpu, const char *pipe, char vars[3][GF_PATH_MAX + 32],
                   char ***envp, gf_error *err)
{
    static const char *const drop[] = {"CUDA_MPS_PIPE_DIRECTORY=", "CUDA_MPS_LOG_DIRECTORY=",
                                       "CUDA_VISIBLE_DEVICES="};
    size_t n = 0, k = 0, d;
    char **e;

    while (environ[n])
        n++;
    e = calloc(n + 4, sizeof(*e));
    if (!e)
        return gf_error_sys(err, "MPS: GPU %d: allocating the environment", gpu);
    for (size_t i = 0; i < n; i++) {
        for (d = 0; d < 3; d++)
            if (strncmp(environ[i], drop[d], strlen(drop[d])) == 0)
                break;
        if (d == 3)
            e[k++] = environ[i];
    }
    snprintf(vars[0], sizeof(vars[0]), "CUDA_MPS_PIPE_DIRECTORY=%s", pipe);
    snprintf(vars[1], sizeof(vars[1]), "CUDA_MPS_LOG_DIRECTORY=%s/log", pipe);
    snprintf(vars[2], sizeof(vars[2]), "CUDA_VISIBLE_DEVICES=%s", a->gpus[gpu].dev.uuid);
    for (d = 0; d < 3; d++)
        e[k++] = vars[d];
    *envp = e;
    return 0;
}

/* Runs the control tool (argv1 = "-d" or NULL) with fds[0..2] as its stdio. */
static int mps_spawn(const gf_agent *a, int gpu, const char *pipe, const char *argv1,
                     const int fds[3], pid_t *pid, gf_error *err)
{
    char vars[3][GF_PATH_MAX + 32];
    char *argv[3] = {(char *)mps_bin(a), (char *)argv1, NULL};
    posix_spawn_file_actions_t fa;
    char **envp = NULL;
    int rc, i;

    if (mps_env(a, gpu, pipe, vars, &envp, err) < 0)
        return -1;
    rc = posix_spawn_file_actions_init(&fa);
    for (i = 0; rc == 0 && i < 3; i++)
        rc = posix_spawn_file_actions_adddup2(&fa, fds[i], i);
    if (rc == 0)
        rc = posix_spawnp(pid, argv[0], &fa, NULL, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    free(envp);
    if (rc != 0) {
        errno = rc;
        return gf_error_sys(err, "MPS: GPU %d: running %s", gpu, argv[0]);
    }
    return 0;
}

/* Waits for child pid until deadline. 0: exited (*status set), 1: still
 * running. A child reaped elsewhere (ECHILD) counts as a clean exit. */
static int wait_child(pid_t pid, int64_t deadline, int *status)
{
    for (;;) {
        pid_t r = waitpid(pid, status, WNOHANG);

        if (r == pid)
            return 0;
        if (r < 0 && errno != EINTR) {
            *status = 0;
            return 0;
        }
        if (now_ms() >= deadline)
            return 1;
        sleep_ms(MPS_POLL_MS);
    }
}

static void kill_child(pid_t pid)
{
    int status;

    kill(pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
}

/* ---- one command ------------------------------------------------------ */

/* Writes all of buf to fd without letting SIGPIPE kill the agent. */
static int write_nosigpipe(int fd, const char *buf, size_t len)
{
    sigset_t pipe_set, old;
    struct timespec zero = {0, 0};
    int rc = 0, saved;

    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    while (len > 0) {
        ssize_t w = write(fd, buf, len);

        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            rc = -1;
            break;
        }
        buf += w;
        len -= (size_t)w;
    }
    saved = errno;
    if (rc < 0 && saved == EPIPE)
        sigtimedwait(&pipe_set, NULL, &zero);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    errno = saved;
    return rc;
}

typedef struct mps_io {
    char *out;
    size_t outlen, used;
    char errbuf[256];
    size_t errused;
    int overflow;
} mps_io;

/* Reads fd into dst (keeping a NUL); returns 1 at EOF. */
static int read_some(int fd, char *dst, size_t cap, size_t *used, int *overflow)
{
    char tmp[1024];
    ssize_t r = read(fd, tmp, sizeof(tmp));
    size_t take;

    if (r < 0)
        return errno == EINTR || errno == EAGAIN ? 0 : 1;
    if (r == 0)
        return 1;
    take = (size_t)r;
    if (*used + take >= cap) {
        take = cap - 1 - *used;
        if (overflow)
            *overflow = 1;
    }
    memcpy(dst + *used, tmp, take);
    *used += take;
    dst[*used] = '\0';
    return 0;
}

/* Collects stdout and stderr until both close or the deadline; 1 = timeout. */
static int collect(int out_fd, int err_fd, mps_io *io, int64_t deadline)
{
    struct pollfd p[2] = {{.fd = out_fd, .events = POLLIN}, {.fd = err_fd, .events = POLLIN}};

    while (p[0].fd >= 0 || p[1].fd >= 0) {
        int64_t left = deadline - now_ms();
        int r;

        if (left <= 0)
            return 1;
        r = poll(p, 2, (int)left);
        if (r < 0 && errno != EINTR)
            return 1;
        if (r <= 0)
            continue;
        if (p[0].revents && read_some(out_fd, io->out, io->outlen, &io->used, &io->overflow))
            p[0].fd = -1;
        if (p[1].revents && read_some(err_fd, io->errbuf, sizeof(io->errbuf), &io->errused, NULL))
            p[1].fd = -1;
    }
    return 0;
}

static void close_fds(int *fds, int n)
{
    for (int i = 0; i < n; i++)
        if (fds[i] >= 0) {
            close(fds[i]);
            fds[i] = -1;
        }
}

static int command_result(gf_agent *a, int gpu, const char *cmd, int status, mps_io *io,
                          gf_error *err)
{
    char line[256];
    const char *why = io->errused ? io->errbuf : io->out;

    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return gf_error_set(err, GF_ESTATE,
                            "MPS: GPU %d (%s): command \"%s\" failed (%s %s %d): %s", gpu,
                            a->gpus[gpu].dev.uuid, cmd, mps_bin(a),
                            WIFEXITED(status) ? "exit" : "signal",
                            WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
                            why[0] ? first_line(why, line, sizeof(line)) : "no output");
    if (io->overflow)
        return gf_error_set(err, GF_ENOSPACE,
                            "MPS: GPU %d: the answer to \"%s\" is longer than %zu bytes", gpu, cmd,
                            io->outlen - 1);
    return 0;
}

int gf_mps_command(gf_agent *a, int gpu, const char *cmd, char *out, size_t outlen, gf_error *err)
{
    char pipe[GF_PATH_MAX], line[GF_PATH_MAX + 2];
    int in[2] = {-1, -1}, o[2] = {-1, -1}, e[2] = {-1, -1};
    mps_io io = {.out = out, .outlen = outlen};
    int64_t deadline = now_ms() + GF_MPS_TIMEOUT_MS;
    int status = 0, rc = -1;
    pid_t pid = -1;

    if (outlen == 0 || strchr(cmd, '\n') || strlen(cmd) + 2 > sizeof(line))
        return gf_error_set(err, GF_EINVAL, "MPS: GPU %d: bad command \"%s\"", gpu, cmd);
    out[0] = '\0';
    if (gf_mps_pipe_dir(a, gpu, pipe, sizeof(pipe), err) < 0)
        return -1;
    if (pipe2(in, O_CLOEXEC) < 0 || pipe2(o, O_CLOEXEC) < 0 || pipe2(e, O_CLOEXEC) < 0) {
        gf_error_sys(err, "MPS: GPU %d: command \"%s\": pipe", gpu, cmd);
        goto fail;
    }
    if (mps_spawn(a, gpu, pipe, NULL, (int[3]){in[0], o[1], e[1]}, &pid, err) < 0) {
        gf_error_wrap(err, "command \"%s\"", cmd);
        goto fail;
    }
    close(in[0]), close(o[1]), close(e[1]);
    in[0] = o[1] = e[1] = -1;
    snprintf(line, sizeof(line), "%s\n", cmd);
    write_nosigpipe(in[1], line, strlen(line)); /* a tool that quit early is caught below */
    close_fds(&in[1], 1);
    if (collect(o[0], e[0], &io, deadline) || wait_child(pid, deadline, &status)) {
        kill_child(pid);
        pid = -1;
        gf_error_set(err, GF_ESTATE,
                     "MPS: GPU %d (%s): command \"%s\" timed out after %d ms: the MPS control "
                     "daemon (pipe dir %s) is not answering",
                     gpu, a->gpus[gpu].dev.uuid, cmd, GF_MPS_TIMEOUT_MS, pipe);
        goto fail;
    }
    pid = -1;
    rc = command_result(a, gpu, cmd, status, &io, err);
fail:
    if (pid > 0)
        kill_child(pid);
    close_fds(in, 2), close_fds(o, 2), close_fds(e, 2);
    return rc;
}

/* ---- parsing ---------------------------------------------------------- */

/* One PID per line; anything else is an error naming the command. */
static int parse_pids(int gpu, const char *cmd, const char *s, pid_t *pids, int max, gf_error *err)
{
    int n = 0;

    while (*s) {
        char *end;
        long v;

        if (isspace((unsigned char)*s)) {
            s++;
            continue;
        }
        errno = 0;
        v = strtol(s, &end, 10);
        if (errno || end == s || v <= 0 || (*end && !isspace((unsigned char)*end))) {
            char line[256];
            return gf_error_set(err, GF_EINVAL,
                                "MPS: GPU %d: command \"%s\": unexpected answer \"%s\"", gpu, cmd,
                                first_line(s, line, sizeof(line)));
        }
        if (n == max)
            return gf_error_set(err, GF_ENOSPACE, "MPS: GPU %d: command \"%s\": over %d PIDs", gpu,
                                cmd, max);
        pids[n++] = (pid_t)v;
        s = end;
    }
    return n;
}

/* Runs a command whose answer is a PID list. */
static int command_pids(gf_agent *a, int gpu, const char *cmd, pid_t *pids, int max, gf_error *err)
{
    char out[MPS_ANSWER_MAX];

    if (gf_mps_command(a, gpu, cmd, out, sizeof(out), err) < 0)
        return -1;
    return parse_pids(gpu, cmd, out, pids, max, err);
}

/* ---- the daemon process ----------------------------------------------- */

/* Whether pid's command line names the control tool (guards PID reuse). */
static int is_control_process(const gf_agent *a, pid_t pid)
{
    char path[64], buf[4096];
    const char *base = strrchr(mps_bin(a), '/');
    ssize_t n;
    int fd;

    base = base ? base + 1 : mps_bin(a);
    snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno != ENOENT; /* no /proc access: trust kill(pid, 0) */
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return 0; /* a zombie has an empty command line */
    for (ssize_t i = 0; i < n; i++)
        if (buf[i] == '\0')
            buf[i] = ' ';
    buf[n] = '\0';
    return strstr(buf, base) != NULL;
}

/* Whether pid is a live (not zombie) control daemon. */
static int daemon_alive(const gf_agent *a, pid_t pid)
{
    waitpid(pid, NULL, WNOHANG); /* reap it if we are its (sub)reaper */
    if (kill(pid, 0) < 0 && errno != EPERM)
        return 0;
    return is_control_process(a, pid);
}

/* The running daemon's PID from its pid file, or 0. */
static pid_t daemon_pid(const gf_agent *a, const char *pipe)
{
    char path[GF_PATH_MAX + 64], buf[32];
    ssize_t n;
    long v;
    int fd;

    snprintf(path, sizeof(path), "%s/%s", pipe, MPS_PIDFILE);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    v = strtol(buf, NULL, 10);
    if (v <= 0 || v > 0x3fffffff)
        return 0;
    return daemon_alive(a, (pid_t)v) ? (pid_t)v : 0;
}

static int control_exists(const char *pipe)
{
    char path[GF_PATH_MAX + 16];
    struct stat st;

    snprintf(path, sizeof(path), "%s/control", pipe);
    return stat(path, &st) == 0 && S_ISSOCK(st.st_mode);
}

/* Running = live PID in the pid file, or a control socket that answers. */
static int daemon_running(gf_agent *a, int gpu, const char *pipe)
{
    char out[MPS_ANSWER_MAX];
    gf_error ignored;

    if (daemon_pid(a, pipe) > 0)
        return 1;
    return control_exists(pipe) &&
           gf_mps_command(a, gpu, "get_server_list", out, sizeof(out), &ignored) == 0;
}

static int make_dir(const char *path, gf_error *err)
{
    if (mkdir(path, 0755) == 0)
        return chmod(path, 0755) < 0 ? gf_error_sys(err, "MPS: chmod %s", path) : 0;
    if (errno == EEXIST)
        return 0;
    return gf_error_sys(err, "MPS: creating %s", path);
}

static int make_dirs(const gf_agent *a, const char *pipe, gf_error *err)
{
    char path[GF_PATH_MAX + 16];

    if (path_join(path, sizeof(path), a->state_dir, GF_STATE_MPS, err) < 0 ||
        make_dir(path, err) < 0)
        return -1;
    if (make_dir(pipe, err) < 0)
        return -1;
    if (path_join(path, sizeof(path), pipe, "log", err) < 0 || make_dir(path, err) < 0)
        return -1;
    return 0;
}

/* Removes a dead daemon's pid file and socket so that the wait for a fresh
 * `control` cannot be fooled by the old one. */
static void remove_stale(const char *pipe)
{
    char path[GF_PATH_MAX + 64];

    snprintf(path, sizeof(path), "%s/control", pipe);
    unlink(path);
    snprintf(path, sizeof(path), "%s/%s", pipe, MPS_PIDFILE);
    unlink(path);
}

static int wait_control(gf_agent *a, int gpu, const char *pipe, int64_t deadline, gf_error *err)
{
    while (!control_exists(pipe)) {
        if (now_ms() >= deadline)
            return gf_error_set(err, GF_ESTATE,
                                "MPS: GPU %d (%s): the daemon started with \"%s -d\" made no "
                                "control socket in %s within %d ms (see %s/log/control.log)",
                                gpu, a->gpus[gpu].dev.uuid, mps_bin(a), pipe, GF_MPS_TIMEOUT_MS,
                                pipe);
        sleep_ms(MPS_POLL_MS);
    }
    return 0;
}

static int daemon_start(gf_agent *a, int gpu, const char *pipe, gf_error *err)
{
    int64_t deadline = now_ms() + GF_MPS_TIMEOUT_MS;
    int null_fd, status = 0;
    pid_t pid;

    if (make_dirs(a, pipe, err) < 0)
        return gf_error_wrap(err, "GPU %d", gpu);
    remove_stale(pipe);
    null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null_fd < 0)
        return gf_error_sys(err, "MPS: GPU %d: opening /dev/null", gpu);
    if (mps_spawn(a, gpu, pipe, "-d", (int[3]){null_fd, null_fd, null_fd}, &pid, err) < 0) {
        close(null_fd);
        return gf_error_wrap(err, "starting the daemon");
    }
    close(null_fd);
    if (wait_child(pid, deadline, &status)) {
        kill_child(pid);
        return gf_error_set(err, GF_ESTATE,
                            "MPS: GPU %d (%s): \"%s -d\" did not return within %d ms", gpu,
                            a->gpus[gpu].dev.uuid, mps_bin(a), GF_MPS_TIMEOUT_MS);
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return gf_error_set(
            err, GF_ESTATE,
            "MPS: GPU %d (%s): \"%s -d\" failed (status %d); see %s/log/control.log", gpu,
            a->gpus[gpu].dev.uuid, mps_bin(a), status, pipe);
    return wait_control(a, gpu, pipe, deadline, err);
}

/* Waits until process pid (the daemon) is gone, not just its pid file;
 * SIGKILLs it when `force` and it stays. */
static int wait_gone(gf_agent *a, int gpu, pid_t pid, int force, gf_error *err)
{
    int64_t deadline = now_ms() + GF_MPS_TIMEOUT_MS;

    while (pid > 0 && daemon_alive(a, pid)) {
        if (now_ms() >= deadline) {
            if (!force)
                return gf_error_set(
                    err, GF_ESTATE,
                    "MPS: GPU %d (%s): daemon %d still running %d ms after \"quit\"", gpu,
                    a->gpus[gpu].dev.uuid, (int)pid, GF_MPS_TIMEOUT_MS);
            kill(pid, SIGKILL);
            force = 0;
            deadline = now_ms() + GF_MPS_TIMEOUT_MS;
        }
        sleep_ms(MPS_POLL_MS);
    }
    return 0;
}

/* `quit`, then wait for the daemon to exit. */
static int daemon_quit(gf_agent *a, int gpu, const char *pipe, int force, gf_error *err)
{
    char out[MPS_ANSWER_MAX];
    pid_t pid = daemon_pid(a, pipe);

    if (gf_mps_command(a, gpu, "quit", out, sizeof(out), err) < 0) {
        if (!force || pid <= 0)
            return -1;
        kill(pid, SIGTERM); /* wedged: hard stop, SIGKILL below if needed */
    }
    return wait_gone(a, gpu, pid, force, err);
}

/* ---- the interface ---------------------------------------------------- */

int gf_mps_ensure(gf_agent *a, int gpu, char *pipe_dir, size_t len, gf_error *err)
{
    char pipe[GF_PATH_MAX];

    if (gf_mps_pipe_dir(a, gpu, pipe, sizeof(pipe), err) < 0)
        return -1;
    if (strlen(pipe) >= len)
        return gf_error_set(err, GF_ERANGE, "MPS: GPU %d: buffer too small for pipe dir %s", gpu,
                            pipe);
    if (daemon_running(a, gpu, pipe)) {
        /* found (maybe still starting): its socket must be there */
        if (wait_control(a, gpu, pipe, now_ms() + GF_MPS_TIMEOUT_MS, err) < 0)
            return -1;
    } else if (daemon_start(a, gpu, pipe, err) < 0) {
        return -1;
    }
    gpu_set(a, gpu, 1, -1, 0);
    memcpy(pipe_dir, pipe, strlen(pipe) + 1);
    return 0;
}

/* Terminates, on server srv, the clients that are in want (all when want is NULL). */
static int terminate_on_server(gf_agent *a, int gpu, pid_t srv, const pid_t *want, int n,
                               gf_error *err)
{
    pid_t clients[MPS_PIDS_MAX];
    char cmd[96], out[MPS_ANSWER_MAX];
    gf_error one;
    int nc, rc = 0;

    snprintf(cmd, sizeof(cmd), "get_client_list %d", (int)srv);
    nc = command_pids(a, gpu, cmd, clients, MPS_PIDS_MAX, err);
    if (nc < 0)
        return -1;
    for (int i = 0; i < nc; i++) {
        int j = 0;

        while (want && j < n && want[j] != clients[i])
            j++;
        if (want && j == n)
            continue;
        snprintf(cmd, sizeof(cmd), "terminate_client %d %d", (int)srv, (int)clients[i]);
        if (gf_mps_command(a, gpu, cmd, out, sizeof(out), &one) < 0 && rc == 0) {
            *err = one; /* keep going: one stuck client must not shield the others */
            rc = -1;
        }
    }
    return rc;
}

int gf_mps_terminate_clients(gf_agent *a, int gpu, const pid_t *pids, int n, gf_error *err)
{
    pid_t servers[MPS_PIDS_MAX];
    char pipe[GF_PATH_MAX];
    int ns, rc = 0;

    if (n <= 0)
        return 0;
    if (gf_mps_pipe_dir(a, gpu, pipe, sizeof(pipe), err) < 0)
        return -1;
    if (!daemon_running(a, gpu, pipe))
        return 0; /* no daemon, no clients */
    ns = command_pids(a, gpu, "get_server_list", servers, MPS_PIDS_MAX, err);
    if (ns < 0)
        return -1;
    for (int i = 0; i < ns; i++)
        if (terminate_on_server(a, gpu, servers[i], pids, n, err) < 0)
            rc = -1;
    return rc;
}

/* The first server in FAULT, 0 when none, -1 on error. */
static pid_t faulted_server(gf_agent *a, int gpu, gf_error *err)
{
    pid_t servers[MPS_PIDS_MAX];
    char cmd[64], out[MPS_ANSWER_MAX];
    int ns = command_pids(a, gpu, "get_server_list", servers, MPS_PIDS_MAX, err);

    if (ns < 0)
        return -1;
    for (int i = 0; i < ns; i++) {
        snprintf(cmd, sizeof(cmd), "get_server_status %d", (int)servers[i]);
        if (gf_mps_command(a, gpu, cmd, out, sizeof(out), err) < 0)
            return -1;
        if (strncmp(out, "FAULT", 5) == 0)
            return servers[i];
    }
    return 0;
}

static int restart(gf_agent *a, int gpu, const char *pipe, gf_error *err)
{
    gpu_set(a, gpu, 0, -1, 1);
    if (daemon_start(a, gpu, pipe, err) < 0)
        return -1;
    gpu_set(a, gpu, 1, -1, 0);
    return 0;
}

/* Fault recovery: terminate the server's clients, quit, start again. */
static int recover_fault(gf_agent *a, int gpu, const char *pipe, pid_t srv, gf_error *err)
{
    gf_error quiet;

    gf_agent_event(a,
                   "mps: GPU %d (%s): server %d in FAULT; terminating its clients and restarting "
                   "the MPS control daemon",
                   gpu, a->gpus[gpu].dev.uuid, (int)srv);
    gpu_set(a, gpu, -1, 1, 0);
    if (terminate_on_server(a, gpu, srv, NULL, 0, &quiet) < 0)
        gf_agent_event(a, "mps: GPU %d: %s", gpu, quiet.msg);
    if (daemon_quit(a, gpu, pipe, 1, &quiet) < 0)
        gf_agent_event(a, "mps: GPU %d: %s", gpu, quiet.msg);
    return restart(a, gpu, pipe, err);
}

int gf_mps_check(gf_agent *a, int gpu, gf_error *err)
{
    char pipe[GF_PATH_MAX];
    gf_error cmd_err;
    pid_t srv;

    if (gf_mps_pipe_dir(a, gpu, pipe, sizeof(pipe), err) < 0)
        return -1;
    if (!a->gpus[gpu].mps_running)
        return 0;
    if (daemon_pid(a, pipe) <= 0) {
        gf_agent_event(a, "mps: GPU %d (%s): the MPS control daemon is gone; restarting it", gpu,
                       a->gpus[gpu].dev.uuid);
        return restart(a, gpu, pipe, err);
    }
    srv = faulted_server(a, gpu, &cmd_err);
    if (srv < 0) {
        gf_agent_event(a, "mps: GPU %d: %s; restarting the MPS control daemon", gpu, cmd_err.msg);
        daemon_quit(a, gpu, pipe, 1, &cmd_err);
        return restart(a, gpu, pipe, err);
    }
    if (srv > 0)
        return recover_fault(a, gpu, pipe, srv, err);
    gpu_set(a, gpu, -1, 0, 0);
    return 0;
}

int gf_mps_stop_idle(gf_agent *a, gf_error *err)
{
    char pipe[GF_PATH_MAX];
    gf_error one;
    int rc = 0;

    for (int i = 0; i < a->n_gpus; i++) {
        const gf_agent_gpu *g = &a->gpus[i];

        if (g->n_fractions > 0 && g->mode == GF_MODE_SM_SHARING)
            continue;
        if (gf_mps_pipe_dir(a, i, pipe, sizeof(pipe), &one) < 0)
            continue; /* such a GPU never had a daemon */
        if (!g->mps_running && daemon_pid(a, pipe) <= 0)
            continue;
        if (daemon_quit(a, i, pipe, 1, &one) < 0) {
            if (rc == 0 && err)
                *err = one;
            rc = -1;
            continue;
        }
        gpu_set(a, i, 0, 0, 0);
    }
    return rc;
}

/* Is pid the live supervisor the agent attached to an sm-sharing fraction on GPU g? */
static bool supervises_sm(gf_agent *a, pid_t pid, int g)
{
    for (int i = 0; i < a->n_fractions; i++) {
        const gf_afraction *f = &a->fractions[i];
        if (f->supervisor == pid && f->sup_pidfd >= 0 && f->cfg.mode == GF_MODE_SM_SHARING &&
            gf_aconfig_device(&f->cfg, a->gpus[g].dev.uuid))
            return true;
    }
    return false;
}

void gf_serve_mps(gf_agent *a, gf_request *r, const gf_msg *in, gf_msg *out)
{
    char pipe[GF_PATH_MAX];
    gf_error err;
    int g;

    if ((g = gf_gate_gpu(a, in, out)) < 0)
        return;
    if (r->peer->uid != 0 && !supervises_sm(a, r->peer->pid, g))
        return gf_reply_error(out, "only root or the supervisor of an sm-sharing fraction on this "
                                   "GPU may ask for its MPS daemon");
    if (gf_mps_ensure(a, g, pipe, sizeof(pipe), &err) < 0)
        return gf_reply_error(out, err.msg);
    gf_msg_init(out, "ok");
    gf_msg_add(out, "pipe", pipe);
}
