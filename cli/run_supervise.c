/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "cli.h"
#include "run.h"

static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

static void watched_set(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGCHLD);
    for (size_t i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++)
        sigaddset(set, forwarded[i]);
}

/* In the child: exec, or report errno through the close-on-exec pipe. */
static void __attribute__((noreturn)) child_exec(char **cmd, const sigset_t *mask, int report)
{
    int e;

    sigprocmask(SIG_SETMASK, mask, NULL);
    execvp(cmd[0], cmd);
    e = errno;
    if (write(report, &e, sizeof(e)) < 0)
        _exit(GF_EXIT_NOTFOUND);
    _exit(e == ENOENT ? GF_EXIT_NOTFOUND : GF_EXIT_NOEXEC);
}

/* Returns the child's exec errno, 0 once it has exec'd. */
static int exec_result(int report)
{
    int e = 0;
    ssize_t n;

    do
        n = read(report, &e, sizeof(e));
    while (n < 0 && errno == EINTR);
    close(report);
    return n == (ssize_t)sizeof(e) ? e : 0;
}

static int exit_code(int status)
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return GF_EXIT_FAIL;
}

/* Our remaining children once the direct child is gone: descendants it
 * left behind were reparented to us. */
static void signal_orphans(int sig)
{
    char path[64], buf[4096];
    ssize_t n;
    int fd;

    snprintf(path, sizeof(path), "/proc/self/task/%d/children", (int)getpid());
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return;
    buf[n] = '\0';
    for (char *tok = strtok(buf, " \n"); tok; tok = strtok(NULL, " \n"))
        kill((pid_t)atoi(tok), sig);
}

/* A signal the terminal sent (SI_KERNEL) already reached every process in
 * our foreground group; sending it again would deliver it twice. */
static void forward(const siginfo_t *si, pid_t child, bool child_done)
{
    if (!child_done) {
        if (si->si_code != SI_KERNEL || getpgid(child) != getpgrp())
            kill(child, si->si_signo);
        return;
    }
    signal_orphans(si->si_signo);
}

/* Reaps everything that exited. Returns true when no descendant is left. */
static bool reap(pid_t child, int *status, bool *child_done)
{
    for (;;) {
        int st;
        pid_t pid = waitpid(-1, &st, WNOHANG);
        if (pid == child) {
            *status = st;
            *child_done = true;
        } else if (pid == 0) {
            return false;
        } else if (pid < 0) {
            return errno == ECHILD;
        }
    }
}

static void note_left_behind(char **cmd, int sig)
{
    fprintf(stderr, "gpufrac run: %s exited; %s the processes it left running in the fraction\n",
            cmd[0], sig ? "stopping" : "waiting for");
}

/* A process whose parent is still alive is reaped by that parent, not by us:
 * no SIGCHLD tells us it died, so its memory is returned on a short tick. */
static const struct timespec reclaim_tick = {0, 250 * 1000 * 1000};

static void (*before_stop)(void *);
static void *before_stop_arg;

static void (*on_tick)(void *);
static void *on_tick_arg;

void run_supervise_on_tick(void (*fn)(void *), void *arg)
{
    on_tick = fn;
    on_tick_arg = arg;
}

void run_supervise_on_stop(void (*fn)(void *), void *arg)
{
    before_stop = fn;
    before_stop_arg = arg;
}

/* A stop signal forwarded to COMMAND is meant for the whole fraction: once
 * COMMAND is gone, what it left running gets it too. */
static int wait_all(char **cmd, pid_t child, gf_ledger *lg, const sigset_t *set)
{
    bool child_done = false, noted = false;
    int status = 0, last_sig = 0;

    for (;;) {
        siginfo_t si;
        int sig = sigtimedwait(set, &si, &reclaim_tick);
        if (sig < 0) {
            gf_ledger_reclaim_dead(lg);
            if (on_tick)
                on_tick(on_tick_arg);
            continue; /* the tick, or EINTR from a stop/continue */
        }
        if (sig != SIGCHLD) {
            if (!last_sig && before_stop)
                before_stop(before_stop_arg); /* e.g. MPS lets its clients go first */
            forward(&si, child, child_done);
            last_sig = sig;
            continue;
        }
        bool all_gone = reap(child, &status, &child_done);
        gf_ledger_reclaim_dead(lg);
        if (all_gone)
            return exit_code(status);
        if (child_done && !noted) {
            note_left_behind(cmd, last_sig);
            if (last_sig)
                signal_orphans(last_sig);
            noted = true;
        }
    }
}

int run_supervise(char **cmd, gf_ledger *lg, pid_t *child_out)
{
    sigset_t set, old;
    int pipefd[2], e;
    pid_t child;

    if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
        fprintf(stderr,
                "gpufrac run: warning: cannot become a subreaper (%s); processes that "
                "outlive %s will not be waited for\n",
                strerror(errno), cmd[0]);
    if (pipe2(pipefd, O_CLOEXEC) < 0) {
        fprintf(stderr, "gpufrac run: pipe: %s\n", strerror(errno));
        return GF_EXIT_FAIL;
    }
    gf_cleanup_close int rd = pipefd[0], wr = pipefd[1];
    watched_set(&set);
    sigprocmask(SIG_BLOCK, &set, &old);
    child = fork();
    if (child < 0) {
        fprintf(stderr, "gpufrac run: fork: %s\n", strerror(errno));
        sigprocmask(SIG_SETMASK, &old, NULL);
        return GF_EXIT_FAIL;
    }
    if (child == 0) {
        close(gf_steal_fd(&rd));
        child_exec(cmd, &old, wr);
    }
    close(gf_steal_fd(&wr)); /* before the read: its EOF says the exec went through */
    if (child_out)
        *child_out = child;
    if ((e = exec_result(gf_steal_fd(&rd))) != 0)
        fprintf(stderr, "gpufrac run: cannot run '%s': %s\n", cmd[0], strerror(e));
    return wait_all(cmd, child, lg, &set);
}
