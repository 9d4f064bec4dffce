/* SPDX-License-Identifier: Apache-2.0 */
/* gpufrac-runtime: see runtime.h and docs/runtime.md. */
#include <stdio.h>
#include <string.h>

#include "runtime.h"
#include "version.h"

int main(int argc, char **argv)
{
    rt_settings s;
    gf_error err = {0};
    rt_args a;

    if (argc >= 2 && strcmp(argv[1], "hook") == 0) {
        if (rt_settings_load(&s, &err) < 0) {
            fprintf(stderr, RT_NAME " hook: %s\n", err.msg);
            return 1;
        }
        return rt_hook(argc, argv, &s);
    }
    rt_args_parse(argc, argv, &a);
    if (a.version && !a.verb) { /* ours, then the wrapped runtime's own */
        printf(RT_NAME " %s\n", GPUFRAC_VERSION);
        fflush(stdout);
    }
    if (rt_settings_load(&s, &err) < 0 || rt_settings_real(&s, argv[0], &err) < 0) {
        rt_report(&a, "error", err.msg);
        return 1;
    }
    if (a.verb && (strcmp(a.verb, "create") == 0 || strcmp(a.verb, "run") == 0))
        return rt_create(&a, &s);
    if (a.verb && strcmp(a.verb, "delete") == 0)
        return rt_delete(&a, &s);
    if (a.verb && strcmp(a.verb, "exec") == 0)
        return rt_exec_verb(&a, &s);
    rt_exec_real(&s, argv, &err);
    rt_report(&a, "error", err.msg);
    return 1;
}
