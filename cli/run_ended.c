/* SPDX-License-Identifier: Apache-2.0 */
/* The end of a run: why gpufracd terminated a process of the fraction (its
 * own record, <fraction>/terminated, see agent/terminated.h), and the ended
 * fraction kept for `gpufrac status`. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "fraction.h"
#include "run.h"
#include "statedir.h"

int run_ended_parse_line(char *line, run_termination *t)
{
    char *reason = strstr(line, " reason=");
    long long pid = 0, gpu = -1, when = 0;
    char by[16] = "";

    memset(t, 0, sizeof(*t));
    line[strcspn(line, "\n")] = '\0';
    if (!reason || sscanf(line, "pid=%lld by=%15s gpu=%lld", &pid, by, &gpu) != 3 || pid <= 0)
        return -1;
    const char *tp = strstr(line, " time=");
    if (tp && tp < reason)
        when = strtoll(tp + 6, NULL, 10);
    t->pid = (pid_t)pid;
    t->gpu = (int)gpu;
    t->when = (time_t)when;
    t->watchdog = strcmp(by, "watchdog") == 0;
    snprintf(t->reason, sizeof(t->reason), "%s", reason + 8);
    return 0;
}

/* Has the agent recorded pid yet? */
static bool recorded(const char *path, pid_t pid)
{
    char line[1024];
    run_termination t;
    bool found = false;
    FILE *fp = fopen(path, "re");

    while (fp && !found && fgets(line, sizeof(line), fp))
        found = run_ended_parse_line(line, &t) == 0 && t.pid == pid;
    if (fp)
        fclose(fp);
    return found;
}

int run_report_terminated(const char *fraction_dir, pid_t child, int rc, bool agent)
{
    char path[GF_PATH_MAX + 16], line[1024];
    struct timespec tick = {0, 20 * 1000 * 1000};
    run_termination t;
    int code = rc;
    FILE *fp;

    if (gf_path_join(path, sizeof(path), fraction_dir, GF_FRAC_TERMINATED) < 0)
        return rc;
    /* the watchdog writes its record right after its SIGKILL, which we may
     * have reaped first: give it a moment (at most 1 s, only then) */
    for (int i = 0; agent && rc == 128 + 9 && i < 50 && !recorded(path, child); i++)
        nanosleep(&tick, NULL);
    if (!(fp = fopen(path, "re")))
        return rc;
    while (fgets(line, sizeof(line), fp)) {
        if (run_ended_parse_line(line, &t) < 0)
            continue;
        fprintf(stderr, "gpufrac run: pid %d %s\n", (int)t.pid, t.reason);
        /* COMMAND itself was the one terminated: say so in the exit status */
        if (t.pid == child && rc == 128 + 9)
            code = t.watchdog ? GF_EXIT_WATCHDOG : GF_EXIT_EVICTED;
    }
    fclose(fp);
    return code;
}
