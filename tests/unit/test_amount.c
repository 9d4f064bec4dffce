/* SPDX-License-Identifier: Apache-2.0 */
#include "unit.h"

#include <stdio.h>

#include "amount.h"
#include "quantity.h"

static gf_amount a_ok(const char *s)
{
    gf_amount a;
    gf_error err;

    if (gf_amount_parse(s, "--memory", &a, &err) < 0)
        fail_msg("\"%s\" refused: %s", s, err.msg);
    return a;
}

static const char *a_bad(const char *s, gf_error *err)
{
    gf_amount a;

    if (gf_amount_parse(s, "--memory", &a, err) == 0)
        fail_msg("\"%s\" accepted", s);
    return err->msg;
}

static void assert_portion(const char *s, double p)
{
    gf_amount a = a_ok(s);

    assert_true(a.is_portion);
    if (a.portion != p)
        fail_msg("\"%s\": portion %.17g, expected %.17g", s, a.portion, p);
}

static void assert_bytes(const char *s, uint64_t b)
{
    gf_amount a = a_ok(s);

    assert_false(a.is_portion);
    assert_int_equal(a.bytes, b);
}

static void test_portions(void **state)
{
    (void)state;
    assert_portion("0.5", 0.5);
    assert_portion(".25", 0.25);
    assert_portion("1", 1.0);
    assert_portion("1.0", 1.0);
    assert_portion("0.29", 0.29);
    assert_portion("0.000001", 0.000001);
    assert_portion("50%", 0.5);
    assert_portion("12.5%", 0.125);
    assert_portion("100%", 1.0);
    assert_portion("100.0%", 1.0);
    assert_portion("0.1%", 0.001);
    assert_portion("33%", 0.33);
}

static void test_quantities(void **state)
{
    (void)state;
    assert_bytes("8Gi", 8ULL << 30);
    assert_bytes("1G", 1000000000);
    assert_bytes("7680Mi", 7680ULL << 20);
    assert_bytes("2", 2); /* a bare number above 1 is bytes */
    assert_bytes("2.0", 2);
    assert_bytes("1e0", 1); /* an exponent makes it a quantity */
    assert_bytes("1000m", 1);
    assert_bytes("1Ki", 1024);
}

static void test_refused(void **state)
{
    static const char *const bad[] = {
        "",    "0",   "0.0",  "0%",   "0.0%", "-0",  "-0.5", "-1Gi", "150%", "100.01%",
        "-5%", "+5%", "5 %",  "%",    "NaN",  "Inf", "nan%", "1.5",  "5e-1", "500m",
        "1gb", "0Gi", "1e2%", "50%%", "0x1",  "8Ei", " 0.5", "0.5 ",
    };
    gf_error err;
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char quoted[64];

        a_bad(bad[i], &err);
        snprintf(quoted, sizeof(quoted), "\"%s\"", bad[i]);
        assert_msg_has(err.msg, "--memory", quoted, "expected");
    }
    assert_msg_has(a_bad("150%", &err), "more than 100%", "portion", "percentage", "quantity");
    assert_msg_has(a_bad("0", &err), "greater than 0");
    assert_msg_has(a_bad("-0.5", &err), "negative");
    assert_msg_has(a_bad("1.5", &err), "neither a portion in (0,1] nor whole bytes", "8Gi");
    assert_msg_has(a_bad("8Ei", &err), "too large");
    assert_msg_has(a_bad("8GB", &err), "did you mean \"8Gi\"?", "8Gi, 7680Mi or 1G");
    assert_msg_has(a_bad("1gb", &err), "did you mean \"1Gi\"?");
    assert_null(strstr(a_bad("8Gx", &err), "did you mean"));
    assert_int_equal(gf_amount_parse(NULL, "x", &(gf_amount){0}, &err), -1);
}

static uint64_t resolve(const char *s, uint64_t total)
{
    gf_amount a = a_ok(s);
    gf_error err;
    uint64_t b = 0;

    if (gf_amount_resolve(&a, total, "--memory", &b, &err) < 0)
        fail_msg("resolving \"%s\": %s", s, err.msg);
    return b;
}

static void test_resolve(void **state)
{
    const uint64_t h200 = 143156ULL << 20;
    gf_amount a;
    gf_error err;
    uint64_t b;

    (void)state;
    assert_int_equal(resolve("0.5", h200), 71578ULL << 20);
    assert_int_equal(resolve("1", h200), h200);
    assert_int_equal(resolve("100%", h200), h200);
    assert_int_equal(resolve("0.25", 80ULL << 30), 20ULL << 30);
    /* 0.29 is below 0.29 as a double; the product is still taken as 29 MiB */
    assert_int_equal(resolve("0.29", 100ULL << 20), 29ULL << 20);
    assert_int_equal(resolve("29%", 100ULL << 20), 29ULL << 20);
    assert_int_equal(resolve("0.3", 10ULL << 20), 3ULL << 20);
    assert_int_equal(resolve("0.7", 10ULL << 20), 7ULL << 20);
    /* floored to whole MiB, never to 0 */
    assert_int_equal(resolve("0.333", 1000ULL << 20), 333ULL << 20);
    assert_int_equal(resolve("0.5", 3ULL << 20), 1ULL << 20);
    assert_int_equal(resolve("0.000001", 1ULL << 30), 1ULL << 20);
    assert_int_equal(resolve("0.5", 1000000001), 476ULL << 20);
    assert_int_equal(resolve("1", 1000000000), 953ULL << 20);
    assert_int_equal(resolve("8Gi", h200), 8ULL << 30);
    assert_int_equal(resolve("1000000000", 1000000000), 1000000000);

    a = a_ok("200Gi");
    assert_int_equal(gf_amount_resolve(&a, h200, "--memory", &b, &err), -1);
    assert_msg_has(err.msg, "--memory", "200.00 GiB", "139.80 GiB");
    a = a_ok("0.5");
    assert_int_equal(gf_amount_resolve(&a, 1000, "--memory", &b, &err), -1);
    assert_msg_has(err.msg, "--memory", "1 MiB");
    a = (gf_amount){.is_portion = true, .portion = 1.5};
    assert_int_equal(gf_amount_resolve(&a, h200, "--memory", &b, &err), -1);
    a = (gf_amount){.is_portion = false, .bytes = 0};
    assert_int_equal(gf_amount_resolve(&a, h200, "--memory", &b, &err), -1);
}

static double cp_ok(const char *s)
{
    gf_error err;
    double p = -1.0;

    if (gf_compute_portion_parse(s, "--compute", &p, &err) < 0)
        fail_msg("\"%s\" refused: %s", s, err.msg);
    return p;
}

static void test_compute_portion(void **state)
{
    static const char *const bad[] = {
        "0",      "-0",  "0.0",    "1.01",  "2",   "50",  "100",  "50%",
        "500m",   "NaN", "nan",    "Inf",   "inf", "",    " 0.5", "0.5 ",
        "-0.5",   "1e1", "0x1p-1", "0.5Gi", ".",   "e-1", "1e",   "93279205e-154775807",
        "1e-400",
    };
    gf_error err;
    double p;
    size_t i;

    (void)state;
    assert_true(cp_ok("0.5") == 0.5);
    assert_true(cp_ok("1") == 1.0);
    assert_true(cp_ok("5e-1") == 0.5);
    assert_true(cp_ok("0.29") == 0.29);
    assert_true(cp_ok("+0.25") == 0.25);
    assert_true(cp_ok("1.000") == 1.0);
    assert_true(cp_ok("100e-2") == 1.0);
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char quoted[64];

        if (gf_compute_portion_parse(bad[i], "--compute", &p, &err) == 0)
            fail_msg("\"%s\" accepted", bad[i]);
        snprintf(quoted, sizeof(quoted), "\"%s\"", bad[i]);
        assert_msg_has(err.msg, "--compute", quoted, "(0,1]", "0.5");
    }
}

static void test_compute_percent(void **state)
{
    (void)state;
    assert_int_equal(gf_compute_percent(cp_ok("0.29")), 28);
    assert_int_equal(gf_compute_percent(cp_ok("0.333")), 33);
    assert_int_equal(gf_compute_percent(cp_ok("0.336")), 33);
    assert_int_equal(gf_compute_percent(cp_ok("0.125")), 12);
    assert_int_equal(gf_compute_percent(cp_ok("0.005")), 1);
    assert_int_equal(gf_compute_percent(cp_ok("0.001")), 1);
    assert_int_equal(gf_compute_percent(cp_ok("0.5")), 50);
    assert_int_equal(gf_compute_percent(cp_ok("1")), 100);
    assert_int_equal(gf_compute_percent(0.0), 1);
    assert_int_equal(gf_compute_percent(2.0), 100);
}

/* floor() per share never hands out more than the card. */
static void test_percent_never_oversubscribes(void **state)
{
    static const char *const sets[][4] = {
        {"0.29", "0.71", NULL, NULL},
        {"0.333", "0.333", "0.334", NULL},
        {"0.25", "0.25", "0.25", "0.25"},
        {"0.1", "0.2", "0.3", "0.4"},
    };
    size_t i, j;

    (void)state;
    for (i = 0; i < sizeof(sets) / sizeof(sets[0]); i++) {
        int sum = 0;

        for (j = 0; j < 4 && sets[i][j] != NULL; j++)
            sum += gf_compute_percent(cp_ok(sets[i][j]));
        assert_true(sum <= 100);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_portions),
        cmocka_unit_test(test_quantities),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_resolve),
        cmocka_unit_test(test_compute_portion),
        cmocka_unit_test(test_compute_percent),
        cmocka_unit_test(test_percent_never_oversubscribes),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
