/* SPDX-License-Identifier: Apache-2.0 */
/* Replacing a file whole: the new text and mode arrive together, a write
 * that fails (a file-size limit stands in for a full disk) leaves the old
 * file exactly as it was and nothing beside it, and gf_mkdir_p makes every
 * missing directory. */
#include "unit.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "replace.h"

static char dir[] = "/tmp/gf-replace-XXXXXX";

static int setup(void **state)
{
    (void)state;
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    char cmd[64];

    (void)state;
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    return system(cmd);
}

static void path_of(char *out, size_t len, const char *name)
{
    snprintf(out, len, "%s/%s", dir, name);
}

static void read_back(const char *path, char *buf, size_t len)
{
    FILE *f = fopen(path, "r");
    size_t n;

    assert_non_null(f);
    n = fread(buf, 1, len - 1, f);
    buf[n] = '\0';
    fclose(f);
}

static int entries(void)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    int n = 0;

    assert_non_null(d);
    while ((de = readdir(d)))
        n += de->d_name[0] != '.';
    closedir(d);
    return n;
}

static void test_new_and_replaced(void **state)
{
    char path[256], buf[64];
    struct stat st;
    gf_error err = {0};

    (void)state;
    path_of(path, sizeof(path), "a");
    assert_int_equal(gf_file_replace(path, "one\n", 4, 0444, &err), 0);
    read_back(path, buf, sizeof(buf));
    assert_string_equal(buf, "one\n");
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0444);
    /* kept mode: the replaced file's */
    assert_int_equal(gf_file_replace(path, "two\n", 4, GF_REPLACE_KEEP_MODE, &err), 0);
    read_back(path, buf, sizeof(buf));
    assert_string_equal(buf, "two\n");
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0444);
    assert_int_equal(entries(), 1);
    unlink(path);
}

static void test_failed_write_leaves_the_old_file(void **state)
{
    static char big[64 * 1024];
    struct rlimit old, small = {.rlim_cur = 4096, .rlim_max = RLIM_INFINITY};
    char path[256], buf[64];
    gf_error err = {0};
    int rc;

    (void)state;
    memset(big, 'x', sizeof(big));
    path_of(path, sizeof(path), "b");
    assert_int_equal(gf_file_replace(path, "old\n", 4, 0600, &err), 0);
    signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    small.rlim_max = old.rlim_max;
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &small), 0);
    rc = gf_file_replace(path, big, sizeof(big), 0600, &err);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    assert_int_equal(rc, -1);
    assert_msg_has(err.msg, "writing ", path);
    read_back(path, buf, sizeof(buf));
    assert_string_equal(buf, "old\n");
    assert_int_equal(entries(), 1); /* no temporary file left */
    unlink(path);
}

static void test_missing_directory_is_refused(void **state)
{
    gf_error err = {0};
    char path[256];

    (void)state;
    path_of(path, sizeof(path), "missing/c");
    assert_int_equal(gf_file_replace(path, "x", 1, 0644, &err), -1);
    assert_msg_has(err.msg, "creating a file next to ", path);
    assert_int_equal(entries(), 0);
}

static void test_mkdir_p(void **state)
{
    char path[256];
    struct stat st;
    gf_error err = {0};

    (void)state;
    path_of(path, sizeof(path), "d/e/f");
    assert_int_equal(gf_mkdir_p(path, 0700, &err), 0);
    assert_int_equal(stat(path, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(gf_mkdir_p(path, 0700, &err), 0); /* existing is fine */
    path_of(path, sizeof(path), "d/e/f/g");
    assert_int_equal(gf_file_replace(path, "x", 1, 0644, &err), 0);
    /* a file where a directory must go */
    path_of(path, sizeof(path), "d/e/f/g/h");
    assert_int_equal(gf_mkdir_p(path, 0700, &err), -1);
    assert_msg_has(err.msg, "creating ", "/d/e/f/g");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_new_and_replaced),
        cmocka_unit_test(test_failed_write_leaves_the_old_file),
        cmocka_unit_test(test_missing_directory_is_refused),
        cmocka_unit_test(test_mkdir_p),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
