/* SPDX-License-Identifier: Apache-2.0 */
/* The kube client as the extender's gf_ext_kube. */
#include "kube_ext.h"

static int bind_cb(void *cls, const char *ns, const char *name, const char *uid, const char *node,
                   json_t *annotations, gf_error *err)
{
    return gf_kube_bind(cls, ns, name, uid, node, annotations, err);
}

static int bind_async_cb(void *cls, const char *ns, const char *name, const char *uid,
                         const char *node, json_t *annotations,
                         void (*done)(void *done_cls, int rc, gf_error *err), void *done_cls,
                         gf_error *err)
{
    return gf_kube_bind_async(cls, ns, name, uid, node, annotations, done, done_cls, err);
}

static int get_pod_cb(void *cls, const char *ns, const char *name, json_t **pod, gf_error *err)
{
    return gf_kube_get_pod(cls, ns, name, pod, err);
}

static uint64_t connections_cb(void *cls)
{
    return gf_kube_connections(cls);
}

gf_ext_kube gf_kube_ext(gf_kube *k)
{
    return (gf_ext_kube){.bind = bind_cb,
                         .bind_async = bind_async_cb,
                         .get_pod = get_pod_cb,
                         .connections = connections_cb,
                         .cls = k};
}
