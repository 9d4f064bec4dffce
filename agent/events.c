/* SPDX-License-Identifier: Apache-2.0 */
/* The agent's events: one line each in its log and in <state>/events.log.
 *
 * events.log never holds more than a->events_max_bytes: a line that would
 * pass the bound first renames it to events.log.1 (the one older file kept,
 * replaced), so the two never take more than twice the bound. Lines of one
 * format string (the caller's fmt pointer) are rate-limited by a token bucket
 * (EVENTS_BURST, then EVENTS_PER_S); what is dropped is counted and said in
 * one "N similar lines suppressed" line, at most once a second per format
 * (before its next line that goes out, or at a tick). The state directory
 * may be a user's: no link is followed, only a plain file of the agent's
 * own, linked once, is appended to or rotated, and the rename replaces a
 * name without following what is there. Callable from any thread. */
#include "events.h"

#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "cleanup.h"
#include "log.h"
#include "proc.h"
#include "statedir.h"

#define EVENTS_LOG GF_STATE_EVENTS
#define EVENTS_OLD GF_STATE_EVENTS_OLD
#define EVENTS_BURST 50
#define EVENTS_PER_S 10
#define FORMATS_MAX 128

typedef struct bucket {
    const char *fmt; /* NULL: free */
    double tokens;
    int64_t refilled_ms; /* when tokens was last brought up to date */
    int64_t noted_ms;    /* when the last suppression note went out */
    uint64_t suppressed;
} bucket;

static pthread_mutex_t events_lock = PTHREAD_MUTEX_INITIALIZER;
static bucket buckets[FORMATS_MAX];

static int open_log(gf_agent *a, struct stat *st)
{
    gf_cleanup_close int fd =
        openat(a->state_dfd, EVENTS_LOG,
               O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
    if (fd < 0 || fstat(fd, st) < 0 || !S_ISREG(st->st_mode) || st->st_uid != geteuid() ||
        st->st_nlink != 1)
        return -1;
    return gf_steal_fd(&fd);
}

/* Appends one stamped line to events.log, rotating it first when the line
 * would take it past the bound. */
static void append(gf_agent *a, const char *line)
{
    char stamp[32], out[1100];
    struct stat st;
    time_t now = time(NULL);
    struct tm tm;
    gf_cleanup_close int fd = -1;
    int n;

    if (a->state_dfd < 0 || (fd = open_log(a, &st)) < 0)
        return;
    gmtime_r(&now, &tm);
    strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", &tm);
    n = snprintf(out, sizeof(out), "%s %s\n", stamp, line);
    if (n <= 0)
        n = 0;
    if ((size_t)n >= sizeof(out))
        n = (int)sizeof(out) - 1;
    if ((uint64_t)st.st_size + (uint64_t)n > a->events_max_bytes && st.st_size > 0) {
        /* the checked file is the one at the name: rename, then start a new one */
        renameat(a->state_dfd, EVENTS_LOG, a->state_dfd, EVENTS_OLD);
        close(gf_steal_fd(&fd));
        if ((fd = open_log(a, &st)) < 0)
            return;
    }
    if (n > 0 && write(fd, out, (size_t)n) < 0) {
        /* the log line already carries it */
    }
}

static void emit(gf_agent *a, const char *line)
{
    gf_log_write(a->log_fd, GF_LOG_INFO, "gpufracd", "%s", line);
    append(a, line);
}

static void note(gf_agent *a, bucket *b, int64_t now)
{
    char line[600];
    snprintf(line, sizeof(line),
             "%" PRIu64 " similar lines suppressed (at most %d a second "
             "after %d): \"%.480s\"",
             b->suppressed, EVENTS_PER_S, EVENTS_BURST, b->fmt);
    b->suppressed = 0;
    b->noted_ms = now;
    emit(a, line);
}

static bucket *bucket_of(const char *fmt, int64_t now)
{
    size_t h = (size_t)(((uintptr_t)fmt >> 3) % FORMATS_MAX);
    for (size_t i = 0; i < FORMATS_MAX; i++) {
        bucket *b = &buckets[(h + i) % FORMATS_MAX];
        if (b->fmt == fmt)
            return b;
        if (!b->fmt) {
            *b = (bucket){.fmt = fmt, .tokens = EVENTS_BURST, .refilled_ms = now, .noted_ms = now};
            return b;
        }
    }
    return NULL; /* more formats than the table: not limited */
}

/* Whether a line of b's format may go out now (takes a token). */
static bool take(bucket *b, int64_t now)
{
    b->tokens += (double)(now - b->refilled_ms) * EVENTS_PER_S / 1000.0;
    if (b->tokens > EVENTS_BURST)
        b->tokens = EVENTS_BURST;
    b->refilled_ms = now;
    if (b->tokens < 1.0)
        return false;
    b->tokens -= 1.0;
    return true;
}

void gf_agent_event(gf_agent *a, const char *fmt, ...)
{
    char line[1024];
    int64_t now = gf_now_ms();
    va_list ap;
    bucket *b;

    pthread_mutex_lock(&events_lock);
    b = bucket_of(fmt, now);
    if (b && !take(b, now)) {
        b->suppressed++;
        pthread_mutex_unlock(&events_lock);
        return;
    }
    if (b && b->suppressed && now - b->noted_ms >= 1000)
        note(a, b, now);
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    emit(a, line);
    pthread_mutex_unlock(&events_lock);
}

void gf_events_flush(gf_agent *a)
{
    int64_t now = gf_now_ms();

    pthread_mutex_lock(&events_lock);
    for (int i = 0; i < FORMATS_MAX; i++)
        if (buckets[i].fmt && buckets[i].suppressed && now - buckets[i].noted_ms >= 1000)
            note(a, &buckets[i], now);
    pthread_mutex_unlock(&events_lock);
}
