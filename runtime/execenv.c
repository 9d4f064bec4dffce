/* SPDX-License-Identifier: Apache-2.0 */
/* exec --process FILE: containerd builds an exec'd process from its own copy
 * of the spec, not from the config.json create edited, so the
 * fraction's environment (NVIDIA_*, CUDA_MPS_*) is added to the process file
 * here, from the container's entry in <state>/containers. The preload and
 * the fraction's files are mounts of the container: exec'd processes have
 * them already. Everything else about exec goes to the real runtime. */
#include <stdio.h>
#include <string.h>

#include "runtime.h"

/* The process JSON is the spec's "process" object: edited through a spec
 * that holds it, with the same env rules as create. */
static int add_env(const char *file, const char *env, gf_error *err)
{
    char line[4096];
    const char *p = env;
    json_t *proc = NULL, *spec = NULL;
    json_error_t je;
    int rc = -1;

    if (!(proc = json_load_file(file, 0, &je)) || !json_is_object(proc)) {
        gf_error_set(err, GF_EINVAL, "reading the exec process %s: %s", file,
                     proc ? "not a JSON object" : je.text);
        goto out;
    }
    if (!(spec = json_object()) || json_object_set(spec, "process", proc) < 0) {
        gf_error_set(err, GF_ENOSPACE, "allocating");
        goto out;
    }
    while (*p) {
        size_t n = strcspn(p, "\n");
        char *eq;
        if (n > 0 && n < sizeof(line)) {
            memcpy(line, p, n);
            line[n] = '\0';
            if ((eq = strchr(line, '=')) != NULL) {
                *eq = '\0';
                if (rt_spec_env_set(spec, line, eq + 1, err) < 0)
                    goto out;
            }
        }
        p += n + (p[n] == '\n');
    }
    rc = rt_spec_save(file, proc, err);
out:
    json_decref(spec);
    json_decref(proc);
    return rc;
}

int rt_exec_verb(const rt_args *a, const rt_settings *s)
{
    char env[4096], msg[GF_ERROR_MSG_MAX + 300];
    gf_error err = {0};
    bool found = false;

    if (a->process && a->id &&
        (rt_map_env(s, a->id, env, sizeof(env), &found, &err) < 0 ||
         (found && env[0] && add_env(a->process, env, &err) < 0))) {
        /* an exec'd process without the fraction's env would not be an MPS
         * client: refuse rather than start it half set up */
        snprintf(msg, sizeof(msg), "exec in container %s: %s", a->id, err.msg);
        rt_report(a, "error", msg);
        return 1;
    }
    rt_exec_real(s, a->argv, &err);
    rt_report(a, "error", err.msg);
    return 1;
}
