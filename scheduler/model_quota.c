/* SPDX-License-Identifier: Apache-2.0 */
/* GPU memory quota per namespace. Invariant: ns->used is the sum of
 * ns_charged over the namespace's pods, and a pod's ns_charged is what its
 * placement charges on its GPUs right now (0 while unplaced): every place,
 * unplace and re-resolve in model.c calls gf_model_ns_charge. A namespace
 * whose quota annotation cannot be read takes no fractional pod. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_int.h"
#include "quantity.h"

/* --- records (write lock held) --- */

static mns *ns_find(const gf_model *m, const char *name)
{
    return (mns *)gf_model_table_find(&m->nss, name);
}

static mns *ns_get(gf_model *m, const char *name)
{
    mns *n = ns_find(m, name);

    if (n != NULL)
        return n;
    if ((n = calloc(1, sizeof(*n) + strlen(name) + 1)) == NULL)
        return NULL;
    n->e.key = (char *)(n + 1);
    memcpy(n->e.key, name, strlen(name) + 1);
    if (gf_model_table_add(&m->nss, &n->e) < 0) {
        free(n);
        return NULL;
    }
    return n;
}

static void ns_maybe_free(gf_model *m, mns *n)
{
    if (n->present || n->refs > 0)
        return;
    gf_model_table_remove(&m->nss, &n->e);
    free(n->error);
    free(n);
}

int gf_model_ns_attach(gf_model *m, mpod *p, const char *ns)
{
    if (p->ns != NULL)
        return 0;
    if ((p->ns = ns_get(m, ns)) == NULL)
        return -1;
    p->ns->refs++;
    return 0;
}

void gf_model_ns_detach(gf_model *m, mpod *p)
{
    mns *n = p->ns;

    if (n == NULL)
        return;
    n->used -= p->ns_charged < n->used ? p->ns_charged : n->used;
    p->ns_charged = 0;
    p->ns = NULL;
    n->refs--;
    ns_maybe_free(m, n);
}

void gf_model_ns_charge(mpod *p)
{
    uint64_t now = 0;

    if (p->ns == NULL)
        return;
    for (size_t i = 0; p->node != NULL && p->resolved && i < p->n_gpus; i++)
        now += gf_sched_mpod_charge(p, p->node->gpus[p->gpu[i]].total);
    p->ns->used -= p->ns_charged < p->ns->used ? p->ns_charged : p->ns->used;
    p->ns->used += now;
    p->ns_charged = now;
}

void gf_model_ns_free_all(gf_model *m)
{
    for (size_t i = 0; i < m->nss.n_buckets; i++) {
        mentry *e = m->nss.buckets[i], *next;
        for (; e != NULL; e = next) {
            next = e->hnext;
            free(((mns *)e)->error);
            free(e);
        }
    }
    free(m->nss.buckets);
}

/* --- the Namespace objects --- */

static int ns_set(mns *n, const gf_sched_ns *src)
{
    free(n->error);
    n->error = NULL;
    n->present = true;
    n->has_quota = src->has_quota;
    n->quota = src->quota;
    if (src->error[0] && (n->error = strdup(src->error)) == NULL)
        return -1;
    return 0;
}

int gf_model_ns_update(gf_model *m, const gf_sched_ns *ns, gf_error *err)
{
    mns *n;
    int rc = 0;

    pthread_rwlock_wrlock(&m->lock);
    if ((n = ns_get(m, ns->name)) == NULL || ns_set(n, ns) < 0) {
        if (n != NULL) /* no record of the error: refuse the namespace's pods */
            n->has_quota = true, n->quota = 0;
        rc = gf_error_set(err, GF_ENOSPACE, "namespace %s: out of memory", ns->name);
    }
    if (n != NULL)
        n->gen = m->ns_gen;
    pthread_rwlock_unlock(&m->lock);
    return rc;
}

static void ns_gone(gf_model *m, mns *n)
{
    n->present = false;
    n->has_quota = false;
    free(n->error);
    n->error = NULL;
    ns_maybe_free(m, n);
}

void gf_model_ns_delete(gf_model *m, const char *name)
{
    mns *n;

    pthread_rwlock_wrlock(&m->lock);
    if ((n = ns_find(m, name)) != NULL)
        ns_gone(m, n);
    pthread_rwlock_unlock(&m->lock);
}

void gf_model_ns_resync_begin(gf_model *m)
{
    pthread_rwlock_wrlock(&m->lock);
    m->ns_gen++;
    pthread_rwlock_unlock(&m->lock);
}

void gf_model_ns_resync_end(gf_model *m)
{
    pthread_rwlock_wrlock(&m->lock);
    for (size_t i = 0; i < m->nss.n_buckets; i++) {
        mentry *e = m->nss.buckets[i], *next;
        for (; e != NULL; e = next) {
            next = e->hnext;
            if (((mns *)e)->present && ((mns *)e)->gen != m->ns_gen)
                ns_gone(m, (mns *)e);
        }
    }
    pthread_rwlock_unlock(&m->lock);
}

size_t gf_model_quotas(gf_model *m, gf_model_quota *out, size_t max)
{
    size_t k = 0;

    pthread_rwlock_rdlock(&m->lock);
    for (size_t i = 0; i < m->nss.n_buckets; i++) {
        for (const mentry *e = m->nss.buckets[i]; e != NULL; e = e->hnext) {
            const mns *n = (const mns *)e;
            if (!n->has_quota && n->error == NULL)
                continue;
            if (k < max) {
                snprintf(out[k].name, sizeof(out[k].name), "%s", n->e.key);
                out[k].valid = n->error == NULL;
                out[k].quota = n->quota;
                out[k].used = n->used;
            }
            k++;
        }
    }
    pthread_rwlock_unlock(&m->lock);
    return k;
}

/* --- placement --- */

static void human(uint64_t b, char *buf, size_t len)
{
    if (gf_bytes_human(b, buf, len) < 0)
        snprintf(buf, len, "%llu bytes", (unsigned long long)b);
}

static void refuse(gf_sched_verdict *v)
{
    v->status = GF_FAIL;
    v->score = 0;
    v->rank = 0.0;
    v->reserve = 0;
}

const mns *gf_model_quota_of(const gf_model *m, const gf_sched_pod *pod)
{
    const mns *ns = m->nss.count ? ns_find(m, pod->ns) : NULL;

    return ns != NULL && (ns->has_quota || ns->error != NULL) ? ns : NULL;
}

uint64_t gf_model_quota_already(const gf_model *m, const mns *ns, const gf_sched_pod *pod)
{
    const mpod *self = ns != NULL ? gf_model_pod_find(m, pod->uid) : NULL;

    return self != NULL && self->ns == ns ? self->ns_charged : 0;
}

bool gf_model_quota_fits(const mns *ns, uint64_t already, const gf_sched_pod *pod, const mnode *n,
                         const uint8_t *pos, gf_sched_verdict *v)
{
    uint64_t ask = 0;
    char q[32], u[32], a[32];

    if (ns == NULL)
        return true;
    if (ns->error != NULL) {
        refuse(v);
        snprintf(v->reason, sizeof(v->reason),
                 "no fractional pods until the namespace's quota is fixed: %.250s", ns->error);
        return false;
    }
    for (int i = 0; i < pod->num_devices; i++)
        ask += gf_sched_pod_charge(pod, n->gpus[pos[i]].total);
    if (ns->used - (already < ns->used ? already : ns->used) + ask <= ns->quota)
        return true;
    refuse(v);
    human(ns->quota, q, sizeof(q));
    human(ns->used - (already < ns->used ? already : ns->used), u, sizeof(u));
    human(ask, a, sizeof(a));
    snprintf(v->reason, sizeof(v->reason),
             "namespace %.63s's GPU memory quota (" GF_SCHED_QUOTA_ANNOTATION ") is %s; its "
             "fractional pods request %s, this pod %s more",
             pod->ns, q, u, a);
    return false;
}
