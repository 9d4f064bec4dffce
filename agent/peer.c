/* SPDX-License-Identifier: Apache-2.0 */
/* See peer.h. */
#include "peer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cleanup.h"
#include "proc.h"

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif

pid_t gf_pidfd_pid(int pidfd)
{
    char path[64], text[1024], *line;
    ssize_t n;
    int fd;

    if (pidfd < 0)
        return -1;
    snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", pidfd);
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
        return -1;
    n = read(fd, text, sizeof(text) - 1);
    close(fd);
    if (n <= 0)
        return -1;
    text[n] = '\0';
    if (!(line = strstr(text, "\nPid:")))
        return -1;
    long pid = strtol(line + 5, NULL, 10);
    return pid > 0 ? (pid_t)pid : -1;
}

/* The pidfd of the process that connected: the kernel's, else one opened
 * now by number (older kernels). */
static int peer_pidfd(int fd, pid_t pid)
{
    socklen_t len = sizeof(int);
    int pidfd = -1;

    if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) == 0 && pidfd >= 0) {
        if (fcntl(pidfd, F_SETFD, FD_CLOEXEC) < 0) {
            close(pidfd);
            return -1;
        }
        return pidfd;
    }
    if (errno != ENOPROTOOPT && errno != EINVAL)
        return -1; /* e.g. ESRCH: the process that connected is gone */
    return gf_pidfd_open(pid);
}

int gf_peer_of(int fd, gf_peer *p)
{
    struct ucred cr;
    socklen_t len = sizeof(cr);
    gf_cleanup_close int pidfd = -1;

    memset(p, 0, sizeof(*p));
    p->pidfd = -1;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0 || cr.pid <= 0)
        return -1;
    if ((pidfd = peer_pidfd(fd, cr.pid)) < 0)
        return -1;
    /* the start time is read while the pidfd shows the process alive, so
     * it is that process's, not a later holder's of the number */
    if (gf_pidfd_pid(pidfd) != cr.pid || !gf_proc_stat(cr.pid, &p->start, NULL) ||
        gf_pidfd_exited(pidfd))
        return -1;
    p->pid = cr.pid;
    p->uid = cr.uid;
    p->gid = cr.gid;
    p->pidfd = gf_steal_fd(&pidfd);
    return 0;
}

bool gf_peer_alive(const gf_peer *p)
{
    return p->pidfd >= 0 && !gf_pidfd_exited(p->pidfd);
}
