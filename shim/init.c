/* SPDX-License-Identifier: Apache-2.0 */
/* Finding the real driver, the fraction's config and ledger, once. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "quantity.h"
#include "shim.h"

/* A config mounted here (read-only, by the runtime wrapper) wins over the
 * environment: a workload cannot point the shim at another file. */
#define GF_TRUSTED_CONFIG "/etc/gpufrac/fraction.conf"

GF_HIDDEN gf_real gf_cu;
GF_HIDDEN gf_real_nvml gf_nvml;
GF_HIDDEN gf_shim gf_state = {.log_fd = 2, .ledger = {.fd = -1, .slot = -1}};
GF_HIDDEN void *(*gf_real_dlsym)(void *, const char *);

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static pthread_once_t nvml_once = PTHREAD_ONCE_INIT;
GF_HIDDEN _Atomic int gf_init_done;

GF_HIDDEN void gf_log(gf_log_level level, const char *fmt, ...)
{
    va_list ap;
    if (level > gf_state.log_level)
        return;
    va_start(ap, fmt);
    gf_log_vwrite(gf_state.log_fd, level, "shim", fmt, ap);
    va_end(ap);
}

static _Thread_local bool in_init;

GF_HIDDEN bool gf_shim_initialising(void)
{
    return in_init;
}

GF_HIDDEN void gf_find_real_dlsym(void)
{
    if (gf_real_dlsym)
        return;
    gf_real_dlsym = (void *(*)(void *, const char *))dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (!gf_real_dlsym)
        gf_real_dlsym = (void *(*)(void *, const char *))dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
}

static void setup_logging(void)
{
    const char *lvl = getenv("GPUFRAC_LOG");
    const char *file = getenv("GPUFRAC_LOG_FILE");
    if (gf_log_level_parse(lvl, &gf_state.log_level) < 0)
        gf_state.log_level = GF_LOG_OFF; /* silent unless asked */
    if (gf_state.log_level != GF_LOG_OFF && file && *file) {
        int fd = open(file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
        if (fd >= 0)
            gf_state.log_fd = fd;
    }
}

static void resolve_cuda(void)
{
    gf_elf elf;

    gf_state.cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!gf_state.cuda) {
        gf_log(GF_LOG_ERROR, "cannot load libcuda.so.1: %s", dlerror());
        return;
    }
    gf_elf_open(gf_state.cuda, &elf);
#define CU_HOOK(name, base, since, ptsz, ret, params) \
    gf_cu.name = (ret(*) params)gf_elf_lookup(&elf, gf_state.cuda, #name);
#include "hooks.def"
#define X(name, ret, params) gf_cu.name = (ret(*) params)gf_elf_lookup(&elf, gf_state.cuda, #name);
    GF_CU_USED(X)
#undef X
}

static void lower_from_env(void)
{
    const char *s = getenv("GPUFRAC_MEMORY_LIMIT");
    gf_error err;
    uint64_t b;

    gf_state.env_limit = UINT64_MAX;
    if (!s || !*s)
        return;
    if (gf_quantity_parse(s, "GPUFRAC_MEMORY_LIMIT", &b, &err) < 0) {
        gf_log(GF_LOG_WARN, "%s; ignored", err.msg);
        return;
    }
    gf_state.env_limit = b; /* only ever lowers: see gf_ordinal_get */
}

static void child_after_fork(void)
{
    gf_error err;
    if (!gf_state.active)
        return;
    gf_ordinals_hot(false); /* they point into the parent's slot */
    gf_ctx_switched();
    for (const gf_family *const *f = gf_families; *f; f++)
        if ((*f)->after_fork)
            (*f)->after_fork();
    if (gf_ledger_after_fork(&gf_state.ledger, gf_state.cfg.ledger, &err) < 0) {
        gf_log(GF_LOG_ERROR, "%s: allocations in this process will fail", err.msg);
        gf_state.active = false;
        gf_state.env_limit = 0;
        return;
    }
    gf_ordinals_hot(true);
}

static void open_fraction(void)
{
    const char *path = GF_TRUSTED_CONFIG;
    gf_error err;

    if (access(path, F_OK) != 0) {
        path = getenv("GPUFRAC_CONFIG");
        if (!path || !*path) {
            gf_log(GF_LOG_INFO, "no fraction config: passing every call through");
            return;
        }
    }
    snprintf(gf_state.config_path, sizeof(gf_state.config_path), "%s", path);
    if (gf_config_load(path, &gf_state.cfg, &err) < 0 ||
        gf_ledger_open(gf_state.cfg.ledger, &gf_state.ledger, &err) < 0 ||
        gf_ledger_claim_slot(&gf_state.ledger, &err) < 0) {
        /* fail closed: a fraction we cannot count is a fraction of nothing */
        gf_log(GF_LOG_ERROR, "%s: every device allocation will be refused", err.msg);
        gf_state.env_limit = 0;
        gf_state.active = false;
        return;
    }
    gf_state.active = true;
    pthread_atfork(NULL, NULL, child_after_fork);
    gf_log(GF_LOG_INFO, "fraction %s (%s), slot %d", gf_state.cfg.name, path, gf_state.ledger.slot);
}

static void init_once_fn(void)
{
    in_init = true;
    gf_find_real_dlsym();
    setup_logging();
    resolve_cuda();
    lower_from_env();
    open_fraction();
    atomic_store_explicit(&gf_init_done, 1, memory_order_release);
    in_init = false;
}

GF_HIDDEN void gf_shim_init_slow(void)
{
    pthread_once(&init_once, init_once_fn);
}

static void init_nvml_fn(void)
{
    in_init = true;
    /* the program's own copy when it loaded one (matched by name) */
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    if (!h) {
        gf_log(GF_LOG_ERROR, "cannot load libnvidia-ml.so.1: %s", dlerror());
        in_init = false;
        return;
    }
#define NVML_HOOK(name, ret, params) gf_nvml.name = (ret(*) params)gf_real_dlsym(h, #name);
#include "hooks.def"
#define X(name, ret, params) gf_nvml.name = (ret(*) params)gf_real_dlsym(h, #name);
    GF_NVML_USED(X)
#undef X
    in_init = false;
}

GF_HIDDEN void gf_shim_init_nvml(void)
{
    gf_shim_init();
    pthread_once(&nvml_once, init_nvml_fn);
}
