/* SPDX-License-Identifier: Apache-2.0 */
/* Log lines: "gpufrac[<pid>] <component> <level>: <message>". The caller owns
 * the level of each line and the file descriptor; the one piece of process
 * state is a threshold (default: everything passes) that a program's
 * --log-level sets once at start. */
#ifndef GPUFRAC_LOG_H
#define GPUFRAC_LOG_H

#include <stdarg.h>

typedef enum gf_log_level {
    GF_LOG_OFF = 0,
    GF_LOG_ERROR,
    GF_LOG_WARN,
    GF_LOG_INFO,
    GF_LOG_DEBUG,
} gf_log_level;

/* Parses "off|error|warn|info|debug" or "0".."4"; NULL or "" is off.
 * Returns -1 for anything else. */
int gf_log_level_parse(const char *s, gf_log_level *out);

/* Lines of a level above the threshold (less severe) are dropped by
 * gf_log_write/gf_log_vwrite. GF_LOG_DEBUG, the default, drops nothing;
 * GF_LOG_OFF drops everything. Set before threads start. */
void gf_log_set_threshold(gf_log_level level);
gf_log_level gf_log_threshold(void);

/* Formats one line into a stack buffer and writes it with a single write(2),
 * so lines from several processes sharing a file never interleave. No
 * allocation, async-signal-safe apart from vsnprintf. */
void gf_log_write(int fd, gf_log_level level, const char *component, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void gf_log_vwrite(int fd, gf_log_level level, const char *component, const char *fmt, va_list ap)
    __attribute__((format(printf, 4, 0)));

#endif
