/* SPDX-License-Identifier: Apache-2.0 */
/* Refusals the agent answered, by verb and reason (metrics_refusals.c), for
 * gpufrac_refusals_total{verb,reason}. Both labels come from fixed tables,
 * never from the request: an unknown verb counts as "other". Journaled like
 * the agent-wide counters ("rcount"), so a restart never lowers one. The
 * loop's alone (a->lock held). */
#ifndef GPUFRAC_AGENT_METRICS_REFUSALS_H
#define GPUFRAC_AGENT_METRICS_REFUSALS_H

#include <stdbool.h>
#include <stdint.h>

typedef enum gf_refusal {
    GF_REFUSAL_BAD_REQUEST,  /* malformed, or a field out of range */
    GF_REFUSAL_NOT_CALLER,   /* the caller may not ask that (socket, uid, process) */
    GF_REFUSAL_NO_FRACTION,  /* the fraction named or the socket's is not there */
    GF_REFUSAL_IN_USE,       /* the name or process is another fraction's */
    GF_REFUSAL_POLICY,       /* the policy file's rules */
    GF_REFUSAL_FIT,          /* no memory, GPU or room to grant it */
    GF_REFUSAL_JOURNAL_FULL, /* the agent cannot record it */
    GF_REFUSAL_OTHER,
    GF_REFUSAL_REASONS
} gf_refusal;

#define GF_REFUSAL_VERBS 11 /* the verbs of verbs.c, then "other" */

typedef struct gf_refusals {
    uint64_t n[GF_REFUSAL_VERBS][GF_REFUSAL_REASONS];
} gf_refusals;

extern gf_refusals gf_refusals_now;

/* Counts the error reply msg to verb (as the request named it). */
void gf_refusal_count(const char *verb, const char *msg);
/* The reason of an error message (a fixed table of what the agent says). */
gf_refusal gf_refusal_reason(const char *msg);
const char *gf_refusal_verb_name(int v);
const char *gf_refusal_reason_name(int r);
/* The journal's "rcount VERB REASON N" (replayed: ignored when it names
 * neither a known verb nor a reason). */
bool gf_refusal_replay(const char *verb, const char *reason, uint64_t n);

#endif
