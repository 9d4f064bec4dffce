/* SPDX-License-Identifier: Apache-2.0 */
/* gpusim events, stream callbacks and waits, peer access, the profiler
 * switches and the device queries clients ask before they allocate.
 *
 * Work on a stream completes at once (gpusim runs no kernels), so an event is
 * complete as soon as it is recorded, a wait never waits, and a stream
 * callback runs, on a thread of its own as the driver's do, before
 * cuStreamAddCallback returns. Elapsed times are the host's monotonic clock
 * between the two records. */
#include <stdlib.h>
#include <time.h>

#include "gs.h"
#include "gs_api.h"

struct CUevent_st {
    gs_obj h;
    unsigned flags;
    bool alive;
    bool recorded;
    struct timespec at;
};

#define GS_EVENT_FLAGS (CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS)

static bool event_ok(CUevent e)
{
    return gs_obj_ok(e, GS_MAGIC_EVENT) && e->alive;
}

GS_API CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
    int p;
    CUevent e;
    CUresult rc;
    GS_FAILPOINT("cuEventCreate");
    NEED_INIT();
    if (!phEvent || (Flags & ~(unsigned)GS_EVENT_FLAGS))
        return CUDA_ERROR_INVALID_VALUE;
    /* interprocess events must not time, as the driver requires */
    if ((Flags & CU_EVENT_INTERPROCESS) && !(Flags & CU_EVENT_DISABLE_TIMING))
        return CUDA_ERROR_INVALID_VALUE;
    rc = gs_cur_pdev(&p, NULL);
    if (rc)
        return rc;
    e = gs_obj_new(sizeof *e, GS_MAGIC_EVENT);
    if (!e)
        return CUDA_ERROR_OUT_OF_MEMORY;
    e->flags = Flags;
    e->alive = true;
    *phEvent = e;
    return CUDA_SUCCESS;
}

static CUresult event_destroy(CUevent e)
{
    NEED_INIT();
    if (!event_ok(e))
        return CUDA_ERROR_INVALID_HANDLE;
    e->alive = false;
    return CUDA_SUCCESS;
}

GS_API CUresult cuEventDestroy_v2(CUevent hEvent)
{
    GS_FAILPOINT("cuEventDestroy_v2");
    return event_destroy(hEvent);
}

GS_API CUresult cuEventDestroy(CUevent hEvent)
{
    GS_FAILPOINT("cuEventDestroy");
    return event_destroy(hEvent);
}

GS_API CUresult cuEventRecord(CUevent hEvent, CUstream hStream)
{
    int p;
    CUresult rc;
    GS_FAILPOINT("cuEventRecord");
    NEED_INIT();
    if (!event_ok(hEvent))
        return CUDA_ERROR_INVALID_HANDLE;
    rc = gs_stream_pdev(hStream, &p);
    if (rc)
        return rc;
    clock_gettime(CLOCK_MONOTONIC, &hEvent->at);
    hEvent->recorded = true;
    return CUDA_SUCCESS;
}

GS_API CUresult cuEventQuery(CUevent hEvent)
{
    GS_FAILPOINT("cuEventQuery");
    NEED_INIT();
    return event_ok(hEvent) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

GS_API CUresult cuEventSynchronize(CUevent hEvent)
{
    GS_FAILPOINT("cuEventSynchronize");
    NEED_INIT();
    return event_ok(hEvent) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

static CUresult elapsed(float *ms, CUevent a, CUevent b)
{
    double d;
    NEED_INIT();
    if (!ms)
        return CUDA_ERROR_INVALID_VALUE;
    if (!event_ok(a) || !event_ok(b))
        return CUDA_ERROR_INVALID_HANDLE;
    /* never recorded, or made without timing: the driver's INVALID_HANDLE */
    if (!a->recorded || !b->recorded || ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING))
        return CUDA_ERROR_INVALID_HANDLE;
    d = (double)(b->at.tv_sec - a->at.tv_sec) * 1e3 + (double)(b->at.tv_nsec - a->at.tv_nsec) / 1e6;
    *ms = (float)d;
    return CUDA_SUCCESS;
}

GS_API CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    GS_FAILPOINT("cuEventElapsedTime");
    return elapsed(pMilliseconds, hStart, hEnd);
}

GS_API CUresult cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    GS_FAILPOINT("cuEventElapsedTime_v2");
    return elapsed(pMilliseconds, hStart, hEnd);
}

GS_API CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
    int p;
    GS_FAILPOINT("cuStreamWaitEvent");
    NEED_INIT();
    if (Flags > 1) /* CU_EVENT_WAIT_DEFAULT, CU_EVENT_WAIT_EXTERNAL */
        return CUDA_ERROR_INVALID_VALUE;
    if (!event_ok(hEvent))
        return CUDA_ERROR_INVALID_HANDLE;
    return gs_stream_pdev(hStream, &p);
}

typedef struct gs_callback {
    CUstreamCallback fn;
    CUstream stream;
    void *data;
} gs_callback;

static void *run_callback(void *arg)
{
    gs_callback *c = arg;
    c->fn(c->stream, CUDA_SUCCESS, c->data);
    return NULL;
}

GS_API CUresult cuStreamAddCallback(CUstream hStream, CUstreamCallback callback, void *userData,
                                    unsigned int flags)
{
    int p;
    pthread_t t;
    gs_callback c = {.fn = callback, .stream = hStream, .data = userData};
    CUresult rc;
    GS_FAILPOINT("cuStreamAddCallback");
    NEED_INIT();
    if (!callback || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    rc = gs_stream_pdev(hStream, &p);
    if (rc)
        return rc;
    if (pthread_create(&t, NULL, run_callback, &c) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_join(t, NULL);
    return CUDA_SUCCESS;
}

/* ---- peers --------------------------------------------------------------------- */
GS_API CUresult cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev, CUdevice peerDev)
{
    int p, q;
    GS_FAILPOINT("cuDeviceCanAccessPeer");
    NEED_INIT();
    if (!canAccessPeer)
        return CUDA_ERROR_INVALID_VALUE;
    DEV_ARG(dev, p);
    DEV_ARG(peerDev, q);
    *canAccessPeer = p != q;
    return CUDA_SUCCESS;
}

GS_API CUresult cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags)
{
    int p;
    CUresult rc = CUDA_SUCCESS;
    GS_FAILPOINT("cuCtxEnablePeerAccess");
    NEED_INIT();
    if (Flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (!gs_obj_ok(peerContext, GS_MAGIC_CTX) || !peerContext->alive)
        return CUDA_ERROR_INVALID_CONTEXT;
    rc = gs_cur_pdev(&p, NULL);
    if (rc)
        return rc;
    if (peerContext->pdev == p)
        return CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
    pthread_mutex_lock(&gsp.pdev[p].mu);
    if (gsp.pdev[p].peers & (1u << peerContext->pdev))
        rc = CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
    gsp.pdev[p].peers |= 1u << peerContext->pdev;
    pthread_mutex_unlock(&gsp.pdev[p].mu);
    return rc;
}

/* ---- the profiler: nothing to collect ---------------------------------------------- */
GS_API CUresult cuProfilerStart(void)
{
    GS_FAILPOINT("cuProfilerStart");
    NEED_INIT();
    return CUDA_SUCCESS;
}

GS_API CUresult cuProfilerStop(void)
{
    GS_FAILPOINT("cuProfilerStop");
    NEED_INIT();
    return CUDA_SUCCESS;
}

/* ---- device queries ------------------------------------------------------------------ */
GS_API CUresult cuDeviceComputeCapability(int *major, int *minor, CUdevice dev)
{
    int p;
    GS_FAILPOINT("cuDeviceComputeCapability");
    NEED_INIT();
    if (!major || !minor)
        return CUDA_ERROR_INVALID_VALUE;
    DEV_ARG(dev, p);
    (void)p;
    *major = 9; /* as CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR/MINOR */
    *minor = 0;
    return CUDA_SUCCESS;
}

/* scheduling (one of auto, spin, yield, blocking sync) and the other flag bits */
static CUresult set_primary_flags(CUdevice dev, unsigned flags)
{
    int p;
    unsigned sched = flags & 0x7u;
    NEED_INIT();
    DEV_ARG(dev, p);
    if ((flags & ~0xffu) || (sched != 0 && sched != 1 && sched != 2 && sched != 4))
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&gsp.pdev[p].mu);
    gsp.pdev[p].primary_flags = flags;
    pthread_mutex_unlock(&gsp.pdev[p].mu);
    return CUDA_SUCCESS;
}

GS_API CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags)
{
    GS_FAILPOINT("cuDevicePrimaryCtxSetFlags_v2");
    return set_primary_flags(dev, flags);
}

GS_API CUresult cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags)
{
    GS_FAILPOINT("cuDevicePrimaryCtxSetFlags");
    return set_primary_flags(dev, flags);
}
