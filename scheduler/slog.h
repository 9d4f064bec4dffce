/* SPDX-License-Identifier: Apache-2.0 */
/* The scheduler's log: stderr, one process-wide level set by main. */
#ifndef GPUFRAC_SCHED_SLOG_H
#define GPUFRAC_SCHED_SLOG_H

#include "log.h"

void gf_slog_set_level(gf_log_level level);
void gf_slog(gf_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
