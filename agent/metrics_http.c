/* SPDX-License-Identifier: Apache-2.0 */
/* The metrics endpoint: libmicrohttpd, so a slow scraper never stalls the
 * agent's loop (a render formats the loop's latest snapshot and never takes
 * a->lock; user names come from the resolver's cache). Its listening port may be
 * reachable by every pod, so no client can hold it: a small pool of epoll
 * workers (a slow render blocks only the connections of its own worker), a connection idle for
 * HTTP_IDLE_S is closed, one address holds at most HTTP_PER_IP connections (others are served while
 * it is at its bound), HTTP_CONNECTIONS in all (past that new ones wait in
 * the kernel's backlog), and a request's headers fit in HTTP_REQUEST_MEMORY.
 * One endpoint per process. */
#include <microhttpd.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent.h"
#include "metrics.h"
#include "netaddr.h"
#include "proc.h"
#include "usernames.h"

#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"
#define HTTP_THREADS 4
#define HTTP_CONNECTIONS 256u
#define HTTP_PER_IP 16u /* well under HTTP_CONNECTIONS / HTTP_THREADS */
#define HTTP_IDLE_S 5u
#define HTTP_REQUEST_MEMORY ((size_t)16 << 10)
#define HTTP_NICE 10 /* the workers yield the CPU to the loop (2-core nodes, a tight scraper) */

static struct MHD_Daemon *daemon_;

static enum MHD_Result reply(struct MHD_Connection *c, unsigned int status, const char *type,
                             char *body, size_t len, enum MHD_ResponseMemoryMode mode)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, mode);
    enum MHD_Result rc;

    if (!r) {
        if (mode == MHD_RESPMEM_MUST_FREE)
            free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
    rc = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return rc;
}

static enum MHD_Result text(struct MHD_Connection *c, unsigned int status, const char *msg)
{
    return reply(c, status, "text/plain; charset=utf-8", (char *)(uintptr_t)msg, strlen(msg),
                 MHD_RESPMEM_PERSISTENT);
}

static enum MHD_Result metrics(struct MHD_Connection *c, gf_agent *a)
{
    gf_error err;
    char *body;
    size_t len;

    if (gf_metrics_render(a, &body, &len, &err) < 0)
        return text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "rendering metrics failed\n");
    return reply(c, MHD_HTTP_OK, CONTENT_TYPE, body, len, MHD_RESPMEM_MUST_FREE);
}

/* Healthy while the loop and the watchdog keep ticking: read from their
 * beats, so a loop stuck holding a->lock still shows as unhealthy. */
static enum MHD_Result healthz(struct MHD_Connection *c, gf_agent *a)
{
    char msg[256];
    int64_t now = gf_now_ms(), limit = 3LL * a->watchdog_period_ms;
    int64_t loop_age = now - atomic_load(&a->loop_beat);
    int64_t wd_age = now - atomic_load(&a->watchdog_beat);

    if (limit < 2000)
        limit = 2000;
    if (loop_age <= limit && wd_age <= limit && atomic_load(&a->journal_full)) {
        /* serving what is durable; a restart would not make room */
        snprintf(msg, sizeof(msg),
                 "ok, degraded: the journal has no room (%s); no new loan, "
                 "admission or run is granted\n",
                 strerror(atomic_load(&a->journal_errno)));
        return reply(c, MHD_HTTP_OK, "text/plain; charset=utf-8", msg, strlen(msg),
                     MHD_RESPMEM_MUST_COPY);
    }
    if (loop_age <= limit && wd_age <= limit)
        return text(c, MHD_HTTP_OK, "ok\n");
    snprintf(msg, sizeof(msg),
             "unhealthy: main loop last ticked %lld ms ago, watchdog %lld ms "
             "ago (limit %lld ms)\n",
             (long long)loop_age, (long long)wd_age, (long long)limit);
    return reply(c, MHD_HTTP_SERVICE_UNAVAILABLE, "text/plain; charset=utf-8", msg, strlen(msg),
                 MHD_RESPMEM_MUST_COPY);
}

/* A worker's first connection lowers the worker's own priority (nice is per
 * thread on Linux): formatting a page never delays the loop's wake-up. */
static void lower_priority(void *cls, struct MHD_Connection *c, void **socket_context,
                           enum MHD_ConnectionNotificationCode code)
{
    static _Thread_local bool lowered;

    (void)cls;
    (void)c;
    (void)socket_context;
    if (code == MHD_CONNECTION_NOTIFY_STARTED && !lowered) {
        setpriority(PRIO_PROCESS, (id_t)gettid(), HTTP_NICE);
        lowered = true;
    }
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_size, void **ctx)
{
    bool get = strcmp(method, MHD_HTTP_METHOD_GET) == 0 ||
               strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;

    (void)version;
    (void)upload;
    (void)upload_size;
    (void)ctx;
    if (!get) /* answered before any body is read; MHD then closes the connection */
        return text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed\n");
    if (strcmp(url, "/metrics") == 0)
        return metrics(c, cls);
    if (strcmp(url, "/healthz") == 0)
        return healthz(c, cls);
    return text(c, MHD_HTTP_NOT_FOUND, "not found; try /metrics\n");
}

static int resolve(const char *listen, struct addrinfo **ai, char *host, size_t hlen, gf_error *err)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    char port[16];
    int rc;

    if (gf_listen_split(listen, "metrics address", "127.0.0.1:9464", host, hlen, port, sizeof(port),
                        err) < 0)
        return -1;
    if ((rc = getaddrinfo(host, port, &hints, ai)) != 0)
        return gf_error_set(err, GF_EINVAL, "metrics address \"%s\": %s", listen, gai_strerror(rc));
    return 0;
}

int gf_metrics_start(gf_agent *a, gf_error *err)
{
    struct addrinfo *ai = NULL;
    const union MHD_DaemonInfo *info;
    char host[128];
    unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL;

    if (daemon_)
        return gf_error_set(err, GF_ESTATE, "the metrics endpoint is already running");
    if (gf_usernames_start(err) < 0)
        return -1;
    if (resolve(a->metrics_listen, &ai, host, sizeof(host), err) < 0)
        return -1;
    if (ai->ai_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    daemon_ = MHD_start_daemon(flags, 0, NULL, NULL, handle, a, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                               MHD_OPTION_THREAD_POOL_SIZE, (unsigned)HTTP_THREADS,
                               MHD_OPTION_CONNECTION_TIMEOUT, HTTP_IDLE_S,
                               MHD_OPTION_CONNECTION_LIMIT, HTTP_CONNECTIONS,
                               MHD_OPTION_PER_IP_CONNECTION_LIMIT, HTTP_PER_IP,
                               MHD_OPTION_CONNECTION_MEMORY_LIMIT, HTTP_REQUEST_MEMORY,
                               MHD_OPTION_NOTIFY_CONNECTION, lower_priority, NULL, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!daemon_)
        return gf_error_set(err, GF_ESYS,
                            "cannot serve metrics on %s (address in use or not this host's?)",
                            a->metrics_listen);
    info = MHD_get_daemon_info(daemon_, MHD_DAEMON_INFO_BIND_PORT);
    if (info && info->port)
        snprintf(a->metrics_listen, sizeof(a->metrics_listen),
                 strchr(host, ':') ? "[%s]:%u" : "%s:%u", host, (unsigned)info->port);
    return 0;
}

void gf_metrics_stop(gf_agent *a)
{
    (void)a;
    if (daemon_)
        MHD_stop_daemon(daemon_);
    daemon_ = NULL;
}
