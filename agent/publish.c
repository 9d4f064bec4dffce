/* SPDX-License-Identifier: Apache-2.0 */
/* Publishes this node's GPU inventory for gpufrac-scheduler: the node
 * annotation gpufrac.io/gpus = [{"uuid","index","memory"}, ...] (bytes), one
 * merge patch of the Node. Retried on the tick until it lands. */
#include "publish.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent.h"
#include "events.h"
#include "kube.h"
#include "log.h"
#include "node_gpus.h"

static char *inventory(const gf_agent *a)
{
    gf_node_gpu gpus[GF_AGENT_GPUS_MAX];

    for (int g = 0; g < a->n_gpus; g++) {
        snprintf(gpus[g].id, sizeof(gpus[g].id), "%s", a->gpus[g].dev.uuid);
        gpus[g].index = a->gpus[g].dev.index;
        gpus[g].memory = a->gpus[g].dev.total;
    }
    return gf_node_gpus_format(gpus, (size_t)a->n_gpus);
}

static int patch_node(gf_agent *a, gf_kube *k, gf_error *err)
{
    char path[512], *inv = NULL, *body = NULL, *resp = NULL;
    long status = 0;
    int rc = -1;
    json_t *patch = NULL;

    inv = inventory(a);
    patch = json_pack("{s:{s:{s:s}}}", "metadata", "annotations", GF_NODE_GPUS_ANNOTATION,
                      inv ? inv : "[]");
    body = patch ? json_dumps(patch, JSON_COMPACT) : NULL;
    snprintf(path, sizeof(path), "/api/v1/nodes/%s", a->node_name);
    if (!body)
        gf_error_set(err, GF_ESYS, "out of memory building the node patch");
    else if (gf_kube_request(k, "PATCH", path, body, "application/merge-patch+json", &status, &resp,
                             err) < 0)
        ;
    else if (status < 200 || status > 299)
        gf_error_set(err, GF_ESTATE, "PATCH %s: HTTP %ld", path, status);
    else
        rc = 0;
    free(inv);
    free(body);
    free(resp);
    json_decref(patch);
    return rc;
}

void gf_publish_tick(gf_agent *a)
{
    gf_kube_opts o = {.api_server = a->api_server[0] ? a->api_server : NULL,
                      .token_file = a->token_file[0] ? a->token_file : NULL,
                      .ca_file = a->api_ca_file[0] ? a->api_ca_file : NULL,
                      .insecure = a->api_insecure};
    gf_kube *k = NULL;
    gf_error err;
    time_t now = time(NULL);

    if (!a->node_name[0] || a->published || now < a->publish_next)
        return;
    a->publish_next = now + 30;
    if (gf_kube_open(&k, &o, &err) < 0 || patch_node(a, k, &err) < 0) {
        gf_log_write(a->log_fd, GF_LOG_WARN, "gpufracd",
                     "cannot publish the GPU inventory of node %s (retrying in 30 s): %s",
                     a->node_name, err.msg);
    } else {
        a->published = true;
        gf_agent_event(a,
                       "published %d GPU(s) as annotation " GF_NODE_GPUS_ANNOTATION " of node %s",
                       a->n_gpus, a->node_name);
    }
    if (k)
        gf_kube_close(k);
}
