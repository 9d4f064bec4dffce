/* SPDX-License-Identifier: Apache-2.0 */
/* Asking gpufracd again across its restart (30-110 ms from SIGKILL to a
 * socket that answers). Only a request the agent never answered is sent
 * again, and only while the agent is unreachable: a refusal is final, and a
 * silent agent (stopped, or slow) is not asked twice, so a caller's wait stays
 * within its timeout plus retry_ms. */
#include <errno.h>
#include <stdint.h>
#include <time.h>

#include "agent_client.h"

bool gf_agent_unreachable(const gf_error *err)
{
    if (err->code != GF_ESYS)
        return false;
    switch (err->sys_errno) {
    case ENOENT:       /* the socket is not there (yet) */
    case ECONNREFUSED: /* a socket file nobody listens on: the agent died */
    case ECONNRESET:   /* the connection was cut before the answer */
    case EPIPE: return true;
    default: return false;
    }
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int gf_agent_request_retry(const char *path, int timeout_s, int retry_ms, const gf_msg *req,
                           gf_msg *reply, gf_error *err)
{
    struct timespec pause = {0, GF_AGENT_RETRY_PAUSE_MS * 1000L * 1000L};
    int64_t until = now_ms() + retry_ms;

    while (gf_agent_request(path, timeout_s, req, reply, err) < 0) {
        if (!gf_agent_unreachable(err))
            return -1;
        if (now_ms() >= until)
            return gf_error_wrap(err, "gpufracd stayed unreachable for %d ms", retry_ms);
        nanosleep(&pause, NULL);
    }
    return 0;
}
