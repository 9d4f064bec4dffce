/* SPDX-License-Identifier: Apache-2.0 */
/* Where the shim and gpusim are, which platform we run on, the private
 * fraction (ledger + config) and the two child environments. */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"
#include "config.h"
#include "ledger.h"

extern char **environ;

#define ENV_EXTRA 8

bool bench_real_gpu_present(void)
{
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    int (*init)(void), (*count)(unsigned *), (*shutdown)(void);
    unsigned n = 0;
    Dl_info info;
    bool real;

    if (!h)
        return false;
    *(void **)&init = dlsym(h, "nvmlInit_v2");
    *(void **)&count = dlsym(h, "nvmlDeviceGetCount_v2");
    *(void **)&shutdown = dlsym(h, "nvmlShutdown");
    /* a gpusim NVML reached through the caller's LD_LIBRARY_PATH is no GPU */
    real = init && count &&
           !(dladdr((void *)init, &info) && info.dli_fname && strstr(info.dli_fname, "gpusim"));
    if (real && init() == 0) {
        real = count(&n) == 0 && n > 0;
        if (shutdown)
            shutdown();
    } else {
        real = false;
    }
    dlclose(h);
    return real;
}

static int exe_paths(bench_env *e, gf_error *err)
{
    const char *shim = getenv("GPUFRAC_SHIM");
    ssize_t n = readlink("/proc/self/exe", e->exe, sizeof(e->exe) - 1);
    char dir[GF_PATH_MAX];

    if (n < 0)
        return gf_error_sys(err, "readlink /proc/self/exe");
    e->exe[n] = '\0';
    snprintf(dir, sizeof(dir), "%s", e->exe);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    if (shim && *shim)
        snprintf(e->shim, sizeof(e->shim), "%s", shim);
    else
        snprintf(e->shim, sizeof(e->shim), "%.900s/../lib/libgpufrac.so", dir);
    snprintf(e->gpusim_dir, sizeof(e->gpusim_dir), "%.900s/../lib/gpusim", dir);
    if (access(e->shim, R_OK) != 0)
        return gf_error_sys(err, "the shim %s (build it, or set GPUFRAC_SHIM)", e->shim);
    return 0;
}

static int make_tmp(bench_env *e, gf_error *err)
{
    const char *t = getenv("TMPDIR");
    snprintf(e->tmp, sizeof(e->tmp), "%.900s/gpufrac-bench-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(e->tmp)) {
        e->tmp[0] = '\0';
        return gf_error_sys(err, "creating a temporary directory");
    }
    snprintf(e->state, sizeof(e->state), "%.900s/gpusim.state", e->tmp);
    snprintf(e->ledger, sizeof(e->ledger), "%.900s/ledger", e->tmp);
    snprintf(e->config, sizeof(e->config), "%.900s/fraction.conf", e->tmp);
    return 0;
}

/* Variables a side sets itself: inherited values are dropped. */
static bool env_ours(const char *kv, bool sim)
{
    static const char *const always[] = {"LD_PRELOAD=",           "GPUFRAC_CONFIG=",
                                         "GPUFRAC_MEMORY_LIMIT=", "GPUFRAC_LOG=",
                                         "GPUFRAC_LOG_FILE=",     NULL};
    static const char *const simvars[] = {"LD_LIBRARY_PATH=", "GPUSIM_STATE=",
                                          "GPUSIM_CTX_OVERHEAD=", "GPUSIM_FAIL=", NULL};
    for (size_t i = 0; always[i]; i++)
        if (strncmp(kv, always[i], strlen(always[i])) == 0)
            return true;
    for (size_t i = 0; sim && simvars[i]; i++)
        if (strncmp(kv, simvars[i], strlen(simvars[i])) == 0)
            return true;
    return false;
}

static char *env_pair(const char *k, const char *v)
{
    size_t n = strlen(k) + strlen(v) + 2;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, "%s=%s", k, v);
    return s;
}

static int env_build(bench_env *e, bench_side side, gf_error *err)
{
    size_t n = 0, k = 0;
    while (environ[n])
        n++;
    char **env = calloc(n + ENV_EXTRA + 1, sizeof(char *));
    if (!env)
        return gf_error_set(err, GF_ESYS, "out of memory");
    for (size_t i = 0; i < n; i++)
        if (!env_ours(environ[i], e->sim))
            env[k++] = strdup(environ[i]);
    if (e->sim) {
        const char *old = getenv("LD_LIBRARY_PATH");
        char lib[2 * GF_PATH_MAX];
        snprintf(lib, sizeof(lib), "%s%s%s", e->gpusim_dir, old && *old ? ":" : "",
                 old && *old ? old : "");
        env[k++] = env_pair("LD_LIBRARY_PATH", lib);
        env[k++] = env_pair("GPUSIM_STATE", e->state);
        env[k++] = env_pair("GPUSIM_CTX_OVERHEAD", "0");
        if (!getenv("GPUSIM_DEVICES"))
            env[k++] = env_pair("GPUSIM_DEVICES", BENCH_SIM_DEVICE);
    }
    if (side == SIDE_SHIM) {
        env[k++] = env_pair("LD_PRELOAD", e->shim);
        env[k++] = env_pair("GPUFRAC_CONFIG", e->config);
    }
    e->envp[side] = env;
    for (size_t i = 0; i < k; i++)
        if (!env[i])
            return gf_error_set(err, GF_ESYS, "out of memory");
    return 0;
}

int bench_env_init(bench_env *e, bool force_sim, gf_error *err)
{
    memset(e, 0, sizeof(*e));
    if (exe_paths(e, err) < 0)
        return -1;
    e->sim = force_sim || !bench_real_gpu_present();
    if (e->sim && access(e->gpusim_dir, R_OK) != 0)
        return gf_error_sys(err, "no GPU here, and the simulated driver %s is missing",
                            e->gpusim_dir);
    if (make_tmp(e, err) < 0 || env_build(e, SIDE_BASE, err) < 0 ||
        env_build(e, SIDE_SHIM, err) < 0)
        return -1;
    return 0;
}

int bench_env_fraction(bench_env *e, uint64_t limit, gf_error *err)
{
    gf_fraction_config cfg = {.version = GF_CONFIG_VERSION,
                              .mode = GF_MODE_TIME_SLICING,
                              .compute_percent = 100,
                              .n_devices = 1};
    char text[GF_CONFIG_TEXT_MAX];
    FILE *f;

    snprintf(cfg.name, sizeof(cfg.name), "bench");
    snprintf(cfg.ledger, sizeof(cfg.ledger), "%s", e->ledger);
    snprintf(cfg.devices[0].uuid, sizeof(cfg.devices[0].uuid), "*");
    cfg.devices[0].request = limit;
    cfg.devices[0].limit = limit;
    if (gf_ledger_create(e->ledger, cfg.name, 0600, err) < 0)
        return gf_error_wrap(err, "creating the bench fraction's ledger");
    if (gf_config_format(&cfg, text, sizeof(text)) < 0)
        return gf_error_set(err, GF_ENOSPACE, "formatting the bench fraction's config");
    if (!(f = fopen(e->config, "w")))
        return gf_error_sys(err, "writing %s", e->config);
    fputs(text, f);
    if (fclose(f) != 0)
        return gf_error_sys(err, "writing %s", e->config);
    return 0;
}

/* The temporary directory holds only flat files we (or gpusim) made. */
static void remove_files(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    char path[2 * GF_PATH_MAX];
    if (!d)
        return;
    while ((de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
        unlink(path);
    }
    closedir(d);
}

void bench_env_cleanup(bench_env *e)
{
    for (int s = 0; s < 2; s++) {
        for (size_t i = 0; e->envp[s] && e->envp[s][i]; i++)
            free(e->envp[s][i]);
        free(e->envp[s]);
        e->envp[s] = NULL;
    }
    if (!e->tmp[0])
        return;
    remove_files(e->tmp);
    if (rmdir(e->tmp) != 0 && errno != ENOENT)
        fprintf(stderr, "gpufrac-bench: left %s behind: %s\n", e->tmp, strerror(errno));
    e->tmp[0] = '\0';
}
