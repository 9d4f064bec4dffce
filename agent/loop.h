/* SPDX-License-Identifier: Apache-2.0 */
/* The agent's event loop: descriptors, and what to call when one is ready.
 * It knows no domain: a caller names a kind (a small number of its own) and
 * the function for it once, then watches descriptors under that kind with an
 * id of its choosing (a slot, a fraction's fid). Every descriptor the agent
 * polls is added and removed here, and nowhere else. */
#ifndef GPUFRAC_AGENT_LOOP_H
#define GPUFRAC_AGENT_LOOP_H

#include <stdbool.h>
#include <stdint.h>

#include "error.h"

#define GF_LOOP_KINDS_MAX 16
#define GF_LOOP_ID_MAX ((1ULL << 56) - 1) /* ids above are cut to this many bits */

/* Called from gf_loop_run for a ready descriptor watched as (kind, id). */
typedef void (*gf_loop_fn)(void *ctx, uint64_t id, uint32_t events);

typedef struct gf_loop {
    int epfd;     /* valid only when `running` (a zeroed loop watches nothing) */
    bool running; /* made by gf_loop_init */
    bool stop;    /* a handler asked gf_loop_run to return */
    struct {
        gf_loop_fn fn;
        void *ctx;
    } kinds[GF_LOOP_KINDS_MAX];
} gf_loop;

int gf_loop_init(gf_loop *l, gf_error *err);
/* The function for descriptors watched as kind (0 < kind < GF_LOOP_KINDS_MAX). */
void gf_loop_on(gf_loop *l, int kind, gf_loop_fn fn, void *ctx);
/* Polls fd for input as (kind, id); nothing when the loop is not made. */
void gf_loop_watch(gf_loop *l, int fd, int kind, uint64_t id);
void gf_loop_unwatch(gf_loop *l, int fd);
/* Unwatches and closes *fd, then sets it to -1 (nothing when it is -1). */
void gf_loop_close(gf_loop *l, int *fd);
/* Serves ready descriptors until a handler calls gf_loop_stop (0) or the
 * poll fails (-1 with why). on_wake, when given, runs after every wake-up,
 * timeouts of timeout_ms included, before the handlers. */
int gf_loop_run(gf_loop *l, int timeout_ms, void (*on_wake)(void *ctx), void *ctx, gf_error *err);
void gf_loop_stop(gf_loop *l);

#endif
