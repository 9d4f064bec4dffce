/* SPDX-License-Identifier: Apache-2.0 */
/* A stand-in for a slow name service (an LDAP server that does not answer),
 * for tests only: LD_PRELOADed into the agent, its getpwuid_r appends
 * "enter <uid>" to $GF_SLOW_NSS_LOG, waits until the file
 * $GF_SLOW_NSS_RELEASE exists (at most 60 s), appends "leave <uid>", then
 * answers as the real one. Not a name service: nothing is resolved here. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef int (*getpwuid_r_fn)(uid_t, struct passwd *, char *, size_t, struct passwd **);

static void note(const char *what, uid_t uid)
{
    const char *path = getenv("GF_SLOW_NSS_LOG");
    char line[64];
    int fd, n;

    if (!path || (fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644)) < 0)
        return;
    n = snprintf(line, sizeof(line), "%s %u\n", what, (unsigned)uid);
    if (write(fd, line, (size_t)n) != n)
        n = -1;
    close(fd);
}

static void wait_release(void)
{
    const char *path = getenv("GF_SLOW_NSS_RELEASE");
    struct stat st;

    for (int i = 0; path && i < 6000 && stat(path, &st) < 0; i++)
        usleep(10000);
}

__attribute__((visibility("default"))) int getpwuid_r(uid_t uid, struct passwd *pw, char *buf,
                                                      size_t len, struct passwd **res)
{
    getpwuid_r_fn real;

    *(void **)&real = dlsym(RTLD_NEXT, "getpwuid_r");
    note("enter", uid);
    wait_release();
    note("leave", uid);
    if (!real) {
        *res = NULL;
        return 5; /* EIO */
    }
    return real(uid, pw, buf, len, res);
}
