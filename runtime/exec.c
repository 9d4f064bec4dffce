/* SPDX-License-Identifier: Apache-2.0 */
/* Handing over to the real runtime, with the caller's argv. */
#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime.h"

int rt_exec_real(const rt_settings *s, char **argv, gf_error *err)
{
    argv[0] = (char *)s->real_runtime;
    execv(s->real_runtime, argv);
    return gf_error_sys(err, "executing %s", s->real_runtime);
}

/* The child is the real runtime in every respect the caller can see: same
 * stdio, descriptors (--preserve-fds), environment and argv. */
int rt_run_real(const rt_settings *s, char **argv, gf_error *err)
{
    int status;
    pid_t pid = fork();

    if (pid < 0)
        return gf_error_sys(err, "fork");
    if (pid == 0) {
        argv[0] = (char *)s->real_runtime;
        execv(s->real_runtime, argv);
        _exit(127);
    }
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return gf_error_sys(err, "waiting for %s", s->real_runtime);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
}
