/* SPDX-License-Identifier: Apache-2.0 */
/* The ledger: one shared file per fraction, mapped by every process of the
 * fraction, that counts device memory across them without a lock.
 *
 * Admission is a reservation: a compare-and-swap on the device's `used`
 * word that never lets `used` pass `limit`, then the same bytes are added to
 * the process's own slot. A process owns its slot while it holds an OFD lock
 * on the slot's byte of the ledger file; the kernel drops the lock when the
 * process dies, so anyone can tell a dead slot from a live one (no PID reuse
 * trap, works across PID namespaces) and return its bytes.
 *
 * Order on the fast path is device word first, slot second: a process killed
 * between the two leaks at most that one reservation towards *less* memory,
 * never lets the fraction pass its limit. */
#ifndef GPUFRAC_LEDGER_H
#define GPUFRAC_LEDGER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "config.h"
#include "error.h"

#define GF_LEDGER_MAGIC 0x31434152465047ULL /* "GPFRAC1" */
#define GF_LEDGER_VERSION 3
#define GF_LEDGER_DEVICES 16
#define GF_LEDGER_SLOTS 4096
#define GF_LEDGER_LOCK_BASE (1LL << 40) /* slot i is locked at byte LOCK_BASE + i */
/* device i's first-context lock is byte CTX_LOCK_BASE + i (past every slot's) */
#define GF_LEDGER_CTX_LOCK_BASE (GF_LEDGER_LOCK_BASE + (1LL << 20))

enum { GF_DEV_FREE = 0, GF_DEV_INIT = 1, GF_DEV_READY = 2 };

typedef struct gf_ledger_device {
    _Atomic uint32_t state;
    uint32_t pad;
    char uuid[GF_UUID_MAX];
    uint64_t request;
    uint64_t limit;
    _Atomic uint64_t used;
    _Atomic uint64_t peak;
    _Atomic uint64_t denied;       /* allocations refused over the limit */
    _Atomic uint64_t reclaimed;    /* bytes returned from dead processes */
    _Atomic uint64_t lent;         /* burst memory on loan from the agent */
    _Atomic uint64_t evictions;    /* processes terminated to take a loan back */
    _Atomic uint64_t overhead;     /* part of used: contexts, modules, reservations */
    _Atomic uint64_t ctx_estimate; /* largest context overhead measured here (tenant data) */
    char pad2[32];
} gf_ledger_device;

typedef struct gf_ledger_slot {
    _Atomic int32_t pid; /* 0: never used or cleared */
    uint32_t pad;
    _Atomic uint64_t loan_seq; /* the agent's number of this process's newest loan */
    _Atomic uint64_t used[GF_LEDGER_DEVICES];
    _Atomic uint64_t borrowed[GF_LEDGER_DEVICES]; /* loans this process holds */
    /* part of used[]: what the process's contexts, modules and context limits
     * hold, as measured from the driver (informational; used[] is the charge) */
    _Atomic uint64_t overhead[GF_LEDGER_DEVICES];
} gf_ledger_slot;

typedef struct gf_ledger_header {
    uint64_t magic;
    uint32_t version;
    uint32_t n_slots;
    uint32_t n_devices;
    uint32_t header_size;
    char name[GF_NAME_MAX];
    int64_t created_unix;
    _Atomic uint32_t slot_high; /* slots at or above this were never claimed */
    uint32_t pad;
    _Atomic uint64_t dead_reclaims;  /* processes whose usage was returned */
    _Atomic uint64_t watchdog_kills; /* processes the agent's watchdog terminated */
    char pad2[56];
    gf_ledger_device devices[GF_LEDGER_DEVICES];
    gf_ledger_slot slots[GF_LEDGER_SLOTS];
} gf_ledger_header;

typedef struct gf_ledger {
    int fd;
    gf_ledger_header *hdr;
    int slot; /* owned slot, -1 if none */
} gf_ledger;

/* Creates a ledger file (temp + rename, so readers never see it half made). */
int gf_ledger_create(const char *path, const char *name, mode_t mode, gf_error *err);

/* gf_ledger_create, then registers cfg's devices with their limits, so that
 * they show before a process first uses them. */
int gf_ledger_create_for(const char *path, const gf_fraction_config *cfg, mode_t mode,
                         gf_error *err);

/* Maps an existing ledger and validates it. Does not claim a slot. */
int gf_ledger_open(const char *path, gf_ledger *lg, gf_error *err);
void gf_ledger_close(gf_ledger *lg);

/* Finds the device entry for uuid, or claims a free one with these limits.
 * Returns the index, or -1 (table full). */
int gf_ledger_device_index(gf_ledger *lg, const char *uuid, uint64_t request, uint64_t limit,
                           gf_error *err);

/* Claims a slot for the calling process (takes its OFD lock; returns a dead
 * owner's bytes first). Sets lg->slot. */
int gf_ledger_claim_slot(gf_ledger *lg, gf_error *err);

/* Raises the device's peak to now (one load when it is not a new peak). */
static inline void gf_ledger_note_peak(gf_ledger_device *d, uint64_t now)
{
    uint64_t peak = atomic_load_explicit(&d->peak, memory_order_relaxed);
    while (now > peak && !atomic_compare_exchange_weak_explicit(
                             &d->peak, &peak, now, memory_order_relaxed, memory_order_relaxed))
        ;
}

/* Lock-free admission against `limit` (the device's limit, or lower when the
 * process's environment lowered it). Returns true when the bytes were reserved.
 * Inline, like release: they are every allocation's and every free's. */
static inline bool gf_ledger_reserve(gf_ledger *lg, int dev, uint64_t bytes, uint64_t limit)
{
    gf_ledger_device *d = &lg->hdr->devices[dev];
    uint64_t cur = atomic_load_explicit(&d->used, memory_order_relaxed);
    uint64_t next;

    if (limit > d->limit)
        limit = d->limit;
    do {
        if (bytes > limit || cur > limit - bytes)
            return false;
        next = cur + bytes;
    } while (!atomic_compare_exchange_weak_explicit(&d->used, &cur, next, memory_order_acq_rel,
                                                    memory_order_relaxed));
    atomic_fetch_add_explicit(&lg->hdr->slots[lg->slot].used[dev], bytes, memory_order_relaxed);
    gf_ledger_note_peak(d, next);
    return true;
}

/* Counts bytes the driver already handed out, without admission (pool growth
 * seen after the fact). */
void gf_ledger_charge(gf_ledger *lg, int dev, uint64_t bytes);

/* Gives back what gf_ledger_reserve took: slot first, the reverse of reserve,
 * so a death in between errs towards less memory for the fraction, never more. */
static inline void gf_ledger_release(gf_ledger *lg, int dev, uint64_t bytes)
{
    atomic_fetch_sub_explicit(&lg->hdr->slots[lg->slot].used[dev], bytes, memory_order_relaxed);
    atomic_fetch_sub_explicit(&lg->hdr->devices[dev].used, bytes, memory_order_release);
}
/* Marks bytes already in used[] (reserved or charged above) as overhead
 * (contexts, modules, reservations), or (unmark) no longer so. */
void gf_ledger_overhead_mark(gf_ledger *lg, int dev, uint64_t bytes);
void gf_ledger_overhead_unmark(gf_ledger *lg, int dev, uint64_t bytes);
/* The largest context overhead a process of the fraction measured on dev:
 * reserved before the next context is made there. note raises it. */
uint64_t gf_ledger_ctx_estimate(const gf_ledger *lg, int dev);
void gf_ledger_note_ctx_overhead(gf_ledger *lg, int dev, uint64_t bytes);
/* Serialises the making of contexts on dev across the fraction's processes
 * while no estimate exists (a blocking OFD write lock on the device's lock
 * byte of the ledger file: the kernel drops it when the holder dies or closes
 * the ledger). 0, or -1 with errno when it cannot be taken. */
int gf_ledger_first_ctx_lock(gf_ledger *lg, int dev);
void gf_ledger_first_ctx_unlock(gf_ledger *lg, int dev);
/* Counts an allocation refused over the limit. */
void gf_ledger_note_denied(gf_ledger *lg, int dev);

/* The most the fraction may hold on dev now: its limit when nothing lends,
 * else request + what the agent lent (never above the limit). */
uint64_t gf_ledger_burst_cap(const gf_ledger *lg, int dev, uint64_t limit);

/* Slots at or above the returned index were never claimed. */
int gf_ledger_slot_high(const gf_ledger *lg);

/* Returns every dead process's bytes (and loans). Returns how many slots were reclaimed. */
int gf_ledger_reclaim_dead(gf_ledger *lg);

/* Is the slot's owner alive (holds its lock)? */
bool gf_ledger_slot_live(gf_ledger *lg, int slot);

/* After fork() in the child: reopen the file (new open file description,
 * so the parent's lock is not shared) and claim a fresh slot. */
int gf_ledger_after_fork(gf_ledger *lg, const char *path, gf_error *err);

#endif
