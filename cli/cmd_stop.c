/* SPDX-License-Identifier: Apache-2.0 */
/* gpufrac stop NAME: asks a fraction's gpufrac run to stop it (SIGTERM,
 * which the run passes on to every process of the fraction). A user stops
 * only their own fractions (whose ledger is theirs); root stops any. The
 * signal goes through a pidfd taken while the run still holds the
 * fraction's supervisor lock, so a reused pid is never signalled. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cleanup.h"
#include "cli.h"
#include "fraction.h"
#include "statedir.h"

static const char stop_help[] =
    "Usage: gpufrac stop [--state-dir DIR] NAME\n"
    "\n"
    "Stops the fraction NAME: its gpufrac run gets SIGTERM and passes it on to\n"
    "every process of the fraction. You may stop your own fractions; root may stop\n"
    "any. A container's fraction is stopped by stopping its container.\n";

int gf_cmd_stop(int argc, char **argv)
{
    char state[GF_PATH_MAX], dir[GF_PATH_MAX], path[GF_PATH_MAX + 16];
    const char *state_flag = NULL, *name = NULL;
    gf_error err = {0};
    struct stat st;
    pid_t pid;
    gf_cleanup_close int fd = -1; /* a pidfd */

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
            return fputs(stop_help, stdout), GF_EXIT_OK;
        if (strcmp(argv[i], "--state-dir") == 0 && i + 1 < argc)
            state_flag = argv[++i];
        else if (argv[i][0] == '-' || name)
            return gf_cli_usage_error("stop", "unexpected argument \"%s\"", argv[i]);
        else
            name = argv[i];
    }
    if (!name)
        return gf_cli_usage_error("stop", "which fraction? (gpufrac stop NAME)");
    if (!gf_name_valid(name))
        return gf_cli_usage_error("stop", "\"%s\" is not a fraction name", name);
    if (gf_state_dir(state_flag, false, state, sizeof(state), &err) < 0 ||
        gf_fraction_path(dir, sizeof(dir), state, name, NULL, &err) < 0)
        return gf_cli_fail("stop", GF_EXIT_FAIL, &err);
    snprintf(path, sizeof(path), "%s/" GF_FRAC_LEDGER, dir);
    if (stat(path, &st) < 0) {
        fprintf(stderr, "gpufrac stop: no fraction \"%s\" in %s\n", name, state);
        return GF_EXIT_FAIL;
    }
    if (geteuid() != 0 && st.st_uid != geteuid()) {
        fprintf(stderr, "gpufrac stop: fraction \"%s\" is not yours (it belongs to uid %u)\n", name,
                (unsigned)st.st_uid);
        return GF_EXIT_FAIL;
    }
    snprintf(path, sizeof(path), "%s/" GF_FRAC_IDENTITY, dir);
    if (access(path, F_OK) == 0) {
        fprintf(stderr, "gpufrac stop: \"%s\" is a container's fraction; stop its container\n",
                name);
        return GF_EXIT_FAIL;
    }
    if (!gf_fraction_supervised(dir, &pid) || pid <= 0) {
        fprintf(stderr, "gpufrac stop: fraction \"%s\" has no running gpufrac run\n", name);
        return GF_EXIT_FAIL;
    }
    fd = (int)syscall(SYS_pidfd_open, pid, 0);
    /* still the holder after the pidfd is taken: the pid is the run's */
    if (fd < 0 || !gf_fraction_supervised(dir, &pid) ||
        syscall(SYS_pidfd_send_signal, fd, SIGTERM, NULL, 0) < 0) {
        fprintf(stderr, "gpufrac stop: cannot signal gpufrac run (pid %d) of \"%s\": %s\n",
                (int)pid, name, strerror(errno));
        return GF_EXIT_FAIL;
    }
    printf("gpufrac stop: asked gpufrac run (pid %d) to stop fraction \"%s\"\n", (int)pid, name);
    return GF_EXIT_OK;
}
