/* SPDX-License-Identifier: Apache-2.0 */
/* The metrics page and its server (metrics.c, metrics_http.c). */
#ifndef GPUFRAC_AGENT_METRICS_H
#define GPUFRAC_AGENT_METRICS_H

#include <stddef.h>

#include "agent.h"

/* Prometheus text format 0.0.4, formatted from the latest
 * snapshot (GF_ESTATE before the first), without a->lock. */
int gf_metrics_render(gf_agent *a, char **out, size_t *len, gf_error *err);
int gf_metrics_start(gf_agent *a, gf_error *err); /* HTTP server on metrics_listen */
void gf_metrics_stop(gf_agent *a);

#endif
