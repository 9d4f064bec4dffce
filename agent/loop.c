/* SPDX-License-Identifier: Apache-2.0 */
/* The loop (loop.h): one epoll; an event's data is kind << 56 | id. */
#include "loop.h"

#include <errno.h>
#include <sys/epoll.h>
#include <unistd.h>

#define EVENTS_PER_WAIT 128

int gf_loop_init(gf_loop *l, gf_error *err)
{
    *l = (gf_loop){0};
    if ((l->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0)
        return gf_error_sys(err, "creating the agent's epoll");
    l->running = true;
    return 0;
}

void gf_loop_on(gf_loop *l, int kind, gf_loop_fn fn, void *ctx)
{
    if (kind > 0 && kind < GF_LOOP_KINDS_MAX) {
        l->kinds[kind].fn = fn;
        l->kinds[kind].ctx = ctx;
    }
}

void gf_loop_watch(gf_loop *l, int fd, int kind, uint64_t id)
{
    struct epoll_event ev = {.events = EPOLLIN,
                             .data.u64 = ((uint64_t)kind << 56) | (id & GF_LOOP_ID_MAX)};
    if (l->running && fd >= 0)
        epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev);
}

void gf_loop_unwatch(gf_loop *l, int fd)
{
    if (l->running && fd >= 0)
        epoll_ctl(l->epfd, EPOLL_CTL_DEL, fd, NULL);
}

void gf_loop_close(gf_loop *l, int *fd)
{
    if (*fd < 0)
        return;
    gf_loop_unwatch(l, *fd);
    close(*fd);
    *fd = -1;
}

void gf_loop_stop(gf_loop *l)
{
    l->stop = true;
}

int gf_loop_run(gf_loop *l, int timeout_ms, void (*on_wake)(void *ctx), void *ctx, gf_error *err)
{
    struct epoll_event ev[EVENTS_PER_WAIT];

    l->stop = false;
    while (!l->stop) {
        int n = epoll_wait(l->epfd, ev, EVENTS_PER_WAIT, timeout_ms);
        if (n < 0 && errno != EINTR)
            return gf_error_sys(err, "waiting for events");
        if (on_wake)
            on_wake(ctx);
        for (int i = 0; i < n && !l->stop; i++) {
            int kind = (int)(ev[i].data.u64 >> 56);
            if (kind > 0 && kind < GF_LOOP_KINDS_MAX && l->kinds[kind].fn)
                l->kinds[kind].fn(l->kinds[kind].ctx, ev[i].data.u64 & GF_LOOP_ID_MAX,
                                  ev[i].events);
        }
    }
    return 0;
}
