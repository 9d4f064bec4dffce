/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "demo.h"

static void parse_line(demo_output *o, char *line)
{
    char *eq = strchr(line, '=');

    if (!eq || o->n >= DEMO_KV_MAX)
        return;
    *eq = '\0';
    snprintf(o->kv[o->n].key, sizeof(o->kv[o->n].key), "%s", line);
    snprintf(o->kv[o->n].val, sizeof(o->kv[o->n].val), "%s", eq + 1);
    o->n++;
}

static void read_all(int fd, demo_output *o)
{
    char buf[16384];
    size_t len = 0;
    ssize_t n;

    char rest[512];

    for (;;) {
        bool full = len == sizeof(buf) - 1;
        n = full ? read(fd, rest, sizeof(rest)) : read(fd, buf + len, sizeof(buf) - 1 - len);
        if (n == 0 || (n < 0 && errno != EINTR))
            break;
        if (n > 0 && !full)
            len += (size_t)n; /* past the buffer: drained, so the child never blocks */
    }
    buf[len] = '\0';
    for (char *save, *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
        parse_line(o, line);
}

int demo_spawn(const char *const argv[], demo_output *out, gf_error *err)
{
    int fds[2], status;
    pid_t pid;

    memset(out, 0, sizeof(*out));
    fflush(stdout);
    if (pipe2(fds, O_CLOEXEC) < 0)
        return gf_error_sys(err, "pipe");
    gf_cleanup_close int rd = fds[0], wr = fds[1];
    pid = fork();
    if (pid < 0)
        return gf_error_sys(err, "fork");
    if (pid == 0) {
        dup2(wr, STDOUT_FILENO);
        execv(argv[0], (char *const *)argv);
        fprintf(stderr, "gpufrac demo: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(gf_steal_fd(&wr)); /* before the read, or it never ends */
    read_all(rd, out);
    close(gf_steal_fd(&rd));
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return gf_error_sys(err, "waiting for %s", argv[0]);
    out->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return 0;
}

const char *demo_get(const demo_output *o, const char *key)
{
    for (size_t i = 0; i < o->n; i++)
        if (strcmp(o->kv[i].key, key) == 0)
            return o->kv[i].val;
    return NULL;
}

bool demo_get_u64(const demo_output *o, const char *key, uint64_t *v)
{
    const char *s = demo_get(o, key);
    char *end;

    if (!s || !*s)
        return false;
    *v = strtoull(s, &end, 10);
    return *end == '\0';
}
