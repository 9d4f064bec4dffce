/* SPDX-License-Identifier: Apache-2.0 */
#include "unit.h"

#include <stdio.h>

#include "annotations.h"
#include "quantity.h"

#define P "nvidia.com/container."
#define KAI "kai.scheduler/container."

#define KV(...) \
    ((const gf_kv[]){__VA_ARGS__}), (sizeof((const gf_kv[]){__VA_ARGS__}) / sizeof(gf_kv))

static const char *const pod_containers[] = {"trainer", "trainer-2", "sidecar"};

static gf_annotation_opts opts_for(const char *container)
{
    gf_annotation_opts o = {0};

    o.container = container;
    o.containers = pod_containers;
    o.n_containers = 3;
    o.container_is_first = strcmp(container, "trainer") == 0;
    return o;
}

static gf_pod_fraction dec_ok(const gf_kv *kv, size_t n, const gf_annotation_opts *o)
{
    gf_pod_fraction f;
    gf_error err;

    if (gf_annotations_decode(kv, n, o, &f, &err) < 0)
        fail_msg("refused: %s", err.msg);
    return f;
}

static const char *dec_bad(const gf_kv *kv, size_t n, const gf_annotation_opts *o, gf_error *err)
{
    gf_pod_fraction f;

    if (gf_annotations_decode(kv, n, o, &f, err) == 0)
        fail_msg("accepted (fractional=%d)", f.fractional);
    assert_false(f.fractional);
    return err->msg;
}

static void test_per_container_keys(void **state)
{
    gf_annotation_opts o = opts_for("trainer");
    gf_pod_fraction f;

    (void)state;
    f = dec_ok(KV({P "trainer.gpu-memory.request", "8Gi"}, {P "trainer.gpu-memory.limit", "16Gi"},
                  {P "trainer.gpu-compute.mode", "sm-sharing"},
                  {P "trainer.gpu-compute.portion", "0.25"},
                  {P "trainer.gpus.devices", "GPU-a,GPU-b"}, {"unrelated/key", "x"},
                  {"nvidia.com/gpu.product", "H200"}),
               &o);
    assert_true(f.fractional);
    assert_int_equal(f.spec.request.bytes, 8ULL << 30);
    assert_int_equal(f.spec.limit.bytes, 16ULL << 30);
    assert_int_equal(f.spec.mode, GF_MODE_SM_SHARING);
    assert_true(f.spec.has_compute);
    assert_true(f.spec.compute == 0.25);
    assert_string_equal(f.spec.devices, "GPU-a,GPU-b");
    assert_int_equal(f.num_devices, 2);
}

static void test_defaulting(void **state)
{
    gf_annotation_opts o = opts_for("trainer");
    gf_pod_fraction f;

    (void)state;
    f = dec_ok(KV({P "trainer.gpu-memory.request", "7680Mi"}), &o);
    assert_true(f.fractional);
    assert_true(f.spec.has_limit);
    assert_int_equal(f.spec.limit.bytes, 7680ULL << 20);
    assert_int_equal(f.spec.mode, GF_MODE_TIME_SLICING);
    assert_false(f.spec.has_compute);
    assert_int_equal(f.num_devices, 1);

    /* limit-only pods are fractional */
    f = dec_ok(KV({P "trainer.gpu-memory.limit", "1G"}), &o);
    assert_true(f.fractional);
    assert_int_equal(f.spec.request.bytes, 1000000000);
}

static void test_prefix_trap(void **state)
{
    gf_annotation_opts o = opts_for("trainer");
    gf_pod_fraction f;

    (void)state;
    f = dec_ok(KV({P "trainer-2.gpu-memory.request", "4Gi"}, {P "trainer-2.gpus.devices", "0"}),
               &o);
    assert_false(f.fractional);
    o = opts_for("trainer-2");
    f = dec_ok(KV({P "trainer-2.gpu-memory.request", "4Gi"}, {P "trainer-2.gpus.devices", "0"}),
               &o);
    assert_true(f.fractional);
    assert_int_equal(f.spec.request.bytes, 4ULL << 30);
    o = opts_for("train");
    o.containers = NULL;
    f = dec_ok(KV({P "trainer.gpu-memory.request", "4Gi"}), &o);
    assert_false(f.fractional);
}

static void test_mode_alone(void **state)
{
    gf_annotation_opts o = opts_for("trainer");
    gf_pod_fraction f;

    (void)state;
    f = dec_ok(KV({P "trainer.gpu-compute.mode", "sm-sharing"}), &o);
    assert_false(f.fractional);
    f = dec_ok(NULL, 0, &o);
    assert_false(f.fractional);
    assert_int_equal(f.num_devices, 1);
}

static void test_bad_keys(void **state)
{
    static const char *const keys[] = {
        P "trainer.gpu-memory.requests", P ".gpu-memory.request",          P "trainer",
        P "trainer.gpu-memory",          P "trainer.gpu-memory.request.x", P "trainer.foo",
    };
    gf_annotation_opts o = opts_for("trainer");
    gf_error err;
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        gf_kv kv = {keys[i], "1Gi"};

        assert_msg_has(dec_bad(&kv, 1, &o, &err), "invalid NvFractions annotation key: ", keys[i],
                       ".gpu-memory.request");
    }
}

static void test_unknown_container(void **state)
{
    gf_annotation_opts o = opts_for("trainer");
    gf_error err;

    (void)state;
    assert_string_equal(dec_bad(KV({P "trainer-3.gpu-memory.request", "1Gi"}), &o, &err),
                        "container trainer-3 not found in pod spec, but a fractional annotation "
                        "referencing it was found");
    dec_bad(KV({P "ghost.gpu-compute.mode", "sm-sharing"}), &o, &err);
    assert_msg_has(err.msg, "container ghost not found");
    dec_bad(KV({"gpu-fraction", "0.5"}, {"gpu-fraction-container-name", "ghost"}), &o, &err);
    assert_msg_has(err.msg, "container ghost not found");
    dec_bad(KV({KAI "ghost.gpu-memory.portion.limit", "0.5"}), &o, &err);
    assert_msg_has(err.msg, "container ghost not found");
}

static void test_value_errors(void **state)
{
    static const struct {
        const char *key, *value;
        const char *accepted;
    } cases[] = {
        {P "trainer.gpu-memory.request", "0", "quantity greater than 0"},
        {P "trainer.gpu-memory.request", "0.5", "quantity greater than 0"},
        {P "trainer.gpu-memory.request", "50%", "quantity greater than 0"},
        {P "trainer.gpu-memory.request", "1gb", "quantity greater than 0"},
        {P "trainer.gpu-memory.request", "-1Gi", "quantity greater than 0"},
        {P "trainer.gpu-memory.limit", "500m", "quantity greater than 0"},
        {P "trainer.gpu-memory.limit", "", "quantity greater than 0"},
        {P "trainer.gpu-compute.mode", "mps", "expected time-slicing or sm-sharing"},
        {P "trainer.gpu-compute.mode", "", "expected time-slicing or sm-sharing"},
        {P "trainer.gpu-compute.portion", "50%", "(0,1]"},
        {P "trainer.gpu-compute.portion", "0", "(0,1]"},
        {P "trainer.gpu-compute.portion", "1.5", "(0,1]"},
        {P "trainer.gpus.devices", "GPU-a,,GPU-b", "comma list"},
        {P "trainer.gpus.devices", "", "comma list"},
        {P "sidecar.gpu-memory.request", "lots", "quantity greater than 0"},
        {"gpu-fraction", "1", "positive number smaller than 1.0"},
        {"gpu-fraction", "0", "positive number smaller than 1.0"},
        {"gpu-fraction", "NaN", "positive number smaller than 1.0"},
        {"gpu-fraction", "-0.5", "positive number smaller than 1.0"},
        {"gpu-fraction", "50%", "positive number smaller than 1.0"},
        {"gpu-fraction", "500m", "positive number smaller than 1.0"},
        {"gpu-memory", "2000mb", "positive integer greater than 0"},
        {"gpu-memory", "4Gi", "positive integer greater than 0"},
        {"gpu-memory", "1.5", "positive integer greater than 0"},
        {"gpu-memory", "0", "positive integer greater than 0"},
        {"gpu-memory", "-4096", "positive integer greater than 0"},
        {"gpu-memory", "99999999999999999999", "positive integer greater than 0"},
        {"gpu-fraction-num-devices", "0", "positive integer greater than 0"},
        {"gpu-fraction-num-devices", "two", "positive integer greater than 0"},
        {"gpu-fraction-container-name", "", "container name"},
        {KAI "trainer.gpu-memory.portion.limit", "1", "(0,1) with at most 5 digits"},
        {KAI "trainer.gpu-memory.portion.limit", "0.123456", "(0,1) with at most 5 digits"},
    };
    gf_annotation_opts o = opts_for("trainer");
    gf_error err;
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        gf_kv kv = {cases[i].key, cases[i].value};
        char quoted[64];

        snprintf(quoted, sizeof(quoted), "\"%s\"", cases[i].value);
        dec_bad(&kv, 1, &o, &err);
        assert_msg_has(err.msg, cases[i].key, quoted, cases[i].accepted);
    }
}

static void test_pod_level(void **state)
{
    gf_annotation_opts o = opts_for("trainer");
    gf_pod_fraction f;

    (void)state;
    f = dec_ok(KV({"gpu-fraction", "0.5"}), &o);
    assert_true(f.fractional);
    assert_true(f.spec.request.is_portion);
    assert_true(f.spec.request.portion == 0.5);
    assert_true(f.spec.limit.portion == 0.5);

    f = dec_ok(KV({"gpu-memory", "4096"}, {"gpu-fraction-num-devices", "2"}), &o);
    assert_true(f.fractional);
    assert_int_equal(f.spec.request.bytes, 4ULL << 30);
    assert_int_equal(f.num_devices, 2);

    f = dec_ok(KV({"gpu-fraction", "5e-1"}, {"gpu-fraction.limit", "0.8"}), &o);
    assert_true(f.spec.limit.is_portion);
    assert_true(f.spec.limit.portion == 0.8);

    f = dec_ok(KV({"gpu-memory", "4096"}, {"gpu-memory.limit", "8Gi"}), &o);
    assert_int_equal(f.spec.limit.bytes, 8ULL << 30);

    /* pod-level forms apply to the first container only */
    o = opts_for("sidecar");
    f = dec_ok(KV({"gpu-fraction", "0.5"}), &o);
    assert_false(f.fractional);

    /* ... unless gpu-fraction-container-name says otherwise */
    f = dec_ok(KV({"gpu-fraction", "0.5"}, {"gpu-fraction-container-name", "sidecar"}), &o);
    assert_true(f.fractional);
    o = opts_for("trainer");
    f = dec_ok(KV({"gpu-fraction", "0.5"}, {"gpu-fraction-container-name", "sidecar"}), &o);
    assert_false(f.fractional);
}

static void test_precedence(void **state)
{
    gf_annotation_opts o = opts_for("trainer");
    gf_pod_fraction f;

    (void)state;
    /* the binder fills the request from gpu-fraction: the request key wins */
    f = dec_ok(KV({"gpu-fraction", "0.5"}, {P "trainer.gpu-memory.request", "71578Mi"},
                  {P "trainer.gpus.devices", "GPU-a"}),
               &o);
    assert_false(f.spec.request.is_portion);
    assert_int_equal(f.spec.request.bytes, 71578ULL << 20);

    /* admission translates gpu-memory into the request key: they agree */
    f = dec_ok(KV({"gpu-memory", "8192"}, {P "trainer.gpu-memory.request", "8Gi"}), &o);
    assert_int_equal(f.spec.request.bytes, 8ULL << 30);

    /* the portion limit outranks the shorthand it was translated from, the key outranks both */
    f = dec_ok(KV({"gpu-fraction", "0.25"}, {"gpu-fraction.limit", "0.8"},
                  {KAI "trainer.gpu-memory.portion.limit", "0.80"}),
               &o);
    assert_true(f.spec.limit.portion == 0.8);
    f = dec_ok(KV({"gpu-fraction", "0.25"}, {KAI "trainer.gpu-memory.portion.limit", "0.8"},
                  {P "trainer.gpu-memory.request", "20Gi"}, {P "trainer.gpu-memory.limit", "64Gi"},
                  {P "trainer.gpus.devices", "GPU-a"}),
               &o);
    assert_int_equal(f.spec.request.bytes, 20ULL << 30);
    assert_int_equal(f.spec.limit.bytes, 64ULL << 30);
}

static void test_combination_errors(void **state)
{
    gf_annotation_opts o = opts_for("trainer");
    gf_error err;

    (void)state;
    assert_msg_has(dec_bad(KV({"gpu-fraction", "0.5"}, {"gpu-memory", "4096"}), &o, &err),
                   "cannot request both gpu-fraction and GPU memory request", "0.5", "4096");
    /* a person's pod-level portion beside a container-level request: refused, both named
     * (a binder writes the request only together with gpus.devices) */
    assert_msg_has(
        dec_bad(KV({"gpu-fraction", "0.5"}, {P "trainer.gpu-memory.request", "8Gi"}), &o, &err),
        "cannot combine gpu-fraction", "\"0.5\"", P "trainer.gpu-memory.request", "\"8Gi\"");
    assert_msg_has(dec_bad(KV({"gpu-fraction-num-devices", "2"}), &o, &err),
                   "gpu-fraction-num-devices", "\"2\"", "without specifying fraction details",
                   "gpu-fraction or gpu-memory");
    assert_msg_has(dec_bad(KV({"gpu-fraction.limit", "0.8"}, {"gpu-memory", "100"}), &o, &err),
                   "gpu-fraction.limit", "\"0.8\"", "only be used together with the gpu-fraction");
    assert_msg_has(dec_bad(KV({"gpu-fraction.limit", "0.5"}, {"gpu-fraction", "0.5"}), &o, &err),
                   "gpu-fraction.limit", "\"0.5\"", "must be greater than gpu-fraction");
    assert_msg_has(
        dec_bad(KV({"gpu-fraction.limit", "0.123456"}, {"gpu-fraction", "0.1"}), &o, &err),
        "gpu-fraction.limit", "\"0.123456\"", "at most 5 digits after the decimal point");
    assert_msg_has(dec_bad(KV({"gpu-memory.limit", "8Gi"}), &o, &err), "gpu-memory.limit",
                   "\"8Gi\"", "only be used together with the gpu-memory");
    assert_msg_has(dec_bad(KV({"gpu-memory", "4096"}, {"gpu-memory.limit", "8192"}), &o, &err),
                   "gpu-memory.limit", "\"8192\"", "with a unit");
    assert_msg_has(dec_bad(KV({"gpu-memory", "4096"}, {"gpu-memory.limit", "2Gi"}), &o, &err),
                   "gpu-memory.limit", "\"2Gi\"", "must not be smaller than gpu-memory");
    assert_msg_has(
        dec_bad(KV({"gpu-memory", "4096"}, {P "trainer.gpu-memory.request", "8Gi"}), &o, &err),
        "NvFractions memory request", P "trainer.gpu-memory.request", "\"8Gi\"", "4096 MiB");
    assert_msg_has(dec_bad(KV({"gpu-fraction", "0.5"}, {P "trainer.gpu-memory.limit", "8Gi"}), &o,
                           &err),
                   "cannot combine", P "trainer.gpu-memory.limit", "gpu-fraction");
    assert_msg_has(dec_bad(KV({"gpu-memory", "4096"}, {P "trainer.gpu-memory.limit", "8Gi"}), &o,
                           &err),
                   "cannot combine", "gpu-memory", "gpu-memory.limit");
    assert_msg_has(dec_bad(KV({"gpu-memory", "4096"}, {"gpu-memory.limit", "8Gi"},
                              {P "trainer.gpu-memory.limit", "9Gi"}),
                           &o, &err),
                   "gpu-memory.limit annotation", "conflicts with", P "trainer.gpu-memory.limit");
    assert_msg_has(dec_bad(KV({"gpu-fraction", "0.25"}, {"gpu-fraction.limit", "0.8"},
                              {KAI "trainer.gpu-memory.portion.limit", "0.7"}),
                           &o, &err),
                   "gpu-fraction.limit annotation", "conflicts with",
                   KAI "trainer.gpu-memory.portion.limit");
    assert_msg_has(dec_bad(KV({"gpu-fraction", "0.5"},
                              {KAI "trainer.gpu-memory.portion.limit", "0.5"}),
                           &o, &err),
                   KAI "trainer.gpu-memory.portion.limit", "\"0.5\"", "greater than gpu-fraction");
    assert_msg_has(
        dec_bad(KV({"gpu-fraction", "0.5"}, {KAI "sidecar.gpu-memory.portion.limit", "0.8"}), &o,
                &err),
        KAI "sidecar.gpu-memory.portion.limit", "sidecar", "not the pod's fractional container");
    assert_msg_has(dec_bad(KV({P "trainer.gpu-memory.request", "8Gi"},
                              {P "trainer.gpu-memory.limit", "4Gi"}),
                           &o, &err),
                   "container trainer", "limit (4Gi) is smaller than request (8Gi)",
                   P "trainer.gpu-memory.request");
    assert_msg_has(dec_bad(KV({P "trainer.gpu-memory.request", "8Gi"},
                              {P "trainer.gpu-compute.portion", "0.5"}),
                           &o, &err),
                   P "trainer.gpu-compute.portion", "\"0.5\"", "sm-sharing");
    assert_msg_has(dec_bad(KV({P "trainer.gpu-memory.request", "8Gi"},
                              {P "trainer.gpus.devices", "GPU-a"},
                              {"gpu-fraction-num-devices", "2"}, {"gpu-memory", "8192"}),
                           &o, &err),
                   P "trainer.gpus.devices", "1 devices", "\"2\"");
    assert_msg_has(dec_bad(KV({P "trainer.gpu-memory.request", "8Gi"},
                              {P "trainer.gpu-memory.request", "8Gi"}),
                           &o, &err),
                   "duplicate", P "trainer.gpu-memory.request");
}

static void test_container_agreement(void **state)
{
    gf_annotation_opts o = opts_for("trainer");
    gf_error err;
    gf_pod_fraction f;

    (void)state;
    assert_msg_has(dec_bad(KV({P "trainer.gpu-memory.request", "1Gi"},
                              {P "sidecar.gpu-memory.request", "1Gi"}),
                           &o, &err),
                   "only one container", "trainer", "sidecar");
    o = opts_for("trainer-2");
    assert_msg_has(dec_bad(KV({P "trainer.gpu-memory.request", "1Gi"},
                              {P "sidecar.gpu-memory.request", "1Gi"}),
                           &o, &err),
                   "only one container", "trainer", "sidecar");
    o = opts_for("trainer");
    assert_msg_has(dec_bad(KV({P "sidecar.gpu-memory.request", "1Gi"},
                              {"gpu-fraction-container-name", "trainer"}),
                           &o, &err),
                   "gpu-fraction-container-name annotation value trainer does not match "
                   "container name sidecar");
    o = opts_for("sidecar");
    assert_msg_has(dec_bad(KV({P "sidecar.gpu-memory.request", "1Gi"}, {"gpu-memory", "1024"}), &o,
                           &err),
                   "first container", "sidecar", "gpu-fraction-container-name");
    f = dec_ok(KV({P "sidecar.gpu-memory.request", "1Gi"}, {"gpu-memory", "1024"},
                  {"gpu-fraction-container-name", "sidecar"}),
               &o);
    assert_true(f.fractional);

    /* with extensions, several containers may each have a fraction */
    o.allow_extensions = true;
    f = dec_ok(KV({P "trainer.gpu-memory.request", "1Gi"}, {P "sidecar.gpu-memory.request", "2Gi"}),
               &o);
    assert_true(f.fractional);
    assert_int_equal(f.spec.request.bytes, 2ULL << 30);
}

static void test_extensions(void **state)
{
    gf_annotation_opts o = opts_for("trainer");
    gf_pod_fraction f;
    gf_error err;

    (void)state;
    o.allow_extensions = true;
    f = dec_ok(KV({P "trainer.gpu-memory.request", "25%"}, {P "trainer.gpu-memory.limit", "0.5"}),
               &o);
    assert_true(f.spec.request.is_portion);
    assert_true(f.spec.request.portion == 0.25);
    assert_true(f.spec.limit.portion == 0.5);
    f = dec_ok(KV({P "trainer.gpu-memory.request", "8Gi"}), &o);
    assert_int_equal(f.spec.request.bytes, 8ULL << 30);
    assert_msg_has(dec_bad(KV({P "trainer.gpu-memory.request", "150%"}), &o, &err),
                   P "trainer.gpu-memory.request", "\"150%\"", "expected");
    /* "1" is the whole device with extensions, one byte without */
    f = dec_ok(KV({P "trainer.gpu-memory.request", "1"}), &o);
    assert_true(f.spec.request.is_portion);
    o.allow_extensions = false;
    f = dec_ok(KV({P "trainer.gpu-memory.request", "1"}), &o);
    assert_false(f.spec.request.is_portion);
    assert_int_equal(f.spec.request.bytes, 1);
}

static void test_custom_prefix(void **state)
{
    gf_annotation_opts o = opts_for("trainer");
    gf_pod_fraction f;

    (void)state;
    o.prefix = "example.org/frac.";
    f = dec_ok(KV({"example.org/frac.trainer.gpu-memory.request", "2Gi"},
                  {P "trainer.gpu-memory.request", "ignored-under-another-prefix"}),
               &o);
    assert_true(f.fractional);
    assert_int_equal(f.spec.request.bytes, 2ULL << 30);
}

static void test_long_container_name(void **state)
{
    static const char name35[] = "abcdefghij-abcdefghij-abcdefghij-ab";
    static const char name34[] = "abcdefghij-abcdefghij-abcdefghij-a";
    const char *const names[] = {name35, name34};
    gf_annotation_opts o = {0};
    gf_pod_fraction f;
    gf_error err;
    char key[128];

    (void)state;
    o.containers = names;
    o.n_containers = 2;
    o.container = name35;
    o.container_is_first = true;
    snprintf(key, sizeof(key), P "%s.gpu-memory.request", name35);
    assert_msg_has(dec_bad(KV({key, "1Gi"}), &o, &err), key, name35, "35 characters", "at most 34");
    assert_msg_has(dec_bad(KV({"gpu-memory", "1024"}), &o, &err), name35, "at most 34");

    o.container = name34;
    o.container_is_first = false;
    snprintf(key, sizeof(key), P "%s.gpu-memory.request", name34);
    f = dec_ok(KV({key, "1Gi"}), &o);
    assert_true(f.fractional);
    snprintf(key, sizeof(key), KAI "%s.gpu-memory.portion.limit", name34);
    assert_msg_has(dec_bad(KV({key, "0.5"}), &o, &err), "at most 28");
}

static void test_bad_opts(void **state)
{
    gf_annotation_opts o = {0};
    gf_error err;

    (void)state;
    assert_msg_has(dec_bad(NULL, 0, &o, &err), "container");
    assert_msg_has(dec_bad(NULL, 0, NULL, &err), "container");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_per_container_keys),
        cmocka_unit_test(test_defaulting),
        cmocka_unit_test(test_prefix_trap),
        cmocka_unit_test(test_mode_alone),
        cmocka_unit_test(test_bad_keys),
        cmocka_unit_test(test_unknown_container),
        cmocka_unit_test(test_value_errors),
        cmocka_unit_test(test_pod_level),
        cmocka_unit_test(test_precedence),
        cmocka_unit_test(test_combination_errors),
        cmocka_unit_test(test_container_agreement),
        cmocka_unit_test(test_extensions),
        cmocka_unit_test(test_custom_prefix),
        cmocka_unit_test(test_long_container_name),
        cmocka_unit_test(test_bad_opts),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
