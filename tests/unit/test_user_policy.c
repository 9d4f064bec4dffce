/* SPDX-License-Identifier: Apache-2.0 */
/* core/policy: the administrator's policy file, parsed and applied. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "quantity.h"
#include "user_policy.h"

static const char policy_text[] = "# the lab box\n"
                                  "[default]\n"
                                  "max-guaranteed = 8Gi   # per GPU\n"
                                  "max-limit = 0.5\n"
                                  "modes = time-slicing\n"
                                  "max-fractions = 2\n"
                                  "\n"
                                  "[group students]\n"
                                  "max-guaranteed = 4Gi\n"
                                  "max-fractions = 1\n"
                                  "[group staff]\n"
                                  "max-fractions = 4\n"
                                  "modes = time-slicing, sm-sharing\n"
                                  "max-compute = 0.5\n"
                                  "[user alice]\n"
                                  "max-guaranteed = 40Gi\n";

static gf_user_policy *parse_ok(const char *text)
{
    gf_user_policy *p = malloc(sizeof(*p));
    gf_error err = {0};
    assert_non_null(p);
    if (gf_user_policy_parse(text, strlen(text), "/etc/gpufrac/policy.conf", p, &err) < 0)
        fail_msg("%s", err.msg);
    return p;
}

static int ask(const gf_user_policy *p, const char *user, const char *const *groups, size_t ng,
               gf_mode mode, int pct, uint64_t req, uint64_t lim, size_t held, gf_error *err)
{
    gf_user_policy_rules r;
    gf_user_policy_device d = {.request = req, .limit = lim, .gpu_total = 80 * GF_GIB};
    gf_user_policy_ask a = {.mode = mode,
                            .compute_percent = pct,
                            .n_devices = 1,
                            .devices = &d,
                            .fractions_held = held};
    gf_user_policy_rules_for(p, user, groups, ng, &r);
    return gf_user_policy_check(p, &r, &a, err);
}

static void test_default_applies_and_names_the_rule(void **state)
{
    (void)state;
    gf_user_policy *p = parse_ok(policy_text);
    gf_error err = {0};

    assert_int_equal(
        ask(p, "bob", NULL, 0, GF_MODE_TIME_SLICING, 100, 8 * GF_GIB, 8 * GF_GIB, 0, &err), 0);
    assert_int_equal(
        ask(p, "bob", NULL, 0, GF_MODE_TIME_SLICING, 100, 9 * GF_GIB, 9 * GF_GIB, 0, &err), -1);
    assert_int_equal(err.code, GF_ERANGE);
    assert_non_null(strstr(err.msg, "policy /etc/gpufrac/policy.conf:3 [default] "
                                    "max-guaranteed = 8Gi"));
    assert_non_null(strstr(err.msg, "--memory 9.00 GiB per GPU asked"));
    /* a portion is of the GPU asked for: 0.5 of 80 GiB */
    assert_int_equal(
        ask(p, "bob", NULL, 0, GF_MODE_TIME_SLICING, 100, GF_GIB, 40 * GF_GIB, 0, &err), 0);
    assert_int_equal(
        ask(p, "bob", NULL, 0, GF_MODE_TIME_SLICING, 100, GF_GIB, 41 * GF_GIB, 0, &err), -1);
    assert_non_null(strstr(err.msg, ":4 [default] max-limit = 0.5"));
    assert_int_equal(ask(p, "bob", NULL, 0, GF_MODE_SM_SHARING, 100, GF_GIB, GF_GIB, 0, &err), -1);
    assert_non_null(strstr(err.msg, ":5 [default] modes = time-slicing: --mode sm-sharing asked"));
    assert_int_equal(ask(p, "bob", NULL, 0, GF_MODE_TIME_SLICING, 100, GF_GIB, GF_GIB, 2, &err),
                     -1);
    assert_non_null(strstr(err.msg, ":6 [default] max-fractions = 2: you hold 2"));
    free(p);
}

static void test_user_beats_group_beats_default(void **state)
{
    (void)state;
    gf_user_policy *p = parse_ok(policy_text);
    const char *student[] = {"users", "students"}, *both[] = {"students", "staff"};
    gf_error err = {0};

    /* students: 4Gi and one fraction */
    assert_int_equal(ask(p, "carol", student, 2, GF_MODE_TIME_SLICING, 100, 5 * GF_GIB, 5 * GF_GIB,
                         0, &err),
                     -1);
    assert_non_null(strstr(err.msg, ":9 [group students] max-guaranteed = 4Gi"));
    assert_int_equal(
        ask(p, "carol", student, 2, GF_MODE_TIME_SLICING, 100, GF_GIB, GF_GIB, 1, &err), -1);
    assert_non_null(strstr(err.msg, "[group students] max-fractions = 1"));
    /* in two groups: the more generous one for each key */
    assert_int_equal(ask(p, "dave", both, 2, GF_MODE_TIME_SLICING, 100, GF_GIB, GF_GIB, 3, &err),
                     0);
    assert_int_equal(ask(p, "dave", both, 2, GF_MODE_SM_SHARING, 50, GF_GIB, GF_GIB, 0, &err), 0);
    assert_int_equal(ask(p, "dave", both, 2, GF_MODE_SM_SHARING, 100, GF_GIB, GF_GIB, 0, &err), -1);
    assert_non_null(strstr(err.msg, "[group staff] max-compute = 0.5: --compute 100% asked"));
    /* alice's own section sets max-guaranteed only; the rest is [default]'s */
    assert_int_equal(ask(p, "alice", student, 2, GF_MODE_TIME_SLICING, 100, 40 * GF_GIB,
                         40 * GF_GIB, 0, &err),
                     0);
    assert_int_equal(ask(p, "alice", student, 2, GF_MODE_TIME_SLICING, 100, 41 * GF_GIB,
                         41 * GF_GIB, 0, &err),
                     -1);
    assert_non_null(strstr(err.msg, "[user alice] max-guaranteed = 40Gi"));
    free(p);
}

/* No rule limits amounts or modes; every user is still bounded in count. */
static void test_empty_policy_bounds_only_the_count(void **state)
{
    (void)state;
    gf_user_policy *p = parse_ok("# nothing here\n\n");
    gf_error err = {0};
    assert_int_equal(ask(p, "bob", NULL, 0, GF_MODE_SM_SHARING, 100, 80 * GF_GIB, 80 * GF_GIB,
                         GF_USER_POLICY_MAX_FRACTIONS_DEFAULT - 1, &err),
                     0);
    assert_int_equal(ask(p, "bob", NULL, 0, GF_MODE_SM_SHARING, 100, 80 * GF_GIB, 80 * GF_GIB,
                         GF_USER_POLICY_MAX_FRACTIONS_DEFAULT, &err),
                     -1);
    assert_non_null(strstr(err.msg, "no max-fractions rule applies to you"));
    assert_non_null(strstr(err.msg, "built-in bound of 32"));
    free(p);
    /* a rule overrides the built-in bound, both ways */
    p = parse_ok("[default]\nmax-fractions = 5000\n");
    assert_int_equal(ask(p, "bob", NULL, 0, GF_MODE_TIME_SLICING, 100, GF_GIB, GF_GIB, 4000, &err),
                     0);
    free(p);
}

static void test_bad_lines_are_named(void **state)
{
    static const struct {
        const char *text, *words;
    } cases[] = {
        {"max-fractions = 1\n", ":1: max-fractions before any section"},
        {"[default]\nmax-memory = 1Gi\n", ":2: unknown key \"max-memory\" (accepted: "},
        {"[default]\nmax-guaranteed = 8GB\n", ":2"},
        {"[default]\nmax-guaranteed 8Gi\n", "is not \"key = value\""},
        {"[default]\nmodes = fast\n", "\"fast\""},
        {"[default]\nmax-compute = 2\n", "max-compute"},
        {"[default]\nmax-fractions = -1\n", "not a whole number"},
        {"[users bob]\n", "[users bob] is not a section"},
        {"[user bad/name]\n", "is not a user or group name"},
        {"[default\n", "is not a section"},
        {"[user a]\n[user a]\n", ":2: this section was already given at line 1"},
        {"[default]\nmax-fractions = 1\nmax-fractions = 2\n", "already set in this section at "
                                                              "line 2"},
        {"[default]\nmax-limit =\n", "needs a value"},
    };
    gf_user_policy *p = malloc(sizeof(*p));
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        gf_error err = {0};
        assert_int_equal(
            gf_user_policy_parse(cases[i].text, strlen(cases[i].text), "p.conf", p, &err), -1);
        if (!strstr(err.msg, cases[i].words) || !strstr(err.msg, "policy p.conf:"))
            fail_msg("case %zu: \"%s\" lacks \"%s\"", i, err.msg, cases[i].words);
    }
    free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_applies_and_names_the_rule),
        cmocka_unit_test(test_user_beats_group_beats_default),
        cmocka_unit_test(test_empty_policy_bounds_only_the_count),
        cmocka_unit_test(test_bad_lines_are_named),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
