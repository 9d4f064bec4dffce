/* SPDX-License-Identifier: Apache-2.0 */
/* The fit table (tests/unit/fit_cases.h) through the scheduler's
 * gf_sched_gpu_fits: each row's GPU is one mgpu, its ask one pod of byte
 * amounts. The scheduler asks every condition and answers fits or not. */
#include "../unit/unit.h"

#include <stdbool.h>

#include "../unit/fit_cases.h"
#include "model_int.h"

static void test_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < FIT_CASES; i++) {
        const fit_case *c = &fit_cases[i];
        mgpu g = {.total = c->gpu.total,
                  .requested = c->gpu.guaranteed,
                  .compute_pct = c->gpu.compute_pct};
        gf_sched_pod pod = {.fractional = true, .num_devices = 1, .mode = c->ask.mode};

        g.pods[c->gpu.mode] = c->gpu.has_fractions ? 1 : 0;
        pod.request = (gf_amount){.bytes = c->ask.request};
        pod.limit = (gf_amount){.bytes = c->ask.limit == GF_FIT_UNRESOLVED ? 0 : c->ask.limit};
        pod.has_compute = c->ask.compute_pct > 0;
        pod.compute = c->ask.compute_pct / 100.0;
        assert_int_equal(gf_sched_pod_compute_pct(&pod), c->ask.compute_pct);
        if (gf_sched_gpu_fits(&g, &pod) != (c->want == GF_FIT_OK))
            fail_msg("%s: %s, expected %s", c->what, c->want == GF_FIT_OK ? "does not fit" : "fits",
                     gf_fit_verdict_name(c->want));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
