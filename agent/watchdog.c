/* SPDX-License-Identifier: Apache-2.0 */
/* The watchdog (the enforcement layer): the driver's per-process
 * memory on every GPU (NVML, host pids), summed per fraction, against the
 * fraction's bound. A process belongs to a fraction as attrib.c decides from
 * the kernel (ancestry to a supervisor the agent attached, or a container's
 * cgroup); ledgers play no part, so a corrupt or forged ledger changes
 * nothing here. Contexts are counted where the driver shows them: the
 * footprint is what NVML reports for processes that really hold memory on
 * that GPU, and the only slack is one tolerance per GPU.
 *
 * The bound is the config's limit; a fraction that borrows from this agent
 * (its config names the agent) is bound by request + what the agent lent it
 * on that GPU (its own record), so writing `lent` into a ledger buys nothing.
 *
 * All scratch space is static: a tick allocates nothing. Not reentrant; the
 * agent runs it from its one loop under a->lock. */
#include "watchdog.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "attrib.h"
#include "events.h"
#include "fraction.h"
#include "journal.h"
#include "ledger_view.h"
#include "loans.h"
#include "nvml.h"
#include "proc.h"
#include "terminated.h"

#define WD_PROCS_MAX 1024

typedef struct wd_frac {
    unsigned stamp;  /* == wd.stamp: sum/n are this GPU's */
    unsigned killed; /* == wd.tick: already killed one this tick */
    uint64_t sum;
    int n;
} wd_frac;

static struct {
    unsigned tick, stamp;
    gf_proc_mem procs[WD_PROCS_MAX];
    int who[WD_PROCS_MAX];
    int touched[WD_PROCS_MAX];
    wd_frac frac[GF_AGENT_FRACTIONS_MAX];
} wd;

uint64_t gf_watchdog_tolerance(const gf_agent *a, int gpu)
{
    uint64_t t = a->gpus[gpu].dev.total / 512;
    if (a->watchdog_tolerance)
        return a->watchdog_tolerance;
    return t > GF_WATCHDOG_TOLERANCE_MIN ? t : GF_WATCHDOG_TOLERANCE_MIN;
}

/* Signals pid only through a pidfd opened now, and only if, seen through
 * it, the process still belongs to fraction i. */
static int terminate(gf_agent *a, pid_t pid, int i)
{
    int fd = gf_pidfd_open(pid), rc = -1;

    if (fd < 0)
        return -1;
    if (gf_attribute(a, pid) == i && !gf_pidfd_exited(fd))
        rc = gf_pidfd_kill(fd);
    close(fd);
    return rc;
}

/* The process to stop: the largest of the fraction's, never its supervisor. */
static int victim(const gf_afraction *f, int i, int n)
{
    int best = -1;

    for (int k = 0; k < n; k++) {
        pid_t pid = wd.procs[k].pid;
        if (wd.who[k] != i || pid <= 1 || pid == getpid() || pid == f->supervisor)
            continue;
        if (best < 0 || wd.procs[k].used > wd.procs[best].used)
            best = k;
    }
    return best;
}

static uint64_t bound(gf_agent *a, const gf_afraction *f, const gf_config_device *cd, int g)
{
    uint64_t b;
    if (!cd)
        return 0; /* a GPU the fraction was not given: any footprint there is a bypass */
    if (!f->cfg.agent[0] || cd->limit <= cd->request)
        return cd->limit; /* no burst through this agent: the shim's cap is the limit */
    b = cd->request + gf_loans_of(a, f, g);
    return b < cd->limit ? b : cd->limit;
}

static void enforce(gf_agent *a, int g, int i, int n)
{
    gf_afraction *f = &a->fractions[i];
    wd_frac *w = &wd.frac[i];
    const gf_config_device *cd = gf_aconfig_device(&f->cfg, a->gpus[g].dev.uuid);
    uint64_t b;
    int k;

    if (w->killed == wd.tick)
        return;
    b = bound(a, f, cd, g);
    if (w->sum <= b + gf_watchdog_tolerance(a, g))
        return;
    if ((k = victim(f, i, n)) < 0)
        return;
    /* the reason is on record before the process dies, so its gpufrac run,
     * which reaps it at once, finds it; the bound passed is what the owner
     * is told (the limit, or request + the agent's loans) */
    gf_terminated_record(a, f, wd.procs[k].pid, g, GF_TERM_WATCHDOG, w->sum, b);
    if (terminate(a, wd.procs[k].pid, i) < 0)
        return;
    w->killed = wd.tick;
    f->watchdog_kills++;
    a->watchdog_kills_total++;
    gf_journal_fraction_counts(a, f);
    /* the shim's copy, for gpufrac status */
    if (f->ledger_fd >= 0 && gf_ledger_view_publish_kills(f->ledger_fd, f->watchdog_kills) < 0) {
        /* a ledger the tenant broke: metrics still have it */
    }
    gf_agent_event(a,
                   "watchdog: killed pid %d of fraction %s: driver reports %llu bytes on %s, "
                   "bound %llu (%s %llu)",
                   (int)wd.procs[k].pid, f->cfg.name, (unsigned long long)w->sum,
                   a->gpus[g].dev.uuid, (unsigned long long)b,
                   cd ? "limit" : "a GPU the fraction was not given: limit",
                   (unsigned long long)(cd ? cd->limit : 0));
    gf_journal_counters(a);
}

/* Sums GPU g's processes per fraction; returns how many fractions it touched. */
static int sum_gpu(gf_agent *a, int g, int n)
{
    int touched = 0;

    wd.stamp++;
    for (int k = 0; k < n; k++) {
        wd.who[k] = gf_attribute(a, wd.procs[k].pid);
        if (wd.who[k] < 0)
            continue;
        gf_afraction *f = &a->fractions[wd.who[k]];
        const gf_config_device *cd = gf_aconfig_device(&f->cfg, a->gpus[g].dev.uuid);
        wd_frac *w = &wd.frac[wd.who[k]];
        if (w->stamp != wd.stamp) {
            w->stamp = wd.stamp;
            w->sum = 0;
            w->n = 0;
            wd.touched[touched++] = wd.who[k];
        }
        w->sum += wd.procs[k].used;
        w->n++;
        if (cd) /* on a GPU it was not given it has no figure, only a bound of 0 */
            f->driver_used[cd - f->cfg.devices] += wd.procs[k].used;
    }
    return touched;
}

int gf_watchdog_tick(gf_agent *a, gf_error *err)
{
    int rc = 0;

    ++wd.tick;
    for (int i = 0; i < a->n_fractions; i++)
        memset(a->fractions[i].driver_used, 0, sizeof(a->fractions[i].driver_used));
    for (int g = 0; g < a->n_gpus; g++) {
        int n = gf_agent_nvml_procs(a, g, wd.procs, WD_PROCS_MAX, err);
        if (n < 0) {
            rc = -1;
            continue;
        }
        int touched = sum_gpu(a, g, n);
        for (int t = 0; t < touched; t++)
            enforce(a, g, wd.touched[t], n);
    }
    return rc;
}
