/* SPDX-License-Identifier: Apache-2.0 */
#include "terminated.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "events.h"
#include "fraction.h"
#include "fsat.h"
#include "kube_event.h"
#include "quantity.h"
#include "statedir.h"

static char cause[GF_NAME_MAX + 64];

void gf_terminated_cause(const char *who)
{
    snprintf(cause, sizeof(cause), "%s", who ? who : "");
}

static void reason_text(const gf_agent *a, const gf_afraction *f, int gpu, gf_term_cause by,
                        uint64_t bytes, uint64_t limit, char *out, size_t len)
{
    char h1[32], h2[32], h3[32];

    gf_bytes_human(bytes, h1, sizeof(h1));
    if (by == GF_TERM_RECLAIM) {
        snprintf(out, len,
                 "evicted by gpufracd: its loan of %s above --memory on GPU %d was taken back "
                 "for %s%s%s, which is guaranteed that memory",
                 h1, a->gpus[gpu].dev.index, cause[0] ? "fraction \"" : "a guaranteed fraction",
                 cause, cause[0] ? "\"" : "");
        return;
    }
    gf_bytes_human(limit, h2, sizeof(h2));
    gf_bytes_human(bytes > limit ? bytes - limit : 0, h3, sizeof(h3));
    snprintf(out, len,
             "terminated by gpufracd's watchdog: the driver reports %s for fraction \"%s\" on "
             "GPU %d, %s over its limit of %s (a process bypassed the shim)",
             h1, f->cfg.name, a->gpus[gpu].dev.index, h3, h2);
}

/* The reason as the container's termination message: the kubelet reads the
 * host file at most 4096 bytes after the container ends. The path came from
 * root's runtime (containerd's config.json); the file is the kubelet's and
 * must already exist: no link followed at it, nothing created, nothing but a
 * regular file written (a FIFO or device would block or do otherwise). */
#define TERMINATION_MESSAGE_MAX 4096

static void write_termination_message(gf_agent *a, const gf_afraction *f, const char *reason)
{
    struct stat st;
    size_t n = strlen(reason);
    int fd;

    if (!f->termlog || !f->termlog[0])
        return;
    fd = open(f->termlog, O_WRONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || ftruncate(fd, 0) < 0 ||
        write(fd, reason, n < TERMINATION_MESSAGE_MAX ? n : TERMINATION_MESSAGE_MAX) < 0)
        gf_agent_event(a, "cannot write the termination message of fraction %s to %s%s",
                       f->cfg.name, f->termlog,
                       fd >= 0 && fstat(fd, &st) == 0 && !S_ISREG(st.st_mode)
                           ? " (not a regular file)"
                           : "");
    if (fd >= 0)
        close(fd);
}

void gf_terminated_record(gf_agent *a, gf_afraction *f, pid_t pid, int gpu, gf_term_cause by,
                          uint64_t bytes, uint64_t limit)
{
    char path[GF_PATH_MAX + 16], reason[512], line[900];
    const gf_config_device *cd = gf_aconfig_device(&f->cfg, a->gpus[gpu].dev.uuid);
    gf_cleanup_close int dfd = -1, fd = -1;
    int n;

    if (by == GF_TERM_WATCHDOG && cd)
        f->watchdog_kills_gpu[cd - f->cfg.devices]++;
    reason_text(a, f, gpu, by, bytes, limit, reason, sizeof(reason));
    n = snprintf(line, sizeof(line), "pid=%d by=%s gpu=%d uuid=%s time=%lld reason=%s\n", (int)pid,
                 by == GF_TERM_RECLAIM ? "reclaim" : "watchdog", a->gpus[gpu].dev.index,
                 a->gpus[gpu].dev.uuid, (long long)time(NULL), reason);
    write_termination_message(a, f, reason);
    if (snprintf(path, sizeof(path), "%s/" GF_FRAC_TERMINATED, f->dir) >= (int)sizeof(path) ||
        n <= 0)
        return;
    /* in the fraction's directory as the agent opened it (relative to the
     * fractions dir fd, no link followed on the way or at the file) */
    dfd = gf_at_dir(a->frac_dfd, f->cfg.name);
    fd = dfd < 0 ? -1 : gf_at_append(dfd, GF_FRAC_TERMINATED, 0644);
    if (fd < 0) {
        gf_agent_event(a, "cannot record why pid %d was terminated in %s", (int)pid, path);
        return;
    }
    if (write(fd, line, (size_t)(n < (int)sizeof(line) ? n : (int)sizeof(line) - 1)) < 0)
        gf_agent_event(a, "cannot record why pid %d was terminated in %s", (int)pid, path);
    gf_kube_event_terminated(a, f, pid, by == GF_TERM_WATCHDOG, reason);
}
