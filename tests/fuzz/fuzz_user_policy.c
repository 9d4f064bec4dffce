/* SPDX-License-Identifier: Apache-2.0 */
/* The policy file: any bytes either parse, and then every user's rules
 * evaluate without fault and a refusal names its rule, or fail with a
 * message that names the line. */
#include <string.h>

#include "fuzz.h"

#include "quantity.h"
#include "user_policy.h"

static gf_user_policy policy;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const groups[] = {"students", "staff", "g"};
    static const char *const users[] = {"alice", "bob", "u", NULL};
    gf_user_policy_device dev = {.request = GF_GIB, .limit = 2 * GF_GIB, .gpu_total = 16 * GF_GIB};
    gf_error err = {0};

    if (gf_user_policy_parse((const char *)data, size, "fuzz.conf", &policy, &err) < 0) {
        FUZZ_CHECK(strncmp(err.msg, "policy fuzz.conf:", 17) == 0);
        return 0;
    }
    FUZZ_CHECK(policy.n <= GF_USER_POLICY_SECTIONS_MAX);
    for (size_t u = 0; u < sizeof(users) / sizeof(users[0]); u++)
        for (int mode = 0; mode < 2; mode++) {
            gf_user_policy_rules r;
            gf_user_policy_ask ask = {.mode = (gf_mode)mode,
                                      .compute_percent = 50,
                                      .n_devices = 1,
                                      .devices = &dev,
                                      .fractions_held = u};
            gf_user_policy_rules_for(&policy, users[u], groups, 3, &r);
            if (gf_user_policy_check(&policy, &r, &ask, &err) < 0)
                FUZZ_CHECK(strstr(err.msg, "refused by policy fuzz.conf:") != NULL);
        }
    return 0;
}
