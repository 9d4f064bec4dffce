/* SPDX-License-Identifier: Apache-2.0 */
/* The cleanup attributes: each releases its object once when the scope ends
 * (a second release would close a reused descriptor, or be a double free
 * AddressSanitizer reports), stolen ones are not released, errno survives. */
#include "unit.h"

#include <fcntl.h>
#include <stdbool.h>

#include "cleanup.h"

static bool fd_open(int fd)
{
    return fcntl(fd, F_GETFD) >= 0;
}

static int open_null(void)
{
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    return fd;
}

static void test_close(void **state)
{
    int seen, reused;

    (void)state;
    {
        gf_cleanup_close int fd = open_null();
        seen = fd;
        assert_true(fd_open(seen));
    }
    assert_false(fd_open(seen));
    /* the number is reused; leaving more scopes never closes it again */
    reused = open_null();
    assert_int_equal(reused, seen);
    {
        gf_cleanup_close int none = -1;
        (void)none;
    }
    assert_true(fd_open(reused));
    close(reused);
}

static int keep_fd(void)
{
    gf_cleanup_close int fd = open_null();
    return gf_steal_fd(&fd);
}

static void test_steal_fd(void **state)
{
    int fd;

    (void)state;
    fd = keep_fd();
    assert_true(fd_open(fd));
    close(fd);
}

static char *keep_str(void)
{
    gf_cleanup_free char *s = strdup("kept");
    gf_cleanup_free char *t = strdup("dropped");
    assert_non_null(s);
    assert_non_null(t);
    return gf_steal_ptr(&s);
}

static void test_free_and_steal(void **state)
{
    char *s;

    (void)state;
    s = keep_str();
    assert_string_equal(s, "kept");
    free(s);
    {
        gf_cleanup_free char *none = NULL;
        (void)none;
    }
}

static void test_dir_and_file(void **state)
{
    DIR *kept;
    int dfd, ffd;

    (void)state;
    {
        gf_cleanup_closedir DIR *d = opendir("/");
        gf_cleanup_fclose FILE *fp = fopen("/dev/null", "re");
        gf_cleanup_closedir DIR *none = NULL;
        gf_cleanup_fclose FILE *nofile = NULL;
        assert_non_null(d);
        assert_non_null(fp);
        (void)none;
        (void)nofile;
        dfd = dirfd(d);
        ffd = fileno(fp);
    }
    assert_false(fd_open(dfd));
    assert_false(fd_open(ffd));
    {
        gf_cleanup_closedir DIR *d = opendir("/");
        assert_non_null(d);
        kept = gf_steal_ptr(&d);
        assert_null(d);
    }
    assert_true(fd_open(dirfd(kept)));
    closedir(kept);
}

static void test_errno_kept(void **state)
{
    (void)state;
    {
        gf_cleanup_close int fd = open_null();
        gf_cleanup_free char *s = strdup("x");
        (void)fd;
        (void)s;
        errno = ENOSPC;
    }
    assert_int_equal(errno, ENOSPC);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_close),          cmocka_unit_test(test_steal_fd),
        cmocka_unit_test(test_free_and_steal), cmocka_unit_test(test_dir_and_file),
        cmocka_unit_test(test_errno_kept),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
