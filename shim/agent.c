/* SPDX-License-Identifier: Apache-2.0 */
/* Talking to gpufracd, only ever off the fast path: to borrow burst memory
 * when the fraction is past its request, to give a loan back, and to have
 * the agent take loans back when this fraction's guaranteed memory is held
 * by borrowers. One connection per process, opened on first use (the agent
 * closes idle ones; the next call opens it again).
 *
 * The agent keeps the record of loans and writes the fraction's `lent` into
 * the ledger; this process remembers what it borrowed itself, in its own
 * memory (a fork's child has borrowed nothing).
 *
 * No call waits on the agent without a bound (docs/agent-trust.md, "When the
 * agent is stopped or restarting"): connect and send are bounded on the
 * connection when it is made, the answer by a deadline per call, and an
 * agent that is restarting is waited for a bounded time. Past a bound the
 * fraction has what the ledger already allows: a borrow is refused, so the
 * allocation fails unless the cap it had covers it; the cap only ever comes
 * from the agent's published `lent`, so a loan is never taken unrecorded. */
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent_client.h"
#include "proto.h"
#include "shim.h"

#define GF_BURST_CHUNK (64ULL << 20)

#define GF_AGENT_IO_TIMEOUT_S 2 /* connect (a stopped agent's full backlog) and send */

typedef struct bounds {
    int answer_ms;  /* for the answer on a connection */
    int restart_ms; /* for an unreachable (restarting) agent to come back */
} bounds;

/* borrow and return: the agent answers at once */
static const bounds quick = {2000, 5000};
/* reclaim: the agent answers within 5 s of starting the evictions
 * (agent/lender.c, GF_AGENT_RECLAIM_WAIT_MS); a guaranteed owner waits longer
 * for a restarting agent */
static const bounds reclaim = {8000, 10000};

/* After an agent that did not answer, loans are not given back for a while:
 * a free must not wait on a stopped agent (the loan goes back at a later
 * free, or when the process ends). */
#define GF_AGENT_SILENT_BACKOFF_MS 5000

static pthread_mutex_t agent_lock = PTHREAD_MUTEX_INITIALIZER;
static int agent_fd = -1;
static bool agent_gone; /* the last call found no agent: borrows do not wait for one */
static _Atomic int64_t silent_until;
static _Atomic uint64_t borrowed[GF_LEDGER_DEVICES]; /* what this process holds on loan */

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One try on the process's connection, made first if need be. A connection
 * that failed is closed: after a timeout the agent's late answer would be
 * read as the next request's. */
static int agent_try(const gf_msg *req, gf_msg *reply, int answer_ms, bool *fresh, gf_error *err)
{
    const char *path = gf_state.cfg.agent;

    *fresh = agent_fd < 0;
    if (*fresh && (agent_fd = gf_agent_connect(path, GF_AGENT_IO_TIMEOUT_S, err)) < 0)
        return -1;
    if (gf_agent_exchange_within(agent_fd, path, req, reply, answer_ms, err) == 0)
        return 0;
    if (err->code == GF_ESYS) {
        close(agent_fd);
        agent_fd = -1;
    }
    return -1;
}

/* One request, one reply. A request the agent did not get or did not answer
 * because it is not there (gf_agent_unreachable) is sent again on a new
 * connection until b->restart_ms have passed; one it answered, or that got no
 * answer within b->answer_ms from an agent that is there, is not. */
static int agent_call(const gf_msg *req, gf_msg *reply, const bounds *b, gf_error *err)
{
    struct timespec pause = {0, GF_AGENT_RETRY_PAUSE_MS * 1000L * 1000L};
    int64_t until;
    bool fresh;
    int rc;

    pthread_mutex_lock(&agent_lock);
    until = now_ms() + (agent_gone && b != &reclaim ? 0 : b->restart_ms);
    while ((rc = agent_try(req, reply, b->answer_ms, &fresh, err)) < 0 &&
           gf_agent_unreachable(err)) {
        if (!fresh)
            continue; /* a kept connection the agent closed (idle, or it died): a new one */
        if (now_ms() >= until)
            break;
        nanosleep(&pause, NULL);
    }
    agent_gone = rc < 0 && gf_agent_unreachable(err);
    if (rc < 0 && err->code == GF_ESYS && !agent_gone) /* there, and silent */
        atomic_store(&silent_until, now_ms() + GF_AGENT_SILENT_BACKOFF_MS);
    pthread_mutex_unlock(&agent_lock);
    return rc;
}

/* 0: the agent said ok; 1: it answered with a refusal; -1: no answer. */
static int agent_ask(const char *verb, const char *uuid, uint64_t bytes, gf_msg *reply)
{
    gf_msg req;
    gf_error err;

    gf_msg_init(&req, verb);
    gf_msg_add(&req, "dev", uuid);
    gf_msg_add_u64(&req, "bytes", bytes);
    if (agent_call(&req, reply, strcmp(verb, "reclaim") == 0 ? &reclaim : &quick, &err) == 0)
        return 0;
    if (err.code == GF_ESTATE) {
        gf_log(GF_LOG_INFO, "agent refused %s: %s", verb, err.msg);
        return 1;
    }
    gf_log(GF_LOG_WARN, "agent %s: no answer to %s (%s)", gf_state.cfg.agent, verb, err.msg);
    return -1;
}

GF_HIDDEN bool gf_agent_borrow(const gf_ordinal *o, uint64_t bytes)
{
    gf_ledger_device *d = &gf_state.ledger.hdr->devices[o->dev];
    uint64_t cap = gf_ledger_burst_cap(&gf_state.ledger, o->dev, o->limit);
    uint64_t used = atomic_load(&d->used), ask, granted = 0;
    gf_msg reply;
    gf_error err;

    if (!gf_state.cfg.agent[0] || cap >= o->limit)
        return false;
    ask = used + bytes > cap ? used + bytes - cap : bytes;
    if (ask < GF_BURST_CHUNK)
        ask = GF_BURST_CHUNK;
    if (ask > o->limit - cap)
        ask = o->limit - cap;
    /* Sent again if a crash cut it (agent_call): safe, since the agent
     * journals a loan before it answers (agent/lender.c gf_lend) and after a
     * restart finds the borrower again by pid + start time (agent/journal.c
     * replay, gf_loans_recover). A loan granted before the crash is published
     * in `lent` and counted in the fraction's room below its limit, so the
     * second grant never takes the fraction past it; that first loan, unknown
     * here, stays lent until this process ends. */
    if (agent_ask("borrow", o->uuid, ask, &reply) != 0 ||
        gf_msg_get_u64(&reply, "granted", &granted, &err) < 0)
        return false;
    atomic_fetch_add(&borrowed[o->dev], granted);
    gf_log(GF_LOG_INFO, "borrowed %llu bytes on %s", (unsigned long long)granted, o->uuid);
    return granted > 0;
}

GF_HIDDEN bool gf_agent_reclaim(const gf_ordinal *o, uint64_t bytes)
{
    gf_msg reply;
    if (!gf_state.cfg.agent[0])
        return false;
    /* Any answer, or none within the bounds, is worth one more try of the
     * driver: the bytes are reserved in the ledger within the fraction's
     * request already, so the driver only says whether the memory is there.
     * A refusal may mean the borrowers are gone (an agent that restarted
     * mid-reclaim finished the eviction itself), a timeout that the agent is
     * slow to see them exit. */
    agent_ask("reclaim", o->uuid, bytes, &reply);
    return true;
}

/* After a free: a loan the fraction no longer needs goes back. */
GF_HIDDEN void gf_agent_maybe_return(const gf_ordinal *o)
{
    gf_ledger_device *d;
    uint64_t mine, cap;
    gf_msg reply;

    if (!gf_state.cfg.agent[0] || o->dev < 0)
        return;
    mine = atomic_load_explicit(&borrowed[o->dev], memory_order_relaxed);
    if (!mine)
        return;
    d = &gf_state.ledger.hdr->devices[o->dev];
    cap = d->request + atomic_load(&d->lent);
    if (atomic_load(&d->used) + mine > cap || now_ms() < atomic_load(&silent_until))
        return;
    if (agent_ask("return", o->uuid, mine, &reply) == 0)
        atomic_fetch_sub(&borrowed[o->dev], mine);
}

static void agent_after_fork(void)
{
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    agent_lock = fresh;
    for (int d = 0; d < GF_LEDGER_DEVICES; d++)
        atomic_store(&borrowed[d], 0); /* the loans are the parent's */
    if (agent_fd >= 0)
        close(agent_fd);
    agent_fd = -1;
    agent_gone = false;
    atomic_store(&silent_until, 0);
}

GF_HIDDEN const gf_family gf_family_agent = {.name = "agent", .after_fork = agent_after_fork};
