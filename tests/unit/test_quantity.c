/* SPDX-License-Identifier: Apache-2.0 */
#include "unit.h"

#include <inttypes.h>
#include <stdio.h>

#include "quantity.h"

static uint64_t q_ok(const char *s)
{
    gf_error err;
    uint64_t b = UINT64_MAX;

    if (gf_quantity_parse(s, "--memory", &b, &err) < 0)
        fail_msg("\"%s\" refused: %s", s, err.msg);
    return b;
}

static const char *q_bad(const char *s, gf_error *err)
{
    uint64_t b = 12345;

    if (gf_quantity_parse(s, "--memory", &b, err) == 0)
        fail_msg("\"%s\" accepted as %" PRIu64, s, b);
    assert_int_equal(b, 12345);
    return err->msg;
}

static void test_plain_and_suffixes(void **state)
{
    (void)state;
    assert_int_equal(q_ok("0"), 0);
    assert_int_equal(q_ok("1"), 1);
    assert_int_equal(q_ok("+1Ki"), 1024);
    assert_int_equal(q_ok("1Ki"), 1ULL << 10);
    assert_int_equal(q_ok("1Mi"), 1ULL << 20);
    assert_int_equal(q_ok("1Gi"), 1ULL << 30);
    assert_int_equal(q_ok("1Ti"), 1ULL << 40);
    assert_int_equal(q_ok("1Pi"), 1ULL << 50);
    assert_int_equal(q_ok("1Ei"), 1ULL << 60);
    assert_int_equal(q_ok("7Ei"), 7ULL << 60);
    assert_int_equal(q_ok("1000000000n"), 1);
    assert_int_equal(q_ok("2000000u"), 2);
    assert_int_equal(q_ok("3000m"), 3);
    assert_int_equal(q_ok("1k"), 1000);
    assert_int_equal(q_ok("1M"), 1000000);
    assert_int_equal(q_ok("1G"), 1000000000);
    assert_int_equal(q_ok("1T"), 1000000000000ULL);
    assert_int_equal(q_ok("1P"), 1000000000000000ULL);
    assert_int_equal(q_ok("1E"), 1000000000000000000ULL);
    assert_int_equal(q_ok("9E"), 9000000000000000000ULL);
    assert_int_equal(q_ok("8192Mi"), 8ULL << 30);
    assert_int_equal(q_ok("007680Mi"), 7680ULL << 20);
}

static void test_decimals(void **state)
{
    (void)state;
    assert_int_equal(q_ok("1.5Gi"), 1610612736);
    assert_int_equal(q_ok(".5Gi"), 536870912);
    assert_int_equal(q_ok("0.5Ki"), 512);
    assert_int_equal(q_ok("1.Gi"), 1ULL << 30);
    assert_int_equal(q_ok("1.000Ki"), 1024);
    assert_int_equal(q_ok("1.5k"), 1500);
    assert_int_equal(q_ok("0.000000001G"), 1);
    assert_int_equal(q_ok("2.0"), 2);
    assert_int_equal(q_ok("0.0009765625Mi"), 1024);
    assert_int_equal(q_ok("0.00000000000000000000000000001e29"), 1);
    /* 60 fraction digits that 2^60 still makes whole */
    assert_int_equal(q_ok("0.000000000000000000867361737988403547205962240695953369140625Ei"), 1);
}

static void test_exponents(void **state)
{
    (void)state;
    assert_int_equal(q_ok("1e3"), 1000);
    assert_int_equal(q_ok("1E3"), 1000);
    assert_int_equal(q_ok("1e+3"), 1000);
    assert_int_equal(q_ok("1e0"), 1);
    assert_int_equal(q_ok("5000e-3"), 5);
    assert_int_equal(q_ok("1.5e9"), 1500000000);
    assert_int_equal(q_ok("1e18"), 1000000000000000000ULL);
    assert_int_equal(q_ok("0e999999999"), 0);
    assert_int_equal(q_ok("9223372036854775807"), INT64_MAX);
    assert_int_equal(q_ok("9223372036854775807e0"), INT64_MAX);
    assert_int_equal(q_ok("92233720368547758070e-1"), INT64_MAX);
}

static void test_refused_syntax(void **state)
{
    static const char *const bad[] = {
        "",      " 1Gi",  "1Gi ",  "1 Gi",  "K",  "1K", "1gb",  "1Kb", "0x10", "1e",    "1e+",
        "1e3.5", "1Gi1",  "1.2.3", ".",     "+",  "-",  "Gi",   "1iG", "1ki",  "1KI",   "NaN",
        "Inf",   "1_000", "1,5",   "1e3Ki", "e3", "1b", "1GiB", "--1", "+-1",  "1Mi\n",
    };
    size_t i;
    gf_error err;

    (void)state;
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char quoted[64];

        q_bad(bad[i], &err);
        assert_int_equal(err.code, GF_EINVAL);
        if (strchr(bad[i], '\n') == NULL) {
            snprintf(quoted, sizeof(quoted), "\"%s\"", bad[i]);
            assert_msg_has(err.msg, "--memory: ", quoted, "Ki Mi Gi Ti Pi Ei", "k M G T P E",
                           "1e9");
        }
    }
    q_bad("1gb", &err);
    assert_string_equal(err.msg, "--memory: \"1gb\" is not a valid quantity (did you mean \"1Gi\"? "
                                 "expected a number with an optional suffix Ki Mi Gi Ti Pi Ei, k M "
                                 "G T P E, or an exponent like 1e9)");
    assert_int_equal(gf_quantity_parse(NULL, "--memory", &(uint64_t){0}, &err), -1);
}

/* A misspelt binary suffix gets the quantity meant; an accepted suffix
 * (1G is 10^9, 1m a thousandth) and other typos get none. */
static void test_suggest(void **state)
{
    static const char *const pairs[][2] = {
        {"8GB", "8Gi"},     {"8gb", "8Gi"}, {"8GiB", "8Gi"}, {"8g", "8Gi"},  {"512mb", "512Mi"},
        {"1.5TB", "1.5Ti"}, {"1ki", "1Ki"}, {"2KI", "2Ki"},  {"3EB", "3Ei"},
    };
    static const char *const none[] = {"8G",  "8Gi",  "1m",    "1e",   "1b", "Gi",
                                       "1iG", "1Gi1", "1e3Ki", "8GBs", "",   "x"};
    char buf[64];
    size_t i;
    gf_error err;

    (void)state;
    for (i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
        assert_int_equal(gf_quantity_suggest(pairs[i][0], buf, sizeof(buf)), 0);
        assert_string_equal(buf, pairs[i][1]);
    }
    for (i = 0; i < sizeof(none) / sizeof(none[0]); i++)
        assert_int_equal(gf_quantity_suggest(none[i], buf, sizeof(buf)), -1);
    assert_int_equal(gf_quantity_suggest(NULL, buf, sizeof(buf)), -1);
    assert_int_equal(gf_quantity_suggest("8GB", buf, 3), -1);
    q_bad("8GB", &err);
    assert_msg_has(err.msg, "--memory: \"8GB\"", "did you mean \"8Gi\"?");
    q_bad("8Gx", &err);
    assert_null(strstr(err.msg, "did you mean"));
}

static void test_refused_values(void **state)
{
    static const char *const negative[] = {"-1", "-0", "-1Gi", "-0.5Ki", "-1e3"};
    static const char *const fraction[] = {"500m", "1.5",  "0.1Ki",      "1m",
                                           "1n",   "1e-1", "1.0000001k", "0.3Ei"};
    static const char *const overflow[] = {"8Ei",         "9223372036854775808",  "10E",
                                           "1e19",        "99999999999999999999", "16Ei",
                                           "1e999999999", "8589934592Gi"};
    gf_error err;
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(negative) / sizeof(negative[0]); i++) {
        assert_msg_has(q_bad(negative[i], &err), "--memory", negative[i], "is negative",
                       "expected");
        assert_int_equal(err.code, GF_ERANGE);
    }
    for (i = 0; i < sizeof(fraction) / sizeof(fraction[0]); i++)
        assert_msg_has(q_bad(fraction[i], &err), "--memory", fraction[i],
                       "not a whole number of bytes", "expected");
    for (i = 0; i < sizeof(overflow) / sizeof(overflow[0]); i++) {
        assert_msg_has(q_bad(overflow[i], &err), "--memory", overflow[i], "too large",
                       "9223372036854775807");
        assert_int_equal(err.code, GF_ERANGE);
    }
}

static void test_long_inputs(void **state)
{
    char buf[400];
    gf_error err;

    (void)state;
    /* many leading and trailing zeros are not significant digits */
    memset(buf, '0', 200);
    strcpy(buf + 200, "1.");
    memset(buf + 202, '0', 150);
    strcpy(buf + 352, "Ki");
    assert_int_equal(q_ok(buf), 1024);
    memset(buf, '1', 100);
    strcpy(buf + 100, "e-100");
    assert_msg_has(q_bad(buf, &err), "significant digits");
    memset(buf, '9', 300);
    buf[300] = '\0';
    q_bad(buf, &err);
    assert_true(strlen(err.msg) < GF_ERROR_MSG_MAX - 1);
    assert_msg_has(err.msg, "...\"");
}

/* a byte count and how it is written */
typedef struct bytes_text {
    uint64_t bytes;
    const char *text;
} bytes_text;

static void test_format(void **state)
{
    static const bytes_text cases[] = {
        {0, "0"},
        {1, "1"},
        {1000, "1000"},
        {1024, "1Ki"},
        {1536, "1536"},
        {8ULL << 30, "8Gi"},
        {7680ULL << 20, "7680Mi"},
        {1000000000, "1000000000"},
        {1610612736, "1536Mi"},
        {1ULL << 60, "1Ei"},
        {7ULL << 60, "7Ei"},
        {INT64_MAX, "9223372036854775807"},
        {(1ULL << 50) * 3, "3Pi"},
        {(1ULL << 40) * 1025, "1025Ti"},
    };
    char buf[32];
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int n = gf_quantity_format(cases[i].bytes, buf, sizeof(buf));

        assert_int_equal(n, strlen(cases[i].text));
        assert_string_equal(buf, cases[i].text);
        assert_int_equal(q_ok(buf), cases[i].bytes);
    }
    assert_int_equal(gf_quantity_format(8ULL << 30, buf, 3), -1);
    assert_int_equal(gf_quantity_format(8ULL << 30, buf, 4), 3);
}

static void test_format_round_trip(void **state)
{
    uint64_t v = 1;
    char buf[32];
    int i;

    (void)state;
    for (i = 0; i < 2000; i++) {
        v = v * 6364136223846793005ULL + 1442695040888963407ULL;
        uint64_t b = (v >> 1) >> (i % 63);

        assert_true(gf_quantity_format(b, buf, sizeof(buf)) > 0);
        assert_int_equal(q_ok(buf), b);
    }
}

static void test_human(void **state)
{
    static const bytes_text cases[] = {
        {0, "0 B"},
        {1023, "1023 B"},
        {1024, "1.00 KiB"},
        {1536, "1.50 KiB"},
        {512ULL << 20, "512.00 MiB"},
        {6ULL << 30, "6.00 GiB"},
        {1000000000, "953.67 MiB"},
        {143156ULL << 20, "139.80 GiB"},
        {1ULL << 60, "1.00 EiB"},
        {INT64_MAX, "8.00 EiB"},
        {UINT64_MAX, "16.00 EiB"},
    };
    char buf[32];
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_int_equal(gf_bytes_human(cases[i].bytes, buf, sizeof(buf)), strlen(cases[i].text));
        assert_string_equal(buf, cases[i].text);
    }
    assert_int_equal(gf_bytes_human(6ULL << 30, buf, 4), -1);
}

static void test_mib_ceil(void **state)
{
    (void)state;
    assert_int_equal(gf_bytes_to_mib_ceil(q_ok("1000Mi")), 1000);
    assert_int_equal(gf_bytes_to_mib_ceil(q_ok("1000M")), 954);
    assert_int_equal(gf_bytes_to_mib_ceil(q_ok("1G")), 954);
    assert_int_equal(gf_bytes_to_mib_ceil(1), 1);
    assert_int_equal(gf_bytes_to_mib_ceil(0), 1);
    assert_int_equal(gf_bytes_to_mib_ceil(GF_MIB), 1);
    assert_int_equal(gf_bytes_to_mib_ceil(GF_MIB + 1), 2);
    assert_int_equal(gf_bytes_to_mib_ceil(UINT64_MAX), 1ULL << 44);
}

static void test_decimal_helpers(void **state)
{
    gf_decimal d;

    (void)state;
    assert_non_null(gf_decimal_scan("0.29", true, &d));
    assert_true(gf_decimal_to_double(&d) == 0.29);
    assert_int_equal(gf_decimal_cmp_one(&d), -1);
    assert_int_equal(gf_decimal_places(&d), 2);
    gf_decimal_scan("1.000", true, &d);
    assert_int_equal(gf_decimal_cmp_one(&d), 0);
    assert_int_equal(gf_decimal_places(&d), 0);
    gf_decimal_scan("10e-1", true, &d);
    assert_int_equal(gf_decimal_cmp_one(&d), 0);
    gf_decimal_scan("1.0001", true, &d);
    assert_int_equal(gf_decimal_cmp_one(&d), 1);
    gf_decimal_scan("0.80000", true, &d);
    assert_int_equal(gf_decimal_places(&d), 1);
    gf_decimal_scan("5e-1", true, &d);
    assert_true(gf_decimal_to_double(&d) == 0.5);
    assert_string_equal(gf_decimal_scan("5e-1x", false, &d), "e-1x");
    assert_string_equal(gf_decimal_scan("5ex", true, &d), "ex");
    assert_null(gf_decimal_scan(".e1", true, &d));
    gf_decimal_scan("0.33333333333333333333333", true, &d);
    assert_true(gf_decimal_to_double(&d) == 1.0 / 3.0);
    gf_decimal_scan("123456789012345678901234567890", true, &d);
    assert_true(gf_decimal_to_double(&d) / 123456789012345678901234567890.0 - 1.0 < 1e-15);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_and_suffixes), cmocka_unit_test(test_decimals),
        cmocka_unit_test(test_exponents),          cmocka_unit_test(test_refused_syntax),
        cmocka_unit_test(test_refused_values),     cmocka_unit_test(test_suggest),
        cmocka_unit_test(test_long_inputs),        cmocka_unit_test(test_format),
        cmocka_unit_test(test_format_round_trip),  cmocka_unit_test(test_human),
        cmocka_unit_test(test_mib_ceil),           cmocka_unit_test(test_decimal_helpers),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
