/* SPDX-License-Identifier: Apache-2.0 */
/* The connections' deadlines (server_deadline.h). Each open connection has
 * an entry, linked under the lock from MHD's "started" notification to its
 * "closed" one, which MHD gives before it closes the socket: the reaper
 * shuts a socket down only under the lock, so never one whose number a new
 * connection has taken. Shutting it down makes MHD's next read end the
 * connection on its own thread, as a client hanging up would. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

#include "server_deadline.h"
#include "slog.h"

typedef struct entry {
    struct entry *prev, *next;
    MHD_socket fd;
    int64_t since_ms; /* opened, its last headers, or its last answer */
    bool waiting;     /* a bind's answer: no deadline */
} entry;

struct gf_deadlines {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    entry *head;
    int64_t limit_ms;
    bool stop;
    pthread_t thread;
};

static int64_t now_ms(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static entry *entry_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *i = MHD_get_connection_info(c,
                                                                MHD_CONNECTION_INFO_SOCKET_CONTEXT);

    return i ? i->socket_context : NULL;
}

/* Under the lock: the overdue connections shut down; how many. */
static size_t reap(gf_deadlines *d, int64_t now)
{
    size_t n = 0;

    for (entry *e = d->head; e; e = e->next) {
        if (e->waiting || now - e->since_ms <= d->limit_ms)
            continue;
        shutdown(e->fd, SHUT_RDWR);
        e->since_ms = now; /* once: MHD closes it on its next turn */
        n++;
    }
    return n;
}

static void *reaper(void *cls)
{
    gf_deadlines *d = cls;
    struct timespec until;
    size_t n;

    pthread_setname_np(pthread_self(), "gf-http-reaper");
    pthread_mutex_lock(&d->lock);
    while (!d->stop) {
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 1;
        pthread_cond_timedwait(&d->wake, &d->lock, &until);
        if ((n = reap(d, now_ms())) > 0)
            gf_slog(GF_LOG_WARN, "closed %zu connection(s) that sent no whole request in %lld s", n,
                    (long long)(d->limit_ms / 1000));
    }
    pthread_mutex_unlock(&d->lock);
    return NULL;
}

int gf_deadlines_start(gf_deadlines **out, unsigned limit_s, gf_error *err)
{
    gf_deadlines *d = calloc(1, sizeof(*d));

    if (!d)
        return gf_error_set(err, GF_ENOSPACE, "out of memory");
    pthread_mutex_init(&d->lock, NULL);
    pthread_cond_init(&d->wake, NULL);
    d->limit_ms = (int64_t)limit_s * 1000;
    if (pthread_create(&d->thread, NULL, reaper, d) != 0) {
        pthread_cond_destroy(&d->wake);
        pthread_mutex_destroy(&d->lock);
        free(d);
        return gf_error_set(err, GF_ESYS, "cannot start the HTTP connections' reaper thread");
    }
    *out = d;
    return 0;
}

void gf_deadlines_stop(gf_deadlines *d)
{
    if (!d)
        return;
    pthread_mutex_lock(&d->lock);
    d->stop = true;
    pthread_cond_signal(&d->wake);
    pthread_mutex_unlock(&d->lock);
    pthread_join(d->thread, NULL);
    for (entry *e = d->head, *next; e; e = next) {
        next = e->next;
        free(e);
    }
    pthread_cond_destroy(&d->wake);
    pthread_mutex_destroy(&d->lock);
    free(d);
}

static void link_new(gf_deadlines *d, struct MHD_Connection *c, void **socket_context)
{
    const union MHD_ConnectionInfo *i = MHD_get_connection_info(c,
                                                                MHD_CONNECTION_INFO_CONNECTION_FD);
    entry *e = calloc(1, sizeof(*e));

    /* without an entry the connection keeps only MHD's idle timeout */
    if (!e || !i) {
        free(e);
        return;
    }
    e->fd = i->connect_fd;
    e->since_ms = now_ms();
    pthread_mutex_lock(&d->lock);
    e->next = d->head;
    if (d->head)
        d->head->prev = e;
    d->head = e;
    pthread_mutex_unlock(&d->lock);
    *socket_context = e;
}

static void unlink_gone(gf_deadlines *d, void **socket_context)
{
    entry *e = *socket_context;

    if (!e)
        return;
    pthread_mutex_lock(&d->lock);
    if (e->prev)
        e->prev->next = e->next;
    else
        d->head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    pthread_mutex_unlock(&d->lock);
    *socket_context = NULL;
    free(e);
}

void gf_deadlines_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                         enum MHD_ConnectionNotificationCode code)
{
    if (code == MHD_CONNECTION_NOTIFY_STARTED)
        link_new(cls, c, socket_context);
    else if (code == MHD_CONNECTION_NOTIFY_CLOSED)
        unlink_gone(cls, socket_context);
}

void gf_deadlines_progress(gf_deadlines *d, struct MHD_Connection *c)
{
    entry *e = entry_of(c);

    if (!e)
        return;
    pthread_mutex_lock(&d->lock);
    e->since_ms = now_ms();
    pthread_mutex_unlock(&d->lock);
}

void gf_deadlines_waiting(gf_deadlines *d, struct MHD_Connection *c, bool waiting)
{
    entry *e = entry_of(c);

    if (!e)
        return;
    pthread_mutex_lock(&d->lock);
    e->waiting = waiting;
    e->since_ms = now_ms();
    pthread_mutex_unlock(&d->lock);
}
