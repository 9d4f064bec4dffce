/* The agent's view of a ledger (agent/ledger_view.c) fed arbitrary bytes: a
 * tenant can write anything into its ledger, truncate it or grow it. First
 * byte even: the input is the ledger's beginning as it is; odd: the input
 * overlays a valid header past its validated fields (so mutations reach the
 * device table). Invariants: parse and the pread path agree, a lookup
 * returns -1 or a ready entry with that exact uuid, strings are terminated,
 * and nothing reads past the copy (ASan). */
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *uuids[] = {"GPU-0", "*", "", "GPU-aaaaaaaa-bbbb"};
    gf_ledger_view v, w;
    size_t len;
    int fd, rc;

    if (size < 1)
        return 0;
    len = build(data, size);
    rc = gf_ledger_view_parse(ledger, len, &v);
    FUZZ_CHECK(rc == 0 ? v.ok : !v.ok);
    FUZZ_CHECK(strlen(v.why) < sizeof(v.why));
    for (size_t i = 0; i < sizeof(uuids) / sizeof(uuids[0]); i++) {
        int d = gf_ledger_view_device(&v, uuids[i]);
        FUZZ_CHECK(d >= -1 && d < GF_LEDGER_DEVICES);
        FUZZ_CHECK(d < 0 || v.ok);
        if (d >= 0) {
            FUZZ_CHECK(atomic_load(&v.devices[d].state) == GF_DEV_READY);
            FUZZ_CHECK(strcmp(v.devices[d].uuid, uuids[i]) == 0);
        }
    }
    if (v.ok)
        for (int d = 0; d < GF_LEDGER_DEVICES; d++)
            FUZZ_CHECK(strlen(v.devices[d].uuid) < GF_UUID_MAX);
    /* the same bytes through a file, as the agent reads them */
    fd = memfd_create("ledger", MFD_CLOEXEC);
    if (fd >= 0) {
        if (write(fd, ledger, len) == (ssize_t)len) {
            gf_ledger_view_read(fd, &w);
            FUZZ_CHECK(w.ok == v.ok);
            FUZZ_CHECK(!gf_ledger_view_any_live(fd));
        }
        close(fd);
    }
    return 0;
}
