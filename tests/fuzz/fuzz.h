/* SPDX-License-Identifier: Apache-2.0 */
/* Shared by the libFuzzer targets: a NUL-terminated copy of the input and
 * an invariant check that aborts (the fuzzer then keeps the input). */
#ifndef GPUFRAC_FUZZ_H
#define GPUFRAC_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_INPUT_MAX 4096

#define FUZZ_CHECK(cond)                                                                   \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "invariant failed at %s:%d: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                                       \
        }                                                                                  \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Copies at most FUZZ_INPUT_MAX bytes into buf as a C string; returns 0 when
 * the input is too long (skipped: parsers see human-sized values). */
static inline int fuzz_cstr(const uint8_t *data, size_t size, char *buf)
{
    if (size > FUZZ_INPUT_MAX)
        return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';
    return 1;
}

#endif
