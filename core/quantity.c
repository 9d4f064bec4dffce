/* SPDX-License-Identifier: Apache-2.0 */
#include "quantity.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define EXP_CAP \
    1000000L /* exponents beyond this saturate: the value is then far out of range anyway */

static const char quantity_accepted[] =
    "expected a number with an optional suffix Ki Mi Gi Ti Pi Ei, k M G T P E, "
    "or an exponent like 1e9";

static const struct {
    const char *name;
    int exp10;
    unsigned shift;
} suffixes[] = {
    {"", 0, 0},    {"Ki", 0, 10}, {"Mi", 0, 20}, {"Gi", 0, 30}, {"Ti", 0, 40}, {"Pi", 0, 50},
    {"Ei", 0, 60}, {"n", -9, 0},  {"u", -6, 0},  {"m", -3, 0},  {"k", 3, 0},   {"M", 6, 0},
    {"G", 9, 0},   {"T", 12, 0},  {"P", 15, 0},  {"E", 18, 0},
};

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static void decimal_push(gf_decimal *d, unsigned char v, int frac)
{
    if (d->ndigits == 0 && v == 0) {
        if (frac)
            d->exp10--;
        return;
    }
    if (d->ndigits < GF_DECIMAL_DIGITS_MAX) {
        d->digits[d->ndigits++] = v;
        if (frac)
            d->exp10--;
        return;
    }
    if (v != 0)
        d->too_long = true;
    else if (!frac)
        d->exp10++; /* a dropped integer zero still scales the value */
}

static const char *scan_exponent(const char *p, long *out)
{
    int neg = 0;
    long e = 0;

    if (*p == '+' || *p == '-')
        neg = *p++ == '-';
    if (!is_digit(*p))
        return NULL;
    for (; is_digit(*p); p++) {
        if (e < EXP_CAP)
            e = e * 10 + (*p - '0');
    }
    *out = neg ? -e : e;
    return p;
}

const char *gf_decimal_scan(const char *s, bool allow_exponent, gf_decimal *d)
{
    const char *p = s;
    int seen = 0;

    memset(d, 0, sizeof(*d));
    if (*p == '+' || *p == '-') {
        d->has_sign = true;
        d->negative = *p++ == '-';
    }
    for (; is_digit(*p); p++, seen = 1)
        decimal_push(d, (unsigned char)(*p - '0'), 0);
    if (*p == '.') {
        d->has_point = true;
        for (p++; is_digit(*p); p++, seen = 1)
            decimal_push(d, (unsigned char)(*p - '0'), 1);
    }
    if (!seen)
        return NULL;
    while (d->ndigits > 0 && d->digits[d->ndigits - 1] == 0) {
        d->ndigits--;
        d->exp10++;
    }
    if (allow_exponent && (*p == 'e' || *p == 'E')) {
        long e;
        const char *q = scan_exponent(p + 1, &e);

        if (q != NULL) {
            d->has_exponent = true;
            d->exp10 += e;
            p = q;
        }
    }
    if (d->ndigits == 0)
        d->exp10 = 0;
    return p;
}

int gf_decimal_cmp_one(const gf_decimal *d)
{
    long int_digits;
    unsigned i;

    if (d->ndigits == 0)
        return -1;
    int_digits = (long)d->ndigits + d->exp10;
    if (int_digits != 1)
        return int_digits > 1 ? 1 : -1;
    if (d->digits[0] > 1)
        return 1;
    for (i = 1; i < d->ndigits; i++) {
        if (d->digits[i] != 0)
            return 1;
    }
    return 0;
}

long gf_decimal_places(const gf_decimal *d)
{
    return d->exp10 < 0 ? -d->exp10 : 0;
}

double gf_decimal_to_double(const gf_decimal *d)
{
    static const double pow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                   1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                   1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    uint64_t m = 0;
    long e = d->exp10;
    unsigned i, n = d->ndigits;

    if (n == 0)
        return 0.0;
    if (n > 19) {
        e += (long)(n - 19);
        n = 19;
    }
    for (i = 0; i < n; i++)
        m = m * 10 + d->digits[i];
    if (m <= (1ULL << 53) && e >= -22 && e <= 22) {
        /* both operands exact: IEEE rounding makes the result the nearest double */
        if (e >= 0)
            return (double)m * pow10[e];
        return (double)m / pow10[-e];
    }
    if (e > 400)
        return (double)INFINITY;
    if (e < -400)
        return 0.0;
    return (double)((long double)m * powl(10.0L, (long double)e));
}

/* d /= 5 in place on a digit string; returns the remainder. */
static unsigned digits_div5(unsigned char *dig, unsigned n)
{
    unsigned i, rem = 0;

    for (i = 0; i < n; i++) {
        unsigned cur = rem * 10 + dig[i];
        dig[i] = (unsigned char)(cur / 5);
        rem = cur % 5;
    }
    return rem;
}

static int digits_to_u64(const unsigned char *dig, unsigned n, uint64_t *out)
{
    uint64_t v = 0;
    unsigned i;

    for (i = 0; i < n; i++) {
        if (v > (UINT64_MAX - dig[i]) / 10)
            return -1;
        v = v * 10 + dig[i];
    }
    *out = v;
    return 0;
}

enum { Q_OK, Q_FRACTION, Q_OVERFLOW };

/* value = digits x 10^e x 2^shift as whole bytes, exactly. */
static int decimal_to_bytes(const gf_decimal *d, long e, unsigned shift, uint64_t *out)
{
    unsigned char work[GF_DECIMAL_DIGITS_MAX];
    uint64_t v;
    long i;

    if (d->ndigits == 0) {
        *out = 0;
        return Q_OK;
    }
    if (e >= 0) {
        if ((long)d->ndigits + e > 19)
            return Q_OVERFLOW;
        if (digits_to_u64(d->digits, d->ndigits, &v) < 0)
            return Q_OVERFLOW;
        for (i = 0; i < e; i++) {
            if (v > INT64_MAX / 10)
                return Q_OVERFLOW;
            v *= 10;
        }
    } else {
        /* digits has no trailing zero, so it is odd whenever 5 divides it:
         * 10^f divides digits x 2^shift iff f <= shift and 5^f divides digits. */
        long f = -e;

        if (f > (long)shift)
            return Q_FRACTION;
        memcpy(work, d->digits, d->ndigits);
        for (i = 0; i < f; i++) {
            if (digits_div5(work, d->ndigits) != 0)
                return Q_FRACTION;
        }
        if (digits_to_u64(work, d->ndigits, &v) < 0)
            return Q_OVERFLOW;
        shift -= (unsigned)f;
    }
    if (v > ((uint64_t)INT64_MAX >> shift))
        return Q_OVERFLOW;
    *out = v << shift;
    return Q_OK;
}

static int suffix_lookup(const char *p, long *exp10, unsigned *shift)
{
    size_t i;

    if (*p == 'e' || *p == 'E') {
        const char *q = scan_exponent(p + 1, exp10);

        if (q != NULL && *q == '\0') {
            *shift = 0;
            return 0;
        }
    }
    for (i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
        if (strcmp(p, suffixes[i].name) == 0) {
            *exp10 = suffixes[i].exp10;
            *shift = suffixes[i].shift;
            return 0;
        }
    }
    return -1;
}

int gf_quantity_suggest(const char *s, char *buf, size_t len)
{
    static const char units[] = "KMGTPE";
    const char *p, *u;
    gf_decimal d;
    long exp10;
    unsigned shift;
    size_t rest, num;
    int n;

    p = s != NULL ? gf_decimal_scan(s, false, &d) : NULL;
    if (p == NULL || p == s || *p == '\0' || suffix_lookup(p, &exp10, &shift) == 0)
        return -1;
    /* a lower-case e starts an exponent ("1e"), not a misspelt exa */
    u = p[0] == 'e' ? NULL : strchr(units, p[0] >= 'a' && p[0] <= 'z' ? p[0] - 'a' + 'A' : p[0]);
    if (u == NULL || *u == '\0')
        return -1;
    /* what may follow the letter: nothing, "B", "i", "iB", in any case */
    rest = strlen(p + 1);
    if (rest > 2 || (rest >= 1 && strchr("iIbB", p[1]) == NULL) ||
        (rest == 2 && (strchr("iI", p[1]) == NULL || strchr("bB", p[2]) == NULL)))
        return -1;
    num = (size_t)(p - s);
    n = snprintf(buf, len, "%.*s%ci", (int)num, s, *u);
    return n < 0 || (size_t)n >= len ? -1 : 0;
}

int gf_quantity_parse(const char *s, const char *what, uint64_t *bytes, gf_error *err)
{
    char hint[GF_QUOTE_MAX + 32], meant[GF_QUOTE_MAX];
    char q[GF_QUOTE_MAX];
    gf_decimal d;
    const char *p;
    long exp10;
    unsigned shift;
    uint64_t v = 0;

    if (what == NULL)
        what = "quantity";
    p = s != NULL ? gf_decimal_scan(s, false, &d) : NULL;
    if (p == NULL || suffix_lookup(p, &exp10, &shift) < 0) {
        hint[0] = '\0';
        if (gf_quantity_suggest(s, meant, sizeof(meant)) == 0)
            snprintf(hint, sizeof(hint), "did you mean \"%s\"? ", meant);
        return gf_error_set(err, GF_EINVAL, "%s: \"%s\" is not a valid quantity (%s%s)", what,
                            gf_quote(s, q, sizeof(q)), hint, quantity_accepted);
    }
    if (d.negative)
        return gf_error_set(err, GF_ERANGE,
                            "%s: \"%s\" is negative (expected a quantity of 0 or more bytes, "
                            "e.g. 512Mi, 8Gi or 1G)",
                            what, gf_quote(s, q, sizeof(q)));
    if (d.too_long)
        return gf_error_set(err, GF_ERANGE, "%s: \"%s\" has more than %d significant digits (%s)",
                            what, gf_quote(s, q, sizeof(q)), GF_DECIMAL_DIGITS_MAX,
                            quantity_accepted);
    switch (decimal_to_bytes(&d, d.exp10 + exp10, shift, &v)) {
    case Q_FRACTION:
        return gf_error_set(err, GF_EINVAL,
                            "%s: \"%s\" is not a whole number of bytes (expected a quantity of "
                            "whole bytes, e.g. 512Mi, 8Gi or 1G)",
                            what, gf_quote(s, q, sizeof(q)));
    case Q_OVERFLOW:
        return gf_error_set(err, GF_ERANGE,
                            "%s: \"%s\" is too large (expected at most %" PRId64
                            " bytes, just under 8Ei)",
                            what, gf_quote(s, q, sizeof(q)), INT64_MAX);
    default: break;
    }
    *bytes = v;
    return 0;
}

int gf_quantity_format(uint64_t bytes, char *buf, size_t len)
{
    static const char *const units[] = {"Ei", "Pi", "Ti", "Gi", "Mi", "Ki"};
    unsigned i;
    int n;

    for (i = 0; i < 6 && bytes != 0; i++) {
        unsigned sh = 60 - 10 * i;

        if ((bytes & ((1ULL << sh) - 1)) == 0) {
            n = snprintf(buf, len, "%" PRIu64 "%s", bytes >> sh, units[i]);
            goto out;
        }
    }
    n = snprintf(buf, len, "%" PRIu64, bytes);
out:
    if (n < 0 || (size_t)n >= len)
        return -1;
    return n;
}

int gf_bytes_human(uint64_t bytes, char *buf, size_t len)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    uint64_t hundredths;
    int i, n;

    if (bytes < 1024) {
        n = snprintf(buf, len, "%" PRIu64 " B", bytes);
    } else {
        for (i = 5; i > 0 && bytes < (1ULL << (10 * (i + 1))); i--)
            ;
        /* long double holds every uint64 exactly, so only the final rounding is inexact */
        hundredths =
            (uint64_t)((long double)bytes * 100.0L / (long double)(1ULL << (10 * (i + 1))) + 0.5L);
        n = snprintf(buf, len, "%" PRIu64 ".%02" PRIu64 " %s", hundredths / 100, hundredths % 100,
                     units[i]);
    }
    if (n < 0 || (size_t)n >= len)
        return -1;
    return n;
}

uint64_t gf_bytes_to_mib_ceil(uint64_t bytes)
{
    uint64_t mib = bytes / GF_MIB + (bytes % GF_MIB != 0);

    return mib == 0 ? 1 : mib;
}
