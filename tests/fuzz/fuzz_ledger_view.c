/* SPDX-License-Identifier: Apache-2.0 */
/* The agent's view of a ledger (agent/ledger_view.c) fed arbitrary bytes: a
 * tenant can write anything into its ledger, truncate it or grow it. First
 * byte even: the input is the ledger's beginning as it is; odd: the input
 * overlays a valid header past its validated fields (so mutations reach the
 * device table). Invariants: parse and the pread path agree, a kept entry is
 * a ready entry of the table named by its key's uuid (or, only when none is,
 * its fallback), copied whole, strings are terminated, and nothing reads past
 * the copy (ASan). */
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz.h"
#include "ledger_view.h"

static unsigned char ledger[GF_LEDGER_VIEW_BYTES + 64];

static size_t build(const uint8_t *data, size_t size)
{
    static const uint64_t magic = GF_LEDGER_MAGIC;
    static const uint32_t fields[4] = {GF_LEDGER_VERSION, GF_LEDGER_SLOTS, GF_LEDGER_DEVICES,
                                       (uint32_t)sizeof(gf_ledger_header)};
    size_t off = offsetof(gf_ledger_header, name), n;

    if (!(data[0] & 1)) {
        n = size - 1 < sizeof(ledger) ? size - 1 : sizeof(ledger);
        memcpy(ledger, data + 1, n);
        return n;
    }
    memset(ledger, 0, sizeof(ledger));
    memcpy(ledger + offsetof(gf_ledger_header, magic), &magic, sizeof(magic));
    memcpy(ledger + offsetof(gf_ledger_header, version), fields, sizeof(fields));
    n = size - 1 < sizeof(ledger) - off ? size - 1 : sizeof(ledger) - off;
    memcpy(ledger + off, data + 1, n);
    /* the second byte, when present, truncates: a tenant's ftruncate */
    n = size > 1 && (data[1] & 0x80) ? (size_t)(data[1] & 0x7f) * 32 : sizeof(ledger);
    return n < sizeof(ledger) ? n : sizeof(ledger);
}

#define N_KEYS 4

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const gf_ledger_view_key keys[N_KEYS] = {
        {"GPU-0", "*"}, {"*", NULL}, {"", "GPU-0"}, {"GPU-aaaaaaaa-bbbb", "GPU-aaaaaaaa-bbbb"}};
    static const gf_ledger_view_key exact[N_KEYS] = {
        {"GPU-0", NULL}, {"*", NULL}, {"", NULL}, {"GPU-aaaaaaaa-bbbb", NULL}};
    gf_ledger_view_entry ve[N_KEYS], xe[N_KEYS], we[N_KEYS];
    gf_ledger_view v = {.n_entries = N_KEYS, .entries = ve};
    gf_ledger_view x = {.n_entries = N_KEYS, .entries = xe};
    gf_ledger_view w = {.n_entries = N_KEYS, .entries = we};
    size_t len;
    int fd, rc;

    if (size < 1)
        return 0;
    len = build(data, size);
    for (int i = 0; i < N_KEYS; i++)
        ve[i].tag = xe[i].tag = we[i].tag = i;
    rc = gf_ledger_view_parse(ledger, len, keys, &v);
    FUZZ_CHECK(rc == 0 ? v.ok : !v.ok);
    FUZZ_CHECK(v.ok || (v.why && strlen(v.why) > 0));
    FUZZ_CHECK(gf_ledger_view_parse(ledger, len, exact, &x) == rc);
    for (int i = 0; i < N_KEYS; i++) {
        const gf_ledger_view_entry *e = gf_ledger_view_entry_of(&v, i, false);
        const unsigned char *raw;
        FUZZ_CHECK(e == NULL || v.ok);
        FUZZ_CHECK(!v.ok || ve[i].index >= -1);
        if (!e)
            continue;
        /* a ready entry of the table, named by the key (its uuid first) */
        FUZZ_CHECK(e->index >= 0 && e->index < GF_LEDGER_DEVICES);
        FUZZ_CHECK(atomic_load(&e->dev.state) == GF_DEV_READY);
        FUZZ_CHECK(strlen(e->dev.uuid) < GF_UUID_MAX);
        FUZZ_CHECK(strcmp(e->dev.uuid, e->exact ? keys[i].uuid : keys[i].fallback) == 0);
        FUZZ_CHECK(e->exact == (xe[i].index >= 0));
        FUZZ_CHECK(!e->exact || xe[i].index == e->index);
        FUZZ_CHECK(e->exact || gf_ledger_view_entry_of(&v, i, true) == NULL);
        /* the copy is the table's entry (counters and all) */
        raw = ledger + offsetof(gf_ledger_header, devices) +
              (size_t)e->index * sizeof(gf_ledger_device);
        FUZZ_CHECK(memcmp(&e->dev.request, raw + offsetof(gf_ledger_device, request),
                          sizeof(gf_ledger_device) - offsetof(gf_ledger_device, request)) == 0);
    }
    /* the same bytes through a file, as the agent reads them */
    fd = memfd_create("ledger", MFD_CLOEXEC);
    if (fd >= 0) {
        if (write(fd, ledger, len) == (ssize_t)len) {
            gf_ledger_view_read(fd, keys, &w);
            FUZZ_CHECK(w.ok == v.ok);
            for (int i = 0; v.ok && i < N_KEYS; i++)
                FUZZ_CHECK(we[i].index == ve[i].index && we[i].exact == ve[i].exact);
            FUZZ_CHECK(!gf_ledger_view_any_live(fd));
        }
        close(fd);
    }
    return 0;
}
