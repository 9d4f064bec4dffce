/* SPDX-License-Identifier: Apache-2.0 */
#include "log.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define LOG_LINE_MAX 1024

static const char *const level_names[] = {"off", "error", "warn", "info", "debug"};

static gf_log_level threshold = GF_LOG_DEBUG;

void gf_log_set_threshold(gf_log_level level)
{
    threshold = level;
}

gf_log_level gf_log_threshold(void)
{
    return threshold;
}

int gf_log_level_parse(const char *s, gf_log_level *out)
{
    size_t i;

    if (s == NULL || s[0] == '\0') {
        *out = GF_LOG_OFF;
        return 0;
    }
    for (i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++) {
        if (strcasecmp(s, level_names[i]) == 0 || (s[0] == (char)('0' + i) && s[1] == '\0')) {
            *out = (gf_log_level)i;
            return 0;
        }
    }
    return -1;
}

void gf_log_write(int fd, gf_log_level level, const char *component, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    gf_log_vwrite(fd, level, component, fmt, ap);
    va_end(ap);
}

void gf_log_vwrite(int fd, gf_log_level level, const char *component, const char *fmt, va_list ap)
{
    static const char cut[] = "...";
    char line[LOG_LINE_MAX];
    const char *lname = "?";
    int saved = errno;
    size_t used, i;
    int n;

    if (fd < 0 || level == GF_LOG_OFF || level > threshold)
        return;
    if ((unsigned)level < sizeof(level_names) / sizeof(level_names[0]))
        lname = level_names[level];
    n = snprintf(line, sizeof(line), "gpufrac[%ld] %s %s: ", (long)getpid(),
                 component != NULL ? component : "-", lname);
    if (n < 0)
        goto out;
    used = (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1;
    n = vsnprintf(line + used, sizeof(line) - used, fmt, ap);
    if (n < 0)
        n = 0;
    if ((size_t)n >= sizeof(line) - used) {
        /* truncated: keep room for the marker and the newline */
        used = sizeof(line) - sizeof(cut) - 1;
        memcpy(line + used, cut, sizeof(cut) - 1);
        used += sizeof(cut) - 1;
    } else {
        used += (size_t)n;
    }
    for (i = 0; i < used; i++) {
        if (line[i] == '\n' || line[i] == '\r')
            line[i] = ' ';
    }
    line[used++] = '\n';
    while (write(fd, line, used) < 0 && errno == EINTR)
        ;
out:
    errno = saved;
}
