/* SPDX-License-Identifier: Apache-2.0 */
/* runc's command line: global flags, the verb, the verb's flags and the
 * container id. Only what the wrapper needs is picked out; argv is never
 * changed. Flags may be written -x, --x, --x=v (Go's flag syntax). */
#include <string.h>

#include "runtime.h"

/* Global flags of runc 1.1 that take a value. */
static const char *const global_valued[] = {"log", "log-format", "root", "criu", "rootless", NULL};
/* Flags of create/run that take a value. */
static const char *const create_valued[] = {"bundle",       "b", "console-socket", "pid-file",
                                            "preserve-fds", NULL};
/* Flags of exec that take a value. */
static const char *const exec_valued[] = {"process",
                                          "p",
                                          "console-socket",
                                          "pid-file",
                                          "cwd",
                                          "env",
                                          "e",
                                          "user",
                                          "u",
                                          "additional-gids",
                                          "g",
                                          "process-label",
                                          "apparmor",
                                          "cap",
                                          "c",
                                          "preserve-fds",
                                          "cgroup",
                                          NULL};

static bool in(const char *const *list, const char *name, size_t len)
{
    for (; *list; list++)
        if (strlen(*list) == len && strncmp(*list, name, len) == 0)
            return true;
    return false;
}

/* Splits "-x", "--x" or "--x=v" into name and inline value. */
static bool flag_name(const char *arg, const char **name, size_t *len, const char **inline_val)
{
    const char *eq;

    if (arg[0] != '-' || arg[1] == '\0' || strcmp(arg, "--") == 0)
        return false;
    *name = arg + (arg[1] == '-' ? 2 : 1);
    eq = strchr(*name, '=');
    *len = eq ? (size_t)(eq - *name) : strlen(*name);
    *inline_val = eq ? eq + 1 : NULL;
    return true;
}

static bool is(const char *name, size_t len, const char *want)
{
    return strlen(want) == len && strncmp(name, want, len) == 0;
}

/* Walks flags from argv[i]; calls back for each valued flag; returns the
 * index of the first operand (or argc). */
static int walk(int argc, char **argv, int i, const char *const *valued, rt_args *a, bool global)
{
    while (i < argc) {
        const char *name, *v;
        size_t len;

        if (strcmp(argv[i], "--") == 0)
            return i + 1;
        if (!flag_name(argv[i], &name, &len, &v))
            return i;
        if (in(valued, name, len) && !v && i + 1 < argc)
            v = argv[++i];
        i++;
        if (global && !v && (is(name, len, "version") || is(name, len, "v")))
            a->version = true;
        if (!v)
            continue;
        if (global && is(name, len, "log"))
            a->log_path = v;
        else if (global && is(name, len, "log-format"))
            a->log_format = v;
        else if (global && is(name, len, "root"))
            a->root = v;
        else if (!global && (is(name, len, "bundle") || is(name, len, "b")))
            a->bundle = v;
        else if (!global && (is(name, len, "process") || is(name, len, "p")))
            a->process = v;
    }
    return i;
}

void rt_args_parse(int argc, char **argv, rt_args *a)
{
    int i;

    memset(a, 0, sizeof(*a));
    a->argc = argc;
    a->argv = argv;
    i = walk(argc, argv, 1, global_valued, a, true);
    if (i >= argc)
        return;
    a->verb = argv[i++];
    if (strcmp(a->verb, "create") == 0 || strcmp(a->verb, "run") == 0)
        i = walk(argc, argv, i, create_valued, a, false);
    else if (strcmp(a->verb, "exec") == 0)
        i = walk(argc, argv, i, exec_valued, a, false);
    else
        i = walk(argc, argv, i, (const char *const[]){NULL}, a, false);
    if (i < argc)
        a->id = argv[i];
}
