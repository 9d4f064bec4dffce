/* SPDX-License-Identifier: Apache-2.0 */
/* The fit rule (core/fit.h) on the shared table (fit_cases.h). */
#include "unit.h"

#include <stdbool.h>

#include "fit_cases.h"

static void test_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < FIT_CASES; i++) {
        const fit_case *c = &fit_cases[i];
        uint64_t free_bytes = 1;
        gf_fit_verdict v = gf_fit_check(&c->gpu, &c->ask, &free_bytes);
        if (v != c->want || free_bytes != c->want_free)
            fail_msg("%s: %s (free %llu), expected %s (free %llu)", c->what, gf_fit_verdict_name(v),
                     (unsigned long long)free_bytes, gf_fit_verdict_name(c->want),
                     (unsigned long long)c->want_free);
        assert_int_equal(gf_fit_check(&c->gpu, &c->ask, NULL), c->want);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
