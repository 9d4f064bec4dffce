/* SPDX-License-Identifier: Apache-2.0 */
/* preempt: ExtenderPreemptionArgs in, ExtenderPreemptionResult out
 *. kube-scheduler proposes victims per node from what it
 * sees (not GPU shares); for a fractional pod the extender keeps the nodes
 * where some lower-priority fractional pods can make room and adds those
 * pods to the node's victims; nodes where nothing helps are left out. */
#include <stdlib.h>
#include <string.h>

#include "decode.h"
#include "extender.h"

#define VICTIMS_MAX 4096

/* The victims' uids of one node entry: MetaVictims {"Pods": [{"UID"}]} or
 * Victims {"Pods": [v1.Pod]}. */
static int victim_uids(const char *node, const json_t *entry, bool meta, const char **uids,
                       size_t *n, json_int_t *pdb, gf_error *err)
{
    const json_t *pods = json_is_object(entry) ? json_object_get(entry, "Pods") : NULL;
    const json_t *v = json_is_object(entry) ? json_object_get(entry, "NumPDBViolations") : NULL;
    const json_t *p;
    size_t i;

    *n = 0;
    *pdb = json_is_integer(v) ? json_integer_value(v) : 0;
    if (!json_is_object(entry) && !json_is_null(entry))
        return gf_error_set(err, GF_EINVAL, "preempt: victims of node %s are not an object", node);
    if (pods == NULL || json_is_null(pods))
        return 0;
    if (!json_is_array(pods) || json_array_size(pods) > VICTIMS_MAX)
        return gf_error_set(err, GF_EINVAL, "preempt: %s.Pods is not a list of at most %d pods",
                            node, VICTIMS_MAX);
    json_array_foreach(pods, i, p)
    {
        const json_t *uid = meta ? json_object_get(p, "UID")
                                 : json_object_get(json_object_get(p, "metadata"), "uid");

        if (!json_is_string(uid))
            return gf_error_set(err, GF_EINVAL, "preempt: %s.Pods[%zu] has no %s", node, i,
                                meta ? "UID" : "metadata.uid");
        uids[(*n)++] = json_string_value(uid);
    }
    return 0;
}

static json_t *meta_victims(const char *const *uids, size_t n, char **extra, size_t n_extra,
                            json_int_t pdb)
{
    json_t *pods = json_array();
    size_t i;

    for (i = 0; pods && i < n; i++)
        json_array_append_new(pods, json_pack("{s:s}", "UID", uids[i]));
    for (i = 0; pods && i < n_extra; i++)
        json_array_append_new(pods, json_pack("{s:s}", "UID", extra[i]));
    return pods ? json_pack("{s:o,s:I}", "Pods", pods, "NumPDBViolations", pdb) : NULL;
}

/* One node: its entry in the result, or NULL when the pod cannot get room
 * there (*err says why; logged by nobody, kube-scheduler only drops it). */
static int one_node(gf_extender *x, const gf_sched_pod *pod, const char *node, const json_t *entry,
                    bool meta, const char **uids, json_t *out, gf_error *err)
{
    char **extra = NULL;
    size_t n = 0, n_extra = 0;
    json_int_t pdb;
    json_t *mv;

    if (victim_uids(node, entry, meta, uids, &n, &pdb, err) < 0)
        return -1;
    if (pod->fractional &&
        gf_model_preempt(x->model, pod, node, uids, n, &extra, &n_extra, err) < 0)
        return 0; /* nothing frees room here */
    mv = meta_victims(uids, n, extra, n_extra, pdb);
    gf_model_uids_free(extra, n_extra);
    if (mv == NULL || json_object_set_new(out, node, mv) < 0)
        return gf_error_set(err, GF_ENOSPACE, "out of memory");
    return 0;
}

int gf_ext_preempt(gf_extender *x, const char *body, size_t len, gf_ext_reply *r)
{
    json_error_t je;
    json_t *root = NULL, *map, *out = json_object(), *entry;
    const char **uids = malloc(VICTIMS_MAX * sizeof(*uids));
    gf_sched_pod *pod = malloc(sizeof(*pod));
    gf_error err = {0};
    const char *node;
    bool meta = true;
    int rc = -1;

    atomic_fetch_add(&x->metrics.requests[GF_EXT_PREEMPT], 1);
    if (!gf_ext_await_synced(x)) { /* no Error field in the result: non-200 is one */
        rc = gf_ext_reply_error(r, 503, GF_EXT_NOT_SYNCED);
        goto out;
    }
    if (!out || !uids || !pod)
        goto out;
    root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!json_is_object(root)) {
        gf_error_set(&err, GF_EINVAL,
                     "preempt: the body is not a JSON "
                     "object (%s)",
                     root ? "not an object" : je.text);
        goto bad;
    }
    if (gf_sched_pod_decode(json_object_get(root, "Pod"), x->prefix, pod, &err) < 0)
        goto bad;
    map = json_object_get(root, "NodeNameToMetaVictims");
    if (map == NULL || json_is_null(map)) {
        map = json_object_get(root, "NodeNameToVictims");
        meta = false;
    }
    if (map != NULL && !json_is_null(map) && !json_is_object(map)) {
        gf_error_set(&err, GF_EINVAL, "preempt: NodeNameTo%sVictims is not an object",
                     meta ? "Meta" : "");
        goto bad;
    }
    if (!pod->invalid && map != NULL) {
        json_object_foreach(map, node, entry)
        {
            if (one_node(x, pod, node, entry, meta, uids, out, &err) < 0)
                goto bad;
        }
    }
    rc = gf_ext_reply_json(r, 200, json_pack("{s:O}", "NodeNameToMetaVictims", out));
    goto out;
bad:
    atomic_fetch_add(&x->metrics.bad_requests, 1);
    rc = gf_ext_reply_error(r, 400, err.msg);
out:
    json_decref(out);
    json_decref(root);
    free(pod);
    free(uids);
    return rc < 0 ? -1 : 0;
}
