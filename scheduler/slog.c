/* SPDX-License-Identifier: Apache-2.0 */
#include <stdarg.h>
#include <stdatomic.h>

#include "slog.h"

static atomic_int level_ = GF_LOG_INFO;

void gf_slog_set_level(gf_log_level level)
{
    atomic_store(&level_, (int)level);
}

void gf_slog(gf_log_level level, const char *fmt, ...)
{
    va_list ap;

    if (level == GF_LOG_OFF || (int)level > atomic_load(&level_))
        return;
    va_start(ap, fmt);
    gf_log_vwrite(2, level, "scheduler", fmt, ap);
    va_end(ap);
}
