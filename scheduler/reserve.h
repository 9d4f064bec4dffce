/* SPDX-License-Identifier: Apache-2.0 */
/* Reservation pods: whole GPUs and fractions never share a GPU.
 *
 * On a node whose device plugin hands out nvidia.com/gpu, the kubelet alone
 * decides which GPU a whole-GPU pod gets. A GPU takes fractions only while a
 * reservation pod of ours holds it from the device plugin (as KAI does): a
 * pod in the reservation namespace, label gpufrac.io/reservation=true,
 * spec.nodeName set, asking nvidia.com/gpu: 1. Its init container "report"
 * writes the device plugin's NVIDIA_VISIBLE_DEVICES (the GPU's UUID) to its
 * termination message; the kubelet gives the main container the same device
 * (an init container's devices are reused by the pod's containers), which
 * then sleeps. The UUID opens that GPU in the model; a message that is not
 * one GPU UUID of the node's inventory opens nothing (the pod is deleted and
 * the node retried later). A reservation is created when filter finds a
 * fractional pod that fits no node but would fit an idle closed GPU, and the
 * device plugin still has a GPU nobody requests; it is deleted (its GPU
 * closed first, under the model's lock) once nothing was placed on its GPU
 * for idle_s. A change of a node's reserved GPUs is also written as the
 * node label gpufrac.io/reserved-gpus, which makes kube-scheduler try its
 * unschedulable pods again.
 *
 * Only pods in the reservation namespace count: tenants cannot create pods
 * there. Threads: the informer's pod thread (gf_reserver_pod), filter's HTTP
 * threads (gf_reserver_want), and the reserver's own thread for the API
 * calls; one mutex inside, never held across an API call. */
#ifndef GPUFRAC_SCHED_RESERVE_H
#define GPUFRAC_SCHED_RESERVE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "error.h"
#include "kube.h"
#include "model.h"

#define GF_RESERVE_LABEL "gpufrac.io/reservation"
#define GF_RESERVE_NODE_LABEL "gpufrac.io/reserved-gpus"
#define GF_RESERVE_NS_DEFAULT "gpufrac-system"
#define GF_RESERVE_IDLE_S_DEFAULT 30
#define GF_RESERVE_RETRY_MS 10000 /* after a failed or refused reservation */
#define GF_RESERVE_FRESH_S 60     /* a reservation no fraction used yet is kept this long */

typedef struct gf_reserve_opts {
    const char *ns;    /* where reservation pods are created and trusted */
    const char *image; /* with /bin/sh and sleep */
    unsigned idle_s;   /* a reservation nothing uses is given back after this */
} gf_reserve_opts;

typedef struct gf_reserver gf_reserver;

int gf_reserver_start(gf_reserver **out, gf_kube *kube, gf_model *model, const gf_reserve_opts *o,
                      gf_error *err);
void gf_reserver_stop(gf_reserver *r);

/* Every pod the informer sees (deleted: gone). Keeps the reservations and
 * the nvidia.com/gpu requests of the pods on each node. */
void gf_reserver_pod(gf_reserver *r, const json_t *pod, bool deleted);
/* A full re-list of pods: records not seen again between begin and end go. */
void gf_reserver_resync_begin(gf_reserver *r);
void gf_reserver_resync_end(gf_reserver *r);

/* Filter: no node takes the pod, node would with `need` more reserved GPUs.
 * Asks for them and writes what happens into why (for the pod's reason). */
void gf_reserver_want(gf_reserver *r, const char *node, unsigned need, char *why, size_t len);

/* For /metrics: reservations holding a GPU, and those not yet reporting. */
void gf_reserver_counts(gf_reserver *r, size_t *holding, size_t *pending);

/* The reservation pod's GPU from its "report" init container's termination
 * message: one GPU id (letters, digits, '-', '_', at most GF_SCHED_GPU_ID_MAX
 * - 1 bytes). -1 with err naming the value otherwise (exposed for tests). */
int gf_reserve_message_parse(const char *msg, char *gpu, size_t len, gf_error *err);

#endif
