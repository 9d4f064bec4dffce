/* SPDX-License-Identifier: Apache-2.0 */
#include "unit.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "proto.h"

/* Decodes len bytes copied into an exactly-sized heap block, so ASan sees
 * any read past len. */
static int decode_n(const char *s, size_t len, gf_msg *m, gf_error *err)
{
    char *copy = malloc(len ? len : 1);
    int rc;

    assert_non_null(copy);
    memcpy(copy, s, len);
    rc = gf_msg_decode(copy, len, m, err);
    free(copy);
    return rc;
}

static gf_msg *ok_n(const char *s, size_t len)
{
    static gf_msg m;
    gf_error err;

    if (decode_n(s, len, &m, &err) < 0)
        fail_msg("\"%s\" refused: %s", s, err.msg);
    return &m;
}

static gf_msg *ok(const char *s)
{
    return ok_n(s, strlen(s));
}

static const char *bad_n(const char *s, size_t len, gf_error *err)
{
    gf_msg m;

    if (decode_n(s, len, &m, err) == 0)
        fail_msg("\"%s\" accepted", s);
    assert_int_equal(m.n, 0);
    assert_string_equal(m.verb, "");
    assert_true(err->msg[0] != '\0');
    return err->msg;
}

static const char *bad(const char *s, gf_error *err)
{
    return bad_n(s, strlen(s), err);
}

static void test_requests(void **state)
{
    gf_msg *m;

    (void)state;
    m = ok("gpufrac/1 ping");
    assert_string_equal(m->verb, "ping");
    assert_int_equal(m->n, 0);
    m = ok("gpufrac/1 borrow dev=GPU-1234-abcd bytes=1048576");
    assert_string_equal(m->verb, "borrow");
    assert_int_equal(m->n, 2);
    assert_string_equal(m->kv[0].key, "dev");
    assert_string_equal(m->kv[0].val, "GPU-1234-abcd");
    assert_string_equal(gf_msg_get(m, "bytes"), "1048576");
    assert_null(gf_msg_get(m, "nope"));
    m = ok("gpufrac/1 status");
    assert_string_equal(m->verb, "status");
    m = ok("gpufrac/1 mps_info dev=x");
    assert_string_equal(m->verb, "mps_info");
}

static void test_values(void **state)
{
    gf_msg *m;

    (void)state;
    m = ok("gpufrac/1 ok a= b=x=y c=\xc3\xa9t\xc3\xa9");
    assert_string_equal(gf_msg_get(m, "a"), "");
    assert_string_equal(gf_msg_get(m, "b"), "x=y");
    assert_string_equal(gf_msg_get(m, "c"), "\xc3\xa9t\xc3\xa9");
    m = ok("gpufrac/1 ok _=1 under_score=2");
    assert_string_equal(gf_msg_get(m, "_"), "1");
    assert_string_equal(gf_msg_get(m, "under_score"), "2");
}

static void test_spaces_and_newline(void **state)
{
    gf_msg *m;

    (void)state;
    m = ok("gpufrac/1   borrow   dev=a    bytes=2  ");
    assert_string_equal(m->verb, "borrow");
    assert_int_equal(m->n, 2);
    assert_string_equal(gf_msg_get(m, "bytes"), "2");
    m = ok("gpufrac/1 ping\n");
    assert_string_equal(m->verb, "ping");
    m = ok("gpufrac/1 ok a=1\n");
    assert_string_equal(gf_msg_get(m, "a"), "1");
}

static void test_msg_rest_of_line(void **state)
{
    gf_msg *m;

    (void)state;
    m = ok("gpufrac/1 error msg=device GPU-1 has only 2 GiB free: a=b");
    assert_string_equal(m->verb, "error");
    assert_int_equal(m->n, 1);
    assert_string_equal(gf_msg_get(m, "msg"), "device GPU-1 has only 2 GiB free: a=b");
    m = ok("gpufrac/1 error code=3 msg=  two  spaces \n");
    assert_int_equal(m->n, 2);
    assert_string_equal(gf_msg_get(m, "msg"), "  two  spaces ");
    m = ok("gpufrac/1 error msg=");
    assert_string_equal(gf_msg_get(m, "msg"), "");
    m = ok("gpufrac/1 error msg=x msg=y");
    assert_int_equal(m->n, 1);
    assert_string_equal(gf_msg_get(m, "msg"), "x msg=y");
    m = ok("gpufrac/1 ok msgs=a b=c");
    assert_int_equal(m->n, 2);
    assert_string_equal(gf_msg_get(m, "msgs"), "a");
}

static void test_limits_accepted(void **state)
{
    char buf[GF_PROTO_MAX + 1];
    gf_msg *m;
    int n;

    (void)state;
    /* 31-byte key, 15-byte verb, 511-byte value */
    n = snprintf(buf, sizeof(buf), "gpufrac/1 abcdefghijklmno abcdefghijklmnopqrstuvwxyz_____=");
    memset(buf + n, 'v', GF_PROTO_VAL_MAX - 1);
    m = ok_n(buf, (size_t)n + GF_PROTO_VAL_MAX - 1);
    assert_string_equal(m->verb, "abcdefghijklmno");
    assert_int_equal(strlen(m->kv[0].val), GF_PROTO_VAL_MAX - 1);
    /* 32 pairs, keys aa..bf */
    n = snprintf(buf, sizeof(buf), "gpufrac/1 ok");
    for (int i = 0; i < GF_PROTO_PAIRS; i++)
        n += snprintf(buf + n, sizeof(buf) - (size_t)n, " %c%c=%d", 'a' + i / 26, 'a' + i % 26, i);
    m = ok_n(buf, (size_t)n);
    assert_int_equal(m->n, GF_PROTO_PAIRS);
    /* exactly GF_PROTO_MAX bytes */
    n = snprintf(buf, sizeof(buf), "gpufrac/1 ok");
    memset(buf + n, ' ', GF_PROTO_MAX - (size_t)n);
    m = ok_n(buf, GF_PROTO_MAX);
    assert_string_equal(m->verb, "ok");
}

static void test_empty_and_long(void **state)
{
    static char big[GF_PROTO_MAX + 1];
    gf_error err;
    gf_msg m;

    (void)state;
    assert_int_equal(gf_msg_decode(NULL, 0, &m, &err), -1);
    assert_msg_has(err.msg, "empty request");
    assert_msg_has(bad_n("", 0, &err), "empty request");
    memcpy(big, "gpufrac/1 ping", 14);
    memset(big + 14, ' ', sizeof(big) - 14);
    assert_msg_has(bad_n(big, sizeof(big), &err), "4097 bytes", "longer than the 4096");
    assert_int_equal(err.code, GF_ERANGE);
}

static void test_magic_and_version(void **state)
{
    gf_error err;

    (void)state;
    assert_msg_has(bad("GET / HTTP/1.1", &err), "not a gpufrac request", "\"GET / HTTP/1.1\"");
    assert_int_equal(err.code, GF_EINVAL);
    assert_msg_has(bad("gpufrac", &err), "not a gpufrac request");
    assert_msg_has(bad(" gpufrac/1 ping", &err), "not a gpufrac request");
    assert_msg_has(bad("GPUFRAC/1 ping", &err), "not a gpufrac request");
    assert_msg_has(bad("\x01\x02garbage", &err), "not a gpufrac request", "\\x01\\x02garbage");
    assert_msg_has(bad("gpufrac/2 ping", &err),
                   "protocol version \"2\" is not supported (this agent speaks gpufrac/1)");
    assert_msg_has(bad("gpufrac/10 ping", &err), "protocol version \"10\" is not supported");
    assert_msg_has(bad("gpufrac/1.1 ping", &err), "protocol version \"1.1\"");
    assert_msg_has(bad("gpufrac/ ping", &err), "protocol version \"\" is not supported");
    assert_msg_has(bad("gpufrac/", &err), "protocol version \"\" is not supported");
}

static void test_verb(void **state)
{
    gf_error err;

    (void)state;
    assert_msg_has(bad("gpufrac/1", &err), "no verb");
    assert_msg_has(bad("gpufrac/1   ", &err), "no verb");
    assert_msg_has(bad("gpufrac/1\n", &err), "no verb");
    assert_msg_has(bad("gpufrac/1 Ping", &err), "verb \"Ping\"", "1 to 15", "a-z and _");
    assert_msg_has(bad("gpufrac/1 ping2", &err), "verb \"ping2\"");
    assert_msg_has(bad("gpufrac/1 abcdefghijklmnop", &err), "verb \"abcdefghijklmnop\"");
    assert_msg_has(bad("gpufrac/1 a=b", &err), "verb \"a=b\"");
    assert_msg_has(bad("gpufrac/1 \"q\"", &err), "verb \"\\\"q\\\"\"");
}

static void test_pairs(void **state)
{
    gf_error err;

    (void)state;
    assert_msg_has(bad("gpufrac/1 ok novalue", &err), "pair \"novalue\" has no '='");
    assert_msg_has(bad("gpufrac/1 ok a=1 b", &err), "pair \"b\" has no '='");
    assert_msg_has(bad("gpufrac/1 ok =1", &err), "key \"\" is not 1 to 31", "a-z and _");
    assert_msg_has(bad("gpufrac/1 ok Dev=1", &err), "key \"Dev\"");
    assert_msg_has(bad("gpufrac/1 ok d-v=1", &err), "key \"d-v\"");
    assert_msg_has(bad("gpufrac/1 ok abcdefghijklmnopqrstuvwxyz______=1", &err),
                   "key \"abcdefghijklmnopqrstuvwxyz______\"");
    assert_msg_has(bad("gpufrac/1 ok a=1 b=2 a=3", &err), "key \"a\" appears more than once");
    assert_msg_has(bad("gpufrac/1 ok msg=x\x7f", &err), "control byte 0x7f at offset 18");
}

static void test_too_many_pairs(void **state)
{
    char buf[GF_PROTO_MAX + 1];
    gf_error err;
    int n = snprintf(buf, sizeof(buf), "gpufrac/1 ok");

    (void)state;
    for (int i = 0; i <= GF_PROTO_PAIRS; i++)
        n += snprintf(buf + n, sizeof(buf) - (size_t)n, " %c%c=%d", 'a' + i / 26, 'a' + i % 26, i);
    assert_msg_has(bad_n(buf, (size_t)n, &err), "more than 32 key=value pairs", "\"bg\"");
    assert_int_equal(err.code, GF_ENOSPACE);
}

static void test_long_value(void **state)
{
    char buf[GF_PROTO_MAX + 1];
    gf_error err;
    int n = snprintf(buf, sizeof(buf), "gpufrac/1 ok dev=");

    (void)state;
    memset(buf + n, 'v', GF_PROTO_VAL_MAX);
    assert_msg_has(bad_n(buf, (size_t)n + GF_PROTO_VAL_MAX, &err),
                   "value of key \"dev\" is 512 bytes, longer than the 511 accepted", "vvv...\"");
    assert_int_equal(err.code, GF_ERANGE);
    n = snprintf(buf, sizeof(buf), "gpufrac/1 error msg=");
    memset(buf + n, ' ', GF_PROTO_VAL_MAX);
    assert_msg_has(bad_n(buf, (size_t)n + GF_PROTO_VAL_MAX, &err), "value of key \"msg\" is 512");
}

static void test_control_bytes(void **state)
{
    gf_error err;

    (void)state;
    assert_msg_has(bad("gpufrac/1 ping\tdev=1", &err), "control byte 0x09 at offset 14");
    assert_msg_has(bad("gpufrac/1 ping\n\n", &err), "control byte 0x0a at offset 14");
    assert_msg_has(bad("gpufrac/1 ping\r\n", &err), "control byte 0x0d at offset 14");
    assert_msg_has(bad("gpufrac/1 ping\nx", &err), "control byte 0x0a at offset 14");
    assert_msg_has(bad("gpufrac/1 ok a=\x1b[31m", &err), "control byte 0x1b at offset 15");
    assert_msg_has(bad("gpufrac/1 error msg=a\x01", &err), "control byte 0x01");
    assert_msg_has(bad_n("gpufrac/1 ping\0", 15, &err), "NUL byte at offset 14");
    assert_msg_has(bad_n("gpufrac/1 ok a=\0b", 17, &err), "NUL byte at offset 15");
    assert_int_equal(err.code, GF_EINVAL);
}

static void roundtrip(const gf_msg *m, const char *want)
{
    char buf[GF_PROTO_MAX + 1];
    gf_msg back;
    gf_error err;
    int n = gf_msg_encode(m, buf, sizeof(buf));

    assert_int_equal(n, (int)strlen(want));
    assert_string_equal(buf, want);
    assert_int_equal(gf_msg_decode(buf, (size_t)n, &back, &err), 0);
    assert_string_equal(back.verb, m->verb);
    assert_int_equal(back.n, m->n);
    for (int i = 0; i < m->n; i++) {
        assert_string_equal(back.kv[i].key, m->kv[i].key);
        assert_string_equal(back.kv[i].val, m->kv[i].val);
    }
}

static void test_encode(void **state)
{
    gf_msg m;

    (void)state;
    gf_msg_init(&m, "ping");
    roundtrip(&m, "gpufrac/1 ping");
    gf_msg_init(&m, "borrow");
    assert_int_equal(gf_msg_add(&m, "dev", "GPU-1"), 0);
    assert_int_equal(gf_msg_add_u64(&m, "bytes", UINT64_MAX), 0);
    roundtrip(&m, "gpufrac/1 borrow dev=GPU-1 bytes=18446744073709551615");
    gf_msg_init(&m, "error");
    assert_int_equal(gf_msg_add(&m, "code", "x=y"), 0);
    assert_int_equal(gf_msg_add(&m, "msg", " not enough  memory "), 0);
    roundtrip(&m, "gpufrac/1 error code=x=y msg= not enough  memory ");
    gf_msg_init(&m, "ok");
    assert_int_equal(gf_msg_add(&m, "empty", ""), 0);
    roundtrip(&m, "gpufrac/1 ok empty=");
}

static void test_encode_refusals(void **state)
{
    char buf[GF_PROTO_MAX + 1], small[8];
    char longval[GF_PROTO_VAL_MAX + 1];
    gf_msg m;

    (void)state;
    gf_msg_init(&m, "Bad");
    assert_int_equal(gf_msg_encode(&m, buf, sizeof(buf)), -1);
    gf_msg_init(&m, "");
    assert_int_equal(gf_msg_encode(&m, buf, sizeof(buf)), -1);
    gf_msg_init(&m, "abcdefghijklmnopqrst"); /* truncated to 15 by init */
    assert_int_equal(gf_msg_encode(&m, buf, sizeof(buf)), 25);
    gf_msg_init(&m, "ping");
    assert_int_equal(gf_msg_encode(&m, small, sizeof(small)), -1);
    assert_int_equal(gf_msg_encode(&m, buf, 14), -1); /* no room for the NUL */
    assert_int_equal(gf_msg_encode(&m, buf, 15), 14);
    assert_int_equal(gf_msg_encode(NULL, buf, sizeof(buf)), -1);

    /* what gf_msg_add refuses */
    assert_int_equal(gf_msg_add(&m, "Key", "v"), -1);
    assert_int_equal(gf_msg_add(&m, "", "v"), -1);
    assert_int_equal(gf_msg_add(&m, "abcdefghijklmnopqrstuvwxyz______", "v"), -1);
    assert_int_equal(gf_msg_add(&m, "k", "two words"), -1);
    assert_int_equal(gf_msg_add(&m, "k", "tab\there"), -1);
    assert_int_equal(gf_msg_add(&m, "msg", "line\nbreak"), -1);
    memset(longval, 'v', GF_PROTO_VAL_MAX);
    longval[GF_PROTO_VAL_MAX] = '\0';
    assert_int_equal(gf_msg_add(&m, "k", longval), -1);
    longval[GF_PROTO_VAL_MAX - 1] = '\0';
    assert_int_equal(gf_msg_add(&m, "k", longval), 0);
    assert_int_equal(gf_msg_add(&m, "k", "again"), -1);
    assert_int_equal(m.n, 1);

    /* hand-built messages that would not decode back */
    gf_msg_init(&m, "error");
    assert_int_equal(gf_msg_add(&m, "msg", "x"), 0);
    assert_int_equal(gf_msg_add(&m, "after", "y"), 0);
    assert_int_equal(gf_msg_encode(&m, buf, sizeof(buf)), -1); /* msg not last */
    gf_msg_init(&m, "ok");
    m.n = 1;
    strcpy(m.kv[0].key, "a");
    strcpy(m.kv[0].val, "b c");
    assert_int_equal(gf_msg_encode(&m, buf, sizeof(buf)), -1);
    strcpy(m.kv[0].val, "b\x7f");
    assert_int_equal(gf_msg_encode(&m, buf, sizeof(buf)), -1);
    memset(m.kv[0].val, 'v', sizeof(m.kv[0].val)); /* no NUL */
    assert_int_equal(gf_msg_encode(&m, buf, sizeof(buf)), -1);
    strcpy(m.kv[0].val, "b");
    m.n = 2;
    strcpy(m.kv[1].key, "a");
    strcpy(m.kv[1].val, "c");
    assert_int_equal(gf_msg_encode(&m, buf, sizeof(buf)), -1); /* duplicate */
    m.n = -1;
    assert_int_equal(gf_msg_encode(&m, buf, sizeof(buf)), -1);
    m.n = GF_PROTO_PAIRS + 1;
    assert_int_equal(gf_msg_encode(&m, buf, sizeof(buf)), -1);
}

static void test_encode_too_long(void **state)
{
    static char buf[2 * GF_PROTO_MAX];
    char val[GF_PROTO_VAL_MAX];
    char key[4];
    gf_msg m;

    (void)state;
    memset(val, 'v', sizeof(val) - 1);
    val[sizeof(val) - 1] = '\0';
    gf_msg_init(&m, "ok");
    for (int i = 0; i < 8; i++) {
        snprintf(key, sizeof(key), "k%c", 'a' + i);
        assert_int_equal(gf_msg_add(&m, key, val), 0);
    }
    /* 12 + 8 * (4 + 511) = 4132 bytes: over GF_PROTO_MAX whatever the buffer */
    assert_int_equal(gf_msg_encode(&m, buf, sizeof(buf)), -1);
}

static void test_add_full(void **state)
{
    char key[4];
    gf_msg m;

    (void)state;
    gf_msg_init(&m, "ok");
    for (int i = 0; i < GF_PROTO_PAIRS; i++) {
        snprintf(key, sizeof(key), "%c%c", 'a' + i / 26, 'a' + i % 26);
        assert_int_equal(gf_msg_add_u64(&m, key, (uint64_t)i), 0);
    }
    assert_int_equal(gf_msg_add(&m, "zz", "1"), -1);
    assert_int_equal(m.n, GF_PROTO_PAIRS);
}

static void test_get_u64(void **state)
{
    gf_msg *m;
    gf_error err;
    uint64_t v = 7;

    (void)state;
    m = ok("gpufrac/1 ok a=0 b=18446744073709551615 c=007 d=18446744073709551616 e=-1 f=+1 "
           "g= h=1x i=99999999999999999999x j=1.5 k=0x10");
    assert_int_equal(gf_msg_get_u64(m, "a", &v, &err), 0);
    assert_int_equal(v, 0);
    assert_int_equal(gf_msg_get_u64(m, "b", &v, &err), 0);
    assert_true(v == UINT64_MAX);
    assert_int_equal(gf_msg_get_u64(m, "c", &v, &err), 0);
    assert_int_equal(v, 7);

    v = 42;
    assert_int_equal(gf_msg_get_u64(m, "d", &v, &err), -1);
    assert_msg_has(err.msg, "key \"d\"", "\"18446744073709551616\"",
                   "larger than 18446744073709551615");
    assert_int_equal(err.code, GF_ERANGE);
    assert_int_equal(v, 42);
    const char *const nan[] = {"e", "f", "g", "h", "i", "j", "k"};
    for (size_t i = 0; i < sizeof(nan) / sizeof(nan[0]); i++) {
        char want[16];

        assert_int_equal(gf_msg_get_u64(m, nan[i], &v, &err), -1);
        snprintf(want, sizeof(want), "key \"%s\"", nan[i]);
        assert_msg_has(err.msg, want, "is not an unsigned decimal number");
        assert_int_equal(err.code, GF_EINVAL);
    }
    assert_msg_has(err.msg, "\"0x10\"");
    assert_int_equal(gf_msg_get_u64(m, "bytes", &v, &err), -1);
    assert_msg_has(err.msg, "missing key \"bytes\"");
    assert_int_equal(err.code, GF_ENOTFOUND);
    assert_int_equal(v, 42);
}

static void test_quoting(void **state)
{
    char buf[300];
    gf_error err;
    int n = snprintf(buf, sizeof(buf), "gpufrac/1 ok ");

    (void)state;
    memset(buf + n, 'x', 200);
    assert_msg_has(bad_n(buf, (size_t)n + 200, &err), "has no '='", "xxx...\"");
    assert_true(strlen(err.msg) < 200);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_requests),
        cmocka_unit_test(test_values),
        cmocka_unit_test(test_spaces_and_newline),
        cmocka_unit_test(test_msg_rest_of_line),
        cmocka_unit_test(test_limits_accepted),
        cmocka_unit_test(test_empty_and_long),
        cmocka_unit_test(test_magic_and_version),
        cmocka_unit_test(test_verb),
        cmocka_unit_test(test_pairs),
        cmocka_unit_test(test_too_many_pairs),
        cmocka_unit_test(test_long_value),
        cmocka_unit_test(test_control_bytes),
        cmocka_unit_test(test_encode),
        cmocka_unit_test(test_encode_refusals),
        cmocka_unit_test(test_encode_too_long),
        cmocka_unit_test(test_add_full),
        cmocka_unit_test(test_get_u64),
        cmocka_unit_test(test_quoting),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
