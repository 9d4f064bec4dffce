/* SPDX-License-Identifier: Apache-2.0 */
/* See replace.h. */
#include "replace.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "config.h"

int gf_mkdir_p(char *path, mode_t mode, gf_error *err)
{
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char c = *p;
        *p = '\0';
        int rc = mkdir(path, mode);
        int e = errno;
        *p = c;
        if (rc < 0 && e != EEXIST) {
            errno = e;
            return gf_error_sys(err, "creating %.*s", (int)(p - path), path);
        }
        if (c == '\0')
            return 0;
    }
}

static int write_all(int fd, const char *text, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, text, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0)
                errno = ENOSPC;
            return -1;
        }
        text += n;
        len -= (size_t)n;
    }
    return 0;
}

static mode_t mode_for(const char *path, mode_t mode)
{
    struct stat st;

    if (mode != GF_REPLACE_KEEP_MODE)
        return mode;
    return stat(path, &st) == 0 ? (st.st_mode & 07777) : 0644;
}

int gf_file_replace(const char *path, const char *text, size_t len, mode_t mode, gf_error *err)
{
    char tmp[GF_PATH_MAX + 8];
    gf_cleanup_close int fd = -1;

    if (snprintf(tmp, sizeof(tmp), "%s.XXXXXX", path) >= (int)sizeof(tmp))
        return gf_error_set(err, GF_EINVAL, "path too long (over %d bytes): %s", GF_PATH_MAX, path);
    if ((fd = mkostemp(tmp, O_CLOEXEC)) < 0)
        return gf_error_sys(err, "creating a file next to %s", path);
    if (fchmod(fd, mode_for(path, mode)) < 0 || write_all(fd, text, len) < 0 || fsync(fd) < 0 ||
        close(gf_steal_fd(&fd)) < 0) {
        gf_error_sys(err, "writing %s", tmp);
        goto fail;
    }
    if (rename(tmp, path) < 0) {
        gf_error_sys(err, "renaming %s to %s", tmp, path);
        goto fail;
    }
    return 0;
fail:
    unlink(tmp);
    return -1;
}
