/* SPDX-License-Identifier: Apache-2.0 */
/* Kubernetes JSON (jansson) -> the model's pod and node records. */
#ifndef GPUFRAC_SCHED_DECODE_H
#define GPUFRAC_SCHED_DECODE_H

#include <jansson.h>

#include "error.h"
#include "model.h"

/* A v1.Pod: metadata.{namespace,name,uid,deletionTimestamp,annotations},
 * spec.{nodeName,containers[].name}, status.phase. The fraction comes from
 * gf_annotations_decode (prefix NULL = GF_NVFRACTIONS_PREFIX, extensions on)
 * over all containers; a pod is fractional when any container is.
 * Malformed annotations do NOT fail: out->invalid/out->error say why (the
 * filter reports it per pod). Fails only when the object is not a pod
 * (not an object, no metadata.name or uid, a field of the wrong type). */
int gf_sched_pod_decode(const json_t *pod, const char *prefix, gf_sched_pod *out, gf_error *err);

/* A v1.Node: metadata.name, the gpufrac.io/gpus annotation (model.h) else
 * the GFD labels, spec.unschedulable, status.conditions Ready. A bad
 * inventory does NOT fail: out->inventory_error says why. Fails only when
 * the object is not a node (no metadata.name, wrong types). */
int gf_sched_node_decode(const json_t *node, gf_sched_node *out, gf_error *err);

/* The gpufrac.io/gpus annotation value for node `node` into out->gpus. */
int gf_sched_gpus_annotation_parse(const char *value, const char *node, gf_sched_node *out,
                                   gf_error *err);

/* GFD labels (count, memory; memory may be NULL) into out->gpus. */
int gf_sched_gfd_labels_parse(const char *count, const char *memory, const char *node,
                              gf_sched_node *out, gf_error *err);

#endif
