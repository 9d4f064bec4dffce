/* Talking to gpufracd, only ever off the fast path: to borrow burst memory
 * when the fraction is past its request, to give a loan back, and to have
 * the agent take loans back when this fraction's guaranteed memory is held
 * by borrowers. One connection per process, opened on first use (the agent
 * closes idle ones; the next call opens it again).
 *
 * The agent keeps the record of loans and writes the fraction's `lent` into
 * the ledger; this process remembers what it borrowed itself, in its own
 * memory (a fork's child has borrowed nothing). */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent_client.h"
#include "proto.h"
#include "shim.h"

#define GF_BURST_CHUNK (64ULL << 20)

#define GF_AGENT_RESTART_WAIT_MS 10000 /* a reclaim waits this long for a restarting agent */

static pthread_mutex_t agent_lock = PTHREAD_MUTEX_INITIALIZER;
static int agent_fd = -1;
static _Atomic uint64_t borrowed[GF_LEDGER_DEVICES]; /* what this process holds on loan */

/* One request, one reply on the process's connection; a connection the
 * agent dropped (it restarted, or closed it idle) is made again once, or,
 * for a reclaim, for up to wait_ms while the agent comes back. */
static int agent_call(const gf_msg *req, gf_msg *reply, int wait_ms, gf_error *err)
{
    const char *path = gf_state.cfg.agent;
    struct timespec pause = {0, 50 * 1000 * 1000};
    int rc = -1, waited = 0;

    pthread_mutex_lock(&agent_lock);
    for (int attempt = 0; attempt < 2 || waited < wait_ms; attempt++) {
        if (agent_fd < 0 && (agent_fd = gf_agent_connect(path, 0, err)) < 0) {
            if (waited >= wait_ms)
                break;
            nanosleep(&pause, NULL);
            waited += 50;
            continue;
        }
        if ((rc = gf_agent_exchange(agent_fd, path, req, reply, err)) == 0 ||
            err->code != GF_ESYS)
            break;
        close(agent_fd);
        agent_fd = -1;
    }
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
    if (agent_call(&req, reply, strcmp(verb, "reclaim") == 0 ? GF_AGENT_RESTART_WAIT_MS : 0,
                   &err) == 0)
        return 0;
    if (err.code == GF_ESTATE) {
        gf_log(GF_LOG_INFO, "agent refused %s: %s", verb, err.msg);
        return 1;
    }
    gf_log(GF_LOG_WARN, "agent %s: no answer (%s)", gf_state.cfg.agent, err.msg);
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
    /* any answer is worth one more try of the driver: a refusal may mean
     * the borrowers are already gone (an agent that restarted mid-reclaim
     * finished the eviction itself) */
    return agent_ask("reclaim", o->uuid, bytes, &reply) >= 0;
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
    if (atomic_load(&d->used) + mine > cap)
        return;
    if (agent_ask("return", o->uuid, mine, &reply) == 0)
        atomic_fetch_sub(&borrowed[o->dev], mine);
}

GF_HIDDEN void gf_agent_after_fork(void)
{
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    agent_lock = fresh;
    for (int d = 0; d < GF_LEDGER_DEVICES; d++)
        atomic_store(&borrowed[d], 0); /* the loans are the parent's */
    if (agent_fd >= 0)
        close(agent_fd);
    agent_fd = -1;
}
