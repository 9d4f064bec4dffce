/* SPDX-License-Identifier: Apache-2.0 */
#include "unit.h"

#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include "log.h"

static void test_error_set(void **state)
{
    gf_error err;

    (void)state;
    assert_int_equal(gf_error_set(&err, GF_EINVAL, "bad %s %d", "thing", 7), -1);
    assert_int_equal(err.code, GF_EINVAL);
    assert_int_equal(err.sys_errno, 0);
    assert_string_equal(err.msg, "bad thing 7");
    assert_int_equal(gf_error_set(NULL, GF_EINVAL, "ignored"), -1);
    gf_error_clear(&err);
    assert_int_equal(err.code, GF_OK);
    assert_string_equal(err.msg, "");
    gf_error_clear(NULL);
}

static void test_error_sys_and_wrap(void **state)
{
    gf_error err;

    (void)state;
    errno = ENOENT;
    assert_int_equal(gf_error_sys(&err, "opening %s", "/x"), -1);
    assert_int_equal(err.code, GF_ESYS);
    assert_int_equal(err.sys_errno, ENOENT);
    assert_int_equal(errno, ENOENT);
    assert_string_equal(err.msg, "opening /x: No such file or directory");
    assert_int_equal(gf_error_wrap(&err, "loading %s", "cfg"), -1);
    assert_string_equal(err.msg, "loading cfg: opening /x: No such file or directory");
    assert_int_equal(err.code, GF_ESYS);
}

static void test_error_truncates(void **state)
{
    char big[2 * GF_ERROR_MSG_MAX];
    gf_error err;

    (void)state;
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    gf_error_set(&err, GF_EINVAL, "%s", big);
    assert_int_equal(strlen(err.msg), GF_ERROR_MSG_MAX - 1);
    gf_error_wrap(&err, "%s", big);
    assert_int_equal(strlen(err.msg), GF_ERROR_MSG_MAX - 1);
}

static void test_quote(void **state)
{
    char buf[GF_QUOTE_MAX], in[200];

    (void)state;
    assert_string_equal(gf_quote("1gb", buf, sizeof(buf)), "1gb");
    assert_string_equal(gf_quote("a\"b\\c\n", buf, sizeof(buf)), "a\\\"b\\\\c\\x0a");
    assert_string_equal(gf_quote(NULL, buf, sizeof(buf)), "");
    memset(in, 'x', sizeof(in) - 1);
    in[sizeof(in) - 1] = '\0';
    gf_quote(in, buf, sizeof(buf));
    assert_int_equal(strlen(buf), GF_QUOTE_INPUT_MAX + 3);
    assert_string_equal(buf + GF_QUOTE_INPUT_MAX, "...");
    gf_quote("abcdef", buf, 4);
    assert_string_equal(buf, "abc");
}

static void test_log_level_parse(void **state)
{
    gf_log_level l;

    (void)state;
    assert_int_equal(gf_log_level_parse(NULL, &l), 0);
    assert_int_equal(l, GF_LOG_OFF);
    assert_int_equal(gf_log_level_parse("", &l), 0);
    assert_int_equal(l, GF_LOG_OFF);
    assert_int_equal(gf_log_level_parse("debug", &l), 0);
    assert_int_equal(l, GF_LOG_DEBUG);
    assert_int_equal(gf_log_level_parse("WARN", &l), 0);
    assert_int_equal(l, GF_LOG_WARN);
    assert_int_equal(gf_log_level_parse("3", &l), 0);
    assert_int_equal(l, GF_LOG_INFO);
    assert_int_equal(gf_log_level_parse("0", &l), 0);
    assert_int_equal(l, GF_LOG_OFF);
    assert_int_equal(gf_log_level_parse("5", &l), -1);
    assert_int_equal(gf_log_level_parse("verbose", &l), -1);
    assert_int_equal(gf_log_level_parse("info ", &l), -1);
}

static size_t read_all(int fd, char *buf, size_t len)
{
    ssize_t n = read(fd, buf, len - 1);

    assert_true(n >= 0);
    buf[n] = '\0';
    return (size_t)n;
}

static void test_log_write(void **state)
{
    char expect[128], buf[4096];
    int fds[2];

    (void)state;
    assert_int_equal(pipe(fds), 0);
    gf_log_write(fds[1], GF_LOG_WARN, "shim", "limit %d%s", 5, "Gi");
    read_all(fds[0], buf, sizeof(buf));
    snprintf(expect, sizeof(expect), "gpufrac[%ld] shim warn: limit 5Gi\n", (long)getpid());
    assert_string_equal(buf, expect);

    gf_log_write(fds[1], GF_LOG_ERROR, "agent", "two\nlines");
    read_all(fds[0], buf, sizeof(buf));
    assert_non_null(strstr(buf, "agent error: two lines\n"));
    assert_int_equal(strchr(buf, '\n') - buf, (long)strlen(buf) - 1);

    gf_log_write(-1, GF_LOG_ERROR, "x", "to nowhere");
    gf_log_write(fds[1], GF_LOG_OFF, "x", "never written");
    gf_log_write(fds[1], GF_LOG_DEBUG, "x", "last");
    read_all(fds[0], buf, sizeof(buf));
    assert_non_null(strstr(buf, "x debug: last\n"));
    assert_null(strstr(buf, "never"));
    close(fds[0]);
    close(fds[1]);
}

/* Below the threshold a line is dropped; at or above it, written. The
 * threshold is back at debug (drop nothing) when the test ends. */
static void test_log_threshold(void **state)
{
    char buf[4096];
    int fds[2];

    (void)state;
    assert_int_equal(gf_log_threshold(), GF_LOG_DEBUG);
    assert_int_equal(pipe(fds), 0);
    gf_log_set_threshold(GF_LOG_WARN);
    gf_log_write(fds[1], GF_LOG_INFO, "agent", "dropped");
    gf_log_write(fds[1], GF_LOG_DEBUG, "agent", "dropped too");
    gf_log_write(fds[1], GF_LOG_WARN, "agent", "kept");
    gf_log_write(fds[1], GF_LOG_ERROR, "agent", "kept too");
    close(fds[1]);
    read_all(fds[0], buf, sizeof(buf));
    assert_null(strstr(buf, "dropped"));
    assert_non_null(strstr(buf, "agent warn: kept\n"));
    assert_non_null(strstr(buf, "agent error: kept too\n"));
    close(fds[0]);

    assert_int_equal(pipe(fds), 0);
    gf_log_set_threshold(GF_LOG_OFF);
    gf_log_write(fds[1], GF_LOG_ERROR, "agent", "off drops errors");
    gf_log_set_threshold(GF_LOG_DEBUG);
    gf_log_write(fds[1], GF_LOG_DEBUG, "agent", "debug passes");
    close(fds[1]);
    read_all(fds[0], buf, sizeof(buf));
    assert_null(strstr(buf, "off drops"));
    assert_non_null(strstr(buf, "agent debug: debug passes\n"));
    close(fds[0]);
}

static void test_log_truncates(void **state)
{
    char big[3000], buf[4096];
    size_t n;
    int fds[2];

    (void)state;
    memset(big, 'z', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    assert_int_equal(pipe(fds), 0);
    gf_log_write(fds[1], GF_LOG_INFO, "cli", "%s", big);
    n = read_all(fds[0], buf, sizeof(buf));
    assert_true(n <= 1024);
    assert_true(n > 1000);
    assert_string_equal(buf + n - 4, "...\n");
    close(fds[0]);
    close(fds[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_error_set),       cmocka_unit_test(test_error_sys_and_wrap),
        cmocka_unit_test(test_error_truncates), cmocka_unit_test(test_quote),
        cmocka_unit_test(test_log_level_parse), cmocka_unit_test(test_log_write),
        cmocka_unit_test(test_log_truncates),   cmocka_unit_test(test_log_threshold),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
