/* SPDX-License-Identifier: Apache-2.0 */
/* The agent's own state, durable across SIGKILL: <state>/agent/journal.
 *
 * <state>/agent is the agent's (0700, checked to be a directory it owns, not
 * a link); nothing a tenant writes is read back from it. Every change is one
 * line appended with a single write() and fdatasync'd before the agent acts
 * on it (before it replies, publishes a loan or sends a signal), so a crash
 * at any instant leaves the journal describing everything that happened and
 * at most one intention (an eviction begun) to finish. A torn last line is
 * ignored. At start, and when it passes JOURNAL_COMPACT_BYTES, the journal is
 * rewritten as a snapshot (temp file, fsync, renameat).
 *
 *   seq N                                     newest loan number
 *   count EVICTIONS KILLS REQUESTS BAD TICKS  agent-wide counters (TICKS may be absent)
 *   gcount UUID MPS_FAULTS                    a GPU's counter
 *   sup FRACTION PID START ADMITTED           a supervisor the agent attached
 *   unsup FRACTION
 *   lend FRACTION UUID PID START BYTES SEQ    a loan (or more of one)
 *   return FRACTION UUID PID START BYTES
 *   evict FRACTION UUID PID START             SIGKILL decided, not yet seen done
 *   evicted FRACTION UUID PID START           the borrower is gone, counted
 *   gone FRACTION UUID PID START              the borrower ended on its own
 *   fcount FRACTION KILLS EVICTIONS...         a fraction's counters (one per config device)
 *   icount p|u ...                            evictions and kills of a label set (metrics_idents.c)
 *   rcount VERB REASON N                      refusals (metrics_refusals.h)
 *
 * Counters never go down across a restart: every value the metrics snapshot
 * takes is journaled before it is published (gf_journal_exposed, from the
 * loop under a->lock like every journal write), so the journal always holds
 * at least what any scrape saw. Evictions and watchdog kills are journaled as
 * they happen; the rest when a snapshot is published (each tick). */
#include "journal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/falloc.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "agent.h"
#include "cleanup.h"
#include "events.h"
#include "loans.h"
#include "log.h"
#include "metrics_idents.h"
#include "metrics_refusals.h"
#include "nvml.h"
#include "statedir.h"

#define JOURNAL GF_STATE_JOURNAL
#define JOURNAL_TMP GF_STATE_JOURNAL_TMP
#define JOURNAL_RESERVE (1 << 20) /* kept allocated past the journal's end */
#define JOURNAL_MAX_READ (64u << 20)
#define JOURNAL_COMPACT_BYTES (1u << 20)

typedef struct jsup {
    char name[GF_NAME_MAX];
    pid_t pid;
    uint64_t start;
    bool admitted, used;
} jsup;

static jsup sups[GF_AGENT_FRACTIONS_MAX];
static int n_sups;

typedef struct jcount {
    char name[GF_NAME_MAX];
    uint64_t kills, evictions[GF_CONFIG_DEVICES_MAX];
} jcount;

static jcount counts[GF_AGENT_FRACTIONS_MAX];
static int n_counts;

/* The counters as the journal holds them (replayed, snapshotted or appended). */
static struct {
    uint64_t evictions, kills, requests, bad, ticks;
    uint64_t mps_faults[GF_AGENT_GPUS_MAX];
    gf_refusals refusals;
} saved;

static void fcount_line(char *out, size_t len, const char *name, uint64_t kills, const uint64_t *ev)
{
    int n = snprintf(out, len, "fcount %s %" PRIu64, name, kills);
    for (int d = 0; d < GF_CONFIG_DEVICES_MAX && n > 0 && (size_t)n < len; d++)
        n += snprintf(out + n, len - (size_t)n, " %" PRIu64, ev[d]);
}

void gf_journal_fraction_counts(gf_agent *a, const gf_afraction *f)
{
    char line[512], ident[GF_IDENTS_LINE_MAX];
    fcount_line(line, sizeof(line), f->cfg.name, f->watchdog_kills, f->evictions);
    gf_journal(a, "%s", line);
    if (gf_idents_counted(a, f, ident, sizeof(ident)))
        gf_journal(a, "%s", ident);
}

void gf_journal_restore_counts(gf_agent *a, gf_afraction *f)
{
    for (int i = 0; i < n_counts; i++)
        if (strcmp(counts[i].name, f->cfg.name) == 0) {
            f->watchdog_kills = counts[i].kills;
            memcpy(f->evictions, counts[i].evictions, sizeof(f->evictions));
            counts[i] = counts[--n_counts];
            break;
        }
    gf_idents_opened(a, f);
}

static void replay_fcount(const char *line)
{
    char name[GF_NAME_MAX];
    const char *p = line + strlen("fcount ");
    jcount c = {0};
    int used = 0;

    if (sscanf(p, "%63s %" SCNu64 "%n", name, &c.kills, &used) != 2)
        return;
    p += used;
    for (int d = 0; d < GF_CONFIG_DEVICES_MAX; d++) {
        if (sscanf(p, " %" SCNu64 "%n", &c.evictions[d], &used) != 1)
            break;
        p += used;
    }
    snprintf(c.name, sizeof(c.name), "%s", name);
    for (int i = 0; i < n_counts; i++)
        if (strcmp(counts[i].name, name) == 0) {
            counts[i] = c;
            return;
        }
    if (n_counts < GF_AGENT_FRACTIONS_MAX)
        counts[n_counts++] = c;
}

#ifdef GF_TEST_HOOKS
void gf_test_crash_point(const char *step)
{
    const char *at = getenv("GPUFRAC_TEST_CRASH_AT");
    if (at && strcmp(at, step) == 0) {
        fprintf(stderr, "gpufracd: test hook: crashing at %s\n", step);
        raise(SIGKILL);
    }
}
#endif

/* The journal is full: nothing new is granted until gf_journal_reserve
 * finds room again. Said once per episode. */
static void journal_full(gf_agent *a, int e)
{
    if (!a->journal_full)
        gf_agent_event(a,
                       "journal: no room in %s/agent (%s): granting no loan, admission or "
                       "run until there is; what is granted already is kept",
                       a->state_dir, strerror(e));
    a->journal_full = true;
    a->journal_errno = e;
}

int gf_journal(gf_agent *a, const char *fmt, ...)
{
    char line[GF_IDENTS_LINE_MAX + 2];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
    va_end(ap);
    if (n < 0 || a->journal_fd < 0)
        return -1;
    if ((size_t)n > sizeof(line) - 2)
        n = (int)sizeof(line) - 2;
    line[n++] = '\n';
    /* one write: a SIGKILL lands before or after it, never inside */
    if (write(a->journal_fd, line, (size_t)n) != n || fdatasync(a->journal_fd) < 0) {
        int e = errno;
        gf_log_write(a->log_fd, GF_LOG_ERROR, "gpufracd", "journal: %s", strerror(e));
        journal_full(a, e);
        return -1;
    }
    a->journal_bytes += (size_t)n;
    return 0;
}

void gf_journal_reserve(gf_agent *a)
{
    struct statvfs vfs;
    struct stat st;

    if (a->journal_fd < 0 || fstat(a->journal_fd, &st) < 0)
        return journal_full(a, EBADF);
    /* allocates only what is missing of the range: once reserved, a full
     * file system does not fail it */
    if (fallocate(a->journal_fd, FALLOC_FL_KEEP_SIZE, st.st_size, JOURNAL_RESERVE) < 0 &&
        errno != EOPNOTSUPP) /* a file system that cannot reserve: its writes tell */
        return journal_full(a, errno);
    /* the reserve is for records that give back; past it, nothing new */
    if (fstatvfs(a->journal_fd, &vfs) == 0 &&
        (uint64_t)vfs.f_bavail * vfs.f_frsize < JOURNAL_RESERVE)
        return journal_full(a, ENOSPC);
    if (a->journal_full)
        gf_agent_event(a, "journal: room in %s/agent again: granting resumes", a->state_dir);
    a->journal_full = false;
}

int gf_journal_refuses(gf_agent *a, const char *what, gf_error *err)
{
    if (!a->journal_full)
        return 0;
    gf_agent_event(a, "refused %s: the agent cannot record it (%s in %s/agent)", what,
                   strerror(a->journal_errno), a->state_dir);
    return gf_error_set(err, GF_ESTATE,
                        "refused: the node agent cannot record %s (its journal: "
                        "%s); what it could not record it does not grant",
                        what, strerror(a->journal_errno));
}

static void replay_line(gf_agent *a, char *line)
{
    char verb[16], frac[GF_NAME_MAX], uuid[GF_UUID_MAX];
    unsigned long long v[5] = {0};
    long pid = 0;
    int n;
    gf_loan *l;

    if (sscanf(line, "%15s", verb) != 1)
        return;
    if (strcmp(verb, "fcount") == 0) {
        replay_fcount(line);
        return;
    }
    if (strcmp(verb, "icount") == 0) {
        gf_idents_replay(line);
        return;
    }
    if (strcmp(verb, "rcount") == 0 &&
        sscanf(line, "rcount %63s %95s %llu", frac, uuid, &v[0]) == 3) {
        gf_refusal_replay(frac, uuid, v[0]);
        return;
    }
    if (strcmp(verb, "seq") == 0 && sscanf(line, "seq %llu", &v[0]) == 1) {
        if (v[0] > a->loan_seq)
            a->loan_seq = v[0];
        return;
    }
    if (strcmp(verb, "count") == 0 &&
        sscanf(line, "count %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4]) >= 4) {
        a->evictions_total = v[0];
        a->watchdog_kills_total = v[1];
        a->requests_total = v[2];
        a->requests_bad = v[3];
        a->ticks = v[4];
        return;
    }
    if (strcmp(verb, "gcount") == 0 && sscanf(line, "gcount %95s %llu", uuid, &v[0]) == 2) {
        int g = gf_gpu_index(a, uuid);
        if (g >= 0)
            a->gpus[g].mps_restarts = v[0];
        return;
    }
    if (strcmp(verb, "sup") == 0 &&
        sscanf(line, "sup %63s %ld %llu %llu", frac, &pid, &v[0], &v[1]) == 4 && pid > 0) {
        jsup *s = NULL;
        for (int i = 0; i < n_sups && !s; i++)
            if (strcmp(sups[i].name, frac) == 0)
                s = &sups[i];
        if (!s && n_sups < GF_AGENT_FRACTIONS_MAX)
            s = &sups[n_sups++];
        if (s)
            *s = (jsup){.pid = (pid_t)pid, .start = v[0], .admitted = v[1] != 0};
        if (s)
            snprintf(s->name, sizeof(s->name), "%s", frac);
        return;
    }
    if (strcmp(verb, "unsup") == 0 && sscanf(line, "unsup %63s", frac) == 1) {
        for (int i = 0; i < n_sups; i++)
            if (strcmp(sups[i].name, frac) == 0)
                sups[i] = sups[--n_sups];
        return;
    }
    n = sscanf(line, "%*s %63s %95s %ld %llu %llu %llu", frac, uuid, &pid, &v[0], &v[1], &v[2]);
    if (n < 4 || pid <= 0)
        return;
    int gpu = gf_gpu_index(a, uuid);
    if (gpu < 0)
        return; /* a GPU this node no longer has */
    l = gf_loan_find(a, frac, gpu, (pid_t)pid, v[0]);
    if (strcmp(verb, "lend") == 0 && n == 6) {
        if (!l && (l = gf_loan_new(a))) {
            snprintf(l->fraction, sizeof(l->fraction), "%s", frac);
            l->gpu = gpu;
            l->pid = (pid_t)pid;
            l->start = v[0];
        }
        if (l) {
            l->bytes += v[1];
            l->seq = v[2];
        }
        if (v[2] > a->loan_seq)
            a->loan_seq = v[2];
    } else if (strcmp(verb, "return") == 0 && n == 5 && l) {
        l->bytes -= v[1] < l->bytes ? v[1] : l->bytes;
        if (!l->bytes && !l->evicting)
            gf_loan_free(a, l);
    } else if (strcmp(verb, "evict") == 0 && l) {
        l->evicting = true;
    } else if ((strcmp(verb, "evicted") == 0 || strcmp(verb, "gone") == 0) && l) {
        gf_loan_free(a, l);
    }
}

static int replay(gf_agent *a, gf_error *err)
{
    gf_cleanup_close int fd = openat(a->priv_dfd, JOURNAL, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    gf_cleanup_free char *buf = NULL;
    struct stat st;
    size_t len = 0;

    if (fd < 0 && errno == ENOENT)
        return 0;
    if (fd < 0)
        return gf_error_sys(err, "opening %s/" GF_STATE_AGENT_DIR "/" JOURNAL, a->state_dir);
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > JOURNAL_MAX_READ)
        return gf_error_set(err, GF_EINVAL,
                            "%s/" GF_STATE_AGENT_DIR "/" JOURNAL " is not a journal of gpufracd",
                            a->state_dir);
    if (!(buf = malloc((size_t)st.st_size + 1)))
        return gf_error_set(err, GF_ENOSPACE, "out of memory reading the journal");
    while (len < (size_t)st.st_size) {
        ssize_t n = read(fd, buf + len, (size_t)st.st_size - len);
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    buf[len] = '\0';
    for (char *p = buf, *nl; (nl = memchr(p, '\n', (size_t)(buf + len - p))); p = nl + 1) {
        *nl = '\0'; /* a last line without its newline was torn: never applied */
        replay_line(a, p);
    }
    return 0;
}

bool gf_journal_supervisor(gf_agent *a, const char *name, pid_t *pid, uint64_t *start,
                           bool *admitted)
{
    (void)a;
    for (int i = 0; i < n_sups; i++)
        if (strcmp(sups[i].name, name) == 0) {
            *pid = sups[i].pid;
            *start = sups[i].start;
            *admitted = sups[i].admitted;
            sups[i] = sups[--n_sups];
            return true;
        }
    return false;
}

static int snapshot(gf_agent *a, FILE *fp)
{
    fprintf(fp, "seq %" PRIu64 "\n", a->loan_seq);
    fprintf(fp, "count %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n",
            a->evictions_total, a->watchdog_kills_total, a->requests_total, a->requests_bad,
            a->ticks);
    for (int g = 0; g < a->n_gpus; g++)
        if (a->gpus[g].mps_restarts)
            fprintf(fp, "gcount %s %" PRIu64 "\n", a->gpus[g].dev.uuid, a->gpus[g].mps_restarts);
    for (int i = 0; i < a->n_fractions; i++) {
        const gf_afraction *f = &a->fractions[i];
        if (f->supervisor > 0)
            fprintf(fp, "sup %s %d %" PRIu64 " %d\n", f->cfg.name, (int)f->supervisor, f->sup_start,
                    f->sup_admitted);
    }
    for (int i = 0; i < a->n_fractions; i++) {
        const gf_afraction *f = &a->fractions[i];
        char line[512];
        fcount_line(line, sizeof(line), f->cfg.name, f->watchdog_kills, f->evictions);
        fprintf(fp, "%s\n", line);
    }
    for (int i = 0; i < n_counts; i++) {
        char line[512];
        fcount_line(line, sizeof(line), counts[i].name, counts[i].kills, counts[i].evictions);
        fprintf(fp, "%s\n", line);
    }
    gf_idents_write(fp);
    for (int v = 0; v < GF_REFUSAL_VERBS; v++)
        for (int r = 0; r < GF_REFUSAL_REASONS; r++)
            if (gf_refusals_now.n[v][r])
                fprintf(fp, "rcount %s %s %" PRIu64 "\n", gf_refusal_verb_name(v),
                        gf_refusal_reason_name(r), gf_refusals_now.n[v][r]);
    for (int i = 0; i < n_sups; i++) /* not opened yet (first scan still to come) */
        fprintf(fp, "sup %s %d %" PRIu64 " %d\n", sups[i].name, (int)sups[i].pid, sups[i].start,
                sups[i].admitted);
    for (int i = 0; i < a->loans_high; i++) {
        const gf_loan *l = &a->loans[i];
        if (!l->used)
            continue;
        fprintf(fp, "lend %s %s %d %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", l->fraction,
                a->gpus[l->gpu].dev.uuid, (int)l->pid, l->start, l->bytes, l->seq);
        if (l->evicting)
            fprintf(fp, "evict %s %s %d %" PRIu64 "\n", l->fraction, a->gpus[l->gpu].dev.uuid,
                    (int)l->pid, l->start);
    }
    return fflush(fp) == 0 && fsync(fileno(fp)) == 0 ? 0 : -1;
}

static void saved_counts(const gf_agent *a)
{
    saved.evictions = a->evictions_total;
    saved.kills = a->watchdog_kills_total;
    saved.requests = a->requests_total;
    saved.bad = a->requests_bad;
    saved.ticks = a->ticks;
}

static void saved_all(const gf_agent *a)
{
    saved_counts(a);
    saved.refusals = gf_refusals_now;
    for (int g = 0; g < a->n_gpus; g++)
        saved.mps_faults[g] = a->gpus[g].mps_restarts;
}

void gf_journal_compact(gf_agent *a)
{
    int fd = openat(a->priv_dfd, JOURNAL_TMP, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
                    0600);
    FILE *fp = fd >= 0 ? fdopen(fd, "w") : NULL;
    bool ok;

    if (!fp) {
        if (fd >= 0)
            close(fd);
        gf_log_write(a->log_fd, GF_LOG_ERROR, "gpufracd", "journal: cannot compact: %s",
                     strerror(errno));
        return;
    }
    /* every byte on disk before it replaces the journal: a full disk fails
     * the compaction, never truncates the journal */
    ok = snapshot(a, fp) == 0 && fflush(fp) == 0 && fsync(fd) == 0;
    ok = fclose(fp) == 0 && ok;
    if (!ok || renameat(a->priv_dfd, JOURNAL_TMP, a->priv_dfd, JOURNAL) < 0) {
        unlinkat(a->priv_dfd, JOURNAL_TMP, 0);
        gf_log_write(a->log_fd, GF_LOG_ERROR, "gpufracd", "journal: cannot compact");
        return;
    }
    fsync(a->priv_dfd);
    saved_all(a);
    if (a->journal_fd >= 0)
        close(a->journal_fd);
    a->journal_fd = openat(a->priv_dfd, JOURNAL, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
    a->journal_bytes = 0;
    gf_journal_reserve(a);
}

static void journal_count(gf_agent *a)
{
    gf_journal(a, "count %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64,
               a->evictions_total, a->watchdog_kills_total, a->requests_total, a->requests_bad,
               a->ticks);
    saved_counts(a);
}

static void journal_gpu_counts(gf_agent *a)
{
    for (int g = 0; g < a->n_gpus; g++)
        if (a->gpus[g].mps_restarts != saved.mps_faults[g]) {
            gf_journal(a, "gcount %s %" PRIu64, a->gpus[g].dev.uuid, a->gpus[g].mps_restarts);
            saved.mps_faults[g] = a->gpus[g].mps_restarts;
        }
}

static void journal_refusals(gf_agent *a)
{
    for (int v = 0; v < GF_REFUSAL_VERBS; v++)
        for (int r = 0; r < GF_REFUSAL_REASONS; r++)
            if (gf_refusals_now.n[v][r] != saved.refusals.n[v][r]) {
                gf_journal(a, "rcount %s %s %" PRIu64, gf_refusal_verb_name(v),
                           gf_refusal_reason_name(r), gf_refusals_now.n[v][r]);
                saved.refusals.n[v][r] = gf_refusals_now.n[v][r];
            }
}

static bool counts_changed(const gf_agent *a)
{
    return a->evictions_total != saved.evictions || a->watchdog_kills_total != saved.kills ||
           a->requests_total != saved.requests || a->requests_bad != saved.bad;
}

void gf_journal_counters(gf_agent *a)
{
    if (counts_changed(a)) /* ticks alone are no reason: an idle agent writes nothing */
        journal_count(a);
    journal_gpu_counts(a);
    journal_refusals(a);
    if (a->journal_bytes > JOURNAL_COMPACT_BYTES)
        gf_journal_compact(a);
}

void gf_journal_exposed(gf_agent *a)
{
    char ident[GF_IDENTS_LINE_MAX];

    if (counts_changed(a) || a->ticks != saved.ticks)
        journal_count(a);
    journal_gpu_counts(a);
    journal_refusals(a);
    while (gf_idents_unjournaled(ident, sizeof(ident)))
        gf_journal(a, "%s", ident);
}

int gf_journal_open(gf_agent *a, gf_error *err)
{
    if (replay(a, err) < 0)
        return -1;
    gf_journal_compact(a);
    if (a->journal_fd < 0) /* not compacted (a full disk): go on appending to it */
        a->journal_fd = openat(a->priv_dfd, JOURNAL,
                               O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (a->journal_fd < 0)
        return gf_error_sys(err, "opening %s/" GF_STATE_AGENT_DIR "/" JOURNAL, a->state_dir);
    gf_journal_reserve(a);
    return 0;
}
