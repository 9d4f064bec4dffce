/* SPDX-License-Identifier: Apache-2.0 */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "version.h"

static const char main_help[] =
    "Usage: gpufrac COMMAND [flags]\n"
    "\n"
    "Share one NVIDIA GPU between workloads with enforced memory bounds.\n"
    "\n"
    "Commands:\n"
    "  run      run a command inside a GPU fraction (gpufrac run --memory 8Gi -- CMD)\n"
    "  status   list the fractions running on this host\n"
    "  top      the same, redrawn every second\n"
    "  stop     stop one of your fractions (gpufrac stop NAME)\n"
    "  demo     show what a fraction does, on a simulated GPU when there is no real one\n"
    "  install  add gpufrac-runtime to Docker's or Podman's runtimes (gpufrac install docker)\n"
    "\n"
    "Flags:\n"
    "  -h, --help     show this help (gpufrac COMMAND --help for a command's flags)\n"
    "  -V, --version  show the version\n";

int gf_cli_fail(const char *cmd, int code, const gf_error *err)
{
    fprintf(stderr, "gpufrac %s: %s\n", cmd, err->msg);
    return code;
}

int gf_cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "gpufrac %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry 'gpufrac %s --help' for the accepted flags.\n", cmd);
    return GF_EXIT_USAGE;
}

int gf_exe_dir(char *buf, size_t len, gf_error *err)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    char *slash;

    if (n < 0)
        return gf_error_sys(err, "reading /proc/self/exe");
    exe[n] = '\0';
    slash = strrchr(exe, '/');
    if (!slash || (size_t)(slash - exe) >= len)
        return gf_error_set(err, GF_EINVAL, "odd executable path %s", exe);
    *slash = '\0';
    snprintf(buf, len, "%s", exe);
    return 0;
}

static const struct {
    const char *name;
    int (*fn)(int, char **);
} commands[] = {
    {"run", gf_cmd_run},   {"status", gf_cmd_status}, {"top", gf_cmd_top},
    {"demo", gf_cmd_demo}, {"stop", gf_cmd_stop},     {"install", gf_cmd_install},
};

int main(int argc, char **argv)
{
    const char *cmd = argc > 1 ? argv[1] : NULL;

    if (!cmd) {
        fputs(main_help, stderr);
        return GF_EXIT_USAGE;
    }
    if (strcmp(cmd, "help") == 0 && argc > 2) { /* gpufrac help run */
        char *help_argv[] = {argv[2], (char *)"--help", NULL};
        for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
            if (strcmp(argv[2], commands[i].name) == 0)
                return commands[i].fn(2, help_argv);
    }
    if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "help") == 0) {
        fputs(main_help, stdout);
        return GF_EXIT_OK;
    }
    if (strcmp(cmd, "-V") == 0 || strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
        printf("gpufrac %s\n", GPUFRAC_VERSION);
        return GF_EXIT_OK;
    }
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (strcmp(cmd, commands[i].name) == 0)
            return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr,
            "gpufrac: unknown %s \"%s\"; commands: run, status, top, stop, demo\n"
            "Try 'gpufrac --help'.\n",
            cmd[0] == '-' ? "flag" : "command", cmd);
    return GF_EXIT_USAGE;
}
