/* SPDX-License-Identifier: Apache-2.0 */
/* Quantities: parse -> format -> parse is the identity, and every refusal
 * carries a message. */
#include "fuzz.h"

#include "amount.h"
#include "quantity.h"

static void check_quantity(const char *s)
{
    char text[32], human[32];
    uint64_t b, b2;
    gf_error err;

    err.msg[0] = '\0';
    if (gf_quantity_parse(s, "fuzz", &b, &err) < 0) {
        FUZZ_CHECK(err.msg[0] != '\0');
        FUZZ_CHECK(strncmp(err.msg, "fuzz: \"", 7) == 0);
        return;
    }
    FUZZ_CHECK(b <= (uint64_t)INT64_MAX);
    FUZZ_CHECK(gf_quantity_format(b, text, sizeof(text)) > 0);
    FUZZ_CHECK(gf_quantity_parse(text, "fuzz", &b2, &err) == 0);
    FUZZ_CHECK(b2 == b);
    FUZZ_CHECK(gf_bytes_human(b, human, sizeof(human)) > 0);
    FUZZ_CHECK(gf_bytes_to_mib_ceil(b) >= 1);
    FUZZ_CHECK(gf_bytes_to_mib_ceil(b) * GF_MIB >= b);
}

static void check_compute(const char *s)
{
    gf_error err;
    double p;
    int pct;

    if (gf_compute_portion_parse(s, "fuzz", &p, &err) < 0) {
        FUZZ_CHECK(err.msg[0] != '\0');
        return;
    }
    FUZZ_CHECK(p > 0.0 && p <= 1.0);
    pct = gf_compute_percent(p);
    FUZZ_CHECK(pct >= 1 && pct <= 100);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char s[FUZZ_INPUT_MAX + 1];

    if (!fuzz_cstr(data, size, s))
        return 0;
    check_quantity(s);
    check_compute(s);
    return 0;
}
