/* SPDX-License-Identifier: Apache-2.0 */
#include "agent_client.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

int gf_agent_connect(const char *path, int timeout_s, gf_error *err)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    struct timeval tv = {.tv_sec = timeout_s};
    int fd;

    if (strlen(path) >= sizeof(sa.sun_path))
        return gf_error_set(err, GF_EINVAL, "agent socket path too long: %s", path);
    memcpy(sa.sun_path, path, strlen(path) + 1);
    fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return gf_error_sys(err, "socket");
    if ((timeout_s > 0 && (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
                           setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0)) ||
        connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        gf_error_sys(err, "connecting to gpufracd at %s (is the node agent running?)", path);
        close(fd);
        return -1;
    }
    return fd;
}

int gf_agent_exchange(int fd, const char *path, const gf_msg *req, gf_msg *reply, gf_error *err)
{
    return gf_agent_exchange_within(fd, path, req, reply, -1, err);
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A deadline, not a per-poll bound: an application's signals (a profiler's
 * timer) do not stretch the wait. */
static int await_reply(int fd, const char *path, int wait_ms, gf_error *err)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int64_t until = now_ms() + wait_ms, left = wait_ms;
    int n;

    if (wait_ms < 0)
        return 0;
    while ((n = poll(&p, 1, (int)left)) < 0 && errno == EINTR && (left = until - now_ms()) > 0)
        ;
    if (n < 0 && errno != EINTR)
        return gf_error_sys(err, "waiting for gpufracd at %s", path);
    if (n <= 0) {
        errno = ETIMEDOUT;
        return gf_error_sys(err, "gpufracd at %s did not answer within %d ms", path, wait_ms);
    }
    return 0;
}

/* The receive time limit gf_agent_connect set on fd, in seconds. */
static int timeout_of(int fd)
{
    struct timeval tv = {0};
    socklen_t len = sizeof(tv);

    return getsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, &len) == 0 ? (int)tv.tv_sec : 0;
}

int gf_agent_exchange_within(int fd, const char *path, const gf_msg *req, gf_msg *reply,
                             int wait_ms, gf_error *err)
{
    char buf[GF_PROTO_MAX + 1];
    int len = gf_msg_encode(req, buf, sizeof(buf));
    ssize_t n;

    if (len < 0)
        return gf_error_set(err, GF_ENOSPACE, "request to gpufracd longer than %d bytes",
                            GF_PROTO_MAX);
    if (send(fd, buf, (size_t)len, MSG_NOSIGNAL) != len)
        return gf_error_sys(err, "talking to gpufracd at %s", path);
    if (await_reply(fd, path, wait_ms, err) < 0)
        return -1;
    if ((n = recv(fd, buf, sizeof(buf), 0)) == 0) {
        errno = ECONNRESET;
        return gf_error_sys(err, "gpufracd at %s closed the connection before answering", path);
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) /* SO_RCVTIMEO ran out */
        return gf_error_sys(err, "gpufracd at %s did not answer within %d s", path, timeout_of(fd));
    if (n < 0)
        return gf_error_sys(err, "talking to gpufracd at %s", path);
    if (gf_msg_decode(buf, (size_t)n, reply, err) < 0)
        return -1;
    if (strcmp(reply->verb, "ok") != 0) {
        const char *m = gf_msg_get(reply, "msg");
        return gf_error_set(err, GF_ESTATE, "gpufracd: %s", m ? m : "refused");
    }
    return 0;
}

int gf_agent_request(const char *path, int timeout_s, const gf_msg *req, gf_msg *reply,
                     gf_error *err)
{
    int fd = gf_agent_connect(path, timeout_s, err), rc;

    if (fd < 0)
        return -1;
    rc = gf_agent_exchange(fd, path, req, reply, err);
    close(fd);
    return rc;
}
