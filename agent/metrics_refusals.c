/* SPDX-License-Identifier: Apache-2.0 */
/* Refusals by verb and reason (metrics_refusals.h). A reason is read off the
 * message the agent itself wrote, by the table below (first match wins); a
 * message no entry matches is "other", so the labels stay a fixed set. */
#include "metrics_refusals.h"

#include <string.h>

gf_refusals gf_refusals_now;

static const char *const verb_names[GF_REFUSAL_VERBS] = {"ping", "borrow",  "return", "reclaim",
                                                         "mps",  "release", "admit",  "attach",
                                                         "run",  "end",     "other"};

static const char *const reason_names[GF_REFUSAL_REASONS] = {
    "bad_request", "not_caller", "no_fraction", "in_use", "policy", "fit", "journal_full", "other"};

static const struct {
    const char *says;
    gf_refusal reason;
} reasons[] = {
    {"cannot record", GF_REFUSAL_JOURNAL_FULL},
    {"policy", GF_REFUSAL_POLICY},
    {"names no fraction", GF_REFUSAL_NO_FRACTION},
    {"fraction is gone", GF_REFUSAL_NO_FRACTION},
    {"not a user's fraction", GF_REFUSAL_NO_FRACTION},
    {"is in use", GF_REFUSAL_IN_USE},
    {"already in fraction", GF_REFUSAL_IN_USE},
    {"only ", GF_REFUSAL_NOT_CALLER},
    {"is not served on", GF_REFUSAL_NOT_CALLER},
    {"is for root's socket", GF_REFUSAL_NOT_CALLER},
    {"the caller is not a process", GF_REFUSAL_NOT_CALLER},
    {"root's gpufrac run makes", GF_REFUSAL_NOT_CALLER},
    {"are kept for containers", GF_REFUSAL_NOT_CALLER},
    {"fits", GF_REFUSAL_FIT},
    {"not guaranteed to other", GF_REFUSAL_FIT},
    {"no burst memory", GF_REFUSAL_FIT},
    {"cannot share it", GF_REFUSAL_FIT},
    {"loans, its most", GF_REFUSAL_FIT},
    {"already waiting", GF_REFUSAL_FIT},
    {"nothing on loan", GF_REFUSAL_FIT},
    {"unknown verb", GF_REFUSAL_BAD_REQUEST},
    {" must be", GF_REFUSAL_BAD_REQUEST},
    {" needs ", GF_REFUSAL_BAD_REQUEST},
    {"not a valid", GF_REFUSAL_BAD_REQUEST},
    {"is not a GPU", GF_REFUSAL_BAD_REQUEST},
    {"no such GPU", GF_REFUSAL_BAD_REQUEST},
    {"has no share of", GF_REFUSAL_BAD_REQUEST},
    {"bad ", GF_REFUSAL_BAD_REQUEST},
    {"missing", GF_REFUSAL_BAD_REQUEST},
    {"longer than", GF_REFUSAL_BAD_REQUEST},
};

gf_refusal gf_refusal_reason(const char *msg)
{
    for (size_t i = 0; msg && i < sizeof(reasons) / sizeof(reasons[0]); i++)
        if (strstr(msg, reasons[i].says))
            return reasons[i].reason;
    return GF_REFUSAL_OTHER;
}

static int verb_index(const char *verb)
{
    int v = 0;

    while (v < GF_REFUSAL_VERBS - 1 && (!verb || strcmp(verb, verb_names[v]) != 0))
        v++;
    return v;
}

void gf_refusal_count(const char *verb, const char *msg)
{
    gf_refusals_now.n[verb_index(verb)][gf_refusal_reason(msg)]++;
}

const char *gf_refusal_verb_name(int v)
{
    return verb_names[v];
}

const char *gf_refusal_reason_name(int r)
{
    return reason_names[r];
}

bool gf_refusal_replay(const char *verb, const char *reason, uint64_t n)
{
    int v = verb_index(verb), r = 0;

    if (v == GF_REFUSAL_VERBS - 1 && strcmp(verb, "other") != 0)
        return false;
    while (r < GF_REFUSAL_REASONS && strcmp(reason, reason_names[r]) != 0)
        r++;
    if (r == GF_REFUSAL_REASONS)
        return false;
    gf_refusals_now.n[v][r] = n;
    return true;
}
