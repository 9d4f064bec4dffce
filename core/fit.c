/* SPDX-License-Identifier: Apache-2.0 */
/* The fit rule (fit.h): pure, no allocation, no message. */
#include "fit.h"

gf_fit_verdict gf_fit_check(const gf_fit_gpu *g, const gf_fit_ask *a, uint64_t *free_bytes)
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

const char *gf_fit_verdict_name(gf_fit_verdict v)
{
    switch (v) {
    case GF_FIT_OK: return "fits";
    case GF_FIT_REQUEST: return "request does not resolve";
    case GF_FIT_MODE: return "mode";
    case GF_FIT_MEMORY: return "memory";
    case GF_FIT_COMPUTE: return "compute";
    case GF_FIT_LIMIT: return "limit";
    }
    return "?";
}
