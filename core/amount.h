/* SPDX-License-Identifier: Apache-2.0 */
/* A memory amount as a person writes it: a quantity ("40Gi", "1G") or a
 * portion of the device ("0.5", "50%"). A bare number up to 1 is a portion;
 * any other value must be a quantity. */
#ifndef GPUFRAC_AMOUNT_H
#define GPUFRAC_AMOUNT_H

#include <stdbool.h>
#include <stdint.h>

#include "error.h"

typedef struct gf_amount {
    bool is_portion;
    double portion; /* (0,1] when is_portion */
    uint64_t bytes; /* > 0 when !is_portion */
} gf_amount;

int gf_amount_parse(const char *s, const char *what, gf_amount *out, gf_error *err);

/* Bytes of a device of device_total bytes; a portion is floored to whole MiB
 * (never to 0). Fails when a quantity exceeds the device. */
int gf_amount_resolve(const gf_amount *a, uint64_t device_total, const char *what, uint64_t *bytes,
                      gf_error *err);

/* SM share in (0,1] as KAI writes it: "0.5", "1", "5e-1". Refuses 0, >1, %,
 * suffixes, NaN, Inf, blank. */
int gf_compute_portion_parse(const char *s, const char *what, double *out, gf_error *err);

/* floor(portion * 100) in double arithmetic (0.29 -> 28, as KAI), at least 1. */
int gf_compute_percent(double portion);

#endif
