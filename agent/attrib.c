/* SPDX-License-Identifier: Apache-2.0 */
/* Attribution: the fraction a host process belongs to, decided from the
 * kernel alone. A process belongs to fraction F when F's supervisor (a
 * process the agent attached itself, pid + start time checked through a
 * pidfd) is the process or one of its ancestors — the whole chain up to
 * init, bounded only by a guard against a parent loop — or, for a container
 * fraction (whose cgroup is its alone), when it shares the supervisor's
 * cgroup — or when it was once found to belong to F and is still that
 * process (pid + start time): a process whose supervisor died (reparented to
 * init) stays F's. Ledgers and tenant files play no part. */
#include "attrib.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "fraction.h"
#include "proc.h"

#define SUP_HASH 8192        /* > 2 x GF_AGENT_FRACTIONS_MAX */
#define ANCESTRY_GUARD 65536 /* more steps than any real chain: a loop */
#define MEMBERS 16384        /* processes remembered as a fraction's */

static struct {
    bool dirty;
    pid_t pid[SUP_HASH];
    int frac[SUP_HASH];
    char own_cg[GF_CGROUP_MAX];
    bool own_cg_done;
} at = {.dirty = true};

void gf_attrib_dirty(void)
{
    at.dirty = true;
}

static unsigned slot_of(pid_t pid)
{
    return ((unsigned)pid * 2654435761u) % SUP_HASH;
}

static void rebuild(gf_agent *a)
{
    memset(at.pid, 0, sizeof(at.pid));
    for (int i = 0; i < a->n_fractions; i++) {
        gf_afraction *f = &a->fractions[i];
        if (f->supervisor <= 0 || f->sup_pidfd < 0)
            continue;
        unsigned h = slot_of(f->supervisor);
        while (at.pid[h])
            h = (h + 1) % SUP_HASH;
        at.pid[h] = f->supervisor;
        at.frac[h] = i;
    }
    at.dirty = false;
}

void gf_attrib_added(gf_agent *a, int i)
{
    const gf_afraction *f = &a->fractions[i];
    unsigned h;

    if (at.dirty || f->supervisor <= 0 || f->sup_pidfd < 0)
        return; /* the next lookup rebuilds, or there is nothing to add */
    for (h = slot_of(f->supervisor); at.pid[h] && at.pid[h] != f->supervisor;
         h = (h + 1) % SUP_HASH)
        ;
    at.pid[h] = f->supervisor;
    at.frac[h] = i;
}

static int sup_lookup(pid_t pid)
{
    for (unsigned h = slot_of(pid); at.pid[h]; h = (h + 1) % SUP_HASH)
        if (at.pid[h] == pid)
            return at.frac[h];
    return -1;
}

/* Processes found to belong to a fraction, by pid + start time: one whose
 * supervisor died (its parent is now init) still belongs to it, so the
 * watchdog judges it and a reclaim can take its loan back. A slot is reused
 * by whichever pid hashes there next; a stale entry never matches, its start
 * time does not. */
static struct member {
    pid_t pid;
    uint64_t start;
    uint64_t fid;
} members[MEMBERS];

static struct member *member_slot(pid_t pid)
{
    return &members[((unsigned)pid * 2654435761u) % MEMBERS];
}

static int member_of(gf_agent *a, pid_t pid, uint64_t start)
{
    const struct member *m = member_slot(pid);
    gf_afraction *f;

    if (m->pid != pid || m->start != start || !(f = gf_fraction_find_fid(a, m->fid)))
        return -1;
    return (int)(f - a->fractions);
}

static int by_lineage(gf_agent *a, pid_t pid)
{
    pid_t first = pid, parent;
    uint64_t first_start = 0, start;

    for (int steps = 0; pid > 1 && steps < ANCESTRY_GUARD; steps++, pid = parent) {
        int i = sup_lookup(pid);
        if (i >= 0 && steps == 0)
            return i; /* a supervisor itself */
        if (i < 0) {
            if (!gf_proc_stat(pid, &start, &parent))
                return -1;
            if (steps == 0)
                first_start = start;
            i = member_of(a, pid, start);
        }
        if (i >= 0) {
            *member_slot(first) = (struct member){first, first_start, a->fractions[i].fid};
            return i;
        }
        if (parent == pid)
            return -1;
    }
    return -1;
}

static int by_cgroup(gf_agent *a, pid_t pid)
{
    char cg[GF_CGROUP_MAX], scg[GF_CGROUP_MAX];

    if (!at.own_cg_done) {
        if (!gf_proc_cgroup(getpid(), at.own_cg, sizeof(at.own_cg)))
            at.own_cg[0] = '\0';
        at.own_cg_done = true;
    }
    if (!gf_proc_cgroup(pid, cg, sizeof(cg)) || strcmp(cg, at.own_cg) == 0)
        return -1;
    for (int i = 0; i < a->n_fractions; i++) {
        const gf_afraction *f = &a->fractions[i];
        if (!f->pod[0] || f->supervisor <= 0 || f->sup_pidfd < 0)
            continue;
        /* the agent's own cgroup (a host without per-container cgroups) is
         * never a fraction's */
        if (gf_proc_cgroup(f->supervisor, scg, sizeof(scg)) && strcmp(scg, at.own_cg) != 0 &&
            strcmp(scg, cg) == 0)
            return i;
    }
    return -1;
}

int gf_attribute(gf_agent *a, pid_t pid)
{
    int i;

    if (pid <= 1)
        return -1;
    if (at.dirty)
        rebuild(a);
    if ((i = by_lineage(a, pid)) >= 0)
        return i;
    return by_cgroup(a, pid);
}

bool gf_attrib_has_member(gf_agent *a, const gf_afraction *f)
{
    (void)a; /* the table is keyed by fid, which outlives f's slot */
    uint64_t start;

    for (int i = 0; i < MEMBERS; i++)
        if (members[i].pid > 0 && members[i].fid == f->fid &&
            gf_proc_stat(members[i].pid, &start, NULL) && start == members[i].start &&
            members[i].pid != f->supervisor)
            return true;
    return false;
}
