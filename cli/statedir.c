/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fraction.h"
#include "replace.h"
#include "statedir.h"

/* A shared /tmp lets anyone create /tmp/gpufrac-<uid> first: only use it
 * when it is our own private directory. */
static int check_private(const char *dir, gf_error *err)
{
    struct stat st;

    if (lstat(dir, &st) < 0)
        return gf_error_sys(err, "state directory %s", dir);
    if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 022))
        return gf_error_set(err, GF_ESTATE,
                            "state directory %s is not a directory owned by uid %u and closed "
                            "to others; remove it or pass --state-dir",
                            dir, (unsigned)geteuid());
    return 0;
}

static int choose(const char *flag, char *out, size_t len, bool *tmp)
{
    const char *env = getenv("GPUFRAC_STATE_DIR");
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    int n;

    *tmp = false;
    if (flag && *flag)
        n = snprintf(out, len, "%s", flag);
    else if (env && *env)
        n = snprintf(out, len, "%s", env);
    else if (access(GF_STATE_DIR_DEFAULT, W_OK) == 0 ||
             (geteuid() == 0 && access("/run", W_OK) == 0) ||
             access(GF_STATE_DIR_DEFAULT "/" GF_STATE_USERS_SOCK, F_OK) == 0)
        n = snprintf(out, len, GF_STATE_DIR_DEFAULT);
    else if (xdg && *xdg == '/' && access(xdg, W_OK) == 0)
        n = snprintf(out, len, "%s/gpufrac", xdg);
    else {
        *tmp = true;
        n = snprintf(out, len, "/tmp/gpufrac-%u", (unsigned)geteuid());
    }
    return n < 0 || (size_t)n >= len ? -1 : 0;
}

int gf_state_dir_given(const char *flag, gf_error *err)
{
    struct stat st;

    if (flag == NULL || *flag == '\0' || strcmp(flag, GF_STATE_DIR_DEFAULT) == 0)
        return 0;
    errno = 0;
    if (stat(flag, &st) == 0) {
        if (S_ISDIR(st.st_mode))
            return 0;
        return gf_error_set(err, GF_EINVAL, "--state-dir: \"%s\" is not a directory", flag);
    }
    if (errno == ENOENT || errno == ENOTDIR)
        return gf_error_set(err, GF_EINVAL,
                            "--state-dir: \"%s\" does not exist (a mistyped path? the agent "
                            "serves " GF_STATE_DIR_DEFAULT ", the default; a directory given "
                            "here must exist)",
                            flag);
    return gf_error_sys(err, "--state-dir: \"%s\"", flag);
}

int gf_state_dir(const char *flag, bool create, char *out, size_t len, gf_error *err)
{
    char fractions[GF_PATH_MAX];
    bool tmp;

    if (!create && gf_state_dir_given(flag, err) < 0)
        return -1;
    if (choose(flag, out, len, &tmp) < 0)
        return gf_error_set(err, GF_EINVAL, "state directory path is too long");
    if (out[0] != '/') {
        char cwd[GF_PATH_MAX], rel[GF_PATH_MAX];
        if (!getcwd(cwd, sizeof(cwd)))
            return gf_error_sys(err, "reading the current directory");
        snprintf(rel, sizeof(rel), "%s", out);
        if (snprintf(out, len, "%s/%s", cwd, rel) >= (int)len)
            return gf_error_set(err, GF_EINVAL, "state directory path is too long");
    }
    if (!create)
        return tmp && access(out, F_OK) == 0 ? check_private(out, err) : 0;
    if (snprintf(fractions, sizeof(fractions), "%s/" GF_STATE_FRACTIONS, out) >=
        (int)sizeof(fractions))
        return gf_error_set(err, GF_EINVAL, "state directory path is too long");
    if (gf_mkdir_p(out, geteuid() == 0 ? 0755 : 0700, err) < 0)
        return -1;
    if (tmp && check_private(out, err) < 0)
        return -1;
    if (mkdir(fractions, geteuid() == 0 ? 0755 : 0700) < 0 && errno != EEXIST)
        return gf_error_sys(err, "creating %s", fractions);
    return 0;
}
