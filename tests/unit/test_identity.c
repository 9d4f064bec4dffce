/* SPDX-License-Identifier: Apache-2.0 */
/* The identity record's parser: the agent's record as written at admission,
 * truncation to the fields' buffers, and the bound on what is read. */
#include "unit.h"

#include "identity.h"

static void test_record(void **state)
{
    const char *t = "namespace=team-a\npod=trainer-0\ncontainer=main\nadmitted=1700000000\n"
                    "termlog=/var/lib/kubelet/pods/u/containers/main/x\nother=1\n";
    gf_identity id;

    (void)state;
    gf_identity_parse(t, strlen(t), &id);
    assert_string_equal(id.ns, "team-a");
    assert_string_equal(id.pod, "trainer-0");
    assert_string_equal(id.container, "main");
    assert_int_equal(id.admitted_at, 1700000000);
    assert_string_equal(id.termlog, "/var/lib/kubelet/pods/u/containers/main/x");
}

static void test_absent_and_relative(void **state)
{
    const char *t = "namespace=\npod=p\n\ntermlog=\ntermlog=rel/x\npod=q";
    gf_identity id;

    (void)state;
    gf_identity_parse(t, strlen(t), &id);
    assert_string_equal(id.ns, "");
    assert_string_equal(id.pod, "q"); /* a later line wins */
    assert_string_equal(id.termlog, "");
    assert_int_equal(id.admitted_at, 0);
}

static void test_bounds(void **state)
{
    char t[GF_IDENTITY_TEXT_MAX + 64];
    gf_identity id;

    (void)state;
    memset(t, 'x', sizeof(t));
    memcpy(t, "namespace=", 10);
    gf_identity_parse(t, 80, &id);
    assert_int_equal(strlen(id.ns), sizeof(id.ns) - 1);
    /* only len bytes are read: "pod=ab" cut to "pod=a" */
    gf_identity_parse("pod=ab", 5, &id);
    assert_string_equal(id.pod, "a");
    /* nothing past GF_IDENTITY_TEXT_MAX bytes, nothing past a NUL */
    memset(t, '\n', sizeof(t));
    memcpy(t + GF_IDENTITY_TEXT_MAX - 5, "pod=late", 8);
    gf_identity_parse(t, sizeof(t), &id);
    assert_string_equal(id.pod, "l");
    gf_identity_parse("pod=a\0\npod=b\n", 13, &id);
    assert_string_equal(id.pod, "a");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_record),
        cmocka_unit_test(test_absent_and_relative),
        cmocka_unit_test(test_bounds),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
