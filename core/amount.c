/* SPDX-License-Identifier: Apache-2.0 */
#include "amount.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "quantity.h"

static const char amount_accepted[] =
    "expected a portion of the device in (0,1] such as 0.5, a percentage in (0,100] such as "
    "50%, or a quantity such as 8Gi, 7680Mi or 1G";

static int amount_invalid(const char *s, const char *what, const char *why, gf_error *err)
{
    char q[GF_QUOTE_MAX], meant[GF_QUOTE_MAX], hint[GF_QUOTE_MAX + 32] = "";

    if (gf_quantity_suggest(s, meant, sizeof(meant)) == 0)
        snprintf(hint, sizeof(hint), "did you mean \"%s\"? ", meant);
    return gf_error_set(err, GF_EINVAL, "%s: \"%s\" %s (%s%s)", what, gf_quote(s, q, sizeof(q)),
                        why, hint, amount_accepted);
}

static int parse_percent(const char *s, const char *what, gf_amount *out, gf_error *err)
{
    gf_decimal d;
    const char *p = gf_decimal_scan(s, false, &d);

    if (p == NULL || d.has_sign || strcmp(p, "%") != 0)
        return amount_invalid(s, what, "is not a valid percentage", err);
    if (d.ndigits == 0 || d.too_long)
        return amount_invalid(s, what, "is not a percentage above 0", err);
    d.exp10 -= 2;
    if (gf_decimal_cmp_one(&d) > 0)
        return amount_invalid(s, what, "is more than 100%", err);
    out->is_portion = true;
    out->portion = gf_decimal_to_double(&d);
    out->bytes = 0;
    if (!(out->portion > 0.0))
        return amount_invalid(s, what, "is too small a percentage", err);
    return 0;
}

int gf_amount_parse(const char *s, const char *what, gf_amount *out, gf_error *err)
{
    gf_decimal d;
    const char *p;
    uint64_t bytes;

    if (what == NULL)
        what = "amount";
    if (s == NULL || s[0] == '\0')
        return amount_invalid(s, what, "is empty", err);
    if (s[strlen(s) - 1] == '%')
        return parse_percent(s, what, out, err);
    p = gf_decimal_scan(s, false, &d);
    /* a bare number (no suffix, no exponent) in (0,1] is a portion: "1" is the whole device */
    if (p != NULL && *p == '\0' && !d.negative && !d.too_long && d.ndigits > 0 &&
        gf_decimal_cmp_one(&d) <= 0) {
        if (!(gf_decimal_to_double(&d) > 0.0))
            return amount_invalid(s, what, "is too small a portion", err);
        out->is_portion = true;
        out->portion = gf_decimal_to_double(&d);
        out->bytes = 0;
        return 0;
    }
    if (gf_quantity_parse(s, what, &bytes, err) < 0) {
        if (p != NULL && *p == '\0' && d.has_point && !d.negative)
            return amount_invalid(s, what, "is neither a portion in (0,1] nor whole bytes", err);
        if (err != NULL && err->code == GF_EINVAL)
            return amount_invalid(s, what, "is not a valid amount", err);
        return -1;
    }
    if (bytes == 0)
        return amount_invalid(s, what, "must be greater than 0", err);
    out->is_portion = false;
    out->portion = 0.0;
    out->bytes = bytes;
    return 0;
}

/* floor(total * portion) in long double (every uint64 is exact there). The
 * double portion carries up to 2^-53 relative error, so a product within
 * that distance of a whole number is taken as that number: 0.29 of 100 MiB
 * is 29 MiB, not 28.99... MiB floored to 28. */
static uint64_t portion_of(uint64_t total, double portion)
{
    long double exact = (long double)total * (long double)portion;
    long double near = floorl(exact + 0.5L);
    long double slack = (long double)total * 0x1p-51L;

    if (fabsl(exact - near) <= slack)
        exact = near;
    if (exact <= 0.0L)
        return 0;
    if (exact >= (long double)total)
        return total;
    return (uint64_t)floorl(exact);
}

int gf_amount_resolve(const gf_amount *a, uint64_t device_total, const char *what, uint64_t *bytes,
                      gf_error *err)
{
    char h1[32], h2[32];
    uint64_t b;

    if (what == NULL)
        what = "amount";
    gf_bytes_human(device_total, h2, sizeof(h2));
    if (a->is_portion) {
        if (!(a->portion > 0.0 && a->portion <= 1.0))
            return gf_error_set(err, GF_ERANGE, "%s: portion %g is outside (0,1]", what,
                                a->portion);
        b = portion_of(device_total, a->portion);
        b -= b % GF_MIB;
        if (b == 0)
            b = GF_MIB;
        if (b > device_total)
            return gf_error_set(err, GF_ERANGE,
                                "%s: the device (%s) is smaller than the 1 MiB minimum", what, h2);
        *bytes = b;
        return 0;
    }
    gf_bytes_human(a->bytes, h1, sizeof(h1));
    if (a->bytes == 0)
        return gf_error_set(err, GF_ERANGE, "%s: must be greater than 0 bytes", what);
    if (a->bytes > device_total)
        return gf_error_set(err, GF_ERANGE, "%s: %s is more than the device's %s", what, h1, h2);
    *bytes = a->bytes;
    return 0;
}

int gf_compute_portion_parse(const char *s, const char *what, double *out, gf_error *err)
{
    char q[GF_QUOTE_MAX];
    gf_decimal d;
    const char *p;

    if (what == NULL)
        what = "compute portion";
    p = s != NULL ? gf_decimal_scan(s, true, &d) : NULL;
    if (p == NULL || *p != '\0' || d.negative || d.too_long || d.ndigits == 0 ||
        gf_decimal_cmp_one(&d) > 0)
        return gf_error_set(err, GF_EINVAL,
                            "%s: \"%s\" is not a valid compute portion (expected a decimal "
                            "number in (0,1], e.g. 0.5, 1 or 5e-1)",
                            what, gf_quote(s, q, sizeof(q)));
    /* a portion too small for a double is refused, not rounded to 0 */
    if (!(gf_decimal_to_double(&d) > 0.0))
        return gf_error_set(err, GF_ERANGE,
                            "%s: \"%s\" is too small a compute portion (expected a decimal "
                            "number in (0,1], e.g. 0.5, 1 or 5e-1)",
                            what, gf_quote(s, q, sizeof(q)));
    *out = gf_decimal_to_double(&d);
    return 0;
}

int gf_compute_percent(double portion)
{
    double pct = floor(portion * 100.0);

    if (!(pct >= 1.0))
        return 1;
    if (pct > 100.0)
        return 100;
    return (int)pct;
}
