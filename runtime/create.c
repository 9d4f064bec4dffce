/* create/run: a fractional container is admitted by the agent and its spec
 * gets the shim, the fraction's files, the env and the hooks; anything else
 * goes to the real runtime untouched. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"

#define CRI "io.kubernetes.cri."

/* Names the container-set variables a fractional container must not pre-set. */
static const char *const owned_env[] = {
    "NVIDIA_VISIBLE_DEVICES",   "NVIDIA_GPU_MEMORY_REQUEST",         "NVIDIA_GPU_MEMORY_LIMIT",
    "CUDA_MPS_PIPE_DIRECTORY",  "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT",
    NULL};

typedef struct create_ctx {
    const rt_args *a;
    rt_settings *s;
    char path[GF_PATH_MAX + 16]; /* <bundle>/config.json */
    json_t *spec;
    gf_kv *kv;
    size_t n_kv;
    rt_identity id;
    gf_pod_fraction pf;
    rt_devices devs;
    rt_admitted adm;
    bool admitted;
} create_ctx;

static uint64_t mib_ceil(uint64_t b)
{
    return (b + (1u << 20) - 1) >> 20;
}

/* Whether any key under <prefix><container>. exists: only then is this
 * container taken as the pod's fractional one for the pod-level forms
 * (the runtime does not know the pod's container order). */
static bool has_own_keys(const create_ctx *c)
{
    size_t pl = strlen(GF_NVFRACTIONS_PREFIX), cl = strlen(c->id.container);

    for (size_t i = 0; i < c->n_kv; i++) {
        const char *k = c->kv[i].key;
        if (strncmp(k, GF_NVFRACTIONS_PREFIX, pl) == 0 && strncmp(k + pl, c->id.container, cl) == 0 &&
            k[pl + cl] == '.')
            return true;
    }
    return false;
}

static bool has_key(const create_ctx *c, const char *key)
{
    for (size_t i = 0; i < c->n_kv; i++)
        if (strcmp(c->kv[i].key, key) == 0)
            return true;
    return false;
}

/* KAI's pod-level forms without gpu-fraction-container-name mean the pod's
 * first container, which CRI does not tell a runtime. When no container has
 * keys of its own either, the first container of the pod to start takes them
 * (kubelet starts them in the pod spec's order); a restart keeps it. */
static bool takes_pod_level_forms(const create_ctx *c)
{
    size_t pl = strlen(GF_NVFRACTIONS_PREFIX);

    if (!c->s->nvfractions || has_key(c, "gpu-fraction-container-name") ||
        !(has_key(c, "gpu-fraction") || has_key(c, "gpu-memory")))
        return false;
    for (size_t i = 0; i < c->n_kv; i++)
        if (strncmp(c->kv[i].key, GF_NVFRACTIONS_PREFIX, pl) == 0)
            return false;
    return rt_pod_claim(c->s, c->id.sandbox, c->id.container);
}

static const char *or_dash(const char *s)
{
    return s && *s ? s : "-";
}

/* Without NvFractions compatibility only the per-container keys (what
 * gpufrac-scheduler writes) count; KAI's pod-level forms (gpu-fraction,
 * gpu-memory, kai.scheduler/...) are ignored. */
static void only_per_container_keys(create_ctx *c)
{
    size_t n = 0;
    for (size_t i = 0; i < c->n_kv; i++)
        if (strncmp(c->kv[i].key, GF_NVFRACTIONS_PREFIX, strlen(GF_NVFRACTIONS_PREFIX)) == 0)
            c->kv[n++] = c->kv[i];
    c->n_kv = n;
}

/* The host file the kubelet reads the termination message from: the source
 * of the mount at the container's terminationMessagePath (containerd's
 * config.json, root's). The agent writes the reason of a kill there. */
static const char *termination_log(json_t *sp)
{
    const char *dest = rt_spec_annotation(sp, "io.kubernetes.container.terminationMessagePath");
    const char *src = rt_spec_mount_source(sp, dest && *dest ? dest : "/dev/termination-log");

    return src && src[0] == '/' ? src : NULL;
}

static int decode(create_ctx *c, gf_error *err)
{
    gf_annotation_opts o = {.prefix = GF_NVFRACTIONS_PREFIX, .allow_extensions = true};
    json_t *sp = c->spec;

    c->id.container = rt_spec_annotation(sp, CRI "container-name");
    if (!c->id.container || !*c->id.container)
        c->id.container = c->a->id ? c->a->id : "";
    c->id.ns = or_dash(rt_spec_annotation(sp, CRI "sandbox-namespace"));
    c->id.pod = or_dash(rt_spec_annotation(sp, CRI "sandbox-name"));
    c->id.sandbox = rt_spec_annotation(sp, CRI "sandbox-id");
    c->id.termlog = termination_log(sp);
    if (rt_spec_annotations(sp, &c->kv, &c->n_kv, err) < 0)
        return -1;
    if (!c->s->nvfractions)
        only_per_container_keys(c);
    o.container = c->id.container;
    o.container_is_first = has_own_keys(c) || takes_pod_level_forms(c);
    return gf_annotations_decode(c->kv, c->n_kv, &o, &c->pf, err);
}

static int set_env_u64(json_t *sp, const char *name, uint64_t v, gf_error *err)
{
    char b[32];
    snprintf(b, sizeof(b), "%llu", (unsigned long long)v);
    return rt_spec_env_set(sp, name, b, err);
}

static int edit_env(create_ctx *c, gf_error *err)
{
    json_t *sp = c->spec;
    char pinned[GF_CONFIG_DEVICES_MAX * 32] = "";
    size_t off = 0;

    for (const char *const *n = owned_env; *n; n++)
        if (rt_spec_env_unset(sp, *n, err) < 0)
            return -1;
    if (rt_spec_env_set(sp, "NVIDIA_VISIBLE_DEVICES", c->devs.visible, err) < 0 ||
        set_env_u64(sp, "NVIDIA_GPU_MEMORY_REQUEST", mib_ceil(c->devs.dev[0].request), err) < 0 ||
        set_env_u64(sp, "NVIDIA_GPU_MEMORY_LIMIT", mib_ceil(c->devs.dev[0].limit), err) < 0)
        return -1;
    if (c->pf.spec.mode != GF_MODE_SM_SHARING)
        return 0;
    for (size_t i = 0; i < c->devs.n; i++)
        off += (size_t)snprintf(pinned + off, sizeof(pinned) - off, "%s%zu=%lluM", i ? "," : "", i,
                                (unsigned long long)mib_ceil(c->devs.dev[i].limit));
    return rt_spec_env_set(sp, "CUDA_MPS_PIPE_DIRECTORY", c->adm.mps, err) < 0 ||
                   set_env_u64(sp, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE",
                               (uint64_t)(c->pf.spec.has_compute
                                              ? gf_compute_percent(c->pf.spec.compute)
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
        const char *v = rt_spec_env_get(c->spec, *n);
        int w;
        if (!v)
            continue;
        w = snprintf(env + off, sizeof(env) - off, "%s=%s\n", *n, v);
        if (w < 0 || (size_t)w >= sizeof(env) - off)
            return gf_error_set(err, GF_ENOSPACE, "the environment of fraction %s is too long",
                                c->id.name);
        off += (size_t)w;
    }
    return rt_map_write(c->s, c->a->id, c->id.name, env, err);
}

static int edit_mounts(create_ctx *c, gf_error *err)
{
    char preload[GF_PATH_MAX + 32];
    json_t *sp = c->spec;

    if (rt_preload_file(c->s, preload, sizeof(preload), err) < 0 ||
        rt_spec_bind(sp, c->s->shim, RT_SHIM_IN, true, err) < 0 ||
        rt_spec_bind(sp, preload, RT_PRELOAD_IN, true, err) < 0 ||
        rt_spec_bind(sp, c->adm.config, RT_CONFIG_IN, true, err) < 0 ||
        rt_spec_bind(sp, c->adm.ledger, c->adm.ledger, false, err) < 0 ||
        rt_spec_bind(sp, c->adm.socket, c->adm.socket, false, err) < 0)
        return -1;
    if (c->pf.spec.mode == GF_MODE_SM_SHARING && c->adm.mps[0])
        return rt_spec_bind(sp, c->adm.mps, c->adm.mps, false, err);
    return 0;
}

static int edit_hooks(create_ctx *c, gf_error *err)
{
    char env[GF_PATH_MAX + 32];
    const char *attach[] = {RT_NAME, "hook", "attach", c->id.name, NULL};
    const char *release[] = {RT_NAME, "hook", "release", c->id.name, NULL};

    snprintf(env, sizeof(env), "GPUFRAC_STATE_DIR=%s", c->s->state);
    return rt_spec_hook(c->spec, "createRuntime", c->s->self, attach, env, err) < 0 ||
                   rt_spec_hook(c->spec, "poststop", c->s->self, release, env, err) < 0
               ? -1
               : 0;
}

/* Everything between decoding and handing over; on failure after admit the
 * caller releases the fraction. */
static int admit_and_edit(create_ctx *c, gf_error *err)
{
    char key[512];

    snprintf(key, sizeof(key), GF_NVFRACTIONS_PREFIX "%s.gpus.devices", c->id.container);
    if (rt_settings_shim(c->s, err) < 0 ||
        rt_devices_resolve(&c->pf, key, rt_spec_env_get(c->spec, "NVIDIA_VISIBLE_DEVICES"),
                           &c->devs, err) < 0)
        return -1;
    if (rt_fraction_name(c->id.sandbox, c->id.container, c->a->id, c->id.name,
                         sizeof(c->id.name)) < 0)
        return gf_error_set(err, GF_EINVAL, "no usable fraction name for container %s",
                            c->id.container);
    if (rt_agent_admit(c->s, &c->id, &c->pf, &c->devs, &c->adm, err) < 0)
        return gf_error_wrap(err, "admitting fraction %s", c->id.name);
    c->admitted = true;
    if (edit_env(c, err) < 0 || map_write(c, err) < 0 || edit_mounts(c, err) < 0 ||
        edit_hooks(c, err) < 0 || rt_spec_save(c->path, c->spec, err) < 0)
        return -1;
    return 0;
}

static void undo(create_ctx *c)
{
    gf_error ignored;

    if (!c->admitted)
        return;
    rt_agent_release(c->s, c->id.name, &ignored);
    rt_map_remove(c->s, c->a->id);
    c->admitted = false;
}

static int fail(create_ctx *c, gf_error *err)
{
    char msg[GF_ERROR_MSG_MAX + 64];

    undo(c);
    snprintf(msg, sizeof(msg), "container %s: %s", c->id.container ? c->id.container : "?",
             err->msg);
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

int rt_create(const rt_args *a, rt_settings *s)
{
    create_ctx c = {.a = a, .s = s};
    gf_error err = {0};
    const char *type;
    int rc;

    snprintf(c.path, sizeof(c.path), "%s/config.json", a->bundle ? a->bundle : ".");
    if (rt_spec_load(c.path, &c.spec, &err) < 0) {
        rt_exec_real(s, a->argv, &err); /* runc reports the bundle problem itself */
        return fail(&c, &err);
    }
    type = rt_spec_annotation(c.spec, CRI "container-type");
    if (type && strcmp(type, "sandbox") == 0)
        goto pass;
    if (decode(&c, &err) < 0) {
        rc = fail(&c, &err);
        goto out;
    }
    if (!c.pf.fractional)
        goto pass;
    rc = admit_and_edit(&c, &err) < 0 ? fail(&c, &err) : hand_over(&c, &err);
out:
    free(c.kv);
    json_decref(c.spec);
    return rc;
pass:
    free(c.kv);
    json_decref(c.spec);
    rt_exec_real(s, a->argv, &err);
    rt_report(a, "error", err.msg);
    return 1;
}
