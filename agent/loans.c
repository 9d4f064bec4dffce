/* SPDX-License-Identifier: Apache-2.0 */
/* The loan table (loans.h). a->loans_high bounds every walk: slots at or
 * above it were never used. */
#include "loans.h"

#include <string.h>

#include "loop.h"

gf_loan *gf_loan_new(gf_agent *a)
{
    for (int i = 0; i < GF_AGENT_LOANS_MAX; i++)
        if (!a->loans[i].used) {
            if (i >= a->loans_high)
                a->loans_high = i + 1;
            a->loans[i] = (gf_loan){.used = true, .pidfd = -1};
            return &a->loans[i];
        }
    return NULL;
}

gf_loan *gf_loan_find(gf_agent *a, const char *frac, int gpu, pid_t pid, uint64_t start)
{
    for (int i = 0; i < a->loans_high; i++) {
        gf_loan *l = &a->loans[i];
        if (l->used && l->gpu == gpu && l->pid == pid && l->start == start &&
            strcmp(l->fraction, frac) == 0)
            return l;
    }
    return NULL;
}

uint64_t gf_loans_of(const gf_agent *a, const gf_afraction *f, int gpu)
{
    uint64_t sum = 0;
    for (int i = 0; i < a->loans_high; i++) {
        const gf_loan *l = &a->loans[i];
        if (l->used && l->gpu == gpu && strcmp(l->fraction, f->cfg.name) == 0)
            sum += l->bytes;
    }
    return sum;
}

void gf_loan_watch(gf_agent *a, gf_loan *l)
{
    gf_loop_watch(&a->loop, l->pidfd, GF_EV_LOAN, (uint64_t)(l - a->loans));
}

void gf_loan_free(gf_agent *a, gf_loan *l)
{
    gf_loop_close(&a->loop, &l->pidfd);
    *l = (gf_loan){.pidfd = -1};
}
