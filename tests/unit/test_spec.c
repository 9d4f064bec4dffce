/* SPDX-License-Identifier: Apache-2.0 */
#include "unit.h"

#include "quantity.h"
#include "spec.h"

static gf_amount bytes(uint64_t b)
{
    return (gf_amount){.is_portion = false, .bytes = b};
}

static gf_amount portion(double p)
{
    return (gf_amount){.is_portion = true, .portion = p};
}

static void test_mode(void **state)
{
    gf_mode m = GF_MODE_SM_SHARING;
    gf_error err;
    static const char *const bad[] = {"",    "Time-Slicing", "time_slicing", "sm", " sm-sharing",
                                      "mps", "time-slicing "};
    size_t i;

    (void)state;
    assert_int_equal(gf_mode_parse("time-slicing", "--mode", &m, &err), 0);
    assert_int_equal(m, GF_MODE_TIME_SLICING);
    assert_int_equal(gf_mode_parse("sm-sharing", "--mode", &m, &err), 0);
    assert_int_equal(m, GF_MODE_SM_SHARING);
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(gf_mode_parse(bad[i], "--mode", &m, &err), -1);
        assert_msg_has(err.msg, "--mode: \"", bad[i], "is not a compute mode",
                       "expected time-slicing or sm-sharing");
    }
    assert_int_equal(gf_mode_parse(NULL, "--mode", &m, &err), -1);
    assert_string_equal(gf_mode_name(GF_MODE_TIME_SLICING), "time-slicing");
    assert_string_equal(gf_mode_name(GF_MODE_SM_SHARING), "sm-sharing");
}

static void test_finish_defaults(void **state)
{
    gf_spec s = {0};
    gf_error err;

    (void)state;
    s.has_request = true;
    s.request = bytes(8ULL << 30);
    assert_int_equal(gf_spec_finish(&s, &err), 0);
    assert_true(s.has_limit);
    assert_int_equal(s.limit.bytes, 8ULL << 30);

    s = (gf_spec){0};
    s.has_limit = true;
    s.limit = portion(0.5);
    assert_int_equal(gf_spec_finish(&s, &err), 0);
    assert_true(s.has_request);
    assert_true(s.request.is_portion);
    assert_true(s.request.portion == 0.5);

    s = (gf_spec){0};
    assert_int_equal(gf_spec_finish(&s, &err), -1);
    assert_msg_has(err.msg, "request or limit", "8Gi", "0.5");
}

static void test_finish_checks(void **state)
{
    gf_spec s = {0};
    gf_error err;

    (void)state;
    s.has_request = s.has_limit = true;
    s.request = bytes(8ULL << 30);
    s.limit = bytes(4ULL << 30);
    assert_int_equal(gf_spec_finish(&s, &err), -1);
    assert_string_equal(err.msg, "limit (4Gi) is smaller than request (8Gi)");

    s.request = portion(0.5);
    s.limit = portion(0.25);
    assert_int_equal(gf_spec_finish(&s, &err), -1);
    assert_msg_has(err.msg, "limit (0.25)", "request (0.5)");

    /* mixed kinds are checked only when resolved */
    s.request = portion(0.5);
    s.limit = bytes(1ULL << 30);
    assert_int_equal(gf_spec_finish(&s, &err), 0);

    s.request = bytes(1ULL << 30);
    s.limit = bytes(2ULL << 30);
    s.has_compute = true;
    s.compute = 0.25;
    assert_int_equal(gf_spec_finish(&s, &err), -1);
    assert_msg_has(err.msg, "compute", "0.25", "sm-sharing");
    s.mode = GF_MODE_SM_SHARING;
    assert_int_equal(gf_spec_finish(&s, &err), 0);
    s.compute = 1.5;
    assert_int_equal(gf_spec_finish(&s, &err), -1);
    s.compute = 0.5;

    s.request = bytes(0);
    assert_int_equal(gf_spec_finish(&s, &err), -1);
    s.request = portion(0.0);
    assert_int_equal(gf_spec_finish(&s, &err), -1);
    s.request = bytes(1);
    strcpy(s.devices, "GPU-a,,GPU-b");
    assert_int_equal(gf_spec_finish(&s, &err), -1);
    assert_msg_has(err.msg, "GPU-a,,GPU-b", "empty");
}

static void test_resolve(void **state)
{
    const uint64_t total = 80ULL << 30;
    gf_spec s = {0};
    gf_error err;
    uint64_t r, l;

    (void)state;
    s.has_request = s.has_limit = true;
    s.request = portion(0.25);
    s.limit = portion(0.8);
    assert_int_equal(gf_spec_resolve(&s, total, &r, &l, &err), 0);
    assert_int_equal(r, 20ULL << 30);
    assert_int_equal(l, 64ULL << 30);

    s.request = bytes(8ULL << 30);
    s.limit = portion(0.5);
    assert_int_equal(gf_spec_resolve(&s, total, &r, &l, &err), 0);
    assert_int_equal(l, 40ULL << 30);

    s.request = bytes(60ULL << 30);
    assert_int_equal(gf_spec_resolve(&s, total, &r, &l, &err), -1);
    assert_msg_has(err.msg, "limit (40.00 GiB)", "request (60.00 GiB)");

    s.request = bytes(100ULL << 30);
    s.limit = bytes(100ULL << 30);
    assert_int_equal(gf_spec_resolve(&s, total, &r, &l, &err), -1);
    assert_msg_has(err.msg, "request", "100.00 GiB", "80.00 GiB");

    s.has_limit = false;
    s.request = bytes(1ULL << 30);
    assert_int_equal(gf_spec_resolve(&s, total, &r, &l, &err), 0);
    assert_int_equal(l, 1ULL << 30);
}

static void test_devices_count(void **state)
{
    gf_error err;
    static const char *const bad[] = {",", "a,", ",a", "a,,b", "a, b", "a\tb", "GPU-1 "};
    size_t i;

    (void)state;
    assert_int_equal(gf_devices_count(NULL, &err), 0);
    assert_int_equal(gf_devices_count("", &err), 0);
    assert_int_equal(gf_devices_count("0", &err), 1);
    assert_int_equal(gf_devices_count("GPU-6b7f1c2e-aaaa", &err), 1);
    assert_int_equal(gf_devices_count("0,1,2", &err), 3);
    assert_int_equal(gf_devices_count("k8s.device-plugin.nvidia.com/gpu=GPU-a,GPU-b", &err), 2);
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(gf_devices_count(bad[i], &err), -1);
        assert_msg_has(err.msg, "devices", "expected a comma list");
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mode),          cmocka_unit_test(test_finish_defaults),
        cmocka_unit_test(test_finish_checks), cmocka_unit_test(test_resolve),
        cmocka_unit_test(test_devices_count),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
