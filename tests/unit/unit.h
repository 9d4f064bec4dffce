/* SPDX-License-Identifier: Apache-2.0 */
/* Shared helpers for the cmocka unit tests. */
#ifndef GPUFRAC_TEST_UNIT_H
#define GPUFRAC_TEST_UNIT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "error.h"

/* Asserts that msg contains every one of the given fragments. */
#define assert_msg_has(msg, ...)                                             \
    do {                                                                     \
        const char *const frags_[] = {__VA_ARGS__};                          \
        for (size_t i_ = 0; i_ < sizeof(frags_) / sizeof(frags_[0]); i_++) { \
            if (strstr((msg), frags_[i_]) == NULL)                           \
                fail_msg("message \"%s\" lacks \"%s\"", (msg), frags_[i_]);  \
        }                                                                    \
    } while (0)

#endif
