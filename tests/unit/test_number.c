/* SPDX-License-Identifier: Apache-2.0 */
/* The strict decimal parser: what it accepts, where its bound lies, and that
 * a refused input leaves the result untouched. */
#include "unit.h"

#include "number.h"

static void test_accepts(void **state)
{
    uint64_t v;

    (void)state;
    assert_int_equal(gf_parse_udec("0", 10, &v), 0);
    assert_int_equal(v, 0);
    assert_int_equal(gf_parse_udec("007", 10, &v), 0); /* leading zeros are digits */
    assert_int_equal(v, 7);
    assert_int_equal(gf_parse_udec("100", 100, &v), 0);
    assert_int_equal(v, 100);
    assert_int_equal(gf_parse_udec("18446744073709551615", UINT64_MAX, &v), 0);
    assert_true(v == UINT64_MAX);
    assert_int_equal(gf_parse_udec("0", 0, &v), 0);
}

static void test_refuses(void **state)
{
    const char *bad[] = {"", "+1", "-1", " 1", "1 ", "0x10", "1.0", "1e3", "\t7", "12a"};
    uint64_t v = 42;

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (gf_parse_udec(bad[i], UINT64_MAX, &v) != GF_NUMBER_INVALID)
            fail_msg("\"%s\" not refused as invalid", bad[i]);
    }
    assert_int_equal(v, 42);
    assert_int_equal(gf_parse_udec("101", 100, &v), GF_NUMBER_RANGE);
    assert_int_equal(gf_parse_udec("1", 0, &v), GF_NUMBER_RANGE);
    assert_int_equal(gf_parse_udec("18446744073709551616", UINT64_MAX, &v), GF_NUMBER_RANGE);
    assert_int_equal(gf_parse_udec("99999999999999999999999", UINT64_MAX, &v), GF_NUMBER_RANGE);
    /* a non-digit past the overflow still makes it invalid */
    assert_int_equal(gf_parse_udec("99999999999999999999999x", UINT64_MAX, &v), GF_NUMBER_INVALID);
    assert_int_equal(v, 42);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accepts),
        cmocka_unit_test(test_refuses),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
