/* SPDX-License-Identifier: Apache-2.0 */
/* The agent's view of a fraction's ledger. The ledger is tenant data (every
 * process of the fraction can write it, truncate it or replace it), so the
 * agent never maps it: it reads the part before the slots with pread into a
 * private buffer, validates it and keeps copies of the device entries it
 * uses.
 * Nothing in the copy can make the agent loop, block or fault; a ledger that
 * does not validate leaves its fraction judged by the driver alone.
 *
 * What the agent writes back (the loans it granted, the evictions and
 * watchdog kills it counted) are absolute values it owns, pwritten into the
 * device entries so the shim sees them: the shim's cooperative copy. */
#ifndef GPUFRAC_AGENT_LEDGER_VIEW_H
#define GPUFRAC_AGENT_LEDGER_VIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ledger.h"

/* The bytes the agent reads: everything before the slots. */
#define GF_LEDGER_VIEW_BYTES offsetof(gf_ledger_header, slots)

/* Which device entry the agent keeps: the first ready entry named uuid, else
 * (fallback non-NULL) the first ready one named fallback. */
typedef struct gf_ledger_view_key {
    const char *uuid;
    const char *fallback;
} gf_ledger_view_key;

/* One kept device entry: a private copy (the atomics are plain memory here:
 * nobody else sees it). */
typedef struct gf_ledger_view_entry {
    int tag;              /* the owner's (the agent: which GPU of the node) */
    int index;            /* in the ledger's device table; -1: no ready entry */
    bool exact;           /* found by the key's uuid, not its fallback */
    gf_ledger_device dev; /* valid when index >= 0 */
} gf_ledger_view_entry;

/* The agent keeps only the entries it looks up (one per GPU of the node the
 * fraction's config covers), not the whole device table: the owner gives
 * entries (n_entries of them) and one key per entry at each read. */
typedef struct gf_ledger_view {
    bool ok;         /* false: corrupt, truncated or unreadable */
    const char *why; /* when !ok: what was wrong (static text) */
    int n_entries;
    gf_ledger_view_entry *entries;
} gf_ledger_view;

/* Validates len bytes of a ledger's beginning and copies into v->entries[i]
 * the entry keys[i] names (no I/O: what the fuzzer drives). Returns 0 when
 * the copy is a ledger, -1 (v->ok false, v->why set, no entry kept)
 * otherwise. */
int gf_ledger_view_parse(const void *buf, size_t len, const gf_ledger_view_key *keys,
                         gf_ledger_view *v);

/* pread of the ledger's beginning from fd, then parse. Never blocks (fd is a
 * regular file opened O_NONBLOCK) and never reads past GF_LEDGER_VIEW_BYTES. */
int gf_ledger_view_read(int fd, const gf_ledger_view_key *keys, gf_ledger_view *v);

/* The kept entry tagged tag (exact: only one found by its key's uuid), or
 * NULL: none, not ready, or the ledger is not valid. */
const gf_ledger_view_entry *gf_ledger_view_entry_of(const gf_ledger_view *v, int tag, bool exact);

/* Writes one 64-bit counter of device entry dev (a field offset within
 * gf_ledger_device) into the file. */
int gf_ledger_view_publish(int fd, int dev, size_t field, uint64_t value);

/* Writes the agent's count of watchdog kills into the header (for gpufrac
 * status). */
int gf_ledger_view_publish_kills(int fd, uint64_t kills);

/* A ledger's size is fixed for its life: one found larger (its owner grew
 * it, to fill the file system it lives on) is cut back. Returns the size it
 * had when it was cut, 0 when it was not. */
long long gf_ledger_view_keep_size(int fd);

/* Whether any process holds a slot lock (one F_OFD_GETLK over all slots: the
 * kernel's answer, not the file's). A failed query counts as held. */
bool gf_ledger_view_any_live(int fd);

#endif
