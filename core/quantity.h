/* Kubernetes resource quantities, as byte counts.
 * Grammar: [+-]? digits[.digits] | .digits, then one of:
 *   binary Ki Mi Gi Ti Pi Ei, decimal n u m k M G T P E, or an exponent e<int>/E<int>.
 * A memory quantity must come out as a whole, non-negative number of bytes
 * that fits in 63 bits ("500m" is half a byte: refused). */
#ifndef GPUFRAC_QUANTITY_H
#define GPUFRAC_QUANTITY_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define GF_MIB (1024ULL * 1024ULL)
#define GF_GIB (1024ULL * GF_MIB)

/* "what" names the field in messages ("--memory", "<annotation key>").
 * Zero is accepted here; callers that need > 0 check it. */
int gf_quantity_parse(const char *s, const char *what, uint64_t *bytes, gf_error *err);

/* Canonical rendering: the largest binary suffix that is exact ("8Gi",
 * "7680Mi"), else plain bytes. Returns the length, or -1 if buf is too small. */
int gf_quantity_format(uint64_t bytes, char *buf, size_t len);

/* Human rendering with two decimals in the best binary unit ("6.00 GiB"). */
int gf_bytes_human(uint64_t bytes, char *buf, size_t len);

/* ceil(bytes / MiB), at least 1 (NVIDIA's node-side rounding). */
uint64_t gf_bytes_to_mib_ceil(uint64_t bytes);

#endif
