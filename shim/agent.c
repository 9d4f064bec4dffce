/* Talking to gpufracd, only ever off the fast path: to borrow burst memory
 * when the fraction is past its request, to give a loan back, and to have
 * the agent take loans back when this fraction's guaranteed memory is held
 * by borrowers. One connection per process, opened on first use. */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "agent_client.h"
#include "proto.h"
#include "shim.h"

#define GF_BURST_CHUNK (64ULL << 20)

static pthread_mutex_t agent_lock = PTHREAD_MUTEX_INITIALIZER;
static int agent_fd = -1;

/* One request, one reply on the process's connection; a connection the
 * agent dropped (it restarted) is made again once. */
static int agent_call(const gf_msg *req, gf_msg *reply, gf_error *err)
{
    const char *path = gf_state.cfg.agent;
    int rc = -1;

    pthread_mutex_lock(&agent_lock);
    for (int attempt = 0; attempt < 2; attempt++) {
        if (agent_fd < 0 && (agent_fd = gf_agent_connect(path, 0, err)) < 0)
            break;
        if ((rc = gf_agent_exchange(agent_fd, path, req, reply, err)) == 0 ||
            err->code != GF_ESYS)
            break;
        close(agent_fd);
        agent_fd = -1;
    }
    pthread_mutex_unlock(&agent_lock);
    return rc;
}

static int agent_ask(const char *verb, const char *uuid, uint64_t bytes, gf_msg *reply)
{
    gf_msg req;
    gf_error err;

    gf_msg_init(&req, verb);
    gf_msg_add(&req, "dev", uuid);
    gf_msg_add_u64(&req, "bytes", bytes);
    if (agent_call(&req, reply, &err) == 0)
        return 0;
    if (err.code == GF_ESTATE)
        gf_log(GF_LOG_INFO, "agent refused %s: %s", verb, err.msg);
    else
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
    if (agent_ask("borrow", o->uuid, ask, &reply) < 0 ||
        gf_msg_get_u64(&reply, "granted", &granted, &err) < 0)
        return false;
    gf_log(GF_LOG_INFO, "borrowed %llu bytes on %s", (unsigned long long)granted, o->uuid);
    return granted > 0;
}

GF_HIDDEN bool gf_agent_reclaim(const gf_ordinal *o, uint64_t bytes)
{
    gf_msg reply;
    if (!gf_state.cfg.agent[0])
        return false;
    return agent_ask("reclaim", o->uuid, bytes, &reply) == 0;
}

/* After a free: a loan the fraction no longer needs goes back. */
GF_HIDDEN void gf_agent_maybe_return(const gf_ordinal *o)
{
    gf_ledger_slot *s;
    gf_ledger_device *d;
    uint64_t mine, cap;
    gf_msg reply;

    if (!gf_state.cfg.agent[0] || o->dev < 0)
        return;
    s = &gf_state.ledger.hdr->slots[gf_state.ledger.slot];
    mine = atomic_load_explicit(&s->borrowed[o->dev], memory_order_relaxed);
    if (!mine)
        return;
    d = &gf_state.ledger.hdr->devices[o->dev];
    cap = d->request + atomic_load(&d->lent);
    if (atomic_load(&d->used) + mine > cap)
        return;
    agent_ask("return", o->uuid, mine, &reply);
}

GF_HIDDEN void gf_agent_after_fork(void)
{
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    agent_lock = fresh;
    if (agent_fd >= 0)
        close(agent_fd);
    agent_fd = -1;
}
