/* The agent's view of a fraction's ledger. The ledger is tenant data (every
 * process of the fraction can write it, truncate it or replace it), so the
 * agent never maps it: it copies the part it reads (header and device table,
 * not the slots) with pread into a private buffer and validates the copy.
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

/* The bytes the agent copies: everything before the slots. */
#define GF_LEDGER_VIEW_BYTES offsetof(gf_ledger_header, slots)

typedef struct gf_ledger_view {
    bool ok;                     /* false: corrupt, truncated or unreadable */
    char why[160];               /* when !ok: what was wrong */
    /* private copies of the header fields and the device table (the atomics
     * are plain memory here: nobody else sees this copy) */
    uint64_t magic;
    uint32_t version, n_slots, n_devices, header_size;
    char name[GF_NAME_MAX];
    uint64_t dead_reclaims, watchdog_kills;
    gf_ledger_device devices[GF_LEDGER_DEVICES];
} gf_ledger_view;

/* Validates len bytes of a ledger's beginning into v (no I/O: what the
 * fuzzer drives). Returns 0 when the copy is a ledger, -1 (v->ok false,
 * v->why set) otherwise. */
int gf_ledger_view_parse(const void *buf, size_t len, gf_ledger_view *v);

/* pread of the ledger's beginning from fd, then parse. Never blocks (fd is a
 * regular file opened O_NONBLOCK) and never reads past GF_LEDGER_VIEW_BYTES. */
int gf_ledger_view_read(int fd, gf_ledger_view *v);

/* The ledger device entry for uuid among the ready ones, or -1. Bounded by
 * GF_LEDGER_DEVICES; only valid when v->ok. */
int gf_ledger_view_device(const gf_ledger_view *v, const char *uuid);

/* Writes one 64-bit counter of device entry dev (a field offset within
 * gf_ledger_device) into the file. */
int gf_ledger_view_publish(int fd, int dev, size_t field, uint64_t value);

/* Whether any process holds a slot lock (one F_OFD_GETLK over all slots: the
 * kernel's answer, not the file's). A failed query counts as held. */
bool gf_ledger_view_any_live(int fd);

#endif
