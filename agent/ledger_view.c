/* SPDX-License-Identifier: Apache-2.0 */
/* See ledger_view.h: the agent reads a ledger only through a private copy,
 * and every write the agent makes into a tenant's ledger is here too. */
#include "ledger_view.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int bad(gf_ledger_view *v, const char *why)
{
    v->ok = false;
    v->why = why;
    for (int i = 0; i < v->n_entries; i++)
        v->entries[i].index = -1;
    return -1;
}

/* The first ready entry of the copied table named uuid, or -1. */
static int find_ready(const unsigned char *table, const char *uuid)
{
    for (int d = 0; uuid && d < GF_LEDGER_DEVICES; d++) {
        const unsigned char *e = table + (size_t)d * sizeof(gf_ledger_device);
        uint32_t state;
        char name[GF_UUID_MAX];
        memcpy(&state, e + offsetof(gf_ledger_device, state), sizeof(state));
        memcpy(name, e + offsetof(gf_ledger_device, uuid), sizeof(name));
        name[sizeof(name) - 1] = '\0'; /* terminated, whatever was written */
        if (state == GF_DEV_READY && strcmp(name, uuid) == 0)
            return d;
    }
    return -1;
}

#define FIELD(dst, buf, f) \
    memcpy(&(dst), (const char *)(buf) + offsetof(gf_ledger_header, f), sizeof(dst))

int gf_ledger_view_parse(const void *buf, size_t len, const gf_ledger_view_key *keys,
                         gf_ledger_view *v)
{
    const unsigned char *table = (const unsigned char *)buf + offsetof(gf_ledger_header, devices);
    uint64_t magic;
    uint32_t version, n_slots, n_devices, header_size;

    v->ok = false;
    v->why = NULL;
    if (len < GF_LEDGER_VIEW_BYTES)
        return bad(v, "truncated");
    FIELD(magic, buf, magic);
    FIELD(version, buf, version);
    FIELD(n_slots, buf, n_slots);
    FIELD(n_devices, buf, n_devices);
    FIELD(header_size, buf, header_size);
    if (magic != GF_LEDGER_MAGIC || version != GF_LEDGER_VERSION || n_slots != GF_LEDGER_SLOTS ||
        n_devices != GF_LEDGER_DEVICES || header_size != sizeof(gf_ledger_header))
        return bad(v, "not a gpufrac ledger of this version");
    for (int i = 0; i < v->n_entries; i++) {
        gf_ledger_view_entry *e = &v->entries[i];
        e->index = find_ready(table, keys[i].uuid);
        e->exact = e->index >= 0;
        if (e->index < 0)
            e->index = find_ready(table, keys[i].fallback);
        if (e->index < 0)
            continue;
        memcpy(&e->dev, table + (size_t)e->index * sizeof(gf_ledger_device), sizeof(e->dev));
        e->dev.uuid[sizeof(e->dev.uuid) - 1] = '\0';
    }
    v->ok = true;
    return 0;
}

int gf_ledger_view_read(int fd, const gf_ledger_view_key *keys, gf_ledger_view *v)
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
    return gf_ledger_view_parse(buf, got, keys, v);
}

const gf_ledger_view_entry *gf_ledger_view_entry_of(const gf_ledger_view *v, int tag, bool exact)
{
    if (!v->ok)
        return NULL;
    for (int i = 0; i < v->n_entries; i++) {
        const gf_ledger_view_entry *e = &v->entries[i];
        if (e->tag == tag)
            return e->index >= 0 && (e->exact || !exact) ? e : NULL;
    }
    return NULL;
}

int gf_ledger_view_publish_kills(int fd, uint64_t kills)
{
    off_t off = (off_t)offsetof(gf_ledger_header, watchdog_kills);
    return pwrite(fd, &kills, sizeof(kills), off) == (ssize_t)sizeof(kills) ? 0 : -1;
}

long long gf_ledger_view_keep_size(int fd)
{
    struct stat st;

    if (fd < 0 || fstat(fd, &st) < 0 || (uint64_t)st.st_size <= sizeof(gf_ledger_header) ||
        ftruncate(fd, (off_t)sizeof(gf_ledger_header)) < 0)
        return 0;
    return (long long)st.st_size;
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
