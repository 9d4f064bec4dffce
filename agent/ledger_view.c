/* See ledger_view.h: the agent reads a ledger only through a private copy. */
#include "ledger_view.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int bad(gf_ledger_view *v, const char *why)
{
    v->ok = false;
    snprintf(v->why, sizeof(v->why), "%s", why);
    return -1;
}

#define FIELD(v, buf, f) memcpy(&(v)->f, (const char *)(buf) + offsetof(gf_ledger_header, f), \
                                sizeof((v)->f))

int gf_ledger_view_parse(const void *buf, size_t len, gf_ledger_view *v)
{
    v->ok = false;
    v->why[0] = '\0';
    if (len < GF_LEDGER_VIEW_BYTES)
        return bad(v, "truncated");
    FIELD(v, buf, magic);
    FIELD(v, buf, version);
    FIELD(v, buf, n_slots);
    FIELD(v, buf, n_devices);
    FIELD(v, buf, header_size);
    FIELD(v, buf, name);
    FIELD(v, buf, dead_reclaims);
    FIELD(v, buf, watchdog_kills);
    FIELD(v, buf, devices);
    if (v->magic != GF_LEDGER_MAGIC || v->version != GF_LEDGER_VERSION ||
        v->n_slots != GF_LEDGER_SLOTS || v->n_devices != GF_LEDGER_DEVICES ||
        v->header_size != sizeof(gf_ledger_header))
        return bad(v, "not a gpufrac ledger of this version");
    /* strings the agent compares and prints: terminated, whatever was written */
    for (int d = 0; d < GF_LEDGER_DEVICES; d++)
        v->devices[d].uuid[sizeof(v->devices[d].uuid) - 1] = '\0';
    v->name[sizeof(v->name) - 1] = '\0';
    v->ok = true;
    return 0;
}

int gf_ledger_view_read(int fd, gf_ledger_view *v)
{
    static _Thread_local unsigned char buf[GF_LEDGER_VIEW_BYTES];
    size_t got = 0;

    /* bounded: at most a few short reads, never past the view's size */
    for (int tries = 0; got < sizeof(buf) && tries < 8; tries++) {
        ssize_t n = pread(fd, buf + got, sizeof(buf) - got, (off_t)got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    return gf_ledger_view_parse(buf, got, v);
}

int gf_ledger_view_device(const gf_ledger_view *v, const char *uuid)
{
    if (!v->ok)
        return -1;
    for (int d = 0; d < GF_LEDGER_DEVICES; d++) {
        const gf_ledger_device *dv = &v->devices[d];
        if (atomic_load_explicit(&dv->state, memory_order_relaxed) == GF_DEV_READY &&
            strcmp(dv->uuid, uuid) == 0)
            return d;
    }
    return -1;
}

int gf_ledger_view_publish(int fd, int dev, size_t field, uint64_t value)
{
    off_t off;

    if (dev < 0 || dev >= GF_LEDGER_DEVICES || field + sizeof(value) > sizeof(gf_ledger_device))
        return -1;
    off = (off_t)(offsetof(gf_ledger_header, devices) + (size_t)dev * sizeof(gf_ledger_device) +
                  field);
    /* an aligned 8-byte store into the page cache: the shim, which maps the
     * file, sees the whole value */
    return pwrite(fd, &value, sizeof(value), off) == (ssize_t)sizeof(value) ? 0 : -1;
}

bool gf_ledger_view_any_live(int fd)
{
    struct flock fl = {
        .l_type = F_WRLCK,
        .l_whence = SEEK_SET,
        .l_start = GF_LEDGER_LOCK_BASE,
        .l_len = GF_LEDGER_SLOTS,
    };
    if (fcntl(fd, F_OFD_GETLK, &fl) < 0)
        return true;
    return fl.l_type != F_UNLCK;
}
