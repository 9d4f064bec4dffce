/* SPDX-License-Identifier: Apache-2.0 */
/* Child processes: `exe --worker ...` with a side's environment, stdout
 * captured through a pipe, optionally stdin from a start-signal pipe. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

#define SPAWN_ARGS_MAX 16

static void child_exec(const bench_env *e, bench_side side, const char **full, int out_fd,
                       int go_fd)
{
    int in = go_fd >= 0 ? go_fd : open("/dev/null", O_RDONLY);
    if (in < 0 || dup2(in, STDIN_FILENO) < 0 || dup2(out_fd, STDOUT_FILENO) < 0)
        _exit(126);
    execve(e->exe, (char *const *)full, e->envp[side]);
    _exit(127);
}

int bench_spawn(const bench_env *e, bench_side side, const char *const *argv, int go_fd,
                bench_child *c, gf_error *err)
{
    const char *full[SPAWN_ARGS_MAX + 3] = {e->exe, "--worker"};
    int out[2];
    size_t n = 0;

    while (argv[n] && n < SPAWN_ARGS_MAX) {
        full[n + 2] = argv[n];
        n++;
    }
    memset(c, 0, sizeof(*c));
    c->pid = -1;
    c->out_fd = -1;
    if (pipe2(out, O_CLOEXEC) < 0)
        return gf_error_sys(err, "pipe");
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(out[0]);
        close(out[1]);
        return gf_error_sys(err, "fork");
    }
    if (pid == 0)
        child_exec(e, side, full, out[1], go_fd);
    close(out[1]);
    c->pid = pid;
    c->out_fd = out[0];
    return 0;
}

int bench_child_line(bench_child *c, char *buf, size_t len, gf_error *err)
{
    size_t n = 0;
    while (n + 1 < len) {
        char ch;
        ssize_t r = read(c->out_fd, &ch, 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return gf_error_set(err, GF_ESTATE, "worker %d ended before it was ready", (int)c->pid);
        if (ch == '\n')
            break;
        buf[n++] = ch;
    }
    buf[n] = '\0';
    return 0;
}

static int read_all(bench_child *c, gf_error *err)
{
    size_t cap = 0;
    for (;;) {
        if (c->out_len + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 16384;
            if (cap > BENCH_OUT_MAX)
                return gf_error_set(err, GF_ENOSPACE, "worker printed more than %d bytes",
                                    BENCH_OUT_MAX);
            char *p = realloc(c->out, cap);
            if (!p)
                return gf_error_set(err, GF_ESYS, "out of memory");
            c->out = p;
        }
        ssize_t r = read(c->out_fd, c->out + c->out_len, cap - c->out_len - 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return gf_error_sys(err, "reading a worker's output");
        if (r == 0)
            break;
        c->out_len += (size_t)r;
    }
    c->out[c->out_len] = '\0';
    return 0;
}

static int reap(bench_child *c, gf_error *err)
{
    int st;
    pid_t pid = c->pid;
    while (waitpid(pid, &st, 0) < 0) {
        if (errno != EINTR)
            return gf_error_sys(err, "waitpid");
    }
    c->pid = -1;
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
        return 0;
    if (WIFSIGNALED(st))
        return gf_error_set(err, GF_ESTATE, "worker %d was killed by signal %d", (int)pid,
                            WTERMSIG(st));
    return gf_error_set(err, GF_ESTATE, "worker %d failed (exit %d; its message is above)",
                        (int)pid, WEXITSTATUS(st));
}

int bench_child_finish(bench_child *c, gf_error *err)
{
    int rc = read_all(c, err);
    close(c->out_fd);
    c->out_fd = -1;
    if (rc < 0) {
        bench_child_kill(c);
        return -1;
    }
    return reap(c, err);
}

void bench_child_kill(bench_child *c)
{
    if (c->out_fd >= 0) {
        close(c->out_fd);
        c->out_fd = -1;
    }
    if (c->pid > 0) {
        kill(c->pid, SIGKILL);
        waitpid(c->pid, NULL, 0);
        c->pid = -1;
    }
}

void bench_child_free(bench_child *c)
{
    bench_child_kill(c);
    free(c->out);
    c->out = NULL;
    c->out_len = 0;
}

int bench_run_worker(const bench_env *e, bench_side side, const char *const *argv, bench_child *c,
                     gf_error *err)
{
    if (bench_spawn(e, side, argv, -1, c, err) < 0)
        return -1;
    if (bench_child_finish(c, err) < 0) {
        bench_child_free(c);
        return gf_error_wrap(err, "worker '%s' (%s)", argv[0],
                             side == SIDE_SHIM ? "with the shim" : "without the shim");
    }
    return 0;
}

int bench_kv(const bench_child *c, const char *key, char *buf, size_t len)
{
    size_t kl = strlen(key);
    const char *p = c->out;
    while (p && *p) {
        if (strncmp(p, key, kl) == 0 && p[kl] == '=') {
            const char *v = p + kl + 1;
            size_t n = strcspn(v, "\n");
            if (n >= len)
                n = len - 1;
            memcpy(buf, v, n);
            buf[n] = '\0';
            return 0;
        }
        p = strchr(p, '\n');
        p = p ? p + 1 : NULL;
    }
    return -1;
}

/* key= read as a whole number into *u, or (u NULL) as a double into *d, from
 * at most len - 1 characters of the value */
static int kv_number(const bench_child *c, const char *key, size_t len, uint64_t *u, double *d,
                     gf_error *err)
{
    char buf[64], *end;
    if (bench_kv(c, key, buf, len) < 0)
        return gf_error_set(err, GF_ENOTFOUND, "a worker did not print %s=", key);
    if (u)
        *u = strtoull(buf, &end, 10);
    else if (d)
        *d = strtod(buf, &end);
    else
        return gf_error_set(err, GF_EINVAL, "no place for %s", key);
    if (end == buf || *end)
        return gf_error_set(err, GF_EINVAL, "a worker printed %s=%s, not a number", key, buf);
    return 0;
}

int bench_kv_u64(const bench_child *c, const char *key, uint64_t *out, gf_error *err)
{
    return kv_number(c, key, 32, out, NULL, err);
}

int bench_kv_double(const bench_child *c, const char *key, double *out, gf_error *err)
{
    return kv_number(c, key, 64, NULL, out, err);
}
