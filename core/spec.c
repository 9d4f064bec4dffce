/* SPDX-License-Identifier: Apache-2.0 */
#include "spec.h"

#include <stdio.h>
#include <string.h>

#include "quantity.h"

int gf_mode_parse(const char *s, const char *what, gf_mode *out, gf_error *err)
{
    char q[GF_QUOTE_MAX];

    if (s != NULL && strcmp(s, "time-slicing") == 0) {
        *out = GF_MODE_TIME_SLICING;
        return 0;
    }
    if (s != NULL && strcmp(s, "sm-sharing") == 0) {
        *out = GF_MODE_SM_SHARING;
        return 0;
    }
    return gf_error_set(err, GF_EINVAL,
                        "%s: \"%s\" is not a compute mode (expected time-slicing or sm-sharing)",
                        what != NULL ? what : "mode", gf_quote(s, q, sizeof(q)));
}

const char *gf_mode_name(gf_mode m)
{
    switch (m) {
    case GF_MODE_TIME_SLICING: return "time-slicing";
    case GF_MODE_SM_SHARING: return "sm-sharing";
    }
    return "unknown";
}

static void amount_text(const gf_amount *a, char *buf, size_t len)
{
    if (a->is_portion)
        snprintf(buf, len, "%g", a->portion);
    else if (gf_quantity_format(a->bytes, buf, len) < 0)
        snprintf(buf, len, "?");
}

static int amount_check(const gf_amount *a, const char *what, gf_error *err)
{
    if (a->is_portion && !(a->portion > 0.0 && a->portion <= 1.0))
        return gf_error_set(err, GF_ERANGE, "%s: portion %g is outside (0,1]", what, a->portion);
    if (!a->is_portion && (a->bytes == 0 || a->bytes > (uint64_t)INT64_MAX))
        return gf_error_set(err, GF_ERANGE, "%s: %llu bytes is outside 1..2^63-1", what,
                            (unsigned long long)a->bytes);
    return 0;
}

int gf_spec_finish(gf_spec *spec, gf_error *err)
{
    char r[32], l[32];

    if (!spec->has_request && !spec->has_limit)
        return gf_error_set(err, GF_EINVAL,
                            "a fraction needs a memory request or limit (a quantity such as 8Gi "
                            "or a portion such as 0.5)");
    if (spec->has_request && amount_check(&spec->request, "request", err) < 0)
        return -1;
    if (spec->has_limit && amount_check(&spec->limit, "limit", err) < 0)
        return -1;
    if (spec->mode != GF_MODE_TIME_SLICING && spec->mode != GF_MODE_SM_SHARING)
        return gf_error_set(err, GF_EINVAL, "compute mode %d is not time-slicing or sm-sharing",
                            (int)spec->mode);
    if (spec->has_compute) {
        if (spec->mode != GF_MODE_SM_SHARING)
            return gf_error_set(err, GF_EINVAL,
                                "compute portion %g is only allowed with the sm-sharing compute "
                                "mode (the mode is time-slicing)",
                                spec->compute);
        if (!(spec->compute > 0.0 && spec->compute <= 1.0))
            return gf_error_set(err, GF_ERANGE, "compute portion %g is outside (0,1]",
                                spec->compute);
    }
    if (!spec->has_request)
        spec->request = spec->limit;
    if (!spec->has_limit)
        spec->limit = spec->request;
    spec->has_request = spec->has_limit = true;
    if (spec->request.is_portion == spec->limit.is_portion &&
        (spec->request.is_portion ? spec->limit.portion < spec->request.portion
                                  : spec->limit.bytes < spec->request.bytes)) {
        amount_text(&spec->request, r, sizeof(r));
        amount_text(&spec->limit, l, sizeof(l));
        return gf_error_set(err, GF_EINVAL, "limit (%s) is smaller than request (%s)", l, r);
    }
    return gf_devices_count(spec->devices, err) < 0 ? -1 : 0;
}

int gf_spec_resolve(const gf_spec *spec, uint64_t device_total, uint64_t *request, uint64_t *limit,
                    gf_error *err)
{
    const gf_amount *ra = spec->has_request ? &spec->request : &spec->limit;
    const gf_amount *la = spec->has_limit ? &spec->limit : &spec->request;
    char r[32], l[32];
    uint64_t rb, lb;

    if (!spec->has_request && !spec->has_limit)
        return gf_error_set(err, GF_EINVAL, "a fraction needs a memory request or limit");
    if (gf_amount_resolve(ra, device_total, "request", &rb, err) < 0 ||
        gf_amount_resolve(la, device_total, "limit", &lb, err) < 0)
        return -1;
    if (lb < rb) {
        gf_bytes_human(rb, r, sizeof(r));
        gf_bytes_human(lb, l, sizeof(l));
        return gf_error_set(err, GF_EINVAL,
                            "limit (%s) is smaller than request (%s) on this device", l, r);
    }
    *request = rb;
    *limit = lb;
    return 0;
}

int gf_devices_count(const char *devices, gf_error *err)
{
    char q[GF_QUOTE_MAX];
    const char *p;
    size_t entry = 0;
    int count = 0;

    if (devices == NULL || devices[0] == '\0')
        return 0;
    for (p = devices;; p++) {
        if (*p == ',' || *p == '\0') {
            if (entry == 0)
                return gf_error_set(err, GF_EINVAL,
                                    "devices: \"%s\" has an empty entry (expected a comma list "
                                    "of GPU UUIDs, CDI names or indices)",
                                    gf_quote(devices, q, sizeof(q)));
            count++;
            entry = 0;
            if (*p == '\0')
                return count;
            continue;
        }
        if ((unsigned char)*p <= ' ' || (unsigned char)*p >= 0x7f)
            return gf_error_set(err, GF_EINVAL,
                                "devices: \"%s\" contains a space or control character (expected "
                                "a comma list of GPU UUIDs, CDI names or indices)",
                                gf_quote(devices, q, sizeof(q)));
        entry++;
    }
}
