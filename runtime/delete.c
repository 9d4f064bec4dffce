/* SPDX-License-Identifier: Apache-2.0 */
/* delete <id>: the real runtime deletes the container (running its poststop
 * hooks); then, best effort, the fraction it had is released, in case the
 * hook never ran (runc killed, state lost). */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "runtime.h"

/* Whether the real runtime still knows the container (its state dir). */
static bool still_there(const rt_args *a)
{
    char path[GF_PATH_MAX * 2];
    struct stat st;

    snprintf(path, sizeof(path), "%s/%s", a->root ? a->root : "/run/runc", a->id);
    return stat(path, &st) == 0;
}

int rt_delete(const rt_args *a, const rt_settings *s)
{
    char name[GF_NAME_MAX], msg[GF_ERROR_MSG_MAX + 400];
    gf_error err = {0};
    int rc;

    if (a->id)
        rt_pod_claim_remove(s, a->id); /* the sandbox's own delete ends its claim */
    if (!a->id || rt_map_read(s, a->id, name, sizeof(name)) < 0) {
        rt_exec_real(s, a->argv, &err);
        rt_report(a, "error", err.msg);
        return 1;
    }
    rc = rt_run_real(s, a->argv, &err);
    if (rc < 0) {
        rt_report(a, "error", err.msg);
        return 1;
    }
    if (rc != 0 && still_there(a))
        return rc;
    rt_map_remove(s, a->id);
    if (rt_agent_release(s, name, &err) < 0) {
        if (snprintf(msg, sizeof(msg), "container %s: releasing fraction %s: %s", a->id, name,
                     err.msg) < 0)
            msg[0] = '\0';
        rt_report(a, "warning", msg);
    }
    return rc;
}
