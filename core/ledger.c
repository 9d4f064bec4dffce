/* SPDX-License-Identifier: Apache-2.0 */
#include "ledger.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

_Static_assert(sizeof(gf_ledger_header) < (2 << 20), "ledger grew past 2 MiB");
_Static_assert(GF_LEDGER_SLOTS * 1LL < GF_LEDGER_LOCK_BASE, "lock bytes overlap");
_Static_assert(GF_LEDGER_LOCK_BASE + GF_LEDGER_SLOTS <= GF_LEDGER_CTX_LOCK_BASE,
               "context lock bytes overlap the slot locks");

/* An OFD lock on the one byte at off of the ledger file. */
static int byte_lock(int fd, off_t off, short type, int cmd)
{
    struct flock fl = {
        .l_type = type,
        .l_whence = SEEK_SET,
        .l_start = off,
        .l_len = 1,
    };
    return fcntl(fd, cmd, &fl);
}

static int slot_lock(int fd, int slot, short type, int cmd)
{
    return byte_lock(fd, GF_LEDGER_LOCK_BASE + slot, type, cmd);
}

static bool slot_lock_free(int fd, int slot)
{
    struct flock fl = {
        .l_type = F_WRLCK,
        .l_whence = SEEK_SET,
        .l_start = GF_LEDGER_LOCK_BASE + slot,
        .l_len = 1,
    };
    if (fcntl(fd, F_OFD_GETLK, &fl) < 0)
        return false; /* cannot tell: treat as live, never reclaim wrongly */
    return fl.l_type == F_UNLCK;
}

int gf_ledger_create(const char *path, const char *name, mode_t mode, gf_error *err)
{
    char tmp[GF_PATH_MAX + 16];
    gf_ledger_header *hdr = MAP_FAILED;
    int fd = -1;

    if (snprintf(tmp, sizeof(tmp), "%s.tmp%d", path, (int)getpid()) >= (int)sizeof(tmp))
        return gf_error_set(err, GF_EINVAL, "ledger path too long: %s", path);
    fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0)
        return gf_error_sys(err, "creating ledger %s", tmp);
    if (fchmod(fd, mode) < 0 || ftruncate(fd, (off_t)sizeof(gf_ledger_header)) < 0) {
        gf_error_sys(err, "sizing ledger %s", tmp);
        goto fail;
    }
    hdr = mmap(NULL, sizeof(*hdr), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (hdr == MAP_FAILED) {
        gf_error_sys(err, "mapping ledger %s", tmp);
        goto fail;
    }
    hdr->version = GF_LEDGER_VERSION;
    hdr->n_slots = GF_LEDGER_SLOTS;
    hdr->n_devices = GF_LEDGER_DEVICES;
    hdr->header_size = (uint32_t)sizeof(*hdr);
    snprintf(hdr->name, sizeof(hdr->name), "%s", name);
    hdr->created_unix = (int64_t)time(NULL);
    atomic_store_explicit((_Atomic uint64_t *)&hdr->magic, GF_LEDGER_MAGIC, memory_order_release);
    munmap(hdr, sizeof(*hdr));
    hdr = MAP_FAILED;
    if (rename(tmp, path) < 0) {
        gf_error_sys(err, "installing ledger %s", path);
        goto fail;
    }
    close(fd);
    return 0;
fail:
    if (hdr != MAP_FAILED)
        munmap(hdr, sizeof(*hdr));
    close(fd);
    unlink(tmp);
    return -1;
}

int gf_ledger_create_for(const char *path, const gf_fraction_config *cfg, mode_t mode,
                         gf_error *err)
{
    gf_ledger lg = {.fd = -1};
    int rc = 0;

    if (gf_ledger_create(path, cfg->name, mode, err) < 0 || gf_ledger_open(path, &lg, err) < 0)
        return -1;
    for (size_t i = 0; i < cfg->n_devices && rc == 0; i++) {
        const gf_config_device *d = &cfg->devices[i];
        if (gf_ledger_device_index(&lg, d->uuid, d->request, d->limit, err) < 0)
            rc = -1;
    }
    gf_ledger_close(&lg);
    return rc;
}

static int ledger_map(int fd, const char *path, gf_ledger *lg, gf_error *err)
{
    struct stat st;
    gf_ledger_header *hdr;

    if (fstat(fd, &st) < 0)
        return gf_error_sys(err, "reading ledger %s", path);
    if ((size_t)st.st_size < sizeof(gf_ledger_header))
        return gf_error_set(err, GF_EINVAL, "ledger %s is truncated (%lld bytes, need %zu)", path,
                            (long long)st.st_size, sizeof(gf_ledger_header));
    hdr = mmap(NULL, sizeof(*hdr), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (hdr == MAP_FAILED)
        return gf_error_sys(err, "mapping ledger %s", path);
    if (hdr->magic != GF_LEDGER_MAGIC || hdr->version != GF_LEDGER_VERSION ||
        hdr->n_slots != GF_LEDGER_SLOTS || hdr->n_devices != GF_LEDGER_DEVICES ||
        hdr->header_size != sizeof(*hdr)) {
        munmap(hdr, sizeof(*hdr));
        return gf_error_set(err, GF_EINVAL,
                            "ledger %s is not a gpufrac ledger of version %d (or was made by "
                            "another build)",
                            path, GF_LEDGER_VERSION);
    }
    lg->fd = fd;
    lg->hdr = hdr;
    lg->slot = -1;
    return 0;
}

int gf_ledger_open(const char *path, gf_ledger *lg, gf_error *err)
{
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return gf_error_sys(err, "opening ledger %s", path);
    if (ledger_map(fd, path, lg, err) < 0) {
        close(fd);
        return -1;
    }
    return 0;
}

void gf_ledger_close(gf_ledger *lg)
{
    if (lg->hdr)
        munmap(lg->hdr, sizeof(*lg->hdr));
    if (lg->fd >= 0)
        close(lg->fd); /* drops the slot lock; our bytes stay until reclaimed */
    lg->hdr = NULL;
    lg->fd = -1;
    lg->slot = -1;
}

static int device_find(gf_ledger_header *hdr, const char *uuid)
{
    for (int i = 0; i < GF_LEDGER_DEVICES; i++) {
        gf_ledger_device *d = &hdr->devices[i];
        uint32_t st = atomic_load_explicit(&d->state, memory_order_acquire);
        while (st == GF_DEV_INIT) { /* another process is filling it in */
            struct timespec ts = {0, 1000};
            nanosleep(&ts, NULL);
            st = atomic_load_explicit(&d->state, memory_order_acquire);
        }
        if (st == GF_DEV_FREE)
            return -(i + 1); /* first free entry, encoded */
        if (strncmp(d->uuid, uuid, sizeof(d->uuid)) == 0)
            return i;
    }
    return -(GF_LEDGER_DEVICES + 1);
}

int gf_ledger_device_index(gf_ledger *lg, const char *uuid, uint64_t request, uint64_t limit,
                           gf_error *err)
{
    for (;;) {
        int r = device_find(lg->hdr, uuid);
        if (r >= 0)
            return r;
        int i = -r - 1;
        if (i >= GF_LEDGER_DEVICES)
            return gf_error_set(err, GF_ENOSPACE, "ledger has no room for device %s (%d in use)",
                                uuid, GF_LEDGER_DEVICES);
        gf_ledger_device *d = &lg->hdr->devices[i];
        uint32_t expect = GF_DEV_FREE;
        if (!atomic_compare_exchange_strong(&d->state, &expect, GF_DEV_INIT))
            continue; /* lost the race for this entry: look again */
        snprintf(d->uuid, sizeof(d->uuid), "%s", uuid);
        d->request = request;
        d->limit = limit;
        atomic_store_explicit(&d->state, GF_DEV_READY, memory_order_release);
        return i;
    }
}

/* Returns a dead slot's bytes to the devices. Caller holds the slot's lock. */
static bool slot_drain(gf_ledger_header *hdr, int slot)
{
    gf_ledger_slot *s = &hdr->slots[slot];
    bool had = false;
    for (int d = 0; d < GF_LEDGER_DEVICES; d++) {
        uint64_t b = atomic_exchange(&s->used[d], 0);
        if (!b)
            continue;
        had = true;
        atomic_fetch_sub(&hdr->devices[d].used, b);
        atomic_fetch_add(&hdr->devices[d].reclaimed, b);
    }
    for (int d = 0; d < GF_LEDGER_DEVICES; d++) {
        uint64_t b = atomic_exchange(&s->overhead[d], 0);
        if (b)
            atomic_fetch_sub(&hdr->devices[d].overhead, b);
    }
    for (int d = 0; d < GF_LEDGER_DEVICES; d++) {
        uint64_t b = atomic_exchange(&s->borrowed[d], 0);
        if (b)
            atomic_fetch_sub(&hdr->devices[d].lent, b); /* a dead borrower's loan ends */
    }
    atomic_store(&s->loan_seq, 0);
    atomic_store(&s->pid, 0);
    return had;
}

static void raise_high(gf_ledger_header *hdr, uint32_t slot)
{
    uint32_t high = atomic_load(&hdr->slot_high);
    while (slot + 1 > high && !atomic_compare_exchange_weak(&hdr->slot_high, &high, slot + 1))
        ;
}

int gf_ledger_slot_high(const gf_ledger *lg)
{
    uint32_t h = atomic_load(&((gf_ledger *)lg)->hdr->slot_high);
    return h > GF_LEDGER_SLOTS ? GF_LEDGER_SLOTS : (int)h;
}

/* Lowest free slot first, so the slots in use stay packed at the front and
 * scans (reclaim, status, the agent) touch only those pages. */
int gf_ledger_claim_slot(gf_ledger *lg, gf_error *err)
{
    for (int slot = 0; slot < GF_LEDGER_SLOTS; slot++) {
        if (slot_lock(lg->fd, slot, F_WRLCK, F_OFD_SETLK) < 0) {
            if (errno == EAGAIN || errno == EACCES)
                continue;
            return gf_error_sys(err, "locking ledger slot %d", slot);
        }
        if (slot_drain(lg->hdr, slot))
            atomic_fetch_add(&lg->hdr->dead_reclaims, 1);
        atomic_store(&lg->hdr->slots[slot].pid, (int32_t)getpid());
        raise_high(lg->hdr, (uint32_t)slot);
        lg->slot = slot;
        return 0;
    }
    return gf_error_set(err, GF_ENOSPACE, "ledger has no free process slot (%d processes live)",
                        GF_LEDGER_SLOTS);
}

void gf_ledger_charge(gf_ledger *lg, int dev, uint64_t bytes)
{
    gf_ledger_device *d = &lg->hdr->devices[dev];
    uint64_t now = atomic_fetch_add_explicit(&d->used, bytes, memory_order_acq_rel) + bytes;
    atomic_fetch_add_explicit(&lg->hdr->slots[lg->slot].used[dev], bytes, memory_order_relaxed);
    gf_ledger_note_peak(d, now);
}

uint64_t gf_ledger_burst_cap(const gf_ledger *lg, int dev, uint64_t limit)
{
    const gf_ledger_device *d = &lg->hdr->devices[dev];
    uint64_t cap = d->request + atomic_load_explicit(&d->lent, memory_order_acquire);
    if (cap < d->request) /* overflow */
        cap = UINT64_MAX;
    return cap < limit ? cap : limit;
}

void gf_ledger_overhead_mark(gf_ledger *lg, int dev, uint64_t bytes)
{
    atomic_fetch_add_explicit(&lg->hdr->slots[lg->slot].overhead[dev], bytes, memory_order_relaxed);
    atomic_fetch_add_explicit(&lg->hdr->devices[dev].overhead, bytes, memory_order_relaxed);
}

void gf_ledger_overhead_unmark(gf_ledger *lg, int dev, uint64_t bytes)
{
    atomic_fetch_sub_explicit(&lg->hdr->slots[lg->slot].overhead[dev], bytes, memory_order_relaxed);
    atomic_fetch_sub_explicit(&lg->hdr->devices[dev].overhead, bytes, memory_order_relaxed);
}

uint64_t gf_ledger_ctx_estimate(const gf_ledger *lg, int dev)
{
    return atomic_load_explicit(&lg->hdr->devices[dev].ctx_estimate, memory_order_relaxed);
}

static int ctx_lock(int fd, int dev, short type, int cmd)
{
    return byte_lock(fd, GF_LEDGER_CTX_LOCK_BASE + dev, type, cmd);
}

int gf_ledger_first_ctx_lock(gf_ledger *lg, int dev)
{
    int rc;
    if (dev < 0 || dev >= GF_LEDGER_DEVICES || lg->fd < 0) {
        errno = EINVAL;
        return -1;
    }
    do
        rc = ctx_lock(lg->fd, dev, F_WRLCK, F_OFD_SETLKW);
    while (rc < 0 && errno == EINTR); /* the program's signal handlers may run */
    return rc;
}

void gf_ledger_first_ctx_unlock(gf_ledger *lg, int dev)
{
    if (dev >= 0 && dev < GF_LEDGER_DEVICES && lg->fd >= 0)
        ctx_lock(lg->fd, dev, F_UNLCK, F_OFD_SETLK);
}

void gf_ledger_note_ctx_overhead(gf_ledger *lg, int dev, uint64_t bytes)
{
    _Atomic uint64_t *e = &lg->hdr->devices[dev].ctx_estimate;
    uint64_t cur = atomic_load_explicit(e, memory_order_relaxed);
    while (bytes > cur && !atomic_compare_exchange_weak_explicit(
                              e, &cur, bytes, memory_order_relaxed, memory_order_relaxed))
        ;
}

void gf_ledger_note_denied(gf_ledger *lg, int dev)
{
    atomic_fetch_add_explicit(&lg->hdr->devices[dev].denied, 1, memory_order_relaxed);
}

bool gf_ledger_slot_live(gf_ledger *lg, int slot)
{
    if (slot == lg->slot)
        return true;
    return !slot_lock_free(lg->fd, slot);
}

static bool slot_has_bytes(const gf_ledger_slot *s)
{
    for (int d = 0; d < GF_LEDGER_DEVICES; d++)
        if (atomic_load_explicit(&s->used[d], memory_order_relaxed))
            return true;
    return atomic_load_explicit(&s->pid, memory_order_relaxed) != 0;
}

int gf_ledger_reclaim_dead(gf_ledger *lg)
{
    int n = 0;
    int high = gf_ledger_slot_high(lg);
    for (int slot = 0; slot < high; slot++) {
        if (slot == lg->slot || !slot_has_bytes(&lg->hdr->slots[slot]))
            continue;
        if (slot_lock(lg->fd, slot, F_WRLCK, F_OFD_SETLK) < 0)
            continue; /* live, or being claimed */
        if (slot_drain(lg->hdr, slot)) {
            atomic_fetch_add(&lg->hdr->dead_reclaims, 1);
            n++;
        }
        slot_lock(lg->fd, slot, F_UNLCK, F_OFD_SETLK);
    }
    return n;
}

int gf_ledger_after_fork(gf_ledger *lg, const char *path, gf_error *err)
{
    int fd;

    /* the inherited descriptor shares the parent's lock: let it go */
    if (lg->hdr)
        munmap(lg->hdr, sizeof(*lg->hdr));
    if (lg->fd >= 0)
        close(lg->fd);
    lg->hdr = NULL;
    lg->fd = -1;
    lg->slot = -1;
    fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return gf_error_sys(err, "reopening ledger %s after fork", path);
    if (ledger_map(fd, path, lg, err) < 0) {
        close(fd);
        return -1;
    }
    return gf_ledger_claim_slot(lg, err);
}
