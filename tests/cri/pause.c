/* SPDX-License-Identifier: Apache-2.0 */
/* The CRI tests' sandbox ("pause") process, built static so the sandbox image
 * needs nothing else: it holds the pod's namespaces, reaps the orphans of a
 * shared PID namespace, and exits on SIGTERM/SIGINT. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_stop(int sig)
{
    (void)sig;
    _exit(0);
}

static void on_child(int sig)
{
    (void)sig;
    while (waitpid(-1, NULL, WNOHANG) > 0)
        ;
}

int main(void)
{
    struct sigaction stop = {.sa_handler = on_stop}, child = {.sa_handler = on_child};

    sigaction(SIGTERM, &stop, NULL);
    sigaction(SIGINT, &stop, NULL);
    child.sa_flags = SA_NOCLDSTOP | SA_RESTART;
    sigaction(SIGCHLD, &child, NULL);
    for (;;)
        pause();
}
