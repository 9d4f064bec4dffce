/* SPDX-License-Identifier: Apache-2.0 */
/* Amounts: accepted values are in range and resolve within the device. */
#include "fuzz.h"

#include "amount.h"
#include "quantity.h"
#include "spec.h"

static const uint64_t totals[] = {1ULL << 20, 1000000000ULL, 143156ULL << 20, 80ULL << 30,
                                  (uint64_t)INT64_MAX};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char s[FUZZ_INPUT_MAX + 1];
    gf_amount a;
    gf_error err;
    gf_mode m;
    size_t i;

    if (!fuzz_cstr(data, size, s))
        return 0;
    gf_mode_parse(s, "fuzz", &m, &err);
    FUZZ_CHECK(gf_devices_count(s, &err) >= -1);
    if (gf_amount_parse(s, "fuzz", &a, &err) < 0) {
        FUZZ_CHECK(err.msg[0] != '\0');
        return 0;
    }
    if (a.is_portion)
        FUZZ_CHECK(a.portion > 0.0 && a.portion <= 1.0);
    else
        FUZZ_CHECK(a.bytes > 0 && a.bytes <= (uint64_t)INT64_MAX);
    for (i = 0; i < sizeof(totals) / sizeof(totals[0]); i++) {
        uint64_t b;

        if (gf_amount_resolve(&a, totals[i], "fuzz", &b, &err) < 0) {
            FUZZ_CHECK(!a.is_portion || totals[i] < GF_MIB);
            continue;
        }
        FUZZ_CHECK(b > 0 && b <= totals[i]);
        if (a.is_portion) {
            FUZZ_CHECK(b % GF_MIB == 0);
            if (a.portion == 1.0)
                FUZZ_CHECK(b == totals[i] - totals[i] % GF_MIB);
        } else {
            FUZZ_CHECK(b == a.bytes);
        }
    }
    return 0;
}
