/* SPDX-License-Identifier: Apache-2.0 */
/* gpusim CUDA graphs (memory nodes only) and kernel launches.
 *
 * Model: a launch runs to completion at once. At launch the process's graph
 * pool of each device grows so that its reserved memory covers the sum of the
 * exec's allocation nodes on that device (growth charged, 2 MiB granules);
 * after the launch nothing is in use (every allocation node counts as freed
 * when the launch completes), so USED_MEM_CURRENT is 0 between launches and
 * cuDeviceGraphMemTrim returns the whole reservation. */
#include <stdlib.h>
#include <string.h>

#include "gs.h"
#include "gs_api.h"

typedef struct gs_node {
    gs_obj h;
    int pdev; /* -1 for a free node */
    uint64_t size;
    CUdeviceptr dptr;
} gs_node;

typedef struct gs_graph {
    gs_obj h;
    bool alive;
    pthread_mutex_t mu;
    int n, cap;
    gs_node **nodes;
} gs_graph;

typedef struct gs_exec {
    gs_obj h;
    bool alive;
    uint64_t need[GS_MAX_DEV];
} gs_exec;

static bool graph_ok(const gs_graph *g)
{
    return gs_obj_ok(g, GS_MAGIC_GRAPH) && g->alive;
}

GS_API CUresult cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
    gs_graph *g;
    CUresult rc;
    GS_FAILPOINT("cuGraphCreate");
    rc = gs_need_init();
    if (rc)
        return rc;
    if (!phGraph || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    g = gs_obj_new(sizeof *g, GS_MAGIC_GRAPH);
    if (!g)
        return CUDA_ERROR_OUT_OF_MEMORY;
    g->alive = true;
    pthread_mutex_init(&g->mu, NULL);
    *phGraph = (CUgraph)g;
    return CUDA_SUCCESS;
}

GS_API CUresult cuGraphDestroy(CUgraph hGraph)
{
    gs_graph *g = (gs_graph *)hGraph;
    CUresult rc;
    GS_FAILPOINT("cuGraphDestroy");
    rc = gs_need_init();
    if (rc)
        return rc;
    if (!graph_ok(g))
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g->mu);
    g->alive = false;
    free(g->nodes);
    g->nodes = NULL;
    g->n = g->cap = 0;
    pthread_mutex_unlock(&g->mu);
    return CUDA_SUCCESS;
}

static CUresult add_node(gs_graph *g, int pdev, uint64_t size, CUdeviceptr dptr, CUgraphNode *out)
{
    gs_node *n = gs_obj_new(sizeof *n, GS_MAGIC_NODE);
    CUresult rc = CUDA_SUCCESS;
    if (!n)
        return CUDA_ERROR_OUT_OF_MEMORY;
    n->pdev = pdev;
    n->size = size;
    n->dptr = dptr;
    pthread_mutex_lock(&g->mu);
    if (g->n == g->cap) {
        int cap = g->cap ? 2 * g->cap : 8;
        gs_node **nn = realloc(g->nodes, (size_t)cap * sizeof *nn);
        if (!nn) {
            rc = CUDA_ERROR_OUT_OF_MEMORY;
            goto out;
        }
        g->nodes = nn;
        g->cap = cap;
    }
    g->nodes[g->n++] = n;
    *out = (CUgraphNode)n;
out:
    pthread_mutex_unlock(&g->mu);
    return rc;
}

static CUresult check_add(CUgraphNode *node, gs_graph *g, const CUgraphNode *deps, size_t ndeps)
{
    CUresult rc = gs_need_init();
    if (rc)
        return rc;
    if (!node || !graph_ok(g) || (ndeps && !deps))
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < ndeps; i++)
        if (!gs_obj_ok(deps[i], GS_MAGIC_NODE))
            return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

GS_API CUresult cuGraphAddMemAllocNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                       const CUgraphNode *dependencies, size_t numDependencies,
                                       CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams)
{
    int p;
    CUdeviceptr d;
    CUresult rc;
    GS_FAILPOINT("cuGraphAddMemAllocNode");
    rc = check_add(phGraphNode, (gs_graph *)hGraph, dependencies, numDependencies);
    if (rc)
        return rc;
    if (!nodeParams || nodeParams->bytesize == 0 ||
        nodeParams->poolProps.allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
        nodeParams->poolProps.location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
        gs_ordinal(nodeParams->poolProps.location.id, &p) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_VALUE;
    d = gs_fake_addr(nodeParams->bytesize);
    rc = add_node((gs_graph *)hGraph, p, nodeParams->bytesize, d, phGraphNode);
    if (rc == CUDA_SUCCESS)
        nodeParams->dptr = d;
    return rc;
}

GS_API CUresult cuGraphAddMemFreeNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                      const CUgraphNode *dependencies, size_t numDependencies,
                                      CUdeviceptr dptr)
{
    CUresult rc;
    GS_FAILPOINT("cuGraphAddMemFreeNode");
    rc = check_add(phGraphNode, (gs_graph *)hGraph, dependencies, numDependencies);
    if (rc)
        return rc;
    if (!dptr)
        return CUDA_ERROR_INVALID_VALUE;
    return add_node((gs_graph *)hGraph, -1, 0, dptr, phGraphNode);
}

GS_API CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
                                            unsigned long long flags)
{
    gs_graph *g = (gs_graph *)hGraph;
    gs_exec *e;
    CUresult rc;
    GS_FAILPOINT("cuGraphInstantiateWithFlags");
    rc = gs_need_init();
    if (rc)
        return rc;
    (void)flags;
    if (!phGraphExec || !graph_ok(g))
        return CUDA_ERROR_INVALID_VALUE;
    e = gs_obj_new(sizeof *e, GS_MAGIC_EXEC);
    if (!e)
        return CUDA_ERROR_OUT_OF_MEMORY;
    e->alive = true;
    pthread_mutex_lock(&g->mu);
    for (int i = 0; i < g->n; i++)
        if (g->nodes[i]->pdev >= 0)
            e->need[g->nodes[i]->pdev] += g->nodes[i]->size;
    pthread_mutex_unlock(&g->mu);
    *phGraphExec = (CUgraphExec)e;
    return CUDA_SUCCESS;
}

static CUresult grow_graph_pool(int p, uint64_t need)
{
    gs_pdev *d = &gsp.pdev[p];
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&d->mu);
    if (d->graph_reserved < need) {
        uint64_t grow = gs_round_up(need - d->graph_reserved, GS_GRAN);
        if (gs_charge_retry(p, grow) != 0) {
            rc = CUDA_ERROR_OUT_OF_MEMORY;
            goto out;
        }
        d->graph_reserved += grow;
    }
    if (d->graph_reserved > d->graph_reserved_high)
        d->graph_reserved_high = d->graph_reserved;
    if (need > d->graph_used_high)
        d->graph_used_high = need;
out:
    pthread_mutex_unlock(&d->mu);
    return rc;
}

/* init, then a live exec */
static CUresult exec_check(const gs_exec *e)
{
    CUresult rc = gs_need_init();
    if (rc)
        return rc;
    return gs_obj_ok(e, GS_MAGIC_EXEC) && e->alive ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult graph_launch(CUgraphExec hExec, CUstream s)
{
    gs_exec *e = (gs_exec *)hExec;
    int p;
    CUresult rc = exec_check(e);
    if (rc)
        return rc;
    rc = gs_stream_pdev(s, &p);
    if (rc)
        return rc;
    for (int i = 0; i < GS_MAX_DEV; i++) {
        if (e->need[i] && (rc = grow_graph_pool(i, e->need[i])) != CUDA_SUCCESS)
            return rc;
    }
    return CUDA_SUCCESS;
}

GS_API CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
    GS_FAILPOINT("cuGraphLaunch");
    return graph_launch(hGraphExec, hStream);
}

GS_API CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    GS_FAILPOINT("cuGraphLaunch_ptsz");
    return graph_launch(hGraphExec, hStream);
}

/* an upload backs the graph's memory nodes ahead of its launches */
GS_API CUresult cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream)
{
    GS_FAILPOINT("cuGraphUpload");
    return graph_launch(hGraphExec, hStream);
}

GS_API CUresult cuGraphUpload_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    GS_FAILPOINT("cuGraphUpload_ptsz");
    return graph_launch(hGraphExec, hStream);
}

GS_API CUresult cuGraphExecDestroy(CUgraphExec hGraphExec)
{
    gs_exec *e = (gs_exec *)hGraphExec;
    CUresult rc;
    GS_FAILPOINT("cuGraphExecDestroy");
    rc = exec_check(e);
    if (rc)
        return rc;
    e->alive = false;
    return CUDA_SUCCESS;
}

/* what a graph memory call asks of its value argument */
enum gm_value { GM_NONE, GM_OUT, GM_ZERO };

/* The checks the graph memory calls share, in the driver's order: init, the
 * value argument, the device. On success the device's lock is held. */
static CUresult graph_mem_lock(CUdevice device, const void *value, enum gm_value want, int *p)
{
    CUresult rc = gs_need_init();
    if (rc)
        return rc;
    if (want != GM_NONE && (!value || (want == GM_ZERO && *(const cuuint64_t *)value != 0)))
        return CUDA_ERROR_INVALID_VALUE;
    rc = gs_ordinal(device, p);
    if (rc)
        return rc;
    pthread_mutex_lock(&gsp.pdev[*p].mu);
    return CUDA_SUCCESS;
}

GS_API CUresult cuDeviceGetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr,
                                             void *value)
{
    int p;
    cuuint64_t *v = value;
    gs_pdev *d;
    CUresult rc;
    GS_FAILPOINT("cuDeviceGetGraphMemAttribute");
    rc = graph_mem_lock(device, value, GM_OUT, &p);
    if (rc)
        return rc;
    d = &gsp.pdev[p];
    switch (attr) {
    case CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT: *v = d->graph_used; break;
    case CU_GRAPH_MEM_ATTR_USED_MEM_HIGH: *v = d->graph_used_high; break;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT: *v = d->graph_reserved; break;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH: *v = d->graph_reserved_high; break;
    default: rc = CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_unlock(&d->mu);
    return rc;
}

/* only the high watermarks can be set, and only to 0 (reset to current) */
GS_API CUresult cuDeviceSetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr,
                                             void *value)
{
    int p;
    gs_pdev *d;
    CUresult rc;
    GS_FAILPOINT("cuDeviceSetGraphMemAttribute");
    rc = graph_mem_lock(device, value, GM_ZERO, &p);
    if (rc)
        return rc;
    d = &gsp.pdev[p];
    if (attr == CU_GRAPH_MEM_ATTR_USED_MEM_HIGH)
        d->graph_used_high = d->graph_used;
    else if (attr == CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH)
        d->graph_reserved_high = d->graph_reserved;
    else
        rc = CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_unlock(&d->mu);
    return rc;
}

GS_API CUresult cuDeviceGraphMemTrim(CUdevice device)
{
    int p;
    gs_pdev *d;
    CUresult rc;
    GS_FAILPOINT("cuDeviceGraphMemTrim");
    rc = graph_mem_lock(device, NULL, GM_NONE, &p);
    if (rc)
        return rc;
    d = &gsp.pdev[p];
    gs_uncharge(p, d->graph_reserved - d->graph_used);
    d->graph_reserved = d->graph_used;
    pthread_mutex_unlock(&d->mu);
    return CUDA_SUCCESS;
}

/* ---- kernels: a no-op that succeeds for any non-NULL function -------------- */
static CUresult launch_kernel(CUfunction f)
{
    if (GS_UNLIKELY(gs_need_init()))
        return CUDA_ERROR_NOT_INITIALIZED;
    return f ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

GS_API CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                               unsigned int bx, unsigned int by, unsigned int bz,
                               unsigned int sharedMemBytes, CUstream hStream, void **kernelParams,
                               void **extra)
{
    GS_FAILPOINT("cuLaunchKernel");
    (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)sharedMemBytes;
    (void)hStream, (void)kernelParams, (void)extra;
    return launch_kernel(f);
}

GS_API CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy,
                                          unsigned int gz, unsigned int bx, unsigned int by,
                                          unsigned int bz, unsigned int sharedMemBytes,
                                          CUstream hStream, void **kernelParams)
{
    GS_FAILPOINT("cuLaunchCooperativeKernel");
    (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)sharedMemBytes;
    (void)hStream, (void)kernelParams;
    return launch_kernel(f);
}

GS_API CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                    unsigned int bx, unsigned int by, unsigned int bz,
                                    unsigned int sharedMemBytes, CUstream hStream,
                                    void **kernelParams, void **extra)
{
    GS_FAILPOINT("cuLaunchKernel_ptsz");
    (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)sharedMemBytes;
    (void)hStream, (void)kernelParams, (void)extra;
    return launch_kernel(f);
}
