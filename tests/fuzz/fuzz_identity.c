/* SPDX-License-Identifier: Apache-2.0 */
/* The identity record: parse reads only len bytes (the input is not
 * NUL-terminated), every field comes back NUL-terminated within its buffer,
 * a termlog is absolute, and the same bytes parse the same way twice. */
#include "fuzz.h"

#include "identity.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gf_identity a, b;

    gf_identity_parse((const char *)data, size, &a);
    FUZZ_CHECK(memchr(a.ns, '\0', sizeof(a.ns)) != NULL);
    FUZZ_CHECK(memchr(a.pod, '\0', sizeof(a.pod)) != NULL);
    FUZZ_CHECK(memchr(a.container, '\0', sizeof(a.container)) != NULL);
    FUZZ_CHECK(memchr(a.termlog, '\0', sizeof(a.termlog)) != NULL);
    FUZZ_CHECK(a.termlog[0] == '\0' || a.termlog[0] == '/');
    FUZZ_CHECK(strchr(a.ns, '\n') == NULL && strchr(a.pod, '\n') == NULL &&
               strchr(a.container, '\n') == NULL && strchr(a.termlog, '\n') == NULL);
    gf_identity_parse((const char *)data, size, &b);
    FUZZ_CHECK(memcmp(&a, &b, sizeof(a)) == 0);
    return 0;
}
