/* SPDX-License-Identifier: Apache-2.0 */
/* The node's GPU-inventory annotation, one owner for its name and format.
 * gpufracd writes it on its Node (agent/publish.c), gpufrac-scheduler reads
 * it (scheduler/decode.c): a JSON list, one object per GPU,
 *   [{"uuid":"GPU-8c1f…","index":0,"memory":85899345920}, …]
 * uuid: string (optional; the id becomes "<node>/gpu<index>" without it),
 * index: integer 0..9999, unique on the node, memory: integer bytes > 0. At
 * most GF_NODE_GPUS_MAX entries. Unknown members are ignored.
 * Invariant: whatever the writer makes from valid GPUs, the reader accepts;
 * the reader never writes past GF_NODE_GPUS_MAX entries or an id's buffer.
 * Uses jansson: in the library gfcore_json, not in the dependency-free gfcore. */
#ifndef GPUFRAC_NODE_GPUS_H
#define GPUFRAC_NODE_GPUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define GF_NODE_GPUS_ANNOTATION "gpufrac.io/gpus"
#define GF_NODE_GPUS_MAX 32    /* GPUs per node */
#define GF_NODE_GPU_ID_MAX 272 /* "<node>/gpu<i>" or a UUID */

typedef struct gf_node_gpu {
    char id[GF_NODE_GPU_ID_MAX]; /* the UUID, or "<node>/gpu<index>" */
    bool has_uuid;
    int index;
    uint64_t memory; /* bytes; 0 = unknown */
} gf_node_gpu;

/* The annotation's value for n GPUs (id is written as the uuid), compact
 * JSON in a malloc'd string; NULL when out of memory. */
char *gf_node_gpus_format(const gf_node_gpu *gpus, size_t n);

/* The annotation's value on node `node` into gpus[0..*n) (room for
 * GF_NODE_GPUS_MAX). On error *n is 0 and err names the entry. */
int gf_node_gpus_parse(const char *value, const char *node, gf_node_gpu *gpus, size_t *n,
                       gf_error *err);

#endif
