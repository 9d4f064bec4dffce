/* SPDX-License-Identifier: Apache-2.0 */
/* Whole GPUs and fractions never share a GPU. On a node whose device plugin
 * hands whole GPUs out (status.allocatable nvidia.com/gpu), a GPU is open to
 * fractions only while a reservation pod holds it (reserve.c tells which);
 * every other GPU of that node is closed, whatever it hosts. A GPU is closed
 * again only when nothing is placed, assumed or held on it. */
#include <stdlib.h>
#include <string.h>

#include "model_int.h"

void gf_model_reserved_free(mnode *n)
{
    for (size_t i = 0; i < n->n_reserved; i++)
        free(n->reserved[i]);
    free(n->reserved);
    n->reserved = NULL;
    n->n_reserved = 0;
}

static bool is_reserved(const mnode *n, const char *id)
{
    for (size_t i = 0; i < n->n_reserved; i++)
        if (strcmp(n->reserved[i], id) == 0)
            return true;
    return false;
}

void gf_model_reserved_apply(mnode *n)
{
    for (size_t i = 0; i < n->n_gpus; i++)
        n->gpus[i].closed = n->dp_gpus > 0 && !is_reserved(n, n->gpus[i].id);
}

static int copy_ids(char ***out, const char *const *ids, size_t n)
{
    char **v = calloc(n ? n : 1, sizeof(*v));

    if (v == NULL)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if ((v[i] = strdup(ids[i])) == NULL) {
            while (i-- > 0)
                free(v[i]);
            free(v);
            return -1;
        }
    }
    *out = v;
    return 0;
}

int gf_model_node_reserved(gf_model *m, const char *node, const char *const *ids, size_t n,
                           gf_error *err)
{
    char **copy = NULL;
    mnode *nd;
    int rc = 0;

    if (copy_ids(&copy, ids, n) < 0)
        return gf_error_set(err, GF_ENOSPACE, "node %s: out of memory", node);
    pthread_rwlock_wrlock(&m->lock);
    nd = gf_model_node_find(m, node);
    if (nd == NULL) {
        rc = gf_error_set(err, GF_ENOTFOUND, "node %s is not in gpufrac's cache", node);
        for (size_t i = 0; i < n; i++)
            free(copy[i]);
        free(copy);
    } else {
        gf_model_reserved_free(nd);
        nd->reserved = copy;
        nd->n_reserved = n;
        gf_model_reserved_apply(nd);
    }
    pthread_rwlock_unlock(&m->lock);
    return rc;
}

int gf_model_gpu_close_idle(gf_model *m, const char *node, const char *id)
{
    mnode *nd;
    int rc = -1;

    pthread_rwlock_wrlock(&m->lock);
    nd = gf_model_node_find(m, node);
    for (size_t i = 0; nd != NULL && i < nd->n_gpus; i++) {
        mgpu *g = &nd->gpus[i];
        if (strcmp(g->id, id) != 0)
            continue;
        if (g->pods[0] + g->pods[1] == 0) {
            g->closed = true;
            for (size_t k = 0; k < nd->n_reserved; k++) {
                if (strcmp(nd->reserved[k], id) == 0) {
                    free(nd->reserved[k]);
                    nd->reserved[k] = nd->reserved[--nd->n_reserved];
                    break;
                }
            }
            rc = 0;
        }
        break;
    }
    pthread_rwlock_unlock(&m->lock);
    return rc;
}

unsigned gf_model_node_dp_gpus(gf_model *m, const char *node)
{
    const mnode *nd;
    unsigned n;

    pthread_rwlock_rdlock(&m->lock);
    nd = gf_model_node_find(m, node);
    n = nd != NULL && nd->present ? nd->dp_gpus : 0;
    pthread_rwlock_unlock(&m->lock);
    return n;
}
