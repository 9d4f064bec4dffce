/* SPDX-License-Identifier: Apache-2.0 */
/* See proc.h. */
#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif

int gf_pidfd_open(pid_t pid)
{
    if (pid <= 0)
        return -1; /* 0 and negatives name groups or everyone: never */
    return (int)syscall(SYS_pidfd_open, pid, 0);
}

int gf_pidfd_kill(int pidfd)
{
    if (pidfd < 0)
        return -1;
    return (int)syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
}

bool gf_pidfd_exited(int pidfd)
{
    struct pollfd p = {.fd = pidfd, .events = POLLIN};
    return pidfd < 0 || (poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR)));
}

static ssize_t read_small(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    ssize_t n;

    if (fd < 0)
        return -1;
    n = read(fd, buf, len - 1);
    close(fd);
    if (n < 0)
        return -1;
    buf[n] = '\0';
    return n;
}

bool gf_proc_stat(pid_t pid, uint64_t *start, pid_t *ppid)
{
    char path[64], text[1024], *p;
    unsigned long long st = 0;
    long pp = 0;

    if (pid <= 0)
        return false;
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    if (read_small(path, text, sizeof(text)) <= 0)
        return false;
    /* "pid (comm) state ppid ... starttime(22)": comm may hold ')' and spaces */
    if (!(p = strrchr(text, ')')) ||
        sscanf(p + 1,
               " %*c %ld %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d "
               "%*d %llu",
               &pp, &st) != 2)
        return false;
    if (start)
        *start = st;
    if (ppid)
        *ppid = (pid_t)pp;
    return true;
}

bool gf_proc_uid(pid_t pid, uid_t *uid)
{
    char path[64], text[4096], *p;
    if (pid <= 0)
        return false;
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    if (read_small(path, text, sizeof(text)) <= 0 || !(p = strstr(text, "\nUid:")))
        return false;
    *uid = (uid_t)strtoul(p + 5, NULL, 10);
    return true;
}

bool gf_proc_cgroup(pid_t pid, char *out, size_t len)
{
    char path[64], text[4096];
    bool found = false;

    if (pid <= 0)
        return false;
    snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
    if (read_small(path, text, sizeof(text)) <= 0)
        return false;
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line && !found;
         line = strtok_r(NULL, "\n", &save)) {
        const char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2 || (strncmp(line, "0::", 3) != 0 && !strstr(line, ":memory:")))
            continue;
        snprintf(out, len, "%s", c2 + 1);
        found = strcmp(out, "/") != 0;
    }
    return found;
}

int gf_pidfd_verified(pid_t pid, uint64_t start)
{
    uint64_t now;
    int fd = gf_pidfd_open(pid);

    if (fd < 0)
        return -1;
    /* read after the pidfd is open: if the start time still matches, the
     * pidfd is that process and no reuse of the number can change it */
    if (!gf_proc_stat(pid, &now, NULL) || (start && now != start) || gf_pidfd_exited(fd)) {
        close(fd);
        return -1;
    }
    return fd;
}

int64_t gf_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
