/* SPDX-License-Identifier: Apache-2.0 */
/* Decoding of the KAI NvFractions pod annotations for one
 * container: the per-container keys under a prefix and the pod-level
 * legacy forms. Container names are compared as whole key segments
 * ("trainer" never matches "trainer-2"). */
#ifndef GPUFRAC_ANNOTATIONS_H
#define GPUFRAC_ANNOTATIONS_H

#include <stdbool.h>
#include <stddef.h>

#include "error.h"
#include "spec.h"

#define GF_NVFRACTIONS_PREFIX "nvidia.com/container."
#define GF_KAI_CONTAINER_PREFIX "kai.scheduler/container."

typedef struct gf_kv {
    const char *key;
    const char *value;
} gf_kv;

typedef struct gf_pod_fraction {
    bool fractional; /* false: the container gets no fraction */
    gf_spec spec;    /* finished (defaults applied) when fractional */
    int num_devices; /* from gpu-fraction-num-devices or gpus.devices; >= 1 */
} gf_pod_fraction;

typedef struct gf_annotation_opts {
    const char *prefix;            /* NULL = GF_NVFRACTIONS_PREFIX */
    const char *container;         /* the container being decoded */
    const char *const *containers; /* all container names of the pod, may be NULL */
    size_t n_containers;
    bool container_is_first; /* index 0: target of pod-level forms by default */
    bool allow_extensions;   /* gpufrac extras: "50%", portions in .gpu-memory.* */
} gf_annotation_opts;

/* Every malformed value is refused with a message naming the key, the value
 * and what is accepted. */
int gf_annotations_decode(const gf_kv *kv, size_t n, const gf_annotation_opts *opts,
                          gf_pod_fraction *out, gf_error *err);

#endif
