/* SPDX-License-Identifier: Apache-2.0 */
/* The agent's loan table (a->loans): which process of which fraction holds
 * how much burst memory of which GPU. The table alone: lending and taking
 * back are lender.c's, durability journal.c's. A used loan's pidfd, when it
 * has one, is watched by the loop as (GF_EV_LOAN, slot). */
#ifndef GPUFRAC_AGENT_LOANS_H
#define GPUFRAC_AGENT_LOANS_H

#include "agent.h"

/* A cleared, used slot (pidfd -1), or NULL when the table is full. */
gf_loan *gf_loan_new(gf_agent *a);
/* The live loan of (fraction, GPU, host pid + start time), or NULL. */
gf_loan *gf_loan_find(gf_agent *a, const char *frac, int gpu, pid_t pid, uint64_t start);
/* What fraction f holds on loan on GPU gpu. */
uint64_t gf_loans_of(const gf_agent *a, const gf_afraction *f, int gpu);
/* Has the loop watch loan l's pidfd. */
void gf_loan_watch(gf_agent *a, gf_loan *l);
/* Frees l's slot; its pidfd, if any, is unwatched and closed. */
void gf_loan_free(gf_agent *a, gf_loan *l);

#endif
