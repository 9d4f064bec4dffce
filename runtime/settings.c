/* SPDX-License-Identifier: Apache-2.0 */
/* Where things are: the real runtime, the agent's state directory and the
 * shim. Each from its environment variable, else /etc/gpufrac/runtime.conf
 * (key=value lines: real_runtime, state_dir, shim, nvfractions), else the default. */
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime.h"
#include "statedir.h"

/* Reads key from the conf file into out; 0 when found. */
static int conf_get(const char *key, char *out, size_t len)
{
    const char *path = getenv("GPUFRAC_RUNTIME_CONF");
    char line[GF_PATH_MAX + 64];
    size_t klen = strlen(key);
    int rc = -1;
    FILE *fp = fopen(path && *path ? path : RT_CONF_FILE, "re");

    if (!fp)
        return -1;
    while (rc < 0 && fgets(line, sizeof(line), fp)) {
        line[strcspn(line, "\r\n")] = '\0';
        if (strncmp(line, key, klen) == 0 && line[klen] == '=' && line[klen + 1]) {
            snprintf(out, len, "%s", line + klen + 1);
            rc = 0;
        }
    }
    fclose(fp);
    return rc;
}

static void pick(const char *env, const char *key, const char *dflt, char *out, size_t len)
{
    const char *e = getenv(env);

    if (e && *e)
        snprintf(out, len, "%s", e);
    else if (conf_get(key, out, len) < 0)
        snprintf(out, len, "%s", dflt);
}

/* A bare name is looked up on PATH, as execvp would. */
static int find_on_path(const char *name, char *out, size_t len)
{
    const char *path = getenv("PATH");
    char dirs[4096], *save = NULL;

    if (strchr(name, '/')) {
        snprintf(out, len, "%s", name);
        return access(out, X_OK);
    }
    snprintf(dirs, sizeof(dirs), "%s",
             path && *path ? path
                           : "/usr/local/sbin:/usr/local/bin:"
                             "/usr/sbin:/usr/bin:/sbin:/bin");
    for (char *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        int n = snprintf(out, len, "%s/%s", d, name);
        if (n > 0 && (size_t)n < len && access(out, X_OK) == 0)
            return 0;
    }
    return -1;
}

static bool same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

/* gpufrac-runtime-<name>: the name of a runtime on PATH ([a-z0-9-]). */
static bool invoked_as(const char *argv0, char *out, size_t len)
{
    const char *base = argv0 ? strrchr(argv0, '/') : NULL;
    const char *tail;

    base = base ? base + 1 : argv0;
    if (!base || strncmp(base, RT_NAME "-", strlen(RT_NAME) + 1) != 0)
        return false;
    tail = base + strlen(RT_NAME) + 1;
    if (!*tail || strlen(tail) >= len ||
        strspn(tail, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(tail))
        return false;
    snprintf(out, len, "%s", tail);
    return true;
}

int rt_settings_real(rt_settings *s, const char *argv0, gf_error *err)
{
    const char *env = getenv("GPUFRAC_REAL_RUNTIME");
    char name[GF_PATH_MAX];

    if ((env && *env) || !invoked_as(argv0, name, sizeof(name)))
        pick("GPUFRAC_REAL_RUNTIME", "real_runtime", "runc", name, sizeof(name));
    if (find_on_path(name, s->real_runtime, sizeof(s->real_runtime)) < 0)
        return gf_error_set(err, GF_ENOTFOUND,
                            "real runtime \"%s\" not found or not executable (set "
                            "GPUFRAC_REAL_RUNTIME or real_runtime= in " RT_CONF_FILE ")",
                            name);
    if (same_file(s->real_runtime, s->self))
        return gf_error_set(err, GF_EINVAL,
                            "real runtime %s is " RT_NAME " itself (set GPUFRAC_REAL_RUNTIME or "
                            "real_runtime= in " RT_CONF_FILE " to runc's path)",
                            s->real_runtime);
    return 0;
}

int rt_settings_load(rt_settings *s, gf_error *err)
{
    ssize_t n;

    memset(s, 0, sizeof(*s));
    n = readlink("/proc/self/exe", s->self, sizeof(s->self) - 1);
    if (n <= 0)
        return gf_error_sys(err, "reading /proc/self/exe");
    s->self[n] = '\0';
    pick("GPUFRAC_STATE_DIR", "state_dir", GF_STATE_DIR_DEFAULT, s->state, sizeof(s->state));
    char nv[8];
    pick("GPUFRAC_NVFRACTIONS", "nvfractions", "1", nv, sizeof(nv));
    s->nvfractions = strcmp(nv, "0") != 0;
    return 0;
}

int rt_settings_shim(rt_settings *s, gf_error *err)
{
    char dir[GF_PATH_MAX];

    pick("GPUFRAC_SHIM", "shim", "", s->shim, sizeof(s->shim));
    if (s->shim[0])
        return access(s->shim, R_OK) == 0 ? 0 : gf_error_sys(err, "shim %s", s->shim);
    snprintf(dir, sizeof(dir), "%s", s->self);
    snprintf(s->shim, sizeof(s->shim), "%s/../lib/libgpufrac.so", dirname(dir));
    if (access(s->shim, R_OK) == 0)
        return 0;
    snprintf(s->shim, sizeof(s->shim), "%s", RT_SHIM_IN);
    if (access(s->shim, R_OK) == 0)
        return 0;
#ifdef GF_ABS_SHIM /* where `make install` / the Debian package put it */
    snprintf(s->shim, sizeof(s->shim), "%s", GF_ABS_SHIM);
    if (access(s->shim, R_OK) == 0)
        return 0;
#endif
    return gf_error_set(
        err, GF_ENOTFOUND,
        "libgpufrac.so not found (looked at GPUFRAC_SHIM, <%s dir>/../lib and " RT_SHIM_IN ")",
        RT_NAME);
}
