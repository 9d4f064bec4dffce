/* SPDX-License-Identifier: Apache-2.0 */
/* The wrapper's own files in the agent's state directory (root's, trusted):
 *   containers/<container id>   the fraction name of a container (for delete),
 *                               then the fraction's env lines (for exec)
 *   pods/<sandbox id>           the container that took a pod's pod-level forms
 *   ld.so.preload               one line: the shim's path inside containers */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "replace.h"
#include "runtime.h"
#include "statedir.h"

static bool id_valid(const char *id)
{
    return id && *id && id[0] != '.' && !strchr(id, '/') && strlen(id) < 256;
}

static int write_atomic(const char *path, const char *text, gf_error *err)
{
    return gf_file_replace(path, text, strlen(text), 0644, err);
}

static int ensure_dir(const char *path, gf_error *err)
{
    if (mkdir(path, 0755) < 0 && errno != EEXIST)
        return gf_error_sys(err, "creating %s", path);
    return 0;
}

int rt_map_write(const rt_settings *s, const char *id, const char *name, const char *env,
                 gf_error *err)
{
    char dir[GF_PATH_MAX + 16], path[GF_PATH_MAX + 300], text[GF_NAME_MAX + 4096];

    if (!id_valid(id))
        return gf_error_set(err, GF_EINVAL, "container id \"%s\" is not usable as a file name",
                            id ? id : "");
    snprintf(dir, sizeof(dir), "%s/" GF_STATE_CONTAINERS, s->state);
    snprintf(path, sizeof(path), "%s/%s", dir, id);
    if ((size_t)snprintf(text, sizeof(text), "%s\n%s", name, env ? env : "") >= sizeof(text))
        return gf_error_set(err, GF_ENOSPACE, "the environment of fraction %s is too long", name);
    if (ensure_dir(s->state, err) < 0 || ensure_dir(dir, err) < 0)
        return -1;
    return write_atomic(path, text, err);
}

int rt_map_read(const rt_settings *s, const char *id, char *name, size_t len)
{
    char path[GF_PATH_MAX + 300];
    FILE *fp;
    int rc = -1;

    if (!id_valid(id))
        return -1;
    snprintf(path, sizeof(path), "%s/" GF_STATE_CONTAINERS "/%s", s->state, id);
    if (!(fp = fopen(path, "re")))
        return -1;
    if (fgets(name, (int)len, fp)) {
        name[strcspn(name, "\n")] = '\0';
        rc = gf_name_valid(name) ? 0 : -1;
    }
    fclose(fp);
    return rc;
}

int rt_map_env(const rt_settings *s, const char *id, char *env, size_t len, bool *found,
               gf_error *err)
{
    char path[GF_PATH_MAX + 300], first[GF_NAME_MAX + 2];
    size_t n;
    FILE *fp;
    int rc = 0;

    *found = false;
    env[0] = '\0';
    if (!id_valid(id))
        return 0; /* create never made an entry for it */
    snprintf(path, sizeof(path), "%s/" GF_STATE_CONTAINERS "/%s", s->state, id);
    if (!(fp = fopen(path, "re")))
        return errno == ENOENT ? 0 : gf_error_sys(err, "reading %s", path);
    *found = true;
    if (!fgets(first, sizeof(first), fp) || !strchr(first, '\n'))
        rc = gf_error_set(err, GF_EINVAL, "%s has no fraction name line", path);
    else if ((n = fread(env, 1, len - 1, fp)) == len - 1 && fgetc(fp) != EOF)
        rc = gf_error_set(err, GF_ENOSPACE, "%s: the environment is longer than %zu bytes", path,
                          len - 1);
    else if (ferror(fp))
        rc = gf_error_sys(err, "reading %s", path);
    else
        env[n] = '\0';
    fclose(fp);
    if (rc < 0)
        env[0] = '\0';
    return rc;
}

static void pod_path(const rt_settings *s, const char *sandbox, char *path, size_t len)
{
    snprintf(path, len, "%s/" GF_STATE_PODS "/%s", s->state, sandbox);
}

/* Makes path hold container, all or nothing: written under a temp name,
 * then linked (which, unlike rename, fails when path exists). 1: it existed. */
static int claim_new(const char *path, const char *container, gf_error *err)
{
    char tmp[GF_PATH_MAX + 340];
    int rc;

    snprintf(tmp, sizeof(tmp), "%s.%ld.tmp", path, (long)getpid());
    if (write_atomic(tmp, container, err) < 0)
        return -1;
    rc = link(tmp, path) == 0 ? 0 : errno == EEXIST ? 1 : gf_error_sys(err, "creating %s", path);
    unlink(tmp);
    return rc;
}

int rt_pod_claim(const rt_settings *s, const char *sandbox, const char *container, bool *mine,
                 gf_error *err)
{
    char dir[GF_PATH_MAX + 16], path[GF_PATH_MAX + 300], have[256] = "";
    ssize_t n;
    int fd, rc;

    *mine = false;
    if (!id_valid(sandbox))
        return gf_error_set(err, GF_EINVAL,
                            "the bundle has no usable io.kubernetes.cri.sandbox-id to record it "
                            "by (name the container in gpu-fraction-container-name)");
    snprintf(dir, sizeof(dir), "%s/" GF_STATE_PODS, s->state);
    if (ensure_dir(s->state, err) < 0 || ensure_dir(dir, err) < 0)
        return -1;
    pod_path(s, sandbox, path, sizeof(path));
    /* the first container of the pod to start takes it: kubelet starts a
     * pod's containers one after another, in the pod spec's order */
    if ((rc = claim_new(path, container, err)) < 0)
        return -1;
    if (rc == 0) {
        *mine = true;
        return 0;
    }
    if ((fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)) < 0)
        return gf_error_sys(err, "reading %s", path);
    n = read(fd, have, sizeof(have) - 1);
    close(fd);
    if (n <= 0)
        return n < 0 ? gf_error_sys(err, "reading %s", path)
                     : gf_error_set(err, GF_EINVAL, "%s is empty", path);
    have[n] = '\0';
    *mine = strcmp(have, container) == 0;
    return 0;
}

void rt_pod_claim_remove(const rt_settings *s, const char *sandbox)
{
    char path[GF_PATH_MAX + 300];

    if (!id_valid(sandbox))
        return;
    pod_path(s, sandbox, path, sizeof(path));
    unlink(path);
}

void rt_map_remove(const rt_settings *s, const char *id)
{
    char path[GF_PATH_MAX + 300];

    if (!id_valid(id))
        return;
    snprintf(path, sizeof(path), "%s/" GF_STATE_CONTAINERS "/%s", s->state, id);
    unlink(path);
}

/* An entry whose fraction the agent no longer holds: its container ended
 * without a delete reaching the wrapper (Podman after its conmon was
 * killed). An entry is written after its admit, so a live one always has
 * its fraction. */
void rt_map_prune(const rt_settings *s)
{
    char dir[GF_PATH_MAX + 32], name[GF_NAME_MAX], frac[GF_PATH_MAX + GF_NAME_MAX + 32];
    struct dirent *de;
    struct stat st;
    DIR *d;

    snprintf(dir, sizeof(dir), "%s/" GF_STATE_CONTAINERS, s->state);
    if (!(d = opendir(dir)))
        return;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.' || rt_map_read(s, de->d_name, name, sizeof(name)) < 0)
            continue;
        snprintf(frac, sizeof(frac), "%s/" GF_STATE_FRACTIONS "/%s", s->state, name);
        if (lstat(frac, &st) < 0 && errno == ENOENT)
            rt_map_remove(s, de->d_name);
    }
    closedir(d);
}

int rt_preload_file(const rt_settings *s, char *path, size_t len, gf_error *err)
{
    if (ensure_dir(s->state, err) < 0)
        return -1;
    snprintf(path, len, "%s/" GF_STATE_PRELOAD, s->state);
    return write_atomic(path, RT_SHIM_IN "\n", err);
}

/* FNV-1a, to keep names unique when they must be cut. */
static uint32_t fnv(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

static void sanitize(char *s)
{
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '_' || *s == '.' || *s == '-'))
            *s = '_';
}

int rt_fraction_name(const rt_identity *who, rt_engine engine, const char *id, char *out,
                     size_t len)
{
    const char *sandbox = who->sandbox, *container = who->container;
    char full[512];
    int n;

    if ((engine == RT_ENGINE_DOCKER || engine == RT_ENGINE_PODMAN) && container && *container)
        n = snprintf(full, sizeof(full), "%s.%.12s.%s", rt_engine_label(engine), id ? id : "",
                     container);
    else if (sandbox && *sandbox && container && *container)
        n = snprintf(full, sizeof(full), "k8s.%.12s.%s", sandbox, container);
    else
        n = snprintf(full, sizeof(full), "oci.%s", id ? id : "");
    if (n < 0)
        return -1;
    sanitize(full);
    if (strlen(full) >= len || strlen(full) > GF_NAME_MAX - 1) {
        /* cut to 54 and add -<8 hex>: still unique, at most 63 */
        uint32_t h = fnv(full);
        snprintf(full + 54, sizeof(full) - 54, "-%08x", (unsigned)h);
    }
    snprintf(out, len, "%s", full);
    return gf_name_valid(out) ? 0 : -1;
}
