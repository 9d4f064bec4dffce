/* SPDX-License-Identifier: Apache-2.0 */
/* List+watch of nodes and pods feeding the model: one
 * thread per kind, re-list at start and after 410 Gone, resume from the
 * last resourceVersion after a normal disconnect; a janitor drops binds
 * the watch never confirmed. */
#ifndef GPUFRAC_SCHED_INFORMER_H
#define GPUFRAC_SCHED_INFORMER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "extender.h"
#include "kube.h"
#include "model.h"

#define GF_INFORMER_ASSUME_TTL_MS (10u * 60u * 1000u)
#define GF_INFORMER_TRIM_S 5                  /* after deletions, trim the heap this often */
#define GF_INFORMER_HOLD_TTL_MS (30u * 1000u) /* a filter's hold without a bind */
#define GF_INFORMER_IDLE_CONN_S 10            /* API connections idle this long are closed */

#define GF_INFORMER_KINDS 3 /* nodes, pods, namespaces (their quotas) */
#define GF_INFORMER_NAMESPACES ((gf_model_kind)2)

typedef struct gf_informer {
    gf_kube *kube;
    gf_model *model;
    gf_extender *ext; /* synced flag */
    char prefix[GF_SCHED_KEY_MAX];
    atomic_bool stop;
    atomic_bool synced[GF_INFORMER_KINDS]; /* by kind */
    atomic_size_t deletions;               /* since the last heap trim */
    pthread_t threads[GF_INFORMER_KINDS + 1];
    int started;
    pthread_mutex_t names_lock; /* node names, for metrics */
    char **names;
    size_t n_names, cap_names;
} gf_informer;

int gf_informer_start(gf_informer *in, gf_kube *kube, gf_model *model, gf_extender *ext,
                      gf_error *err);
void gf_informer_stop(gf_informer *in);

/* Copies of the known node names (for gf_extender.node_names). */
int gf_informer_node_names(void *cls, char ***names, size_t *n);

#endif
