/* SPDX-License-Identifier: Apache-2.0 */
/* Refusals reach the person twice: on stderr, and as a line in runc's --log
 * file, which containerd's shim turns into the error of the pod's event. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runtime.h"

static void now_rfc3339(char *buf, size_t len)
{
    struct timespec ts;
    struct tm tm;

    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static char *json_line(const char *level, const char *msg, const char *when)
{
    json_t *o = json_pack("{s:s, s:s, s:s}", "level", level, "msg", msg, "time", when);
    char *s = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    return s;
}

static void append_line(const char *path, const char *line)
{
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    size_t n = strlen(line);

    if (fd < 0)
        return;
    /* one write: lines from several processes never interleave */
    if (write(fd, line, n) != (ssize_t)n) {
        /* nothing more to do: stderr already has it */
    }
    close(fd);
}

void rt_report(const rt_args *a, const char *level, const char *msg)
{
    char when[40], *line = NULL, *s;
    int n;

    fprintf(stderr, RT_NAME ": %s\n", msg);
    if (!a || !a->log_path)
        return;
    now_rfc3339(when, sizeof(when));
    /* whole lines, however long msg is: a cut json line is no json */
    if (a->log_format && strcmp(a->log_format, "json") == 0) {
        if (!(s = json_line(level, msg, when)))
            return;
        n = asprintf(&line, "%s\n", s);
        free(s);
    } else {
        n = asprintf(&line, "time=\"%s\" level=%s msg=\"%s\"\n", when, level, msg);
    }
    if (n < 0)
        return;
    append_line(a->log_path, line);
    free(line);
}
