/* SPDX-License-Identifier: Apache-2.0 */
/* The bundle's config.json through jansson, once bundle.c has read it:
 * edit the few parts the wrapper owns (env, mounts, hooks), write back
 * atomically. Every other field is kept as it was. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "replace.h"
#include "runtime.h"

int rt_spec_save(const char *path, json_t *spec, gf_error *err)
{
    gf_cleanup_free char *text = json_dumps(spec, JSON_COMPACT | JSON_PRESERVE_ORDER);

    if (!text)
        return gf_error_set(err, GF_ENOSPACE, "encoding %s", path);
    return gf_file_replace(path, text, strlen(text), GF_REPLACE_KEEP_MODE, err);
}

const char *rt_spec_annotation(json_t *spec, const char *key)
{
    return json_string_value(json_object_get(json_object_get(spec, "annotations"), key));
}

const char *rt_spec_mount_source(json_t *spec, const char *dest)
{
    const char *found = NULL;
    json_t *m;
    size_t i;

    json_array_foreach(json_object_get(spec, "mounts"), i, m)
    {
        const char *d = json_string_value(json_object_get(m, "destination"));
        const char *src = json_string_value(json_object_get(m, "source"));
        if (d && src && strcmp(d, dest) == 0)
            found = src;
    }
    return found;
}

/* process.env, created when missing. */
static json_t *env_array(json_t *spec, gf_error *err)
{
    json_t *proc = json_object_get(spec, "process"), *env;

    if (!json_is_object(proc)) {
        gf_error_set(err, GF_EINVAL, "config.json has no process object");
        return NULL;
    }
    env = json_object_get(proc, "env");
    if (json_is_array(env))
        return env;
    env = json_array();
    if (!env || json_object_set_new(proc, "env", env) < 0) {
        gf_error_set(err, GF_ENOSPACE, "adding process.env");
        return NULL;
    }
    return env;
}

static bool env_is(const char *entry, const char *name)
{
    size_t n = strlen(name);
    return entry && strncmp(entry, name, n) == 0 && entry[n] == '=';
}

const char *rt_spec_env_get(json_t *spec, const char *name)
{
    json_t *env = json_object_get(json_object_get(spec, "process"), "env"), *v;
    const char *found = NULL;
    size_t i;

    json_array_foreach(env, i, v) if (env_is(json_string_value(v), name))
        found = json_string_value(v) + strlen(name) + 1;
    return found; /* the last one wins, as in execve's environment */
}

int rt_spec_env_unset(json_t *spec, const char *name, gf_error *err)
{
    json_t *env = env_array(spec, err);

    if (!env)
        return -1;
    for (size_t i = 0; i < json_array_size(env);) {
        if (env_is(json_string_value(json_array_get(env, i)), name))
            json_array_remove(env, i);
        else
            i++;
    }
    return 0;
}

int rt_spec_env_set(json_t *spec, const char *name, const char *value, gf_error *err)
{
    gf_cleanup_free char *entry = NULL;
    json_t *env;

    if (rt_spec_env_unset(spec, name, err) < 0 || !(env = env_array(spec, err)))
        return -1;
    if (asprintf(&entry, "%s=%s", name, value) < 0)
        return gf_error_sys(err, "allocating");
    if (json_array_append_new(env, json_string(entry)) < 0)
        return gf_error_set(err, GF_ENOSPACE, "adding %s to process.env", name);
    return 0;
}

static json_t *array_member(json_t *obj, const char *key, gf_error *err)
{
    json_t *a = json_object_get(obj, key);

    if (json_is_array(a))
        return a;
    a = json_array();
    if (!a || json_object_set_new(obj, key, a) < 0) {
        gf_error_set(err, GF_ENOSPACE, "adding %s to config.json", key);
        return NULL;
    }
    return a;
}

int rt_spec_bind(json_t *spec, const char *src, const char *dest, bool ro, gf_error *err)
{
    json_t *mounts = array_member(spec, "mounts", err), *m;

    if (!mounts)
        return -1;
    for (size_t i = 0; i < json_array_size(mounts);) {
        const char *d =
            json_string_value(json_object_get(json_array_get(mounts, i), "destination"));
        if (d && strcmp(d, dest) == 0)
            json_array_remove(mounts, i);
        else
            i++;
    }
    m = json_pack("{s:s, s:s, s:s, s:[s, s, s]}", "destination", dest, "type", "bind", "source",
                  src, "options", "rbind", ro ? "ro" : "rw", "nosuid");
    if (!m || json_array_append_new(mounts, m) < 0)
        return gf_error_set(err, GF_ENOSPACE, "adding the mount %s", dest);
    return 0;
}

int rt_spec_hook(json_t *spec, const char *kind, const char *path, const char *const *args,
                 const char *env, gf_error *err)
{
    json_t *hooks = json_object_get(spec, "hooks"), *list, *h, *a;

    if (!json_is_object(hooks)) {
        hooks = json_object();
        if (!hooks || json_object_set_new(spec, "hooks", hooks) < 0)
            return gf_error_set(err, GF_ENOSPACE, "adding hooks to config.json");
    }
    if (!(list = array_member(hooks, kind, err)))
        return -1;
    a = json_array();
    for (; a && *args; args++)
        json_array_append_new(a, json_string(*args));
    h = json_pack("{s:s, s:o, s:[s], s:i}", "path", path, "args", a, "env", env, "timeout",
                  RT_HOOK_TIMEOUT_S);
    if (!h || json_array_append_new(list, h) < 0)
        return gf_error_set(err, GF_ENOSPACE, "adding a %s hook", kind);
    return 0;
}
