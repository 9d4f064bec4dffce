/* SPDX-License-Identifier: Apache-2.0 */
/* `gpufrac-runtime hook attach|release <fraction>`: run by runc as the
 * container's createRuntime and poststop hooks, with the OCI state JSON on
 * stdin (pid = the container's init as seen from the runtime namespace). */
#include <stdio.h>
#include <string.h>

#include "runtime.h"

static int read_state(json_t **state, gf_error *err)
{
    json_error_t je;

    *state = json_loadf(stdin, JSON_DISABLE_EOF_CHECK, &je);
    if (!*state || !json_is_object(*state)) {
        json_decref(*state);
        *state = NULL;
        return gf_error_set(err, GF_EINVAL, "reading the OCI state on stdin: %s", je.text);
    }
    return 0;
}

static int attach(const rt_settings *s, const char *name, gf_error *err)
{
    json_t *st;
    json_int_t pid;
    int rc;

    if (read_state(&st, err) < 0)
        return -1;
    pid = json_integer_value(json_object_get(st, "pid"));
    json_decref(st);
    if (pid <= 0)
        return gf_error_set(err, GF_EINVAL, "the OCI state on stdin has no pid");
    rc = rt_agent_attach(s, name, (long)pid, err);
    return rc < 0 ? gf_error_wrap(err, "attaching pid %lld to fraction %s", (long long)pid, name)
                  : 0;
}

static int release(const rt_settings *s, const char *name, gf_error *err)
{
    json_t *st = NULL;
    gf_error ignored;

    if (read_state(&st, &ignored) == 0) {
        const char *id = json_string_value(json_object_get(st, "id"));
        char mapped[GF_NAME_MAX];
        /* only the container's own entry (a newer create may reuse the id) */
        if (id && rt_map_read(s, id, mapped, sizeof(mapped)) == 0 && strcmp(mapped, name) == 0)
            rt_map_remove(s, id);
        json_decref(st);
    }
    if (rt_agent_release(s, name, err) < 0)
        return gf_error_wrap(err, "releasing fraction %s", name);
    return 0;
}

int rt_hook(int argc, char **argv, const rt_settings *s)
{
    gf_error err = {0};
    int rc;

    if (argc != 4 || !gf_name_valid(argv[3]) ||
        (strcmp(argv[2], "attach") != 0 && strcmp(argv[2], "release") != 0)) {
        fprintf(stderr,
                "usage: " RT_NAME " hook attach|release <fraction> (state JSON on stdin)\n");
        return 2;
    }
    rc = strcmp(argv[2], "attach") == 0 ? attach(s, argv[3], &err) : release(s, argv[3], &err);
    if (rc < 0) {
        fprintf(stderr, RT_NAME " hook %s: %s\n", argv[2], err.msg);
        return 1;
    }
    return 0;
}
