/* SPDX-License-Identifier: Apache-2.0 */
/* Graph memory nodes. Their memory is backed at launch from the device's
 * graph pool, so the charge follows that pool: a launch is admitted for the
 * growth its allocation nodes may need, then trued up to what the driver
 * reserved (CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT). Graphs built by stream
 * capture are seen only through that true-up. */
#include <pthread.h>

#include "shim.h"
#include "table.h"

static gf_table graph_bytes; /* CUgraph / CUgraphExec -> bytes of alloc nodes */
static pthread_mutex_t graph_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t charged[GF_MAX_ORDINALS];

static uint64_t bytes_of(const void *key)
{
    gf_entry e;
    return gf_table_get(&graph_bytes, (uint64_t)(uintptr_t)key, &e) ? e.bytes : 0;
}

static void set_bytes(const void *key, uint64_t bytes)
{
    gf_entry e = {.key = (uint64_t)(uintptr_t)key, .bytes = bytes};
    gf_table_set(&graph_bytes, &e);
}

static uint64_t graph_reserved(int ord)
{
    cuuint64_t v = 0;
    if (!gf_cu.cuDeviceGetGraphMemAttribute ||
        gf_cu.cuDeviceGetGraphMemAttribute(ord, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &v) !=
            CUDA_SUCCESS)
        return UINT64_MAX;
    return v;
}

/* Caller holds graph_lock. */
static void true_up(int ord)
{
    const gf_ordinal *o = gf_ordinal_get(ord);
    uint64_t now = graph_reserved(ord);
    if (!o || o->dev < 0 || now == UINT64_MAX || now == charged[ord])
        return;
    if (now < charged[ord])
        gf_ledger_release(&gf_state.ledger, o->dev, charged[ord] - now);
    else
        gf_ledger_charge(&gf_state.ledger, o->dev, now - charged[ord]);
    charged[ord] = now;
}

static void graphs_reconcile(int ordinal)
{
    pthread_mutex_lock(&graph_lock);
    for (int i = 0; i < GF_MAX_ORDINALS; i++)
        if ((ordinal < 0 && charged[i]) || i == ordinal)
            true_up(i);
    pthread_mutex_unlock(&graph_lock);
}

GF_EXPORT CUresult cuGraphAddMemAllocNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                          const CUgraphNode *dependencies, size_t numDependencies,
                                          CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams)
{
    CUresult rc;
    GF_HOOK_ENTER(cu, cuGraphAddMemAllocNode);
    rc = gf_cu.cuGraphAddMemAllocNode(phGraphNode, hGraph, dependencies, numDependencies,
                                      nodeParams);
    if (rc == CUDA_SUCCESS && nodeParams)
        set_bytes(hGraph, bytes_of(hGraph) + nodeParams->bytesize);
    return rc;
}

GF_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
                                               unsigned long long flags)
{
    CUresult rc;
    GF_HOOK_ENTER(cu, cuGraphInstantiateWithFlags);
    rc = gf_cu.cuGraphInstantiateWithFlags(phGraphExec, hGraph, flags);
    if (rc == CUDA_SUCCESS && bytes_of(hGraph))
        set_bytes(*phGraphExec, bytes_of(hGraph));
    return rc;
}

static CUresult launch(CUgraphExec exec, CUstream stream, CUresult (*call)(CUgraphExec, CUstream))
{
    int ord = gf_current_ordinal();
    const gf_ordinal *o = ord >= 0 && ord < GF_MAX_ORDINALS ? gf_ordinal_get(ord) : NULL;
    uint64_t need = bytes_of(exec), extra = 0;
    CUresult rc;

    if (!o)
        return call(exec, stream);
    pthread_mutex_lock(&graph_lock);
    true_up(ord);
    if (need > charged[ord])
        extra = need - charged[ord];
    pthread_mutex_unlock(&graph_lock);
    if (extra && !gf_admit(o, extra))
        return CUDA_ERROR_OUT_OF_MEMORY;
    rc = call(exec, stream);
    gf_unadmit(o, extra);
    pthread_mutex_lock(&graph_lock);
    true_up(ord);
    pthread_mutex_unlock(&graph_lock);
    return rc;
}

GF_EXPORT CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
    GF_HOOK_ENTER(cu, cuGraphLaunch);
    return launch(hGraphExec, hStream, gf_cu.cuGraphLaunch);
}

GF_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    GF_HOOK_ENTER(cu, cuGraphLaunch_ptsz);
    return launch(hGraphExec, hStream, gf_cu.cuGraphLaunch_ptsz);
}

/* an upload backs the memory nodes ahead of the launches: admitted the same way */
GF_EXPORT CUresult cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream)
{
    GF_HOOK_ENTER(cu, cuGraphUpload);
    return launch(hGraphExec, hStream, gf_cu.cuGraphUpload);
}

GF_EXPORT CUresult cuGraphUpload_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    GF_HOOK_ENTER(cu, cuGraphUpload_ptsz);
    return launch(hGraphExec, hStream, gf_cu.cuGraphUpload_ptsz);
}

GF_EXPORT CUresult cuGraphExecDestroy(CUgraphExec hGraphExec)
{
    GF_HOOK_ENTER(cu, cuGraphExecDestroy);
    gf_table_take(&graph_bytes, (uint64_t)(uintptr_t)hGraphExec, NULL);
    return gf_cu.cuGraphExecDestroy(hGraphExec);
}

GF_EXPORT CUresult cuGraphDestroy(CUgraph hGraph)
{
    GF_HOOK_ENTER(cu, cuGraphDestroy);
    gf_table_take(&graph_bytes, (uint64_t)(uintptr_t)hGraph, NULL);
    return gf_cu.cuGraphDestroy(hGraph);
}

GF_EXPORT CUresult cuDeviceGraphMemTrim(CUdevice device)
{
    CUresult rc;
    GF_HOOK_ENTER(cu, cuDeviceGraphMemTrim);
    rc = gf_cu.cuDeviceGraphMemTrim(device);
    if (device >= 0 && device < GF_MAX_ORDINALS && gf_ordinal_get(device))
        graphs_reconcile(device);
    return rc;
}

static void graphs_after_fork(void)
{
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    graph_lock = fresh;
    gf_table_reset(&graph_bytes);
    for (int i = 0; i < GF_MAX_ORDINALS; i++)
        charged[i] = 0;
}

static void reconcile(int ordinal, gf_reconcile_why why)
{
    graphs_reconcile(why == GF_RECONCILE_REFUSAL ? -1 : ordinal); /* every charged device */
}

GF_HIDDEN const gf_family gf_family_graph = {.name = "graph",
                                             .after_fork = graphs_after_fork,
                                             .reconcile = reconcile};
