/* SPDX-License-Identifier: Apache-2.0 */
/* A bundle's identity and fraction, from its annotations. A container that
 * any annotation names (rt_bundle_naming_key) is fractional or refused:
 * "not fractional" for it would start it with the whole GPU. */
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "runtime.h"

#define CRI "io.kubernetes.cri."
#define KAI_PLIM ".gpu-memory.portion.limit"

static const char *or_dash(const char *s)
{
    return s && *s ? s : "-";
}

/* <prefix><container>.<rest> */
static bool under(const char *key, const char *prefix, const char *container)
{
    size_t pl = strlen(prefix), cl = strlen(container);

    return strncmp(key, prefix, pl) == 0 && strncmp(key + pl, container, cl) == 0 &&
           key[pl + cl] == '.';
}

const gf_kv *rt_bundle_naming_key(const gf_kv *kv, size_t n, const char *container)
{
    size_t kl = strlen(GF_KAI_CONTAINER_PREFIX) + strlen(container);

    for (size_t i = 0; container && *container && i < n; i++) {
        const char *k = kv[i].key;
        if (under(k, GF_NVFRACTIONS_PREFIX, container) ||
            (under(k, GF_KAI_CONTAINER_PREFIX, container) && strcmp(k + kl, KAI_PLIM) == 0) ||
            (strcmp(k, "gpu-fraction-container-name") == 0 && strcmp(kv[i].value, container) == 0))
            return &kv[i];
    }
    return NULL;
}

static bool has_key(const gf_kv *kv, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(kv[i].key, key) == 0)
            return true;
    return false;
}

static bool has_prefix(const gf_kv *kv, size_t n, const char *prefix)
{
    for (size_t i = 0; i < n; i++)
        if (strncmp(kv[i].key, prefix, strlen(prefix)) == 0)
            return true;
    return false;
}

/* KAI's pod-level forms without gpu-fraction-container-name mean the pod's
 * first container, which CRI does not tell a runtime. When no container has
 * keys of its own either, the first container of the pod to start takes
 * them (kubelet starts them in the pod spec's order); a restart keeps it.
 * The runtime does not know the pod's container order otherwise. */
static int container_is_first(const rt_bundle *b, const rt_bundle_opts *o, bool *first,
                              gf_error *err)
{
    const char *c = b->id.container;

    *first = false;
    for (size_t i = 0; i < b->n_kv && !*first; i++)
        *first = under(b->kv[i].key, GF_NVFRACTIONS_PREFIX, c);
    if (*first || !o->nvfractions || has_key(b->kv, b->n_kv, "gpu-fraction-container-name") ||
        !(has_key(b->kv, b->n_kv, "gpu-fraction") || has_key(b->kv, b->n_kv, "gpu-memory")) ||
        has_prefix(b->kv, b->n_kv, GF_NVFRACTIONS_PREFIX))
        return 0;
    if (!o->claim)
        return gf_error_set(err, GF_ESTATE,
                            "no record of the pod's first container to take "
                            "gpu-fraction / gpu-memory");
    if (o->claim(o->claim_ctx, b->id.sandbox, c, first, err) < 0)
        return gf_error_wrap(err,
                             "gpu-fraction / gpu-memory name no container; telling whether "
                             "%s is the pod's first",
                             c);
    return 0;
}

/* Without NvFractions compatibility only the per-container keys (what
 * gpufrac-scheduler writes) count; KAI's pod-level forms (gpu-fraction,
 * gpu-memory, kai.scheduler/...) are ignored. kv is a copy. */
static size_t only_per_container_keys(gf_kv *kv, size_t n)
{
    size_t kept = 0;

    for (size_t i = 0; i < n; i++)
        if (strncmp(kv[i].key, GF_NVFRACTIONS_PREFIX, strlen(GF_NVFRACTIONS_PREFIX)) == 0)
            kv[kept++] = kv[i];
    return kept;
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

static void identity(rt_bundle *b, const rt_bundle_opts *o)
{
    json_t *sp = b->spec;

    if (b->engine == RT_ENGINE_DOCKER || b->engine == RT_ENGINE_PODMAN) {
        /* one container, no pod: the engine's name, the engine as namespace */
        b->id.container = b->engine_name;
        b->id.ns = rt_engine_label(b->engine);
        b->id.pod = "-";
        b->id.sandbox = NULL;
        b->id.termlog = NULL;
        return;
    }

    b->id.container = rt_spec_annotation(sp, CRI "container-name");
    if (!b->id.container || !*b->id.container)
        b->id.container = o->fallback_name ? o->fallback_name : "";
    b->id.ns = or_dash(rt_spec_annotation(sp, CRI "sandbox-namespace"));
    b->id.pod = or_dash(rt_spec_annotation(sp, CRI "sandbox-name"));
    b->id.sandbox = rt_spec_annotation(sp, CRI "sandbox-id");
    b->id.termlog = termination_log(sp);
}

static int unasked(const rt_bundle *b, const rt_bundle_opts *o, const gf_kv *named, gf_error *err)
{
    char q[GF_QUOTE_MAX];

    return gf_error_set(err, GF_EINVAL,
                        "annotation %s names container %s but asks no GPU memory for it "
                        "(expected %s%s.gpu-memory.request%s); it is not started with the "
                        "whole GPU instead",
                        gf_quote(named->key, q, sizeof(q)), b->id.container, GF_NVFRACTIONS_PREFIX,
                        b->id.container,
                        o->nvfractions ? ", gpu-fraction or gpu-memory"
                                       : "; gpu-fraction and gpu-memory count only with "
                                         "nvfractions=1");
}

/* A docker or podman container is alone: per-container keys name it or
 * ask for no one, which would start it with the whole GPU. */
static int foreign_key(const rt_bundle *b, gf_error *err)
{
    size_t pl = strlen(GF_NVFRACTIONS_PREFIX);
    char q[GF_QUOTE_MAX];

    for (size_t i = 0; i < b->n_kv; i++)
        if (strncmp(b->kv[i].key, GF_NVFRACTIONS_PREFIX, pl) == 0 &&
            !under(b->kv[i].key, GF_NVFRACTIONS_PREFIX, b->id.container))
            return gf_error_set(err, GF_EINVAL,
                                "annotation %s names another container than this %s "
                                "container, %s (expected %s%s.<key>, or gpu-fraction / "
                                "gpu-memory)",
                                gf_quote(b->kv[i].key, q, sizeof(q)), rt_engine_label(b->engine),
                                b->id.container, GF_NVFRACTIONS_PREFIX, b->id.container);
    return 0;
}

static bool alone(const rt_bundle *b)
{
    return b->engine == RT_ENGINE_DOCKER || b->engine == RT_ENGINE_PODMAN;
}

/* The env form's keys name this one container segment: a container's
 * name (or, without one, its id) need not fit Kubernetes' key length. */
#define ENV_CONTAINER "c"

/* The annotations, or the env form's keys in their place (the two forms
 * together are refused); the env form is read by create only. */
static int collect(rt_bundle *b, const rt_bundle_opts *o, gf_kv *kv, size_t *n, bool *env,
                   gf_error *err)
{
    size_t added = 0;

    if (b->n_kv)
        memcpy(kv, b->kv, b->n_kv * sizeof(*kv));
    *n = b->n_kv;
    *env = false;
    if (!o->bundle_dir)
        return 0;
    if (rt_engine_env_form(b, ENV_CONTAINER, kv, *n, &added, err) < 0)
        return -1;
    if (added) {
        memmove(kv, kv + *n, added * sizeof(*kv));
        *n = added;
        *env = true;
    }
    return 0;
}

int rt_bundle_decode(rt_bundle *b, const rt_bundle_opts *o, gf_error *err)
{
    gf_annotation_opts ao = {.prefix = GF_NVFRACTIONS_PREFIX, .allow_extensions = true};
    gf_cleanup_free gf_kv *kv = calloc(b->n_kv + RT_ENV_FORMS + 1, sizeof(*kv));
    const gf_kv *named;
    size_t n = 0;
    bool env;

    memset(&b->pf, 0, sizeof(b->pf));
    if (rt_engine_detect(b, o, err) < 0)
        return -1;
    identity(b, o);
    if (!kv)
        return gf_error_sys(err, "allocating annotations");
    if (collect(b, o, kv, &n, &env, err) < 0 || (alone(b) && foreign_key(b, err) < 0))
        return -1;
    if (!o->nvfractions)
        n = only_per_container_keys(kv, n);
    ao.container = env ? ENV_CONTAINER : b->id.container;
    if (env)
        ao.container_is_first = false;
    else if (alone(b))
        ao.container_is_first = true; /* the pod-level forms are its own */
    else if (container_is_first(b, o, &ao.container_is_first, err) < 0)
        return -1;
    if (gf_annotations_decode(kv, n, &ao, &b->pf, err) < 0) {
        rt_engine_env_error(b, err);
        return -1;
    }
    named = env ? &kv[0] : rt_bundle_naming_key(b->kv, b->n_kv, b->id.container);
    if (!b->pf.fractional && env)
        return gf_error_set(err, GF_EINVAL,
                            "the GPUFRAC_GPU_* environment asks no GPU memory (expected "
                            "GPUFRAC_GPU_MEMORY_REQUEST too); container %s is not started with "
                            "the whole GPU instead",
                            b->id.container);
    if (!b->pf.fractional && named)
        return unasked(b, o, named, err);
    return 0;
}
