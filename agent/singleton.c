/* SPDX-License-Identifier: Apache-2.0 */
/* One agent per state directory: <state>/agent/lock carries an OFD write
 * lock for as long as the agent lives (the kernel drops it with the last
 * descriptor, so a SIGKILLed agent leaves nothing to clean up). It is taken
 * before anything in the state directory is made, replaced or read back
 * (sockets, journal, fractions, events.log); a second agent finds it held,
 * touches nothing and exits naming the holder. The holder writes its pid
 * into the file once it holds the lock: OFD locks report no pid. */
#include "singleton.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "cleanup.h"
#include "statedir.h"

#define LOCK_FILE GF_STATE_AGENT_LOCK

static int lock_fd = -1; /* held open for the process' life, never closed */

/* The pid the holder wrote, 0 if it has not yet (it writes just after
 * locking: a few short retries cover that window). */
static long holder_pid(int fd)
{
    struct timespec pause = {0, 10 * 1000 * 1000};
    char buf[24];

    for (int i = 0; i < 50; i++) {
        ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
        if (n > 0) {
            buf[n] = '\0';
            long pid = strtol(buf, NULL, 10);
            if (pid > 0)
                return pid;
        }
        nanosleep(&pause, NULL);
    }
    return 0;
}

static int held_elsewhere(gf_agent *a, int fd, gf_error *err)
{
    long pid = holder_pid(fd);
    char who[48];

    if (pid > 0)
        snprintf(who, sizeof(who), "pid %ld", pid);
    else
        snprintf(who, sizeof(who), "pid unknown");
    return gf_error_set(err, GF_ESTATE,
                        "%s is served by another gpufracd (%s holds %s/" GF_STATE_AGENT_DIR
                        "/" LOCK_FILE "); stop it first, or give this one its own --state-dir",
                        a->state_dir, who, a->state_dir);
}

int gf_agent_lock(gf_agent *a, gf_error *err)
{
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    struct stat st;
    char pid[24];
    gf_cleanup_close int fd = -1;
    int n;

    fd = openat(a->priv_dfd, LOCK_FILE, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return gf_error_sys(err, "opening %s/" GF_STATE_AGENT_DIR "/" LOCK_FILE, a->state_dir);
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
        return gf_error_set(err, GF_EINVAL,
                            "%s/" GF_STATE_AGENT_DIR "/" LOCK_FILE " is not a plain file",
                            a->state_dir);
    if (fcntl(fd, F_OFD_SETLK, &fl) < 0) {
        if (errno == EAGAIN || errno == EACCES)
            return held_elsewhere(a, fd, err);
        return gf_error_sys(err, "locking %s/" GF_STATE_AGENT_DIR "/" LOCK_FILE, a->state_dir);
    }
    /* fixed width, written over the last holder's: on a full file system
     * the page it had is reused, so a restart never needs new space */
    n = snprintf(pid, sizeof(pid), "%-20ld\n", (long)getpid());
    if (pwrite(fd, pid, (size_t)n, 0) != n)
        return gf_error_sys(err, "writing %s/" GF_STATE_AGENT_DIR "/" LOCK_FILE, a->state_dir);
    lock_fd = gf_steal_fd(&fd); /* held for the process' life */
    return 0;
}
