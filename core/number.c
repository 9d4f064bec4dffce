/* SPDX-License-Identifier: Apache-2.0 */
/* Strict unsigned decimal parsing (see number.h): never reads past the
 * terminating NUL, never overflows. */
#include "number.h"

int gf_parse_udec(const char *s, uint64_t max, uint64_t *out)
{
    uint64_t v = 0;
    int over = 0;

    if (*s == '\0')
        return GF_NUMBER_INVALID;
    for (; *s != '\0'; s++) {
        uint64_t d = (uint64_t)(*s - '0');

        if (*s < '0' || *s > '9')
            return GF_NUMBER_INVALID;
        if (over || d > max || v > (max - d) / 10)
            over = 1;
        else
            v = v * 10 + d;
    }
    if (over)
        return GF_NUMBER_RANGE;
    *out = v;
    return 0;
}
