/* SPDX-License-Identifier: Apache-2.0 */
/* Annotations: the first byte picks the options, then one "key=value" per
 * line. A decoded fraction is always finished and consistent. */
#include "fuzz.h"

#include "annotations.h"

#define FUZZ_KV_MAX 32

static const char *const containers[] = {"trainer", "trainer-2", "sidecar"};

static void check(const gf_kv *kv, size_t n, const gf_annotation_opts *o)
{
    gf_pod_fraction f;
    gf_error err;
    uint64_t r, l;

    err.msg[0] = '\0';
    if (gf_annotations_decode(kv, n, o, &f, &err) < 0) {
        FUZZ_CHECK(err.msg[0] != '\0');
        FUZZ_CHECK(!f.fractional);
        return;
    }
    FUZZ_CHECK(f.num_devices >= 1);
    if (!f.fractional)
        return;
    FUZZ_CHECK(f.spec.has_request && f.spec.has_limit);
    FUZZ_CHECK(!f.spec.has_compute || f.spec.mode == GF_MODE_SM_SHARING);
    if (f.spec.request.is_portion == f.spec.limit.is_portion)
        FUZZ_CHECK(f.spec.request.is_portion ? f.spec.limit.portion >= f.spec.request.portion
                                             : f.spec.limit.bytes >= f.spec.request.bytes);
    FUZZ_CHECK(gf_devices_count(f.spec.devices, &err) >= 0);
    if (gf_spec_resolve(&f.spec, 80ULL << 30, &r, &l, &err) == 0)
        FUZZ_CHECK(r > 0 && r <= l && l <= (80ULL << 30));
    else
        FUZZ_CHECK(err.msg[0] != '\0');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char s[FUZZ_INPUT_MAX + 1];
    gf_kv kv[FUZZ_KV_MAX];
    gf_annotation_opts o;
    size_t n = 0, i;
    char *line, *next;
    uint8_t flags;

    if (size < 1 || !fuzz_cstr(data + 1, size - 1, s))
        return 0;
    flags = data[0];
    for (line = s; line != NULL && n < FUZZ_KV_MAX; line = next) {
        char *eq;

        next = strchr(line, '\n');
        if (next != NULL)
            *next++ = '\0';
        eq = strchr(line, '=');
        if (eq == NULL)
            continue;
        *eq = '\0';
        kv[n].key = line;
        kv[n].value = eq + 1;
        n++;
    }
    memset(&o, 0, sizeof(o));
    o.allow_extensions = flags & 1;
    o.prefix = (flags & 8) ? "example.org/f." : NULL;
    if (flags & 4) {
        o.containers = containers;
        o.n_containers = 3;
    }
    for (i = 0; i < 3; i++) {
        o.container = containers[i];
        o.container_is_first = (flags & 2) ? i == 0 : i == 1;
        check(kv, n, &o);
    }
    return 0;
}
