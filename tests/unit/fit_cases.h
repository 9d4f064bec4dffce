/* SPDX-License-Identifier: Apache-2.0 */
/* The fit rule's cases (core/fit.h), one table for every user of the rule:
 * the core's gf_fit_check, the CLI's gf_admit_check, the agent's
 * gf_admit_check_fit and the scheduler's gf_sched_gpu_fits each run it
 * through their own entry point (tests/unit/test_fit*.c, tests/agent,
 * tests/scheduler). A user that does not ask a condition (the CLI and the
 * agent: request resolution, compute, limit) skips the rows whose verdict is
 * that condition; every other row must give it the same verdict. */
#ifndef GPUFRAC_TEST_FIT_CASES_H
#define GPUFRAC_TEST_FIT_CASES_H

#include <stdbool.h>

#include "fit.h"
#include "quantity.h"

#define FIT_TS GF_MODE_TIME_SLICING
#define FIT_SM GF_MODE_SM_SHARING

typedef struct fit_case {
    const char *what;
    gf_fit_gpu gpu;
    gf_fit_ask ask;
    gf_fit_verdict want;
    uint64_t want_free;
} fit_case;

/* gpu: {total, guaranteed, has_fractions, mode, compute_pct};
 * ask: {request, limit, mode, compute_pct} */
static const fit_case fit_cases[] = {
    {"empty GPU",
     {16 * GF_GIB, 0, false, FIT_TS, 0},
     {4 * GF_GIB, 8 * GF_GIB, FIT_TS, 0},
     GF_FIT_OK,
     16 * GF_GIB},
    {"empty GPU, other mode",
     {16 * GF_GIB, 0, false, FIT_TS, 0},
     {4 * GF_GIB, 4 * GF_GIB, FIT_SM, 50},
     GF_FIT_OK,
     16 * GF_GIB},
    {"the whole GPU",
     {16 * GF_GIB, 0, false, FIT_TS, 0},
     {16 * GF_GIB, 16 * GF_GIB, FIT_TS, 0},
     GF_FIT_OK,
     16 * GF_GIB},
    {"exactly what is left",
     {16 * GF_GIB, 12 * GF_GIB, true, FIT_TS, 0},
     {4 * GF_GIB, 4 * GF_GIB, FIT_TS, 0},
     GF_FIT_OK,
     4 * GF_GIB},
    {"one byte more than is left",
     {16 * GF_GIB, 12 * GF_GIB, true, FIT_TS, 0},
     {4 * GF_GIB + 1, 8 * GF_GIB, FIT_TS, 0},
     GF_FIT_MEMORY,
     4 * GF_GIB},
    {"more than the GPU",
     {16 * GF_GIB, 0, false, FIT_TS, 0},
     {17 * GF_GIB, 17 * GF_GIB, FIT_TS, 0},
     GF_FIT_MEMORY,
     16 * GF_GIB},
    {"fully guaranteed",
     {8 * GF_GIB, 8 * GF_GIB, true, FIT_TS, 0},
     {1 * GF_MIB, 1 * GF_MIB, FIT_TS, 0},
     GF_FIT_MEMORY,
     0},
    {"guarantees past the GPU",
     {8 * GF_GIB, 10 * GF_GIB, true, FIT_SM, 0},
     {1 * GF_MIB, 1 * GF_MIB, FIT_SM, 0},
     GF_FIT_MEMORY,
     0},
    {"sm-sharing on a time-slicing GPU",
     {16 * GF_GIB, 2 * GF_GIB, true, FIT_TS, 0},
     {2 * GF_GIB, 2 * GF_GIB, FIT_SM, 50},
     GF_FIT_MODE,
     14 * GF_GIB},
    {"time-slicing on an sm-sharing GPU",
     {16 * GF_GIB, 2 * GF_GIB, true, FIT_SM, 50},
     {2 * GF_GIB, 2 * GF_GIB, FIT_TS, 0},
     GF_FIT_MODE,
     14 * GF_GIB},
    {"mode before memory",
     {16 * GF_GIB, 16 * GF_GIB, true, FIT_SM, 0},
     {2 * GF_GIB, 2 * GF_GIB, FIT_TS, 0},
     GF_FIT_MODE,
     0},
    {"same mode shares",
     {16 * GF_GIB, 2 * GF_GIB, true, FIT_SM, 40},
     {2 * GF_GIB, 4 * GF_GIB, FIT_SM, 60},
     GF_FIT_OK,
     14 * GF_GIB},
    {"SM percents past 100",
     {16 * GF_GIB, 2 * GF_GIB, true, FIT_SM, 60},
     {2 * GF_GIB, 2 * GF_GIB, FIT_SM, 50},
     GF_FIT_COMPUTE,
     14 * GF_GIB},
    {"memory before compute",
     {16 * GF_GIB, 15 * GF_GIB, true, FIT_SM, 100},
     {2 * GF_GIB, 2 * GF_GIB, FIT_SM, 50},
     GF_FIT_MEMORY,
     1 * GF_GIB},
    {"a request that did not resolve",
     {16 * GF_GIB, 0, false, FIT_TS, 0},
     {0, 1 * GF_GIB, FIT_TS, 0},
     GF_FIT_REQUEST,
     16 * GF_GIB},
    {"a limit past the GPU",
     {16 * GF_GIB, 0, false, FIT_TS, 0},
     {4 * GF_GIB, 17 * GF_GIB, FIT_TS, 0},
     GF_FIT_LIMIT,
     16 * GF_GIB},
    {"a limit that did not resolve",
     {16 * GF_GIB, 0, false, FIT_TS, 0},
     {4 * GF_GIB, GF_FIT_UNRESOLVED, FIT_TS, 0},
     GF_FIT_LIMIT,
     16 * GF_GIB},
    {"compute before limit",
     {16 * GF_GIB, 0, true, FIT_SM, 80},
     {4 * GF_GIB, 17 * GF_GIB, FIT_SM, 30},
     GF_FIT_COMPUTE,
     16 * GF_GIB},
};

#define FIT_CASES (sizeof(fit_cases) / sizeof(fit_cases[0]))

/* Does a user that asks only mode and memory see this row's verdict? */
static inline bool fit_case_mode_memory(const fit_case *c)
{
    return c->want == GF_FIT_OK || c->want == GF_FIT_MODE || c->want == GF_FIT_MEMORY;
}

/* Runs every mode-and-memory row through an admission check that names the
 * GPU (memory_frag before the free amount) and the mode (mode_frag beside
 * its name) when it refuses; unseen leaves out rows that check cannot see.
 * Needs unit.h before this header. */
static inline void fit_cases_run_admission(gf_fit_verdict (*run)(const fit_case *, gf_error *),
                                           bool (*unseen)(const fit_case *),
                                           const char *memory_frag, const char *mode_frag)
{
    size_t ran = 0;

    for (size_t i = 0; i < FIT_CASES; i++) {
        const fit_case *c = &fit_cases[i];
        gf_error err = {0};
        char h[32];
        gf_fit_verdict v;

        if (!fit_case_mode_memory(c) || (unseen && unseen(c)))
            continue;
        v = run(c, &err);
        if (v != c->want)
            fail_msg("%s: %s, expected %s (%s)", c->what, gf_fit_verdict_name(v),
                     gf_fit_verdict_name(c->want), v ? err.msg : "admitted");
        if (v == GF_FIT_MEMORY) {
            gf_bytes_human(c->want_free, h, sizeof(h));
            assert_msg_has(err.msg, memory_frag, h);
        }
        if (v == GF_FIT_MODE)
            assert_msg_has(err.msg, mode_frag, gf_mode_name(c->gpu.mode));
        ran++;
    }
    assert_true(ran >= 10);
}

#endif
