/* SPDX-License-Identifier: Apache-2.0 */
/* create/run: a fractional container is admitted by the agent and its spec
 * gets the shim, the fraction's files, the env and the hooks. The real
 * runtime gets the bundle untouched only when it was read completely and no
 * annotation asks a fraction for the container; every other failure refuses
 * the container, leaving nothing at the agent or in the state directory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"

/* Names the container-set variables a fractional container must not pre-set. */
static const char *const owned_env[] = {"NVIDIA_VISIBLE_DEVICES",
                                        "NVIDIA_GPU_MEMORY_REQUEST",
                                        "NVIDIA_GPU_MEMORY_LIMIT",
                                        "CUDA_MPS_PIPE_DIRECTORY",
                                        "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE",
                                        "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT",
                                        NULL};

typedef struct create_ctx {
    const rt_args *a;
    rt_settings *s;
    char path[GF_PATH_MAX + 16]; /* <bundle>/config.json */
    rt_bundle b;
    rt_devices devs;
    rt_admitted adm;
    bool admitted;
} create_ctx;

static uint64_t mib_ceil(uint64_t b)
{
    return (b + (1u << 20) - 1) >> 20;
}

static int set_env_u64(json_t *sp, const char *name, uint64_t v, gf_error *err)
{
    char b[32];
    snprintf(b, sizeof(b), "%llu", (unsigned long long)v);
    return rt_spec_env_set(sp, name, b, err);
}

static int edit_env(create_ctx *c, gf_error *err)
{
    json_t *sp = c->b.spec;
    char pinned[GF_CONFIG_DEVICES_MAX * 32] = "";
    size_t off = 0;

    for (const char *const *n = owned_env; *n; n++)
        if (rt_spec_env_unset(sp, *n, err) < 0)
            return -1;
    if (rt_spec_env_set(sp, "NVIDIA_VISIBLE_DEVICES", c->devs.visible, err) < 0 ||
        set_env_u64(sp, "NVIDIA_GPU_MEMORY_REQUEST", mib_ceil(c->devs.dev[0].request), err) < 0 ||
        set_env_u64(sp, "NVIDIA_GPU_MEMORY_LIMIT", mib_ceil(c->devs.dev[0].limit), err) < 0)
        return -1;
    if (c->b.pf.spec.mode != GF_MODE_SM_SHARING)
        return 0;
    for (size_t i = 0; i < c->devs.n; i++)
        off += (size_t)snprintf(pinned + off, sizeof(pinned) - off, "%s%zu=%lluM", i ? "," : "", i,
                                (unsigned long long)mib_ceil(c->devs.dev[i].limit));
    return rt_spec_env_set(sp, "CUDA_MPS_PIPE_DIRECTORY", c->adm.mps, err) < 0 ||
                   set_env_u64(sp, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE",
                               (uint64_t)(c->b.pf.spec.has_compute
                                              ? gf_compute_percent(c->b.pf.spec.compute)
                                              : 100),
                               err) < 0 ||
                   rt_spec_env_set(sp, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", pinned, err) < 0
               ? -1
               : 0;
}

/* The container's entry: its fraction, and the env edit_env set (for exec). */
static int map_write(create_ctx *c, gf_error *err)
{
    char env[4096];
    size_t off = 0;

    env[0] = '\0';
    for (const char *const *n = owned_env; *n; n++) {
        const char *v = rt_spec_env_get(c->b.spec, *n);
        int w;
        if (!v)
            continue;
        w = snprintf(env + off, sizeof(env) - off, "%s=%s\n", *n, v);
        if (w < 0 || (size_t)w >= sizeof(env) - off)
            return gf_error_set(err, GF_ENOSPACE, "the environment of fraction %s is too long",
                                c->b.id.name);
        off += (size_t)w;
    }
    return rt_map_write(c->s, c->a->id, c->b.id.name, env, err);
}

static int edit_mounts(create_ctx *c, gf_error *err)
{
    char preload[GF_PATH_MAX + 32];
    json_t *sp = c->b.spec;

    if (rt_preload_file(c->s, preload, sizeof(preload), err) < 0 ||
        rt_spec_bind(sp, c->s->shim, RT_SHIM_IN, true, err) < 0 ||
        rt_spec_bind(sp, preload, RT_PRELOAD_IN, true, err) < 0 ||
        rt_spec_bind(sp, c->adm.config, RT_CONFIG_IN, true, err) < 0 ||
        rt_spec_bind(sp, c->adm.ledger, c->adm.ledger, false, err) < 0 ||
        rt_spec_bind(sp, c->adm.socket, c->adm.socket, false, err) < 0)
        return -1;
    if (c->b.pf.spec.mode == GF_MODE_SM_SHARING && c->adm.mps[0])
        return rt_spec_bind(sp, c->adm.mps, c->adm.mps, false, err);
    return 0;
}

static int edit_hooks(create_ctx *c, gf_error *err)
{
    char env[GF_PATH_MAX + 32];
    const char *attach[] = {RT_NAME, "hook", "attach", c->b.id.name, NULL};
    const char *release[] = {RT_NAME, "hook", "release", c->b.id.name, NULL};

    snprintf(env, sizeof(env), "GPUFRAC_STATE_DIR=%s", c->s->state);
    return rt_spec_hook(c->b.spec, "createRuntime", c->s->self, attach, env, err) < 0 ||
                   rt_spec_hook(c->b.spec, "poststop", c->s->self, release, env, err) < 0
               ? -1
               : 0;
}

/* Everything between decoding and handing over; on failure after admit the
 * caller releases the fraction. */
static int admit_and_edit(create_ctx *c, gf_error *err)
{
    char key[512];

    snprintf(key, sizeof(key), GF_NVFRACTIONS_PREFIX "%s.gpus.devices", c->b.id.container);
    if (rt_settings_shim(c->s, err) < 0 ||
        rt_devices_resolve(&c->b.pf, key, rt_spec_env_get(c->b.spec, "NVIDIA_VISIBLE_DEVICES"),
                           &c->devs, err) < 0)
        return -1;
    if (rt_fraction_name(&c->b.id, c->b.engine, c->a->id, c->b.id.name, sizeof(c->b.id.name)) < 0)
        return gf_error_set(err, GF_EINVAL, "no usable fraction name for container %s",
                            c->b.id.container);
    rt_map_prune(c->s);
    if (rt_agent_admit(c->s, &c->b.id, &c->b.pf, &c->devs, &c->adm, err) < 0)
        return gf_error_wrap(err, "admitting fraction %s", c->b.id.name);
    c->admitted = true;
    if (edit_env(c, err) < 0 || map_write(c, err) < 0 || edit_mounts(c, err) < 0 ||
        edit_hooks(c, err) < 0 || rt_spec_save(c->path, c->b.spec, err) < 0)
        return -1;
    return 0;
}

static void undo(create_ctx *c)
{
    gf_error ignored;

    if (!c->admitted)
        return;
    rt_agent_release(c->s, c->b.id.name, &ignored);
    rt_map_remove(c->s, c->a->id);
    c->admitted = false;
}

static int fail(create_ctx *c, gf_error *err)
{
    char msg[GF_ERROR_MSG_MAX + 64];

    undo(c);
    snprintf(msg, sizeof(msg), "container %s: %s", c->b.id.container ? c->b.id.container : "?",
             err->msg);
    rt_report(c->a, "error", msg);
    return 1;
}

static int refuse_bundle(create_ctx *c, const gf_error *err)
{
    char msg[GF_PATH_MAX + GF_ERROR_MSG_MAX + 160];

    snprintf(msg, sizeof(msg),
             "refusing bundle %s: %s; a bundle gpufrac cannot read is never started, since its "
             "fraction could not be enforced",
             c->path, err->msg);
    rt_report(c->a, "error", msg);
    return 1;
}

static int hand_over(create_ctx *c, gf_error *err)
{
    int rc;

    if (strcmp(c->a->verb, "run") == 0) {
        /* run stays in the foreground with the container: exec; poststop or
         * delete releases */
        rt_exec_real(c->s, c->a->argv, err);
        return fail(c, err);
    }
    rc = rt_run_real(c->s, c->a->argv, err);
    if (rc < 0)
        return fail(c, err);
    if (rc != 0)
        undo(c); /* runc said why on its stderr and in its log */
    return rc;
}

/* The bundle untouched: read completely, and nothing in it for gpufrac. */
static int pass(create_ctx *c)
{
    gf_error err = {0};

    rt_bundle_free(&c->b);
    rt_exec_real(c->s, c->a->argv, &err);
    rt_report(c->a, "error", err.msg);
    return 1;
}

static int claim(const void *s, const char *sandbox, const char *container, bool *mine,
                 gf_error *err)
{
    return rt_pod_claim(s, sandbox, container, mine, err);
}

static bool from_podman(const rt_bundle *b)
{
    const char *mgr = rt_spec_annotation(b->spec, "io.container.manager");
    return mgr && strcmp(mgr, "libpod") == 0;
}

int rt_create(const rt_args *a, rt_settings *s)
{
    create_ctx c = {.a = a, .s = s};
    const char *dir = a->bundle && *a->bundle ? a->bundle : "."; /* runc: "" is the cwd */
    rt_bundle_opts o = {.nvfractions = s->nvfractions,
                        .fallback_name = a->id,
                        .claim = claim,
                        .claim_ctx = s,
                        .id = a->id,
                        .bundle_dir = dir};
    gf_error err = {0};
    int rc;

    if ((size_t)snprintf(c.path, sizeof(c.path), "%s/config.json", dir) >= sizeof(c.path)) {
        gf_error_set(&err, GF_ERANGE, "the path is longer than %d bytes", GF_PATH_MAX);
        return refuse_bundle(&c, &err);
    }
    if (rt_bundle_read(c.path, &c.b, &err) < 0)
        return refuse_bundle(&c, &err);
    if (c.b.sandbox && !from_podman(&c.b))
        return pass(&c); /* a pod's pause container (podman's bundles are never one) */
    if (rt_bundle_decode(&c.b, &o, &err) < 0)
        rc = fail(&c, &err);
    else if (!c.b.pf.fractional)
        return pass(&c);
    else
        rc = admit_and_edit(&c, &err) < 0 ? fail(&c, &err) : hand_over(&c, &err);
    rt_bundle_free(&c.b);
    return rc;
}
