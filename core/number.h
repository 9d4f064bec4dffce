/* SPDX-License-Identifier: Apache-2.0 */
/* The one strict decimal parser of core: ASCII digits only, the whole string,
 * no sign, no whitespace, no base prefix (leading zeros are digits like any
 * other). The result is written only on success. */
#ifndef GPUFRAC_NUMBER_H
#define GPUFRAC_NUMBER_H

#include <stdint.h>

#define GF_NUMBER_INVALID (-1) /* empty, or a character that is not a digit */
#define GF_NUMBER_RANGE (-2)   /* digits only, but larger than max */

/* 0 and *out set, or GF_NUMBER_INVALID / GF_NUMBER_RANGE. A non-digit
 * anywhere makes the string invalid, even past an overflow. */
int gf_parse_udec(const char *s, uint64_t max, uint64_t *out);

#endif
