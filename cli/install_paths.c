/* SPDX-License-Identifier: Apache-2.0 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "install_paths.h"

/* Set by cli/CMakeLists.txt from the install directories; the REL_ forms are
 * relative to the installed bin directory. */
#ifndef GF_REL_SHIM
#define GF_REL_SHIM "../lib/gpufrac/libgpufrac.so"
#define GF_ABS_SHIM "/usr/local/lib/gpufrac/libgpufrac.so"
#define GF_REL_PROBE "../libexec/gpufrac/gpufrac-probe"
#define GF_ABS_PROBE "/usr/local/libexec/gpufrac/gpufrac-probe"
#define GF_REL_GPUSIM "../lib/gpufrac/gpusim"
#define GF_ABS_GPUSIM "/usr/local/lib/gpufrac/gpusim"
#endif
#ifndef GF_REL_AGENT
#define GF_REL_AGENT "../sbin/gpufracd"
#define GF_ABS_AGENT "/usr/local/sbin/gpufracd"
#endif

/* The first of <exe dir>/<build>, <exe dir>/<rel>, <abs> that passes
 * access(mode); its canonical path goes to out. */
static int find(const char *what, const char *build, const char *rel, const char *abs, int mode,
                const char *hint, char *out, size_t len, gf_error *err)
{
    char dir[PATH_MAX] = "<gpufrac dir>", cand[PATH_MAX + 64], real[PATH_MAX];
    const char *tried[2] = {build, rel};

    if (gf_exe_dir(dir, sizeof(dir), err) == 0)
        for (int i = 0; i < 2; i++) {
            snprintf(cand, sizeof(cand), "%s/%s", dir, tried[i]);
            if (realpath(cand, real) && access(real, mode) == 0) {
                if (snprintf(out, len, "%s", real) >= (int)len)
                    return gf_error_set(err, GF_EINVAL, "path of %s too long: %s", what, real);
                return 0;
            }
        }
    if (access(abs, mode) == 0) {
        snprintf(out, len, "%s", abs);
        return 0;
    }
    return gf_error_set(err, GF_ENOTFOUND, "cannot find %s (looked in %s/%s, %s/%s and %s)%s", what,
                        dir, build, dir, rel, abs, hint);
}

int gf_find_shim(char *out, size_t len, gf_error *err)
{
    const char *env = getenv("GPUFRAC_SHIM");

    if (env && *env) {
        if (access(env, R_OK) < 0)
            return gf_error_sys(err, "GPUFRAC_SHIM=%s", env);
        snprintf(out, len, "%s", env);
        return 0;
    }
    return find("libgpufrac.so", "../lib/libgpufrac.so", GF_REL_SHIM, GF_ABS_SHIM, R_OK,
                "; set GPUFRAC_SHIM to its path", out, len, err);
}

int gf_find_probe(char *out, size_t len, gf_error *err)
{
    return find("gpufrac-probe", "gpufrac-probe", GF_REL_PROBE, GF_ABS_PROBE, X_OK, "", out, len,
                err);
}

int gf_find_agent(char *out, size_t len, gf_error *err)
{
    return find("gpufracd", "gpufracd", GF_REL_AGENT, GF_ABS_AGENT, X_OK, "", out, len, err);
}

int gf_find_gpusim_dir(char *out, size_t len, gf_error *err)
{
    char *slash;

    if (find("the simulated GPU (gpusim)", "../lib/gpusim/libcuda.so.1",
             GF_REL_GPUSIM "/libcuda.so.1", GF_ABS_GPUSIM "/libcuda.so.1", R_OK, "", out, len,
             err) < 0)
        return -1;
    if ((slash = strrchr(out, '/')))
        *slash = '\0';
    return 0;
}
