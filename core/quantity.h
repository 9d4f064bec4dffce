/* SPDX-License-Identifier: Apache-2.0 */
/* Kubernetes resource quantities, as byte counts.
 * Grammar: [+-]? digits[.digits] | .digits, then one of:
 *   binary Ki Mi Gi Ti Pi Ei, decimal n u m k M G T P E, or an exponent e<int>/E<int>.
 * A memory quantity must come out as a whole, non-negative number of bytes
 * that fits in 63 bits ("500m" is half a byte: refused). */
#ifndef GPUFRAC_QUANTITY_H
#define GPUFRAC_QUANTITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define GF_MIB (1024ULL * 1024ULL)
#define GF_GIB (1024ULL * GF_MIB)

/* "what" names the field in messages ("--memory", "<annotation key>").
 * Zero is accepted here; callers that need > 0 check it. */
int gf_quantity_parse(const char *s, const char *what, uint64_t *bytes, gf_error *err);

/* For a refused quantity that is a number and a misspelt binary suffix
 * ("8GB", "8gib", "512mb", "1g"), the quantity meant ("8Gi", "512Mi", "1Gi")
 * into buf; returns 0, or -1 when there is nothing to suggest (an accepted
 * suffix such as "G" is never "corrected"). */
int gf_quantity_suggest(const char *s, char *buf, size_t len);

/* Canonical rendering: the largest binary suffix that is exact ("8Gi",
 * "7680Mi"), else plain bytes. Returns the length, or -1 if buf is too small. */
int gf_quantity_format(uint64_t bytes, char *buf, size_t len);

/* Human rendering with two decimals in the best binary unit ("6.00 GiB"). */
int gf_bytes_human(uint64_t bytes, char *buf, size_t len);

/* ceil(bytes / MiB), at least 1 (NVIDIA's node-side rounding). */
uint64_t gf_bytes_to_mib_ceil(uint64_t bytes);

/* A decimal number as written, exactly: value = digits x 10^exp10, with the
 * significant digits only (no leading or trailing zeros; ndigits 0 = zero).
 * Shared by the quantity, portion and annotation parsers. */
#define GF_DECIMAL_DIGITS_MAX 80

typedef struct gf_decimal {
    bool negative; /* a '-' was written (also for "-0") */
    bool has_sign; /* '+' or '-' was written */
    bool has_point;
    bool has_exponent;
    bool too_long; /* more than GF_DECIMAL_DIGITS_MAX significant digits */
    unsigned ndigits;
    unsigned char digits[GF_DECIMAL_DIGITS_MAX]; /* values 0..9 */
    long exp10;
} gf_decimal;

/* Scans [+-](digits[.[digits]] | .digits) and, with allow_exponent, an
 * exponent [eE][+-]digits. Returns the first byte not consumed, or NULL
 * when s does not start with a number. */
const char *gf_decimal_scan(const char *s, bool allow_exponent, gf_decimal *d);

/* Compares |d| with 1: -1, 0 or 1. */
int gf_decimal_cmp_one(const gf_decimal *d);

/* Digits after the decimal point the value needs (0.80 -> 1). */
long gf_decimal_places(const gf_decimal *d);

/* The nearest double (exact decimal-to-binary rounding up to 15 significant
 * digits; longer inputs may be off by one ulp). Ignores the sign. */
double gf_decimal_to_double(const gf_decimal *d);

#endif
