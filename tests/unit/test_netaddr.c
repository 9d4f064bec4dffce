/* SPDX-License-Identifier: Apache-2.0 */
#include "unit.h"

#include "netaddr.h"

static void split_ok(const char *listen, const char *want_host, const char *want_port)
{
    char host[64], port[16];
    gf_error err;

    if (gf_listen_split(listen, "--listen", "127.0.0.1:8888", host, sizeof(host), port,
                        sizeof(port), &err) < 0)
        fail_msg("\"%s\" refused: %s", listen, err.msg);
    assert_string_equal(host, want_host);
    assert_string_equal(port, want_port);
}

static const char *split_bad(const char *listen, size_t hlen, size_t plen, gf_error *err)
{
    char host[64] = "untouched", port[16] = "untouched";

    assert_true(hlen <= sizeof(host) && plen <= sizeof(port));
    if (gf_listen_split(listen, "metrics address", "127.0.0.1:9464", host, hlen, port, plen, err) ==
        0)
        fail_msg("\"%s\" accepted as %s / %s", listen, host, port);
    assert_int_equal(err->code, GF_EINVAL);
    assert_string_equal(host, "untouched");
    assert_string_equal(port, "untouched");
    return err->msg;
}

static void test_forms(void **state)
{
    (void)state;
    split_ok("127.0.0.1:8888", "127.0.0.1", "8888");
    split_ok("0.0.0.0:0", "0.0.0.0", "0");
    split_ok("node-1.example:9464", "node-1.example", "9464");
    split_ok(":9464", "127.0.0.1", "9464");
    split_ok("[::1]:8888", "::1", "8888");
    split_ok("[::]:1", "::", "1");
    /* the last colon splits: an unbracketed v6 literal keeps the rest */
    split_ok("::1:8888", "::1", "8888");
    /* empty brackets are an empty host: loopback too */
    split_ok("[]:80", "127.0.0.1", "80");
}

static void test_refused(void **state)
{
    gf_error err;
    const char *const bad[] = {"",        "8888",     "host",     "host:", ":",     "host:88a",
                               "host:-1", "host:+80", "host: 80", "[::1]", "[::1]:"};

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_msg_has(split_bad(bad[i], 64, 16, &err), "metrics address", "is not HOST:PORT",
                       "(e.g. 127.0.0.1:9464)");
    assert_msg_has(split_bad("nohost", 64, 16, &err), "\"nohost\"");
}

static void test_too_long(void **state)
{
    gf_error err;

    (void)state;
    /* the host needs its terminator: 9 characters do not fit in 9 bytes */
    split_bad("123456789:80", 9, 16, &err);
    assert_msg_has(err.msg, "metrics address \"123456789:80\" is too long");
    split_ok("12345678:80", "12345678", "80");
    split_bad("[12345678]:80", 8, 16, &err);
    /* so does the port */
    split_bad("h:1234", 64, 4, &err);
    assert_msg_has(err.msg, "is too long");
    /* the loopback default counts too */
    split_bad(":80", 9, 16, &err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forms),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_too_long),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
