/* SPDX-License-Identifier: Apache-2.0 */
/* HTTP routing and request bodies for the extender. A few polling threads
 * (MHD's pool, epoll) serve every connection; filter, prioritize, preempt
 * and the pages are answered on them at once, a bind is answered when the
 * API server has answered: its connection is suspended meanwhile and
 * resumed from the thread that finishes the bind. Every bind started is
 * counted until MHD has completed its request, and stopping waits for that
 * count to fall to 0 before the daemon stops: no suspended connection is
 * left to MHD_stop_daemon, no answer is lost to it, and no request is freed
 * while its bind can still reach it. */
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "netaddr.h"
#include "server.h"
#include "server_deadline.h"
#include "slog.h"

struct gf_server {
    struct MHD_Daemon *daemon;
    gf_deadlines *deadlines;
    gf_extender *x;
    char prefix[128]; /* always starts and ends with '/' */
    char address[GF_SERVER_ADDR_MAX];
    pthread_mutex_t lock;  /* binds, stopping, and every request's bind fields */
    pthread_cond_t idle;   /* binds fell to 0 */
    size_t binds;          /* binds started whose request MHD has not completed */
    size_t sync_waits;     /* verbs suspended for the lists whose waiter has not resumed them */
    unsigned sync_wait_ms; /* how long a verb waits for the lists (the verbs' own wait is 0) */
    bool stopping;         /* no bind starts */
};

typedef struct request {
    char *body;
    size_t len, cap;
    bool too_large;
    bool sync_waited; /* suspended once for the lists: not again */
    /* a bind's, under the server's lock */
    gf_server *s;
    struct MHD_Connection *conn;
    bool bind;      /* started: counted in s->binds */
    bool answered;  /* answer_rc and answer are set */
    bool suspended; /* the connection waits for the answer */
    bool gone;      /* MHD completed the request before the answer came */
    int answer_rc;
    gf_ext_reply answer;
} request;

typedef int (*verb_fn)(gf_extender *x, const char *body, size_t len, gf_ext_reply *r);

static enum MHD_Result send_reply(struct MHD_Connection *c, gf_ext_reply *r, const char *allow)
{
    struct MHD_Response *resp;
    enum MHD_Result rc;

    resp = MHD_create_response_from_buffer(r->len, r->body, MHD_RESPMEM_MUST_FREE);
    if (!resp) {
        gf_ext_reply_free(r);
        return MHD_NO;
    }
    r->body = NULL; /* the response owns it */
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, r->content_type);
    if (allow)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allow);
    rc = MHD_queue_response(c, r->status, resp);
    MHD_destroy_response(resp);
    return rc;
}

static enum MHD_Result send_error(struct MHD_Connection *c, unsigned status, const char *msg,
                                  const char *allow)
{
    gf_ext_reply r = {0};

    if (gf_ext_reply_error(&r, status, msg) < 0)
        return MHD_NO;
    return send_reply(c, &r, allow);
}

static verb_fn route_post(const gf_server *s, const char *url)
{
    size_t n = strlen(s->prefix);

    if (strncmp(url, s->prefix, n) != 0)
        return NULL;
    url += n;
    if (strcmp(url, "filter") == 0)
        return gf_ext_filter;
    if (strcmp(url, "prioritize") == 0)
        return gf_ext_prioritize;
    if (strcmp(url, "bind") == 0)
        return gf_ext_bind;
    if (strcmp(url, "preempt") == 0)
        return gf_ext_preempt;
    return NULL;
}

static enum MHD_Result get(gf_server *s, struct MHD_Connection *c, const char *url)
{
    gf_ext_reply r = {0};
    int rc;

    if (strcmp(url, "/metrics") == 0)
        rc = gf_ext_metrics_page(s->x, &r);
    else if (strcmp(url, "/healthz") == 0 || strcmp(url, "/readyz") == 0)
        rc = gf_ext_healthz(s->x, &r);
    else
        return send_error(c, MHD_HTTP_NOT_FOUND, "not found; try /metrics or /healthz", NULL);
    return rc < 0 ? MHD_NO : send_reply(c, &r, NULL);
}

static void append(request *q, const char *data, size_t n)
{
    char *grown;
    size_t cap;

    if (q->too_large || q->len + n + 1 > GF_EXT_BODY_MAX) {
        q->too_large = true;
        return;
    }
    if (q->len + n + 1 > q->cap) {
        for (cap = q->cap ? q->cap : 8192; cap < q->len + n + 1;)
            cap *= 2;
        if (!(grown = realloc(q->body, cap))) {
            q->too_large = true;
            return;
        }
        q->body = grown;
        q->cap = cap;
    }
    memcpy(q->body + q->len, data, n);
    q->len += n;
    q->body[q->len] = '\0';
}

static enum MHD_Result too_large(struct MHD_Connection *c)
{
    char msg[96];

    snprintf(msg, sizeof(msg), "request body over %u bytes", GF_EXT_BODY_MAX);
    return send_error(c, 413, msg, NULL);
}

/* First call of a POST: route it and check its announced length. */
static enum MHD_Result post_begin(gf_server *s, struct MHD_Connection *c, const char *url,
                                  void **ctx)
{
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                 MHD_HTTP_HEADER_CONTENT_LENGTH);
    request *q;

    if (!route_post(s, url))
        return send_error(c, MHD_HTTP_NOT_FOUND,
                          "not found; the verbs are filter, prioritize, preempt, bind", NULL);
    if (cl && strtoull(cl, NULL, 10) >= GF_EXT_BODY_MAX)
        return too_large(c);
    if (!(q = calloc(1, sizeof(*q))))
        return MHD_NO;
    *ctx = q;
    return MHD_YES;
}

static void request_free(request *q)
{
    gf_ext_reply_free(&q->answer);
    free(q->body);
    free(q);
}

/* Under the lock: q's bind is over for the count. */
static void bind_over(gf_server *s)
{
    if (--s->binds == 0)
        pthread_cond_broadcast(&s->idle);
}

/* The bind's answer, on any thread (before bind_begin's return, or on the
 * API multiplexer's): kept for the handler, the connection resumed. */
static void bind_answered(void *cls, int rc, gf_ext_reply *r)
{
    request *q = cls;
    gf_server *s = q->s;
    struct MHD_Connection *c = q->conn;
    bool resume, gone;

    pthread_mutex_lock(&s->lock);
    q->answer_rc = rc;
    q->answer = *r;
    q->answered = true;
    resume = q->suspended;
    if ((gone = q->gone))
        bind_over(s);
    pthread_mutex_unlock(&s->lock);
    /* s is alive while the bind is counted; suspended, the connection stays
     * until resumed; once resumed, q is MHD's again */
    if (gone)
        request_free(q);
    else if (resume)
        MHD_resume_connection(c);
}

static enum MHD_Result bind_answer(struct MHD_Connection *c, request *q)
{
    gf_ext_reply r = q->answer;

    gf_deadlines_waiting(q->s->deadlines, c, false);
    q->answer = (gf_ext_reply){0};
    if (q->answer_rc < 0) {
        gf_ext_reply_free(&r);
        return MHD_NO;
    }
    gf_slog(GF_LOG_DEBUG, "POST bind -> %u", r.status);
    return send_reply(c, &r, NULL);
}

static enum MHD_Result bind_begin(gf_server *s, struct MHD_Connection *c, request *q)
{
    bool stopping, full = false, suspended = false;
    char why[128];

    pthread_mutex_lock(&s->lock);
    if (!(stopping = s->stopping) && !(full = s->binds >= GF_SERVER_BINDS_MAX)) {
        s->binds++;
        q->bind = true;
        q->s = s;
        q->conn = c;
    }
    pthread_mutex_unlock(&s->lock);
    /* ExtenderBindingResult.Error: the pod is tried again; nothing reserved */
    if (stopping)
        return send_error(c, MHD_HTTP_OK,
                          "gpufrac-scheduler is stopping (retried by kube-scheduler)", NULL);
    if (full) {
        snprintf(why, sizeof(why),
                 "gpufrac-scheduler has %d binds waiting for the API server (retried by "
                 "kube-scheduler)",
                 GF_SERVER_BINDS_MAX);
        return send_error(c, MHD_HTTP_OK, why, NULL);
    }
    gf_deadlines_waiting(s->deadlines, c, true);
    gf_ext_bind_async(s->x, q->body ? q->body : "", q->len, bind_answered, q);
    pthread_mutex_lock(&s->lock);
    if (!q->answered) {
        q->suspended = suspended = true;
        MHD_suspend_connection(c);
    }
    pthread_mutex_unlock(&s->lock);
    return suspended ? MHD_YES : bind_answer(c, q);
}

/* Called again once resumed: the answer is in. */
static enum MHD_Result bind_resumed(gf_server *s, struct MHD_Connection *c, request *q)
{
    bool answered;

    pthread_mutex_lock(&s->lock);
    answered = q->answered;
    pthread_mutex_unlock(&s->lock);
    return answered ? bind_answer(c, q) : MHD_YES;
}

typedef struct sync_waiter {
    gf_server *s;
    struct MHD_Connection *c;
} sync_waiter;

/* Off the workers: waits for the lists (up to sync_wait_ms), then resumes
 * the verb's connection, which then answers at once, synced or not. */
static void *sync_wait(void *cls)
{
    sync_waiter *w = cls;
    gf_server *s = w->s;

    gf_ext_await_synced_ms(s->x, s->sync_wait_ms);
    pthread_mutex_lock(&s->lock);
    MHD_resume_connection(w->c);
    if (--s->sync_waits == 0)
        pthread_cond_broadcast(&s->idle);
    pthread_mutex_unlock(&s->lock);
    free(w);
    return NULL;
}

/* A verb arriving before the lists are in waits for them without holding a
 * worker (the other connections of its worker go on); false: no thread for
 * it, the verb answers at once. */
static bool sync_suspend(gf_server *s, struct MHD_Connection *c, request *q)
{
    sync_waiter *w = malloc(sizeof(*w));
    pthread_attr_t attr;
    pthread_t t;
    bool ok;

    q->sync_waited = true;
    if (!w)
        return false;
    *w = (sync_waiter){s, c};
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_mutex_lock(&s->lock);
    MHD_suspend_connection(c);
    if ((ok = pthread_create(&t, &attr, sync_wait, w) == 0))
        s->sync_waits++;
    else
        MHD_resume_connection(c);
    pthread_mutex_unlock(&s->lock);
    pthread_attr_destroy(&attr);
    if (!ok)
        free(w);
    return ok;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_size, void **ctx)
{
    gf_server *s = cls;
    request *q = *ctx;
    gf_ext_reply r = {0};

    (void)version;
    if (strcmp(method, MHD_HTTP_METHOD_GET) == 0 || strcmp(method, MHD_HTTP_METHOD_HEAD) == 0)
        return get(s, c, url);
    if (strcmp(method, MHD_HTTP_METHOD_POST) != 0)
        return send_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed", "GET, POST");
    if (!q) {
        gf_deadlines_progress(s->deadlines, c);
        return post_begin(s, c, url, ctx);
    }
    if (q->bind)
        return bind_resumed(s, c, q);
    if (*upload_size) {
        append(q, upload, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    if (q->too_large)
        return too_large(c);
    if (!q->sync_waited && !atomic_load(&s->x->synced) && sync_suspend(s, c, q))
        return MHD_YES;
    if (route_post(s, url) == gf_ext_bind)
        return bind_begin(s, c, q);
    if (route_post(s, url)(s->x, q->body ? q->body : "", q->len, &r) < 0)
        return MHD_NO;
    gf_slog(GF_LOG_DEBUG, "POST %s -> %u", url, r.status);
    return send_reply(c, &r, NULL);
}

static void completed(void *cls, struct MHD_Connection *c, void **ctx,
                      enum MHD_RequestTerminationCode toe)
{
    gf_server *s = cls;
    request *q = *ctx;
    bool pending = false;

    (void)toe;
    gf_deadlines_progress(s->deadlines, c);
    if (!q)
        return;
    *ctx = NULL;
    if (q->bind) {
        pthread_mutex_lock(&s->lock);
        if (!(pending = !q->answered))
            bind_over(s);
        q->gone = pending; /* bind_answered frees it */
        pthread_mutex_unlock(&s->lock);
    }
    if (!pending)
        request_free(q);
}

static int set_prefix(gf_server *s, const char *prefix, gf_error *err)
{
    size_t n;

    if (!prefix || !*prefix)
        prefix = "/";
    n = strlen(prefix);
    if (n + 3 > sizeof(s->prefix))
        return gf_error_set(err, GF_EINVAL, "URL prefix \"%.40s...\" is too long", prefix);
    snprintf(s->prefix, sizeof(s->prefix), "%s%s%s", prefix[0] == '/' ? "" : "/", prefix,
             prefix[n - 1] == '/' ? "" : "/");
    return 0;
}

static int start(gf_server *s, const char *listen, gf_error *err)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    const union MHD_DaemonInfo *info;
    unsigned int flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME |
                         MHD_USE_ERROR_LOG;
    char host[128], port[16];
    int rc;

    if (gf_listen_split(listen, "--listen", "127.0.0.1:8888", host, sizeof(host), port,
                        sizeof(port), err) < 0)
        return -1;
    if ((rc = getaddrinfo(host, port, &hints, &ai)) != 0)
        return gf_error_set(err, GF_EINVAL, "--listen \"%s\": %s", listen, gai_strerror(rc));
    if (ai->ai_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    if (gf_deadlines_start(&s->deadlines, GF_SERVER_REQUEST_S, err) < 0) {
        freeaddrinfo(ai);
        return -1;
    }
    s->daemon = MHD_start_daemon(flags, 0, NULL, NULL, handle, s, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                                 MHD_OPTION_NOTIFY_COMPLETED, completed, s,
                                 MHD_OPTION_NOTIFY_CONNECTION, gf_deadlines_notify, s->deadlines,
                                 MHD_OPTION_THREAD_POOL_SIZE, (unsigned)GF_SERVER_THREADS,
                                 MHD_OPTION_CONNECTION_TIMEOUT, 30U, MHD_OPTION_CONNECTION_LIMIT,
                                 (unsigned)GF_SERVER_CONNECTIONS,
                                 MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)16384, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!s->daemon)
        return gf_error_set(err, GF_ESYS,
                            "cannot listen on %s (address in use or not this host's?)", listen);
    info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    snprintf(s->address, sizeof(s->address), strchr(host, ':') ? "[%s]:%u" : "%s:%u", host,
             info ? (unsigned)info->port : 0U);
    return 0;
}

int gf_server_start(gf_server **out, gf_extender *x, const char *listen, const char *prefix,
                    gf_error *err)
{
    gf_server *s = calloc(1, sizeof(*s));

    if (!s)
        return gf_error_set(err, GF_ENOSPACE, "out of memory");
    s->x = x;
    /* the server waits for the lists itself, off its workers */
    s->sync_wait_ms = x->sync_wait_ms;
    x->sync_wait_ms = 0;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->idle, NULL);
    if (set_prefix(s, prefix, err) < 0 || start(s, listen, err) < 0) {
        gf_server_stop(s);
        return -1;
    }
    *out = s;
    return 0;
}

const char *gf_server_address(const gf_server *s)
{
    return s->address;
}

/* The binds in flight are answered first (MHD must not stop with a
 * connection suspended); meanwhile no connection is accepted and no bind
 * starts. */
void gf_server_stop(gf_server *s)
{
    MHD_socket listener;

    if (!s)
        return;
    if (s->daemon) {
        listener = MHD_quiesce_daemon(s->daemon);
        pthread_mutex_lock(&s->lock);
        s->stopping = true;
        while (s->binds > 0 || s->sync_waits > 0)
            pthread_cond_wait(&s->idle, &s->lock);
        pthread_mutex_unlock(&s->lock);
        MHD_stop_daemon(s->daemon);
        if (listener != MHD_INVALID_SOCKET)
            close(listener);
    }
    gf_deadlines_stop(s->deadlines);
    if (s->x)
        s->x->sync_wait_ms = s->sync_wait_ms;
    pthread_cond_destroy(&s->idle);
    pthread_mutex_destroy(&s->lock);
    free(s);
}
