/* SPDX-License-Identifier: Apache-2.0 */
/* The strict decimal parser against a slow reference: accepted exactly when
 * the string is non-empty digits, the value exact, GF_NUMBER_RANGE exactly
 * when digits only but above max, the result untouched on any refusal. The
 * first byte picks max (the bounds core's callers use, or the full range). */
#include "fuzz.h"

#include <stdbool.h>

#include "number.h"

static const uint64_t maxes[] = {100,        1000, UINT32_MAX, INT64_MAX, INT64_MAX / (1 << 20),
                                 UINT64_MAX, 0,    9};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char s[FUZZ_INPUT_MAX + 1];
    uint64_t max, v = 12345, want = 0;
    bool digits, over = false;
    int rc;

    if (size < 1 || !fuzz_cstr(data + 1, size - 1, s))
        return 0;
    max = maxes[data[0] % (sizeof(maxes) / sizeof(maxes[0]))];
    digits = s[0] != '\0';
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9') {
            digits = false;
            break;
        }
        unsigned __int128 x = (unsigned __int128)want * 10 + (unsigned)(*p - '0');
        if (over || x > max)
            over = true;
        else
            want = (uint64_t)x;
    }
    rc = gf_parse_udec(s, max, &v);
    if (!digits) {
        FUZZ_CHECK(rc == GF_NUMBER_INVALID && v == 12345);
    } else if (over) {
        FUZZ_CHECK(rc == GF_NUMBER_RANGE && v == 12345);
    } else {
        FUZZ_CHECK(rc == 0 && v == want);
    }
    return 0;
}
