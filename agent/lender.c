/* Burst: memory between a fraction's request and its limit is lent only from
 * what no fraction on that GPU is guaranteed and nobody has on loan, and is
 * taken back, newest loan first, when a guaranteed owner needs it. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "quantity.h"
#include "terminated.h"

static int ledger_dev(gf_afraction *f, const gf_gpu *g, gf_error *err)
{
    const gf_config_device *cd = gf_config_find_device(&f->cfg, g->uuid);
    if (!cd)
        return gf_error_set(err, GF_EINVAL, "fraction %s has no share of %s", f->cfg.name,
                            g->uuid);
    return gf_ledger_device_index(&f->ledger, g->uuid, cd->request, cd->limit, err);
}

int gf_lend(gf_agent *a, gf_afraction *f, int slot, int gpu, uint64_t bytes, uint64_t *granted,
            gf_error *err)
{
    gf_gpu *g = &a->gpus[gpu];
    char h1[32], h2[32];
    int d;

    *granted = 0;
    if ((d = ledger_dev(f, g, err)) < 0)
        return -1;
    gf_ledger_device *ld = &f->ledger.hdr->devices[d];
    uint64_t lent = atomic_load(&ld->lent);
    uint64_t room_fraction = ld->limit > ld->request + lent ? ld->limit - ld->request - lent : 0;
    uint64_t committed = g->guaranteed + g->lent;
    uint64_t room_gpu = g->total > committed ? g->total - committed : 0;
    uint64_t give = bytes;

    if (give > room_fraction)
        give = room_fraction;
    if (give > room_gpu)
        give = room_gpu;
    if (give == 0) {
        gf_bytes_human(room_gpu, h1, sizeof(h1));
        gf_bytes_human(bytes, h2, sizeof(h2));
        return gf_error_set(err, GF_ESTATE,
                            "no burst memory for %s on %s: %s asked, %s neither guaranteed nor "
                            "lent, %s left below its limit",
                            f->cfg.name, g->uuid, h2, h1,
                            room_fraction ? "some" : "nothing");
    }
    gf_ledger_lend(&f->ledger, slot, d, give, ++a->loan_seq);
    g->lent += give;
    *granted = give;
    return 0;
}

int gf_return_loan(gf_agent *a, gf_afraction *f, int slot, int gpu, uint64_t bytes)
{
    gf_error err;
    int d = ledger_dev(f, &a->gpus[gpu], &err);
    if (d < 0)
        return -1;
    uint64_t had = atomic_load(&f->ledger.hdr->slots[slot].borrowed[d]);
    gf_ledger_unlend(&f->ledger, slot, d, bytes);
    uint64_t back = had - atomic_load(&f->ledger.hdr->slots[slot].borrowed[d]);
    a->gpus[gpu].lent -= back < a->gpus[gpu].lent ? back : a->gpus[gpu].lent;
    return 0;
}

typedef struct borrower {
    gf_afraction *f;
    int slot, dev;
    pid_t pid;
    uint64_t seq, borrowed;
} borrower;

/* Every live process holding a loan on GPU g, newest loan first. */
static int borrowers(gf_agent *a, const gf_gpu *g, borrower *out, int max)
{
    int n = 0;
    for (int i = 0; i < a->n_fractions && n < max; i++) {
        gf_afraction *f = &a->fractions[i];
        gf_error err;
        int d = gf_config_find_device(&f->cfg, g->uuid) ? ledger_dev(f, g, &err) : -1;
        if (d < 0)
            continue;
        for (int s = 0, high = gf_ledger_slot_high(&f->ledger); s < high && n < max; s++) {
            gf_ledger_slot *sl = &f->ledger.hdr->slots[s];
            uint64_t b = atomic_load(&sl->borrowed[d]);
            if (!b || !gf_ledger_slot_live(&f->ledger, s))
                continue;
            out[n++] = (borrower){f, s, d, atomic_load(&sl->pid), atomic_load(&sl->loan_seq), b};
        }
    }
    for (int i = 1; i < n; i++) /* insertion sort, newest first: n is small */
        for (int j = i; j > 0 && out[j].seq > out[j - 1].seq; j--) {
            borrower t = out[j];
            out[j] = out[j - 1];
            out[j - 1] = t;
        }
    return n;
}

/* Waits (bounded) until pid is gone. */
static bool wait_gone(pid_t pid, int ms)
{
    struct timespec ts = {0, 5 * 1000 * 1000};
    for (int waited = 0; waited < ms; waited += 5) {
        if (kill(pid, 0) < 0 && errno == ESRCH)
            return true;
        nanosleep(&ts, NULL);
    }
    return false;
}

static void evict(gf_agent *a, const gf_gpu *g, const borrower *b)
{
    char h[32];
    if (g->mode == GF_MODE_SM_SHARING) {
        gf_error err;
        /* let MPS tear the client down first: killing one mid-work can wedge
         * the server for every tenant */
        if (gf_mps_terminate_clients(a, (int)(g - a->gpus), &b->pid, 1, &err) < 0)
            gf_agent_event(a, "reclaim: %s", err.msg);
    }
    /* the reason is on record before the process dies, so its gpufrac run,
     * which reaps it at once, finds it */
    gf_terminated_record(a, b->f, b->pid, (int)(g - a->gpus), GF_TERM_RECLAIM, b->borrowed, 0);
    kill(b->pid, SIGKILL);
    wait_gone(b->pid, 5000);
    gf_ledger_reclaim_dead(&b->f->ledger);
    atomic_fetch_add(&b->f->ledger.hdr->devices[b->dev].evictions, 1);
    a->evictions_total++;
    gf_counters_save(a);
    gf_bytes_human(b->borrowed, h, sizeof(h));
    gf_agent_event(a, "reclaim: terminated pid %d of fraction %s on %s to take back its loan of %s",
                   (int)b->pid, b->f->cfg.name, g->uuid, h);
}

int gf_reclaim(gf_agent *a, const char *uuid, uint64_t bytes, int *evicted, gf_error *err)
{
    borrower list[256];
    int gpu = gf_gpu_index(a, uuid), n;
    uint64_t back = 0;

    *evicted = 0;
    if (gpu < 0)
        return gf_error_set(err, GF_ENOTFOUND, "no GPU %s on this node", uuid);
    n = borrowers(a, &a->gpus[gpu], list, 256);
    for (int i = 0; i < n && back < bytes; i++) {
        evict(a, &a->gpus[gpu], &list[i]);
        back += list[i].borrowed;
        (*evicted)++;
    }
    gf_registry_scan(a, err);
    if (*evicted == 0)
        return gf_error_set(err, GF_ESTATE, "nothing on loan on %s to take back", uuid);
    return 0;
}
