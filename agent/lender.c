/* SPDX-License-Identifier: Apache-2.0 */
/* Burst: memory between a fraction's request and its limit is lent only from
 * what no fraction on that GPU is guaranteed and nobody has on loan, and is
 * taken back, newest loan first, when a guaranteed owner needs it.
 *
 * The agent's loan record (a->loans, journaled) is the truth: who borrowed
 * (host pid + start time, a pidfd held for the loan's life), how much, in
 * which order. The ledger's `lent` is the shim's copy, written from it.
 * Taking a loan back never waits in the loop: the victims are SIGKILLed
 * through their pidfds, whose exit the loop sees like any other event, and
 * the reclaimer gets its answer then. */
#include "lender.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "attrib.h"
#include "cleanup.h"
#include "conn.h"
#include "events.h"
#include "fraction.h"
#include "gate.h"
#include "journal.h"
#include "ledger_view.h"
#include "loans.h"
#include "mps.h"
#include "nvml.h"
#include "proc.h"
#include "proto.h"
#include "quantity.h"
#include "registry.h"
#include "terminated.h"

typedef struct reclaim {
    bool used;
    gf_reply_token to;
    int gpu;
    int evicted;
    int64_t deadline;
} reclaim;

static reclaim pending[GF_AGENT_RECLAIMS_MAX];

void gf_loans_publish(gf_agent *a, gf_afraction *f)
{
    if (!f->view.ok)
        return; /* a corrupt ledger: no entry the shim would read */
    /* one kept entry per GPU of the node f's config covers */
    for (int i = 0; i < f->view.n_entries; i++) {
        gf_ledger_view_entry *e = &f->view.entries[i];
        int g = e->tag;
        const gf_config_device *cd = gf_aconfig_device(&f->cfg, a->gpus[g].dev.uuid);
        if (!cd || e->index < 0)
            continue; /* no entry the shim would read */
        uint64_t lent = gf_loans_of(a, f, g), ev = f->evictions[cd - f->cfg.devices];
        gf_ledger_view_publish(f->ledger_fd, e->index, offsetof(gf_ledger_device, lent), lent);
        gf_ledger_view_publish(f->ledger_fd, e->index, offsetof(gf_ledger_device, evictions), ev);
        /* the view shows the agent's figures, not the tenant's */
        atomic_store(&e->dev.lent, lent);
        atomic_store(&e->dev.evictions, ev);
    }
}

/* What f may borrow of `bytes` on GPU gpu: what is left below its limit, and
 * on the GPU what no fraction is guaranteed and nobody has on loan. */
static uint64_t room_for(const gf_agent *a, const gf_afraction *f, const gf_config_device *cd,
                         int gpu, uint64_t bytes, uint64_t *room_fraction, uint64_t *room_gpu)
{
    const gf_agent_gpu *g = &a->gpus[gpu];
    uint64_t lent = gf_loans_of(a, f, gpu), committed = g->guaranteed + g->lent;

    *room_fraction = cd->limit > cd->request + lent ? cd->limit - cd->request - lent : 0;
    *room_gpu = g->dev.total > committed ? g->dev.total - committed : 0;
    if (bytes > *room_fraction)
        bytes = *room_fraction;
    return bytes < *room_gpu ? bytes : *room_gpu;
}

/* The borrower's loan on GPU gpu, made (holding a duplicate of peer_pidfd,
 * watched by the loop) when it has none yet. */
static gf_loan *loan_of(gf_agent *a, const gf_afraction *f, int gpu, pid_t pid, uint64_t start,
                        int peer_pidfd, gf_error *err)
{
    gf_loan *l = gf_loan_find(a, f->cfg.name, gpu, pid, start);
    gf_cleanup_close int pidfd = -1;

    if (l)
        return l; /* it holds a pidfd already */
    /* the connection's own pidfd: the loan is the connecting process's, and
     * its number cannot be reused while the loan holds it */
    if ((pidfd = fcntl(peer_pidfd, F_DUPFD_CLOEXEC, 0)) < 0) {
        gf_error_set(err, GF_ESTATE, "the borrower exited");
        return NULL;
    }
    if (!(l = gf_loan_new(a))) {
        gf_error_set(err, GF_ENOSPACE, "the agent holds %d loans, its most", GF_AGENT_LOANS_MAX);
        return NULL;
    }
    *l = (gf_loan){
        .used = true, .gpu = gpu, .pid = pid, .start = start, .pidfd = gf_steal_fd(&pidfd)};
    snprintf(l->fraction, sizeof(l->fraction), "%s", f->cfg.name);
    gf_loan_watch(a, l);
    return l;
}

int gf_lend(gf_agent *a, gf_afraction *f, pid_t pid, int peer_pidfd, int gpu, uint64_t bytes,
            uint64_t *granted, gf_error *err)
{
    gf_agent_gpu *g = &a->gpus[gpu];
    const gf_config_device *cd = gf_aconfig_device(&f->cfg, g->dev.uuid);
    char h1[32], h2[32];
    uint64_t start, room_fraction, room_gpu, give;
    gf_loan *l;

    *granted = 0;
    if (!cd)
        return gf_error_set(err, GF_EINVAL, "fraction %s has no share of %s", f->cfg.name,
                            g->dev.uuid);
    if (gf_journal_refuses(a, "a loan", err) < 0)
        return -1;
    if (!gf_proc_stat(pid, &start, NULL))
        return gf_error_set(err, GF_ESTATE, "the borrower exited");
    if (!(give = room_for(a, f, cd, gpu, bytes, &room_fraction, &room_gpu))) {
        gf_bytes_human(room_gpu, h1, sizeof(h1));
        gf_bytes_human(bytes, h2, sizeof(h2));
        return gf_error_set(err, GF_ESTATE,
                            "no burst memory for %s on %s: %s asked, %s neither guaranteed nor "
                            "lent, %s left below its limit",
                            f->cfg.name, g->dev.uuid, h2, h1, room_fraction ? "some" : "nothing");
    }
    if (!(l = loan_of(a, f, gpu, pid, start, peer_pidfd, err)))
        return -1;
    /* journaled before anyone can act on it: a crash from here on keeps it;
     * a loan the journal did not take is not granted */
    if (gf_journal(a, "lend %s %s %d %" PRIu64 " %" PRIu64 " %" PRIu64, f->cfg.name, g->dev.uuid,
                   (int)pid, start, give, a->loan_seq + 1) < 0) {
        if (!l->bytes)
            gf_loan_free(a, l); /* never granted */
        return gf_journal_refuses(a, "a loan", err);
    }
    l->bytes += give;
    l->seq = ++a->loan_seq;
    gf_test_crash_point("lend");
    g->lent += give;
    gf_loans_publish(a, f);
    *granted = give;
    return 0;
}

int gf_return_loan(gf_agent *a, gf_afraction *f, pid_t pid, int gpu, uint64_t bytes)
{
    uint64_t start;
    gf_loan *l;

    if (!gf_proc_stat(pid, &start, NULL) || !(l = gf_loan_find(a, f->cfg.name, gpu, pid, start)))
        return -1;
    if (bytes > l->bytes)
        bytes = l->bytes;
    gf_journal(a, "return %s %s %d %" PRIu64 " %" PRIu64, f->cfg.name, a->gpus[gpu].dev.uuid,
               (int)pid, start, bytes);
    l->bytes -= bytes;
    a->gpus[gpu].lent -= bytes < a->gpus[gpu].lent ? bytes : a->gpus[gpu].lent;
    if (!l->bytes && !l->evicting)
        gf_loan_free(a, l);
    gf_loans_publish(a, f);
    return 0;
}

static bool evicting_on(const gf_agent *a, int gpu)
{
    for (int i = 0; i < a->loans_high; i++)
        if (a->loans[i].used && a->loans[i].evicting && a->loans[i].gpu == gpu)
            return true;
    return false;
}

static void answer(gf_agent *a, reclaim *r, bool timed_out)
{
    char m[128];
    gf_msg out;

    if (timed_out) {
        snprintf(m, sizeof(m), "borrowers on this GPU did not exit within %d ms of SIGKILL",
                 GF_AGENT_RECLAIM_WAIT_MS);
        gf_reply_error(&out, m);
    } else {
        gf_msg_init(&out, "ok");
        gf_msg_add_u64(&out, "evicted", (uint64_t)r->evicted);
    }
    gf_conn_reply(a, r->to, &out);
    r->used = false;
}

static void reclaims_check(gf_agent *a)
{
    for (int i = 0; i < GF_AGENT_RECLAIMS_MAX; i++)
        if (pending[i].used && !evicting_on(a, pending[i].gpu))
            answer(a, &pending[i], false);
}

void gf_reclaim_expire(gf_agent *a)
{
    int64_t now = gf_now_ms();
    for (int i = 0; i < GF_AGENT_RECLAIMS_MAX; i++)
        if (pending[i].used && now >= pending[i].deadline)
            answer(a, &pending[i], true);
}

/* SIGKILLs the borrower of loan l, if it is still the process that borrowed
 * (pidfd open since the loan, start time unchanged) and still belongs to the
 * loan's fraction at this moment. */
static bool evict_begin(gf_agent *a, gf_loan *l)
{
    gf_afraction *f = gf_registry_find_name(a, l->fraction);
    uint64_t start;
    gf_error err;

    int owner;

    /* the loan's own process (its pidfd, its start time): taken back unless
     * it now belongs to another fraction; one that belongs to none (its
     * supervisor died before the agent knew it) still holds the loan */
    if (!f || gf_pidfd_exited(l->pidfd) || !gf_proc_stat(l->pid, &start, NULL) || start != l->start)
        return false;
    owner = gf_attribute(a, l->pid);
    if (owner >= 0 && owner != (int)(f - a->fractions))
        return false;
    gf_journal(a, "evict %s %s %d %" PRIu64, l->fraction, a->gpus[l->gpu].dev.uuid, (int)l->pid,
               l->start);
    gf_test_crash_point("reclaim-journaled");
    if (a->gpus[l->gpu].mode == GF_MODE_SM_SHARING &&
        gf_mps_terminate_clients(a, l->gpu, &l->pid, 1, &err) < 0)
        /* let MPS tear the client down first: killing one mid-work can wedge
         * the server for every tenant */
        gf_agent_event(a, "reclaim: %s", err.msg);
    /* the reason is on record before the process dies, so its gpufrac run,
     * which reaps it at once, finds it */
    gf_terminated_record(a, f, l->pid, l->gpu, GF_TERM_RECLAIM, l->bytes, 0);
    gf_pidfd_kill(l->pidfd);
    l->evicting = true;
    gf_test_crash_point("reclaim-killed");
    return true;
}

static int newest(const gf_agent *a, int gpu, uint64_t below)
{
    int best = -1;
    for (int i = 0; i < a->loans_high; i++) {
        const gf_loan *l = &a->loans[i];
        if (l->used && !l->evicting && l->gpu == gpu && l->bytes && l->seq < below &&
            (best < 0 || l->seq > a->loans[best].seq))
            best = i;
    }
    return best;
}

static int reclaim_start(gf_agent *a, int gpu, uint64_t bytes, gf_reply_token to, gf_error *err)
{
    uint64_t back = 0, below = UINT64_MAX;
    int evicted = 0, slot = -1, i;

    for (i = 0; i < GF_AGENT_RECLAIMS_MAX && slot < 0; i++)
        if (!pending[i].used)
            slot = i;
    if (slot < 0)
        return gf_error_set(err, GF_ENOSPACE, "%d reclaims are already waiting",
                            GF_AGENT_RECLAIMS_MAX);
    for (i = 0; i < a->loans_high; i++) /* already on their way back */
        if (a->loans[i].used && a->loans[i].evicting && a->loans[i].gpu == gpu) {
            back += a->loans[i].bytes;
            evicted++;
        }
    while (back < bytes && (i = newest(a, gpu, below)) >= 0) {
        below = a->loans[i].seq;
        if (evict_begin(a, &a->loans[i])) {
            back += a->loans[i].bytes;
            evicted++;
        }
    }
    if (!evicted)
        return gf_error_set(err, GF_ESTATE, "nothing on loan on %s to take back",
                            a->gpus[gpu].dev.uuid);
    pending[slot] = (reclaim){.used = true,
                              .to = to,
                              .gpu = gpu,
                              .evicted = evicted,
                              .deadline = gf_now_ms() + GF_AGENT_RECLAIM_WAIT_MS};
    return 0;
}

static void finish(gf_agent *a, gf_loan *l, const char *how)
{
    gf_afraction *f = gf_registry_find_name(a, l->fraction);
    const char *uuid = a->gpus[l->gpu].dev.uuid;
    char h[32];

    if (l->evicting) {
        gf_journal(a, "evicted %s %s %d %" PRIu64, l->fraction, uuid, (int)l->pid, l->start);
        a->evictions_total++;
        if (f) {
            const gf_config_device *cd = gf_aconfig_device(&f->cfg, uuid);
            if (cd)
                f->evictions[cd - f->cfg.devices]++;
            gf_journal_fraction_counts(a, f);
        }
        gf_journal_counters(a);
        gf_bytes_human(l->bytes, h, sizeof(h));
        gf_agent_event(a,
                       "reclaim: terminated pid %d of fraction %s on %s to take back its loan "
                       "of %s%s",
                       (int)l->pid, l->fraction, uuid, h, how);
    } else {
        gf_journal(a, "gone %s %s %d %" PRIu64, l->fraction, uuid, (int)l->pid, l->start);
    }
    a->gpus[l->gpu].lent -= l->bytes < a->gpus[l->gpu].lent ? l->bytes : a->gpus[l->gpu].lent;
    gf_loan_free(a, l);
    if (f)
        gf_loans_publish(a, f);
}

void gf_loan_exited(void *agent, uint64_t slot, uint32_t events)
{
    gf_agent *a = agent;

    (void)events;
    pthread_mutex_lock(&a->lock);
    if (slot < GF_AGENT_LOANS_MAX && a->loans[slot].used) {
        finish(a, &a->loans[slot], "");
        reclaims_check(a);
    }
    pthread_mutex_unlock(&a->lock);
}

void gf_loans_recover(gf_agent *a)
{
    for (int i = 0; i < a->loans_high; i++) {
        gf_loan *l = &a->loans[i];
        gf_afraction *f;
        if (!l->used)
            continue;
        l->pidfd = gf_pidfd_verified(l->pid, l->start);
        f = gf_registry_find_name(a, l->fraction);
        if (l->pidfd < 0 || !f) {
            /* gone while the agent was down: an eviction it had begun is
             * finished here, recorded and counted */
            finish(a, l, l->evicting ? " (finished after a restart)" : "");
            continue;
        }
        gf_loan_watch(a, l);
        if (l->evicting) { /* begun, then the agent died: do it again */
            l->evicting = false;
            if (!evict_begin(a, l))
                gf_agent_event(a,
                               "reclaim: pid %d no longer belongs to fraction %s; its "
                               "eviction is undone",
                               (int)l->pid, l->fraction);
        }
    }
    gf_registry_sums(a);
    for (int k = 0; k < a->n_fractions; k++)
        gf_loans_publish(a, &a->fractions[k]);
}

/* What borrow, return and reclaim name: a node GPU (dev=), a number of bytes,
 * and the caller's fraction; NULL with an error in out. */
static gf_afraction *loan_request(gf_agent *a, const gf_request *r, const gf_msg *in, gf_msg *out,
                                  int *g, uint64_t *bytes)
{
    gf_error err;

    if ((*g = gf_gate_gpu(a, in, out)) < 0)
        return NULL;
    if (gf_msg_get_u64(in, "bytes", bytes, &err) < 0) {
        gf_reply_error(out, err.msg);
        return NULL;
    }
    return gf_gate_caller_fraction(a, r, out);
}

void gf_serve_borrow(gf_agent *a, gf_request *r, const gf_msg *in, gf_msg *out)
{
    uint64_t bytes, granted = 0;
    gf_afraction *f;
    gf_error err;
    int g;

    if (!(f = loan_request(a, r, in, out, &g, &bytes)))
        return;
    if (gf_lend(a, f, r->peer->pid, r->peer->pidfd, g, bytes, &granted, &err) < 0)
        return gf_reply_error(out, err.msg);
    gf_msg_init(out, "ok");
    gf_msg_add_u64(out, "granted", granted);
}

void gf_serve_return(gf_agent *a, gf_request *r, const gf_msg *in, gf_msg *out)
{
    uint64_t bytes;
    gf_afraction *f;
    int g;

    if (!(f = loan_request(a, r, in, out, &g, &bytes)))
        return;
    gf_return_loan(a, f, r->peer->pid, g, bytes);
    gf_msg_init(out, "ok");
}

void gf_serve_reclaim(gf_agent *a, gf_request *r, const gf_msg *in, gf_msg *out)
{
    const gf_config_device *cd;
    gf_afraction *f;
    gf_error err;
    uint64_t bytes;
    int g, rc;

    if (!(f = loan_request(a, r, in, out, &g, &bytes)))
        return;
    if (!(cd = gf_aconfig_device(&f->cfg, a->gpus[g].dev.uuid)))
        return gf_reply_error(out, "only a fraction guaranteed memory on this GPU may reclaim");
    if (bytes > cd->request)
        bytes = cd->request; /* nobody takes back more than its own guarantee */
    /* the driver has the memory already: nobody is evicted for nothing */
    if (gf_agent_nvml_refresh(a, &err) == 0 && a->gpus[g].dev.total > a->gpus[g].dev.used &&
        a->gpus[g].dev.total - a->gpus[g].dev.used >= bytes) {
        gf_msg_init(out, "ok");
        gf_msg_add_u64(out, "evicted", 0);
        return;
    }
    gf_terminated_cause(f->cfg.name); /* the "who" of the victims' reason lines */
    rc = reclaim_start(a, g, bytes, r->token, &err);
    gf_terminated_cause(NULL);
    if (rc < 0)
        return gf_reply_error(out, err.msg);
    r->deferred = true; /* answered when the borrowers are gone */
}
