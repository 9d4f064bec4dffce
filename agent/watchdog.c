/* The watchdog (DESIGN 3.3, defence in depth): the driver's per-process
 * memory, summed per fraction and GPU, against the fraction's limit. A
 * process belongs to a fraction when it owns a live slot of the fraction's
 * ledger, else when it descends from the fraction's supervisor, else (only
 * for Kubernetes fractions, whose container cgroup is theirs alone) when it
 * shares the supervisor's cgroup. Everything else is left alone.
 *
 * All scratch space is static: a tick allocates nothing. Not reentrant; the
 * agent runs it from its one loop under a->lock. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent.h"
#include "terminated.h"

#define WD_PROCS_MAX 1024
#define WD_ANCESTRY_MAX 64
#define WD_CGROUP_MAX 256

typedef struct wd_proc {
    int f;        /* fraction index, -1: not ours */
    bool slotted; /* owns a live ledger slot (goes through the shim) */
} wd_proc;

typedef struct wd_frac {
    unsigned stamp;          /* == wd.stamp: sum/n are this GPU's */
    unsigned killed;         /* == wd.tick: already killed one this tick */
    unsigned cg_tick;        /* == wd.tick: cg holds the supervisor's cgroup */
    uint64_t sum;
    int n;
    char cg[WD_CGROUP_MAX];
} wd_frac;

static struct {
    unsigned tick, stamp;
    gf_proc_mem procs[WD_PROCS_MAX];
    wd_proc who[WD_PROCS_MAX];
    int touched[WD_PROCS_MAX];
    wd_frac frac[GF_AGENT_FRACTIONS_MAX];
    char own_cg[WD_CGROUP_MAX];
} wd;

static pid_t parent_of(pid_t pid)
{
    char path[64], text[512], *p;
    long ppid = 0;
    ssize_t n;
    int fd;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
        return 0;
    n = read(fd, text, sizeof(text) - 1);
    close(fd);
    if (n <= 0)
        return 0;
    text[n] = '\0';
    /* "pid (comm) state ppid ...": comm may hold ')' and spaces */
    if (!(p = strrchr(text, ')')) || sscanf(p + 1, " %*c %ld", &ppid) != 1)
        return 0;
    return (pid_t)ppid;
}

static int ancestry(pid_t pid, pid_t *chain)
{
    int n = 0;

    while (pid > 1 && n < WD_ANCESTRY_MAX) {
        chain[n++] = pid;
        pid = parent_of(pid);
    }
    return n;
}

/* The process's cgroup: the v2 path ("0::/..."), else the v1 memory one. */
static bool cgroup_of(pid_t pid, char *out)
{
    char path[64], line[WD_CGROUP_MAX + 32];
    bool found = false;
    FILE *fp;

    snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
    if (!(fp = fopen(path, "re")))
        return false;
    while (!found && fgets(line, sizeof(line), fp)) {
        const char *cg = strchr(line, ':') ? strchr(strchr(line, ':') + 1, ':') : NULL;
        if (!cg || (strncmp(line, "0::", 3) != 0 && !strstr(line, ":memory:")))
            continue;
        snprintf(out, WD_CGROUP_MAX, "%s", cg + 1);
        out[strcspn(out, "\n")] = '\0';
        found = strcmp(out, "/") != 0;
    }
    fclose(fp);
    return found;
}

static const char *supervisor_cgroup(int i, pid_t sup)
{
    wd_frac *w = &wd.frac[i];

    if (w->cg_tick != wd.tick) {
        w->cg_tick = wd.tick;
        if (!cgroup_of(sup, w->cg) || strcmp(w->cg, wd.own_cg) == 0)
            w->cg[0] = '\0'; /* no cgroup of its own: never match by cgroup */
    }
    return w->cg;
}

static int by_lineage(gf_agent *a, pid_t pid)
{
    pid_t chain[WD_ANCESTRY_MAX];
    int n = ancestry(pid, chain);

    for (int i = 0; i < a->n_fractions; i++)
        for (int k = 0; a->fractions[i].supervisor > 0 && k < n; k++)
            if (chain[k] == a->fractions[i].supervisor)
                return i;
    return -1;
}

static int by_cgroup(gf_agent *a, pid_t pid)
{
    char cg[WD_CGROUP_MAX];
    bool have = false;

    for (int i = 0; i < a->n_fractions; i++) {
        const gf_afraction *f = &a->fractions[i];
        if (!f->pod[0] || f->supervisor <= 0)
            continue;
        if (!have && !(have = cgroup_of(pid, cg)))
            return -1;
        const char *scg = supervisor_cgroup(i, f->supervisor);
        if (scg[0] && strcmp(scg, cg) == 0)
            return i;
    }
    return -1;
}

static wd_proc attribute(gf_agent *a, pid_t pid)
{
    gf_afraction *f = gf_registry_find_pid(a, pid, NULL);
    int i;

    if (f)
        return (wd_proc){.f = (int)(f - a->fractions), .slotted = true};
    if ((i = by_lineage(a, pid)) >= 0 || (i = by_cgroup(a, pid)) >= 0)
        return (wd_proc){.f = i};
    return (wd_proc){.f = -1};
}

/* Signals pid only if, seen through a pidfd (so the number cannot be reused
 * meanwhile), it still belongs to fraction i. */
static int terminate(gf_agent *a, pid_t pid, int i)
{
#ifdef SYS_pidfd_open
    int fd = (int)syscall(SYS_pidfd_open, pid, 0);
    int rc;

    if (fd >= 0) {
        rc = attribute(a, pid).f == i ? (int)syscall(SYS_pidfd_send_signal, fd, SIGKILL, NULL, 0)
                                      : -1;
        close(fd);
        return rc;
    }
    if (errno != ENOSYS)
        return -1;
#endif
    (void)a;
    (void)i;
    return kill(pid, SIGKILL);
}

/* The process to stop: one that bypassed the shim first, then the largest. */
static int victim(const gf_afraction *f, int i, int n)
{
    int best = -1;

    for (int k = 0; k < n; k++) {
        pid_t pid = wd.procs[k].pid;
        if (wd.who[k].f != i || pid <= 1 || pid == getpid() || pid == f->supervisor)
            continue;
        if (best < 0 || (!wd.who[k].slotted && wd.who[best].slotted) ||
            (wd.who[k].slotted == wd.who[best].slotted && wd.procs[k].used > wd.procs[best].used))
            best = k;
    }
    return best;
}

static uint64_t allowance(const gf_agent *a)
{
    return a->watchdog_ctx_allowance ? a->watchdog_ctx_allowance : GF_WATCHDOG_CTX_ALLOWANCE;
}

static void enforce(gf_agent *a, int g, int i, int n)
{
    gf_afraction *f = &a->fractions[i];
    wd_frac *w = &wd.frac[i];
    const gf_config_device *cd = gf_config_find_device(&f->cfg, a->gpus[g].uuid);
    int k;

    if (!cd || w->killed == wd.tick ||
        w->sum <= cd->limit + GF_WATCHDOG_SLACK + allowance(a) * (uint64_t)w->n)
        return;
    if ((k = victim(f, i, n)) < 0 || terminate(a, wd.procs[k].pid, i) < 0)
        return;
    w->killed = wd.tick;
    f->watchdog_kills++;
    atomic_fetch_add(&f->ledger.hdr->watchdog_kills, 1);
    a->watchdog_kills_total++;
    gf_agent_event(a, "watchdog: killed pid %d of fraction %s: driver reports %llu bytes on %s, "
                      "limit %llu",
                   (int)wd.procs[k].pid, f->cfg.name, (unsigned long long)w->sum,
                   a->gpus[g].uuid, (unsigned long long)cd->limit);
    gf_terminated_record(a, f, wd.procs[k].pid, g, GF_TERM_WATCHDOG, w->sum, cd->limit);
    gf_counters_save(a);
}

/* Sums GPU g's processes per fraction; returns how many fractions it touched. */
static int sum_gpu(gf_agent *a, int g, int n)
{
    int touched = 0;

    wd.stamp++;
    for (int k = 0; k < n; k++) {
        wd.who[k] = attribute(a, wd.procs[k].pid);
        if (wd.who[k].f < 0)
            continue;
        gf_afraction *f = &a->fractions[wd.who[k].f];
        const gf_config_device *cd = gf_config_find_device(&f->cfg, a->gpus[g].uuid);
        wd_frac *w = &wd.frac[wd.who[k].f];
        if (!cd) {
            wd.who[k].f = -1; /* a GPU the fraction was not given: not its limit to judge */
            continue;
        }
        if (w->stamp != wd.stamp) {
            w->stamp = wd.stamp;
            w->sum = 0;
            w->n = 0;
            wd.touched[touched++] = wd.who[k].f;
        }
        w->sum += wd.procs[k].used;
        w->n++;
        f->driver_used[cd - f->cfg.devices] += wd.procs[k].used;
    }
    return touched;
}

int gf_watchdog_tick(gf_agent *a, gf_error *err)
{
    int rc = 0;

    if (++wd.tick == 1 && !cgroup_of(getpid(), wd.own_cg))
        wd.own_cg[0] = '\0';
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
