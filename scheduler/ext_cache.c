/* SPDX-License-Identifier: Apache-2.0 */
/* The pods filter saw last, for bind (which carries only their names). Each
 * record is its own allocation, freed once its bind succeeds, so nothing of
 * a burst stays resident after its pods are bound. */
#include <stdlib.h>
#include <string.h>

#include "extender.h"

int gf_ext_cache_init(gf_ext_pod_cache *c, gf_error *err)
{
    memset(c, 0, sizeof(*c));
    c->pods = calloc(GF_EXT_POD_CACHE, sizeof(*c->pods));
    if (!c->pods)
        return gf_error_set(err, GF_ENOSPACE, "out of memory for the pod cache");
    pthread_mutex_init(&c->lock, NULL);
    return 0;
}

void gf_ext_cache_fini(gf_ext_pod_cache *c)
{
    if (!c->pods)
        return;
    pthread_mutex_destroy(&c->lock);
    for (size_t i = 0; i < GF_EXT_POD_CACHE; i++)
        free(c->pods[i]);
    free(c->pods);
    c->pods = NULL;
}

static gf_sched_pod **find(gf_ext_pod_cache *c, const char *ns, const char *name)
{
    for (size_t i = 0; i < GF_EXT_POD_CACHE; i++) {
        gf_sched_pod *p = c->pods[i];
        if (p && strcmp(p->name, name) == 0 && strcmp(p->ns, ns) == 0)
            return &c->pods[i];
    }
    return NULL;
}

void gf_ext_cache_put(gf_ext_pod_cache *c, const gf_sched_pod *pod)
{
    gf_sched_pod **slot;

    pthread_mutex_lock(&c->lock);
    slot = find(c, pod->ns, pod->name);
    if (!slot) {
        slot = &c->pods[c->next];
        c->next = (c->next + 1) % GF_EXT_POD_CACHE;
        if (!*slot && !(*slot = malloc(sizeof(*pod))))
            goto out; /* bind asks the API server instead */
    }
    **slot = *pod;
out:
    pthread_mutex_unlock(&c->lock);
}

bool gf_ext_cache_get(gf_ext_pod_cache *c, const char *ns, const char *name, const char *uid,
                      gf_sched_pod *out)
{
    gf_sched_pod **p;
    bool found = false;

    pthread_mutex_lock(&c->lock);
    p = find(c, ns, name);
    if (p && (!uid || !uid[0] || strcmp((*p)->uid, uid) == 0)) {
        *out = **p;
        found = true;
    }
    pthread_mutex_unlock(&c->lock);
    return found;
}

size_t gf_ext_cache_count(gf_ext_pod_cache *c)
{
    size_t n = 0;

    pthread_mutex_lock(&c->lock);
    for (size_t i = 0; c->pods && i < GF_EXT_POD_CACHE; i++)
        n += c->pods[i] != NULL;
    pthread_mutex_unlock(&c->lock);
    return n;
}

void gf_ext_cache_drop(gf_ext_pod_cache *c, const char *ns, const char *name)
{
    gf_sched_pod **p;

    pthread_mutex_lock(&c->lock);
    if ((p = find(c, ns, name))) {
        free(*p);
        *p = NULL;
    }
    pthread_mutex_unlock(&c->lock);
}
