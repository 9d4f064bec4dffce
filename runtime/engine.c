/* SPDX-License-Identifier: Apache-2.0 */
/* Which engine made a bundle, the engine's name for the container, and the
 * request in the container's environment (Docker 20.10 has no annotations).
 * Invariants: a name comes only from the engine's root-owned records of
 * that very container id (never from the spec a user shaped) and is display
 * only, the fraction's name always holding the id; the env form is one more
 * spelling of the per-container annotation keys, decoded by the same code,
 * and never read under Kubernetes, where the pod's annotations are the
 * request the scheduler saw. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "fsat.h"
#include "runtime.h"

#define RECORD_MAX (16u << 20) /* bytes of an engine's record read */

static const struct {
    const char *env, *key;
} env_forms[RT_ENV_FORMS] = {
    {"GPUFRAC_GPU_MEMORY_REQUEST", "gpu-memory.request"},
    {"GPUFRAC_GPU_MEMORY_LIMIT", "gpu-memory.limit"},
    {"GPUFRAC_GPU_COMPUTE_MODE", "gpu-compute.mode"},
    {"GPUFRAC_GPU_COMPUTE_PORTION", "gpu-compute.portion"},
    {"GPUFRAC_GPUS", "gpus.devices"},
};

const char *rt_engine_label(rt_engine e)
{
    switch (e) {
    case RT_ENGINE_CRI: return "k8s";
    case RT_ENGINE_DOCKER: return "docker";
    case RT_ENGINE_PODMAN: return "podman";
    default: return "oci";
    }
}

/* Docker's and Podman's container names: [A-Za-z0-9][A-Za-z0-9_.-]*. */
static bool name_ok(const char *n)
{
    size_t len = strlen(n);

    if (len == 0 || len >= RT_ENV_NAME_MAX || n[0] == '.' || n[0] == '-' || n[0] == '_')
        return false;
    for (; *n; n++)
        if (!((*n >= 'a' && *n <= 'z') || (*n >= 'A' && *n <= 'Z') || (*n >= '0' && *n <= '9') ||
              *n == '_' || *n == '.' || *n == '-'))
            return false;
    return true;
}

/* file in dir, both root's and not writable by others, parsed whole. */
static json_t *read_record(const char *dir, const char *file)
{
    struct stat st;
    gf_cleanup_close int dfd = gf_at_dir(AT_FDCWD, dir);
    gf_cleanup_close int fd = -1;
    gf_cleanup_free char *buf = NULL;
    ssize_t n;

    if (dfd < 0 || fstat(dfd, &st) < 0 || st.st_uid != 0 || (st.st_mode & S_IWOTH))
        return NULL;
    fd = gf_at_file(dfd, file, O_RDONLY, &st);
    if (fd < 0 || st.st_uid != 0 || (st.st_mode & (S_IWOTH | S_IWGRP)) ||
        (unsigned long long)st.st_size > RECORD_MAX || !(buf = malloc((size_t)st.st_size + 1)))
        return NULL;
    n = read(fd, buf, (size_t)st.st_size);
    if (n != st.st_size)
        return NULL;
    return json_loadb(buf, (size_t)n, JSON_REJECT_DUPLICATES, NULL);
}

/* <data-root>/containers/<id>/, where Docker keeps the container's hostname
 * file (the source of its /etc/hostname) and config.v2.json. */
static bool docker_name(json_t *spec, const char *id, char *out, size_t len)
{
    const char *src = rt_spec_mount_source(spec, "/etc/hostname");
    char dir[GF_PATH_MAX], tail[300];
    size_t sl, tl;
    json_t *rec;
    bool ok = false;

    if (!src || !id || strlen(id) > 256)
        return false;
    tl = (size_t)snprintf(tail, sizeof(tail), "/containers/%s/hostname", id);
    sl = strlen(src);
    if (sl <= tl || sl - tl + 32 >= sizeof(dir) || strcmp(src + sl - tl, tail) != 0)
        return false;
    snprintf(dir, sizeof(dir), "%.*s/containers/%s", (int)(sl - tl), src, id);
    if (!(rec = read_record(dir, "config.v2.json")))
        return false;
    const char *rid = json_string_value(json_object_get(rec, "ID"));
    const char *name = json_string_value(json_object_get(rec, "Name"));
    if (rid && strcmp(rid, id) == 0 && name && name[0] == '/' && name_ok(name + 1)) {
        snprintf(out, len, "%s", name + 1);
        ok = true;
    } else if (rid && strcmp(rid, id) == 0) {
        ok = true; /* Docker's, but no usable name: the id stands for it */
    }
    json_decref(rec);
    return ok;
}

/* <graphroot>/<driver>-containers/<id>/userdata is the bundle; the
 * directory above <id> holds containers/storage's containers.json. */
static void podman_name(const char *bundle, const char *id, char *out, size_t len)
{
    char dir[GF_PATH_MAX], tail[300];
    size_t bl, tl;
    json_t *rec, *c;
    size_t i;

    if (!bundle || !id || strlen(id) > 256)
        return;
    tl = (size_t)snprintf(tail, sizeof(tail), "/%s/userdata", id);
    bl = strlen(bundle);
    while (bl > 1 && bundle[bl - 1] == '/')
        bl--;
    if (bl <= tl || bl - tl >= sizeof(dir) || strncmp(bundle + bl - tl, tail, tl) != 0)
        return;
    snprintf(dir, sizeof(dir), "%.*s", (int)(bl - tl), bundle);
    if (!(rec = read_record(dir, "containers.json")))
        return;
    json_array_foreach(rec, i, c)
    {
        const char *cid = json_string_value(json_object_get(c, "id"));
        const char *name = json_string_value(json_array_get(json_object_get(c, "names"), 0));
        if (cid && strcmp(cid, id) == 0 && name && name_ok(name)) {
            snprintf(out, len, "%s", name);
            break;
        }
    }
    json_decref(rec);
}

static const gf_kv *cri_key(const rt_bundle *b)
{
    for (size_t i = 0; i < b->n_kv; i++)
        if (strncmp(b->kv[i].key, "io.kubernetes.cri.", 18) == 0)
            return &b->kv[i];
    return NULL;
}

int rt_engine_detect(rt_bundle *b, const rt_bundle_opts *o, gf_error *err)
{
    const char *mgr = rt_spec_annotation(b->spec, "io.container.manager");
    const gf_kv *cri = cri_key(b);
    char q[GF_QUOTE_MAX];

    b->engine_name[0] = '\0';
    if (mgr && strcmp(mgr, "libpod") == 0) {
        if (cri)
            return gf_error_set(err, GF_EINVAL,
                                "annotation %s is the identity containerd's CRI gives a pod's "
                                "container; a podman container cannot carry it (it would take "
                                "that container's fraction name)",
                                gf_quote(cri->key, q, sizeof(q)));
        b->engine = RT_ENGINE_PODMAN;
        if (o->bundle_dir)
            podman_name(o->bundle_dir, o->id, b->engine_name, sizeof(b->engine_name));
    } else if (cri) {
        b->engine = RT_ENGINE_CRI;
    } else if (o->bundle_dir &&
               docker_name(b->spec, o->id, b->engine_name, sizeof(b->engine_name))) {
        b->engine = RT_ENGINE_DOCKER;
    } else {
        b->engine = RT_ENGINE_OCI;
    }
    if ((b->engine == RT_ENGINE_DOCKER || b->engine == RT_ENGINE_PODMAN) && !b->engine_name[0])
        snprintf(b->engine_name, sizeof(b->engine_name), "%.12s", o->id ? o->id : "");
    return 0;
}

static int form_of(const char *entry, size_t *nlen)
{
    const char *eq = strchr(entry, '=');

    *nlen = eq ? (size_t)(eq - entry) : strlen(entry);
    for (int i = 0; i < RT_ENV_FORMS; i++)
        if (strlen(env_forms[i].env) == *nlen && strncmp(entry, env_forms[i].env, *nlen) == 0)
            return i;
    return -1;
}

static int unknown_env(const char *entry, size_t nlen, gf_error *err)
{
    char q[GF_QUOTE_MAX], name[128];

    snprintf(name, sizeof(name), "%.*s", (int)(nlen < 100 ? nlen : 100), entry);
    return gf_error_set(err, GF_EINVAL,
                        "environment variable %s is not one gpufrac reads (expected "
                        "GPUFRAC_GPU_MEMORY_REQUEST, GPUFRAC_GPU_MEMORY_LIMIT, "
                        "GPUFRAC_GPU_COMPUTE_MODE, GPUFRAC_GPU_COMPUTE_PORTION or GPUFRAC_GPUS)",
                        gf_quote(name, q, sizeof(q)));
}

/* Whether any annotation asks for a fraction: a key gpufrac decodes. */
static const gf_kv *asking_annotation(const gf_kv *kv, size_t n)
{
    static const char *const pod_level[] = {"gpu-fraction", "gpu-memory",
                                            "gpu-fraction-num-devices",
                                            "gpu-fraction-container-name", NULL};

    for (size_t i = 0; i < n; i++) {
        if (strncmp(kv[i].key, GF_NVFRACTIONS_PREFIX, strlen(GF_NVFRACTIONS_PREFIX)) == 0 ||
            strncmp(kv[i].key, GF_KAI_CONTAINER_PREFIX, strlen(GF_KAI_CONTAINER_PREFIX)) == 0)
            return &kv[i];
        for (const char *const *p = pod_level; *p; p++)
            if (strcmp(kv[i].key, *p) == 0)
                return &kv[i];
    }
    return NULL;
}

int rt_engine_env_form(rt_bundle *b, const char *container, gf_kv *kv, size_t n, size_t *added,
                       gf_error *err)
{
    json_t *env = json_object_get(json_object_get(b->spec, "process"), "env"), *e;
    bool seen[RT_ENV_FORMS] = {false};
    const gf_kv *ann;
    char q[GF_QUOTE_MAX];
    size_t i;

    *added = 0;
    json_array_foreach(env, i, e)
    {
        const char *entry = json_string_value(e);
        size_t nlen;
        int f;
        if (!entry || strncmp(entry, RT_ENV_PREFIX, strlen(RT_ENV_PREFIX)) != 0)
            continue;
        if ((f = form_of(entry, &nlen)) < 0)
            return unknown_env(entry, nlen, err);
        if (b->engine == RT_ENGINE_CRI)
            return gf_error_set(err, GF_EINVAL,
                                "environment variable %s is not read in a Kubernetes pod: ask "
                                "with the pod's annotations (%s<container>.%s), which the "
                                "scheduler sees",
                                env_forms[f].env, GF_NVFRACTIONS_PREFIX, env_forms[f].key);
        if (seen[f])
            return gf_error_set(err, GF_EINVAL,
                                "environment variable %s is set twice in the container's "
                                "environment; set it once",
                                env_forms[f].env);
        if (!entry[nlen] || !entry[nlen + 1])
            return gf_error_set(err, GF_EINVAL,
                                "environment variable %s is empty (expected a value as the "
                                "annotation %s<container>.%s takes)",
                                env_forms[f].env, GF_NVFRACTIONS_PREFIX, env_forms[f].key);
        seen[f] = true;
        if (!b->env_keys && !(b->env_keys = calloc(RT_ENV_FORMS, sizeof(*b->env_keys))))
            return gf_error_sys(err, "allocating");
        if ((size_t)snprintf(b->env_keys[f], sizeof(b->env_keys[f]), "%s%s.%s",
                             GF_NVFRACTIONS_PREFIX, container,
                             env_forms[f].key) >= sizeof(b->env_keys[f]))
            return gf_error_set(err, GF_ERANGE,
                                "environment variable %s: the container's name is longer than "
                                "%d bytes",
                                env_forms[f].env, RT_ENV_KEY_MAX - 64);
        kv[n + *added].key = b->env_keys[f];
        kv[n + *added].value = entry + nlen + 1;
        (*added)++;
    }
    if (*added && (ann = asking_annotation(kv, n)))
        return gf_error_set(err, GF_EINVAL,
                            "the container asks for a fraction twice, by annotation %s and by "
                            "the GPUFRAC_GPU_* environment; use one form",
                            gf_quote(ann->key, q, sizeof(q)));
    return 0;
}

/* The message with every occurrence of from replaced by to. */
static void replace_all(char *msg, size_t cap, const char *from, const char *to)
{
    char out[GF_ERROR_MSG_MAX];
    size_t fl = strlen(from), o = 0;

    if (!fl)
        return;
    for (const char *p = msg; *p && o + 1 < sizeof(out);) {
        if (strncmp(p, from, fl) == 0) {
            o += (size_t)snprintf(out + o, sizeof(out) - o, "%s", to);
            p += fl;
        } else {
            out[o++] = *p++;
        }
    }
    out[o < sizeof(out) ? o : sizeof(out) - 1] = '\0';
    snprintf(msg, cap, "%s", out);
}

void rt_engine_env_error(const rt_bundle *b, gf_error *err)
{
    for (int f = 0; b->env_keys && f < RT_ENV_FORMS; f++)
        if (b->env_keys[f][0])
            replace_all(err->msg, sizeof(err->msg), b->env_keys[f], env_forms[f].env);
}
