/* SPDX-License-Identifier: Apache-2.0 */
/* The fraction spec: what a workload asks for, before and after resolving
 * portions against a device. */
#ifndef GPUFRAC_SPEC_H
#define GPUFRAC_SPEC_H

#include <stdbool.h>
#include <stdint.h>

#include "amount.h"
#include "error.h"

typedef enum gf_mode {
    GF_MODE_TIME_SLICING = 0,
    GF_MODE_SM_SHARING = 1,
} gf_mode;

#define GF_DEVICES_MAX 1024 /* the devices field as written */

typedef struct gf_spec {
    bool has_request, has_limit;
    gf_amount request; /* guaranteed, per device */
    gf_amount limit;   /* burstable maximum, per device */
    gf_mode mode;
    bool has_compute;
    double compute;               /* (0,1]; sm-sharing only */
    char devices[GF_DEVICES_MAX]; /* comma list as written; "" = unspecified */
} gf_spec;

/* "time-slicing" | "sm-sharing" exactly. */
int gf_mode_parse(const char *s, const char *what, gf_mode *out, gf_error *err);
const char *gf_mode_name(gf_mode m);

/* Checks a spec: at least one of request/limit; compute only with sm-sharing;
 * when both amounts are of the same kind, limit >= request. Applies the
 * defaulting rule (only one given: the other equals it). */
int gf_spec_finish(gf_spec *spec, gf_error *err);

/* Resolves request/limit against one device's total; limit >= request after
 * resolving; both > 0 and <= device_total. */
int gf_spec_resolve(const gf_spec *spec, uint64_t device_total, uint64_t *request, uint64_t *limit,
                    gf_error *err);

/* Splits spec->devices; each entry non-empty, no spaces. Returns the count
 * (0 when unspecified) or -1. */
int gf_devices_count(const char *devices, gf_error *err);

#endif
