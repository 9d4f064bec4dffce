/* SPDX-License-Identifier: Apache-2.0 */
/* Shared pieces of the gpufrac command: exit codes and the subcommands. */
#ifndef GPUFRAC_CLI_H
#define GPUFRAC_CLI_H

#include <stdbool.h>

#include "error.h"

enum {
    GF_EXIT_OK = 0,
    GF_EXIT_FAIL = 1,      /* something other than the command line went wrong */
    GF_EXIT_USAGE = 2,     /* a bad flag or value: nothing was started */
    GF_EXIT_EVICTED = 75,  /* gpufracd took COMMAND's burst loan back (retry, or lower --limit) */
    GF_EXIT_WATCHDOG = 76, /* gpufracd's watchdog terminated COMMAND for passing --limit */
    GF_EXIT_NOEXEC = 126,
    GF_EXIT_NOTFOUND = 127,
};

int gf_cmd_run(int argc, char **argv);
int gf_cmd_status(int argc, char **argv);
int gf_cmd_top(int argc, char **argv);
int gf_cmd_demo(int argc, char **argv);
int gf_cmd_stop(int argc, char **argv);
int gf_cmd_install(int argc, char **argv);

/* Prints "gpufrac <cmd>: <message>" on stderr and returns code. */
int gf_cli_fail(const char *cmd, int code, const gf_error *err);

/* "unknown flag" and friends: message, hint, GF_EXIT_USAGE. */
int gf_cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The directory holding the running executable, without a trailing slash. */
int gf_exe_dir(char *buf, size_t len, gf_error *err);

#endif
