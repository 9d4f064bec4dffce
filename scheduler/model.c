/* SPDX-License-Identifier: Apache-2.0 */
/* The cluster model's bookkeeping: node and pod records in two hash tables,
 * per-GPU accounting kept in step with every update (model.h). */
#include "model.h"

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "annotations.h"
#include "model_int.h"

#define TABLE_MIN_BUCKETS 1024

/* --- hash tables --- */

size_t gf_model_hash(const char *s)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */

    while (*s != '\0') {
        h ^= (unsigned char)*s++;
        h *= 1099511628211ULL;
    }
    return (size_t)(h ^ (h >> 29));
}

static mentry *table_find_hashed(const mtable *t, const char *key, size_t h)
{
    mentry *e;

    if (t->n_buckets == 0)
        return NULL;
    for (e = t->buckets[h & (t->n_buckets - 1)]; e != NULL; e = e->hnext)
        if (e->hash == h && strcmp(e->key, key) == 0)
            return e;
    return NULL;
}

static mentry *table_find(const mtable *t, const char *key)
{
    return table_find_hashed(t, key, gf_model_hash(key));
}

static int table_resize(mtable *t, size_t n)
{
    mentry **b = calloc(n, sizeof(*b));
    size_t i;
    mentry *e, *next;

    if (b == NULL)
        return -1;
    for (i = 0; i < t->n_buckets; i++) {
        for (e = t->buckets[i]; e != NULL; e = next) {
            size_t h = e->hash & (n - 1);

            next = e->hnext;
            e->hnext = b[h];
            b[h] = e;
        }
    }
    free(t->buckets);
    t->buckets = b;
    t->n_buckets = n;
    return 0;
}

static int table_grow(mtable *t)
{
    return table_resize(t, t->n_buckets ? t->n_buckets * 2 : TABLE_MIN_BUCKETS);
}

/* Back to the smallest size for its count after many removals. */
static void table_shrink(mtable *t)
{
    size_t n = TABLE_MIN_BUCKETS;

    while (n < t->count)
        n *= 2;
    if (n < t->n_buckets / 2)
        (void)table_resize(t, n); /* out of memory: keep the big one */
}

static int table_add(mtable *t, mentry *e)
{
    size_t h;

    e->hash = gf_model_hash(e->key);
    if (t->count >= t->n_buckets && table_grow(t) < 0)
        return -1;
    h = e->hash & (t->n_buckets - 1);
    e->hnext = t->buckets[h];
    t->buckets[h] = e;
    t->count++;
    return 0;
}

static void table_remove(mtable *t, mentry *e)
{
    mentry **pp = &t->buckets[e->hash & (t->n_buckets - 1)];

    for (; *pp != NULL; pp = &(*pp)->hnext) {
        if (*pp == e) {
            *pp = e->hnext;
            t->count--;
            return;
        }
    }
}

mnode *gf_model_node_find(const gf_model *m, const char *name)
{
    return (mnode *)table_find(&m->nodes, name);
}

mnode *gf_model_node_find_hashed(const gf_model *m, const char *name, size_t hash)
{
    return (mnode *)table_find_hashed(&m->nodes, name, hash);
}

void gf_model_bucket_prefetch(const gf_model *m, size_t hash)
{
    if (m->nodes.n_buckets > 0)
        __builtin_prefetch(&m->nodes.buckets[hash & (m->nodes.n_buckets - 1)]);
}

/* The node's first two lines and its name (the chain's first record). */
void gf_model_node_prefetch(const gf_model *m, size_t hash)
{
    const char *e;

    if (m->nodes.n_buckets == 0)
        return;
    e = (const char *)m->nodes.buckets[hash & (m->nodes.n_buckets - 1)];
    if (e != NULL) {
        __builtin_prefetch(e);
        __builtin_prefetch(e + 64);
        __builtin_prefetch(e + sizeof(mnode));
    }
}

mpod *gf_model_pod_find(const gf_model *m, const char *uid)
{
    return (mpod *)table_find(&m->pods, uid);
}

/* --- GPU accounting --- */

/* Resolving a portion formats messages: remember the last one per thread
 * (a node's GPUs, and a cluster's, mostly share one size). */
uint64_t gf_sched_charge_portion(const gf_amount *request, uint64_t total)
{
    static __thread double last_portion;
    static __thread uint64_t last_total, last_bytes;
    uint64_t b;

    if (total == 0)
        return 0;
    if (total == last_total && request->portion == last_portion)
        return last_bytes;
    if (gf_amount_resolve(request, total, NULL, &b, NULL) < 0)
        b = 0;
    last_portion = request->portion;
    last_total = total;
    last_bytes = b;
    return b;
}

uint64_t gf_sched_charge_parts(const gf_amount *first, bool first_init, const gf_sched_part *more,
                               size_t n, uint64_t total)
{
    uint64_t c = gf_sched_charge(first, total);
    uint64_t run = first_init ? 0 : c, init = first_init ? c : 0;

    for (size_t i = 0; i < n; i++) {
        c = gf_sched_charge(&more[i].request, total);
        if (more[i].init)
            init = c > init ? c : init;
        else
            run += c;
    }
    return run > init ? run : init;
}

uint64_t gf_sched_pod_charge(const gf_sched_pod *pod, uint64_t total)
{
    return gf_sched_charge_parts(&pod->request, pod->init, pod->more, pod->n_more, total);
}

void gf_model_charge(mnode *n, const mpod *p, int sign)
{
    size_t i;

    for (i = 0; i < p->n_gpus; i++) {
        mgpu *g = &n->gpus[p->gpu[i]];
        uint64_t c = gf_sched_mpod_charge(p, g->total);

        if (sign > 0) {
            g->requested += c;
            g->pods[p->mode]++;
            g->compute_pct += p->compute_pct;
        } else {
            g->requested -= c < g->requested ? c : g->requested;
            if (g->pods[p->mode] > 0)
                g->pods[p->mode]--;
            g->compute_pct -= p->compute_pct < g->compute_pct ? p->compute_pct : g->compute_pct;
        }
    }
    gf_model_node_summarize(n);
}

/* "k8s.device-plugin.nvidia.com/gpu=GPU-x" -> "GPU-x"; "3" -> index 3. */
static int resolve_entry(const mnode *n, const char *s, size_t len)
{
    const char *eq = memchr(s, '=', len);
    size_t i;
    char *end;
    long idx;

    if (eq != NULL) {
        len -= (size_t)(eq + 1 - s);
        s = eq + 1;
    }
    for (i = 0; i < n->n_gpus; i++)
        if (strlen(n->gpus[i].id) == len && memcmp(n->gpus[i].id, s, len) == 0)
            return (int)i;
    if (len == 0 || len > 4 || s[0] < '0' || s[0] > '9')
        return -1;
    idx = strtol(s, &end, 10);
    if (end != s + len)
        return -1;
    for (i = 0; i < n->n_gpus; i++)
        if (n->gpus[i].index == idx)
            return (int)i;
    return -1;
}

/* Maps p->devices onto node positions; false when some entry matches none. */
static bool resolve_devices(const mnode *n, mpod *p)
{
    const char *s = p->devices, *c;
    int pos;

    p->n_gpus = 0;
    if (s == NULL || *s == '\0')
        return false;
    for (; p->n_gpus < GF_SCHED_GPUS_MAX; s = c + 1) {
        c = strchr(s, ',');
        if (c == NULL)
            c = s + strlen(s);
        pos = resolve_entry(n, s, (size_t)(c - s));
        if (pos < 0)
            return false;
        p->gpu[p->n_gpus++] = (uint8_t)pos;
        if (*c == '\0')
            return true;
    }
    return false;
}

static void place(mnode *n, mpod *p)
{
    p->node = n;
    p->nprev = NULL;
    p->nnext = n->pods;
    if (n->pods != NULL)
        n->pods->nprev = p;
    n->pods = p;
    p->resolved = n->present && resolve_devices(n, p);
    if (p->resolved)
        gf_model_charge(n, p, +1);
    else
        p->n_gpus = 0;
    gf_model_ns_charge(p);
}

static void unplace(mpod *p)
{
    mnode *n = p->node;

    if (n == NULL)
        return;
    if (p->resolved)
        gf_model_charge(n, p, -1);
    if (p->nprev != NULL)
        p->nprev->nnext = p->nnext;
    else
        n->pods = p->nnext;
    if (p->nnext != NULL)
        p->nnext->nprev = p->nprev;
    p->node = NULL;
    p->held = false;
    p->resolved = false;
    p->n_gpus = 0;
    p->nnext = p->nprev = NULL;
    gf_model_ns_charge(p);
}

/* Re-resolves every pod of n against its (new) inventory. */
static void recharge_node(mnode *n)
{
    mpod *p;
    size_t i;

    for (i = 0; i < n->n_gpus; i++) {
        n->gpus[i].requested = 0;
        n->gpus[i].pods[0] = n->gpus[i].pods[1] = 0;
        n->gpus[i].compute_pct = 0;
    }
    gf_model_node_summarize(n);
    for (p = n->pods; p != NULL; p = p->nnext) {
        p->resolved = n->present && resolve_devices(n, p);
        if (p->resolved)
            gf_model_charge(n, p, +1);
        else
            p->n_gpus = 0;
        gf_model_ns_charge(p);
    }
}

/* --- lifecycle --- */

int gf_model_new(const char *prefix, gf_model **out, gf_error *err)
{
    gf_model *m = calloc(1, sizeof(*m));

    if (m == NULL)
        return gf_error_set(err, GF_ENOSPACE, "scheduler model: out of memory");
    m->prefix = strdup(prefix != NULL ? prefix : GF_NVFRACTIONS_PREFIX);
    if (m->prefix == NULL || table_grow(&m->nodes) < 0 || table_grow(&m->pods) < 0)
        goto fail;
    if (pthread_rwlock_init(&m->lock, NULL) != 0)
        goto fail;
    *out = m;
    return 0;
fail:
    free(m->nodes.buckets);
    free(m->pods.buckets);
    free(m->prefix);
    free(m);
    return gf_error_set(err, GF_ENOSPACE, "scheduler model: out of memory");
}

static void node_free_gpus(mnode *n)
{
    size_t i;

    for (i = 0; i < n->n_gpus; i++)
        free(n->gpus[i].id);
    free(n->gpus);
    n->gpus = NULL;
    n->n_gpus = 0;
    free(n->inventory_error);
    n->inventory_error = NULL;
    gf_model_node_summarize(n);
}

static void node_free(mnode *n)
{
    node_free_gpus(n);
    gf_model_reserved_free(n);
    free(n);
}

static void pod_free(mpod *p)
{
    free(p->container);
    free(p->devices);
    free(p->more);
    free(p);
}

void gf_model_free(gf_model *m)
{
    size_t i;
    mentry *e, *next;

    if (m == NULL)
        return;
    for (i = 0; i < m->pods.n_buckets; i++)
        for (e = m->pods.buckets[i]; e != NULL; e = next) {
            next = e->hnext;
            pod_free((mpod *)e);
        }
    for (i = 0; i < m->nodes.n_buckets; i++)
        for (e = m->nodes.buckets[i]; e != NULL; e = next) {
            next = e->hnext;
            node_free((mnode *)e);
        }
    gf_model_ns_free_all(m);
    free(m->pods.buckets);
    free(m->nodes.buckets);
    free(m->prefix);
    pthread_rwlock_destroy(&m->lock);
    free(m);
}

uint64_t gf_model_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* --- nodes --- */

static mnode *node_get(gf_model *m, const char *name)
{
    mnode *n = gf_model_node_find(m, name);
    size_t size;

    if (n != NULL)
        return n;
    /* on a cache line, the name inline: filter's lookup loads known lines */
    size = (sizeof(*n) + strlen(name) + 1 + 63) / 64 * 64;
    n = aligned_alloc(64, size);
    if (n == NULL)
        return NULL;
    memset(n, 0, size);
    n->e.key = (char *)(n + 1);
    memcpy(n->e.key, name, strlen(name) + 1);
    if (table_add(&m->nodes, &n->e) < 0) {
        free(n);
        return NULL;
    }
    return n;
}

static int node_set_gpus(mnode *n, const gf_sched_node *src)
{
    size_t i;

    if (src->n_gpus == 0)
        return 0;
    n->gpus = calloc(src->n_gpus, sizeof(*n->gpus));
    if (n->gpus == NULL)
        return -1;
    for (i = 0; i < src->n_gpus; i++) {
        n->gpus[i].id = strdup(src->gpus[i].id);
        if (n->gpus[i].id == NULL)
            return -1;
        n->gpus[i].index = src->gpus[i].index;
        n->gpus[i].has_uuid = src->gpus[i].has_uuid;
        n->gpus[i].total = src->gpus[i].memory;
        n->n_gpus = i + 1;
    }
    gf_model_node_summarize(n);
    return 0;
}

static int node_set(mnode *n, const gf_sched_node *src)
{
    node_free_gpus(n);
    n->present = true;
    n->unschedulable = src->unschedulable;
    n->ready = src->ready;
    n->memory_known = src->memory_known;
    n->source = src->source;
    n->dp_gpus = src->dp_gpus;
    if (src->inventory_error[0] != '\0') {
        n->inventory_error = strdup(src->inventory_error);
        return n->inventory_error != NULL ? 0 : -1;
    }
    if (src->n_gpus > GF_SCHED_GPUS_MAX)
        return -1;
    return node_set_gpus(n, src);
}

int gf_model_node_update(gf_model *m, const gf_sched_node *node, gf_error *err)
{
    mnode *n;
    int rc = 0;

    pthread_rwlock_wrlock(&m->lock);
    n = node_get(m, node->name);
    if (n == NULL || node_set(n, node) < 0) {
        if (n != NULL)
            node_free_gpus(n);
        rc = gf_error_set(err, GF_ENOSPACE, "node %s: out of memory", node->name);
    }
    if (n != NULL) {
        n->gen = m->gen[GF_MODEL_NODES];
        recharge_node(n);
        gf_model_reserved_apply(n);
    }
    pthread_rwlock_unlock(&m->lock);
    return rc;
}

/* The record stays while pods still point at it. */
static void node_drop(gf_model *m, mnode *n)
{
    node_free_gpus(n);
    n->present = false;
    recharge_node(n);
    if (n->pods == NULL) {
        table_remove(&m->nodes, &n->e);
        node_free(n);
    }
}

void gf_model_node_delete(gf_model *m, const char *name)
{
    mnode *n;

    pthread_rwlock_wrlock(&m->lock);
    n = gf_model_node_find(m, name);
    if (n != NULL)
        node_drop(m, n);
    pthread_rwlock_unlock(&m->lock);
}

/* --- pods --- */

static void pod_drop(gf_model *m, mpod *p)
{
    mnode *n = p->node;

    unplace(p);
    gf_model_ns_detach(m, p);
    table_remove(&m->pods, &p->e);
    pod_free(p);
    if (n != NULL && !n->present && n->pods == NULL) {
        table_remove(&m->nodes, &n->e);
        node_free(n);
    }
}

static mpod *pod_get(gf_model *m, const char *uid)
{
    mpod *p = gf_model_pod_find(m, uid);

    if (p != NULL)
        return p;
    p = calloc(1, sizeof(*p) + strlen(uid) + 1);
    if (p == NULL)
        return NULL;
    p->e.key = (char *)(p + 1);
    memcpy(p->e.key, uid, strlen(uid) + 1);
    if (table_add(&m->pods, &p->e) < 0) {
        free(p);
        return NULL;
    }
    return p;
}

static int set_str(char **dst, const char *src)
{
    char *s;

    if (*dst != NULL && strcmp(*dst, src) == 0)
        return 0;
    s = strdup(src);
    if (s == NULL)
        return -1;
    free(*dst);
    *dst = s;
    return 0;
}

static int parts_set(mpod *p, const gf_sched_pod *src)
{
    gf_sched_part *more = NULL;

    if (src->n_more > 0) {
        more = malloc(src->n_more * sizeof(*more));
        if (more == NULL)
            return -1;
        memcpy(more, src->more, src->n_more * sizeof(*more));
    }
    free(p->more);
    p->more = more;
    p->n_more = (uint8_t)src->n_more;
    return 0;
}

/* Copies the request fields (p unplaced). */
static int pod_set(mpod *p, const gf_sched_pod *src)
{
    if (parts_set(p, src) < 0)
        return -1;
    p->init = src->init;
    p->request = src->request;
    p->limit = src->limit;
    p->mode = src->mode == GF_MODE_SM_SHARING ? GF_MODE_SM_SHARING : GF_MODE_TIME_SLICING;
    p->num_devices = src->num_devices;
    p->compute_pct = gf_sched_pod_compute_pct(src);
    p->priority = src->priority;
    return set_str(&p->container, src->container);
}

static bool pod_counts(const gf_sched_pod *pod)
{
    return pod->fractional && !pod->invalid && pod->phase != GF_PHASE_SUCCEEDED &&
           pod->phase != GF_PHASE_FAILED;
}

/* A pod the watch shows on a node with its devices: (re)place it, confirmed. */
static int pod_bound(gf_model *m, mpod *p, const gf_sched_pod *pod)
{
    mnode *n;

    unplace(p);
    if (pod_set(p, pod) < 0 || set_str(&p->devices, pod->devices) < 0)
        return -1;
    n = node_get(m, pod->node);
    if (n == NULL)
        return -1;
    p->assumed = false;
    place(n, p);
    return 0;
}

static int pod_update_locked(gf_model *m, const gf_sched_pod *pod)
{
    mpod *p = gf_model_pod_find(m, pod->uid);

    if (!pod_counts(pod)) {
        if (p != NULL)
            pod_drop(m, p);
        return 0;
    }
    if (p == NULL && (p = pod_get(m, pod->uid)) == NULL)
        return -1;
    if (gf_model_ns_attach(m, p, pod->ns) < 0)
        return -1;
    p->gen = m->gen[GF_MODEL_PODS];
    if (pod->node[0] != '\0' && pod->devices[0] != '\0')
        return pod_bound(m, p, pod);
    if (p->node != NULL && p->assumed)
        return 0; /* our bind is in flight: keep the assumption */
    unplace(p);
    return pod_set(p, pod);
}

int gf_model_pod_update(gf_model *m, const gf_sched_pod *pod, gf_error *err)
{
    int rc;

    pthread_rwlock_wrlock(&m->lock);
    rc = pod_update_locked(m, pod);
    if (rc < 0) {
        mpod *p = gf_model_pod_find(m, pod->uid);

        if (p != NULL)
            pod_drop(m, p);
    }
    pthread_rwlock_unlock(&m->lock);
    if (rc < 0)
        return gf_error_set(err, GF_ENOSPACE, "pod %s/%s: out of memory", pod->ns, pod->name);
    return 0;
}

void gf_model_pod_delete(gf_model *m, const char *uid)
{
    mpod *p;

    pthread_rwlock_wrlock(&m->lock);
    p = gf_model_pod_find(m, uid);
    if (p != NULL)
        pod_drop(m, p);
    pthread_rwlock_unlock(&m->lock);
}

/* --- assumptions --- */

int gf_model_assume_locked(gf_model *m, const gf_sched_pod *pod, mnode *node, const uint8_t *pos,
                           size_t n, gf_error *err)
{
    char devices[GF_DEVICES_MAX];
    size_t i, len = 0;
    mpod *p;

    devices[0] = '\0';
    for (i = 0; i < n; i++) {
        const mgpu *g = &node->gpus[pos[i]];
        int w = g->has_uuid
                    ? snprintf(devices + len, sizeof(devices) - len, "%s%s", i ? "," : "", g->id)
                    : snprintf(devices + len, sizeof(devices) - len, "%s%d", i ? "," : "",
                               g->index);

        if (w < 0 || (size_t)w >= sizeof(devices) - len)
            return gf_error_set(err, GF_ERANGE, "pod %s/%s: device list too long", pod->ns,
                                pod->name);
        len += (size_t)w;
    }
    p = pod_get(m, pod->uid);
    if (p == NULL)
        goto oom;
    if (gf_model_ns_attach(m, p, pod->ns) < 0) {
        pod_drop(m, p);
        goto oom;
    }
    unplace(p);
    if (pod_set(p, pod) < 0 || set_str(&p->devices, devices) < 0) {
        pod_drop(m, p);
        goto oom;
    }
    p->assumed = true;
    p->assumed_at = gf_model_now_ms();
    p->gen = m->gen[GF_MODEL_PODS];
    place(node, p);
    return 0;
oom:
    return gf_error_set(err, GF_ENOSPACE, "pod %s/%s: out of memory", pod->ns, pod->name);
}

int gf_model_assume(gf_model *m, const gf_sched_pod *pod, const gf_sched_placement *placement,
                    gf_error *err)
{
    uint8_t pos[GF_SCHED_GPUS_MAX];
    mnode *n;
    size_t i, j;
    int rc = -1;

    pthread_rwlock_wrlock(&m->lock);
    n = gf_model_node_find(m, placement->node);
    if (n == NULL || !n->present) {
        gf_error_set(err, GF_ENOTFOUND, "node %s is not in gpufrac's cache", placement->node);
        goto out;
    }
    for (i = 0; i < placement->n && i < GF_SCHED_GPUS_MAX; i++) {
        for (j = 0; j < n->n_gpus && n->gpus[j].index != placement->gpu_index[i]; j++)
            ;
        if (j == n->n_gpus) {
            gf_error_set(err, GF_ENOTFOUND, "node %s has no GPU of index %d", placement->node,
                         placement->gpu_index[i]);
            goto out;
        }
        pos[i] = (uint8_t)j;
    }
    rc = gf_model_assume_locked(m, pod, n, pos, i, err);
out:
    pthread_rwlock_unlock(&m->lock);
    return rc;
}

void gf_model_forget_locked(mpod *p)
{
    if (p->assumed)
        unplace(p);
    p->assumed = false;
}

void gf_model_forget(gf_model *m, const char *uid)
{
    mpod *p;

    pthread_rwlock_wrlock(&m->lock);
    p = gf_model_pod_find(m, uid);
    if (p != NULL)
        gf_model_forget_locked(p);
    pthread_rwlock_unlock(&m->lock);
}

/* Drops the assumptions (holds only, when holds_only) older than ttl_ms. */
static size_t expire(gf_model *m, uint64_t now_ms, uint64_t ttl_ms, bool holds_only)
{
    size_t i, count = 0;
    mentry *e;

    pthread_rwlock_wrlock(&m->lock);
    for (i = 0; i < m->pods.n_buckets; i++) {
        for (e = m->pods.buckets[i]; e != NULL; e = e->hnext) {
            mpod *p = (mpod *)e;

            if (p->assumed && p->node != NULL && (p->held || !holds_only) &&
                now_ms - p->assumed_at > ttl_ms) {
                gf_model_forget_locked(p);
                count++;
            }
        }
    }
    pthread_rwlock_unlock(&m->lock);
    return count;
}

size_t gf_model_expire_held(gf_model *m, uint64_t now_ms, uint64_t ttl_ms)
{
    return expire(m, now_ms, ttl_ms, true);
}

size_t gf_model_expire_assumed(gf_model *m, uint64_t now_ms, uint64_t ttl_ms)
{
    return expire(m, now_ms, ttl_ms, false);
}

/* --- resync --- */

void gf_model_resync_begin(gf_model *m, gf_model_kind kind)
{
    pthread_rwlock_wrlock(&m->lock);
    m->gen[kind]++;
    pthread_rwlock_unlock(&m->lock);
}

static bool stale(const gf_model *m, gf_model_kind kind, const mentry *e)
{
    if (kind == GF_MODEL_NODES)
        return ((const mnode *)e)->present && ((const mnode *)e)->gen != m->gen[kind];
    return ((const mpod *)e)->gen != m->gen[kind] && !((const mpod *)e)->assumed;
}

void gf_model_resync_end(gf_model *m, gf_model_kind kind)
{
    mtable *t = kind == GF_MODEL_NODES ? &m->nodes : &m->pods;
    size_t i;
    mentry *e, *next;

    pthread_rwlock_wrlock(&m->lock);
    for (i = 0; i < t->n_buckets; i++) {
        for (e = t->buckets[i]; e != NULL; e = next) {
            next = e->hnext;
            if (!stale(m, kind, e))
                continue;
            if (kind == GF_MODEL_NODES)
                node_drop(m, (mnode *)e);
            else
                pod_drop(m, (mpod *)e);
        }
    }
    pthread_rwlock_unlock(&m->lock);
}

void gf_model_trim(gf_model *m)
{
    pthread_rwlock_wrlock(&m->lock);
    table_shrink(&m->pods);
    table_shrink(&m->nodes);
    pthread_rwlock_unlock(&m->lock);
    /* glibc keeps the freed chunks of a burst in its arena: hand the free
     * pages back */
    malloc_trim(0);
}

/* --- introspection --- */

static size_t str_size(const char *s)
{
    return s != NULL ? strlen(s) + 1 : 0;
}

static void stats_node(const mnode *n, gf_model_stats *out)
{
    size_t i;

    if (n->present)
        out->nodes++;
    out->gpus += n->n_gpus;
    out->memory_bytes += sizeof(*n) + str_size(n->e.key) + str_size(n->inventory_error) +
                         n->n_gpus * sizeof(mgpu);
    for (i = 0; i < n->n_gpus; i++)
        out->memory_bytes += str_size(n->gpus[i].id);
}

static void stats_pod(const mpod *p, gf_model_stats *out)
{
    out->memory_bytes += sizeof(*p) + str_size(p->e.key) + str_size(p->container) +
                         str_size(p->devices) + p->n_more * sizeof(*p->more);
    if (p->node == NULL) {
        out->pending++;
        return;
    }
    out->pods++;
    if (p->assumed)
        out->assumed++;
    if (!p->resolved)
        out->unresolved++;
}

void gf_model_stats_get(gf_model *m, gf_model_stats *out)
{
    size_t i;
    mentry *e;

    memset(out, 0, sizeof(*out));
    pthread_rwlock_rdlock(&m->lock);
    out->memory_bytes = sizeof(*m) + (m->nodes.n_buckets + m->pods.n_buckets) * sizeof(mentry *);
    for (i = 0; i < m->nodes.n_buckets; i++)
        for (e = m->nodes.buckets[i]; e != NULL; e = e->hnext)
            stats_node((const mnode *)e, out);
    for (i = 0; i < m->pods.n_buckets; i++)
        for (e = m->pods.buckets[i]; e != NULL; e = e->hnext)
            stats_pod((const mpod *)e, out);
    pthread_rwlock_unlock(&m->lock);
}

int gf_model_node_gpus(gf_model *m, const char *node, gf_model_gpu_state *out, size_t max,
                       size_t *n, gf_error *err)
{
    const mnode *nd;
    size_t i;
    int rc = 0;

    pthread_rwlock_rdlock(&m->lock);
    nd = gf_model_node_find(m, node);
    if (nd == NULL || !nd->present) {
        rc = gf_error_set(err, GF_ENOTFOUND, "node %s is not in gpufrac's cache", node);
        goto out;
    }
    *n = nd->n_gpus;
    for (i = 0; i < nd->n_gpus && i < max; i++) {
        const mgpu *g = &nd->gpus[i];

        snprintf(out[i].id, sizeof(out[i].id), "%s", g->id);
        out[i].index = g->index;
        out[i].total = g->total;
        out[i].requested = g->requested;
        out[i].pods = g->pods[0] + g->pods[1];
        out[i].has_mode = out[i].pods > 0;
        out[i].mode = g->pods[GF_MODE_SM_SHARING] > 0 ? GF_MODE_SM_SHARING : GF_MODE_TIME_SLICING;
        out[i].compute_pct = g->compute_pct;
        out[i].closed = g->closed;
    }
out:
    pthread_rwlock_unlock(&m->lock);
    return rc;
}

/* --- the tables, for model_quota.c --- */

mentry *gf_model_table_find(const mtable *t, const char *key)
{
    return table_find(t, key);
}

int gf_model_table_add(mtable *t, mentry *e)
{
    return table_add(t, e);
}

void gf_model_table_remove(mtable *t, mentry *e)
{
    table_remove(t, e);
}
