/* SPDX-License-Identifier: Apache-2.0 */
/* Config: parse reads only len bytes (the input is not NUL-terminated), and
 * parse -> format -> parse gives the same config and the same text. */
#include "fuzz.h"

#include "config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char text[GF_CONFIG_TEXT_MAX * 2], text2[GF_CONFIG_TEXT_MAX * 2];
    gf_fraction_config a, b;
    gf_error err;
    size_t i;
    int n;

    err.msg[0] = '\0';
    if (gf_config_parse((const char *)data, size, &a, &err) < 0) {
        FUZZ_CHECK(err.msg[0] != '\0');
        return 0;
    }
    FUZZ_CHECK(a.version == GF_CONFIG_VERSION);
    FUZZ_CHECK(gf_name_valid(a.name));
    FUZZ_CHECK(a.ledger[0] == '/');
    FUZZ_CHECK(a.compute_percent >= 1 && a.compute_percent <= 100);
    FUZZ_CHECK(a.n_devices >= 1 && a.n_devices <= GF_CONFIG_DEVICES_MAX);
    for (i = 0; i < a.n_devices; i++) {
        FUZZ_CHECK(a.devices[i].request > 0 && a.devices[i].request <= a.devices[i].limit);
        FUZZ_CHECK(gf_config_find_device(&a, a.devices[i].uuid) == &a.devices[i]);
    }
    n = gf_config_format(&a, text, sizeof(text));
    FUZZ_CHECK(n > 0);
    FUZZ_CHECK(gf_config_parse(text, (size_t)n, &b, &err) == 0);
    FUZZ_CHECK(memcmp(&a, &b, sizeof(a)) == 0);
    FUZZ_CHECK(gf_config_format(&b, text2, sizeof(text2)) == n);
    FUZZ_CHECK(memcmp(text, text2, (size_t)n) == 0);
    return 0;
}
