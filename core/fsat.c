/* SPDX-License-Identifier: Apache-2.0 */
/* See fsat.h. */
#include "fsat.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#define AT_FLAGS (O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY)

int gf_at_dir(int dfd, const char *name)
{
    return openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

int gf_at_file(int dfd, const char *name, int flags, struct stat *st)
{
    int fd = openat(dfd, name, (flags & ~O_CREAT) | AT_FLAGS);

    if (fd < 0)
        return -1;
    if (fstat(fd, st) < 0 || !S_ISREG(st->st_mode)) {
        close(fd);
        errno = EINVAL;
        return -1;
    }
    return fd;
}

int gf_at_append(int dfd, const char *name, mode_t mode)
{
    struct stat st;
    int fd = openat(dfd, name, O_WRONLY | O_APPEND | O_CREAT | AT_FLAGS, mode);

    if (fd < 0)
        return -1;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        errno = EINVAL;
        return -1;
    }
    return fd;
}

ssize_t gf_at_read(int dfd, const char *name, char *buf, size_t len)
{
    struct stat st;
    size_t got = 0;
    int fd = gf_at_file(dfd, name, O_RDONLY, &st);

    if (fd < 0)
        return -1;
    while (got < len) {
        ssize_t n = read(fd, buf + got, len - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    return (ssize_t)got;
}

int gf_at_write(int dfd, const char *name, const char *text, mode_t mode, gf_error *err)
{
    size_t len = strlen(text);
    struct stat st;
    int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_TRUNC | AT_FLAGS, mode);

    if (fd < 0)
        return gf_error_sys(err, "creating %s", name);
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return gf_error_set(err, GF_EINVAL, "%s is not a regular file", name);
    }
    if (write(fd, text, len) != (ssize_t)len || fchmod(fd, mode) < 0) {
        gf_error_sys(err, "writing %s", name);
        close(fd);
        return -1;
    }
    close(fd);
    return 0;
}

void gf_at_rmdir(int dfd, const char *name)
{
    int fd = gf_at_dir(dfd, name);
    struct dirent *de;
    DIR *d;

    if (fd >= 0 && (d = fdopendir(fd))) {
        while ((de = readdir(d)))
            if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
                unlinkat(fd, de->d_name, 0);
        closedir(d);
    } else if (fd >= 0) {
        close(fd);
    }
    unlinkat(dfd, name, AT_REMOVEDIR);
}
