/* SPDX-License-Identifier: Apache-2.0 */
/* Does an ask fit a GPU: the one rule the CLI's and the agent's admission
 * and the scheduler's placement share. Modes never share a GPU, the
 * guarantees on a GPU never add up to more than it holds, SM percents never
 * add up to more than 100 and a limit is never more than the GPU. Each caller
 * words its own message from the verdict. */
#ifndef GPUFRAC_FIT_H
#define GPUFRAC_FIT_H

#include <stdbool.h>
#include <stdint.h>

#include "spec.h"

#define GF_FIT_UNRESOLVED UINT64_MAX /* a limit that did not resolve against the GPU */

/* A GPU as the fractions on it (or pods placed on it) hold it now. */
typedef struct gf_fit_gpu {
    uint64_t total;      /* bytes */
    uint64_t guaranteed; /* sum of the requests on it */
    bool has_fractions;  /* any fraction on it: then mode is theirs */
    gf_mode mode;
    unsigned compute_pct; /* SM percents promised on it */
} gf_fit_gpu;

typedef struct gf_fit_ask {
    uint64_t request; /* bytes on this GPU; 0: it did not resolve against it */
    uint64_t limit;   /* bytes; 0: none to check; GF_FIT_UNRESOLVED */
    gf_mode mode;
    unsigned compute_pct; /* 0: none */
} gf_fit_ask;

/* The first condition that fails, in this order. */
typedef enum gf_fit_verdict {
    GF_FIT_OK = 0,
    GF_FIT_REQUEST, /* the request did not resolve (0 bytes) */
    GF_FIT_MODE,    /* the GPU runs fractions of the other mode */
    GF_FIT_MEMORY,  /* the request is more than what is not guaranteed to others */
    GF_FIT_COMPUTE, /* the SM percents would add up to more than 100 */
    GF_FIT_LIMIT,   /* the limit did not resolve or is more than the GPU */
} gf_fit_verdict;

/* The verdict; *free_bytes (may be NULL) = the GPU's bytes not guaranteed to others.
 * Inline: the scheduler's filter asks it for every GPU of every node. */
static inline gf_fit_verdict gf_fit_check(const gf_fit_gpu *g, const gf_fit_ask *a,
                                          uint64_t *free_bytes)
{
    uint64_t room = g->total > g->guaranteed ? g->total - g->guaranteed : 0;

    if (free_bytes)
        *free_bytes = room;
    if (a->request == 0)
        return GF_FIT_REQUEST;
    if (g->has_fractions && g->mode != a->mode)
        return GF_FIT_MODE;
    if (g->guaranteed > g->total || a->request > room)
        return GF_FIT_MEMORY;
    if (a->compute_pct > 100 || g->compute_pct > 100 - a->compute_pct)
        return GF_FIT_COMPUTE;
    if (a->limit == GF_FIT_UNRESOLVED || a->limit > g->total)
        return GF_FIT_LIMIT;
    return GF_FIT_OK;
}

const char *gf_fit_verdict_name(gf_fit_verdict v);

#endif
