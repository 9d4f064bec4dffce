/* SPDX-License-Identifier: Apache-2.0 */
/* gpusim IPC memory handles: cuIpcGetMemHandle names a device allocation of
 * this process, cuIpcOpenMemHandle maps it in another process (the same
 * pages: both see the same bytes), cuIpcCloseMemHandle unmaps it.
 *
 * An export is a record in the first MiB of the exporter's arena memfd
 * (GS_ARENA_HDR): a random nonce, the allocation's offset, size and device.
 * A handle carries the exporter's pid, the memfd's descriptor number and
 * inode, the record's index and the nonce. Invariant: an importer maps only a
 * range that a live export record of a memfd arena describes with the very
 * nonce, offset, size and device of the handle; anything else (a forged or
 * stale handle, one naming another file, a freed allocation) is refused with
 * CUDA_ERROR_INVALID_VALUE and maps nothing. Opening charges nothing: the
 * memory is the exporter's, as the driver (and NVML) count it. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "gs.h"
#include "gs_api.h"

#define GS_IPC_MAGIC 0x50495347u /* "GSIP" */
#define GS_IPC_VERSION 1u
#define GS_IPC_SLOTS ((unsigned)(GS_ARENA_HDR / sizeof(gs_ipc_rec)))
#define GS_IPC_OPEN_MAX 4096
#define GS_PAGE 4096ULL

typedef struct gs_ipc_rec { /* in the memfd, at index * 64 */
    uint64_t nonce;         /* 0: free */
    uint64_t offset;        /* from GS_ARENA_BASE */
    uint64_t size;
    uint32_t pdev;
    uint32_t pad[9];
} gs_ipc_rec;
_Static_assert(sizeof(gs_ipc_rec) == 64, "one record is 64 bytes");

typedef struct gs_ipc_handle { /* the 64 bytes of a CUipcMemHandle */
    uint32_t magic, version;
    int32_t pid, fd;
    uint64_t ino, nonce, offset, size;
    uint32_t index, pdev;
    uint32_t pad[2];
} gs_ipc_handle;
_Static_assert(sizeof(gs_ipc_handle) == CU_IPC_HANDLE_SIZE, "a handle is 64 bytes");

typedef struct gs_export {
    uint64_t base;
    gs_ipc_handle h;
} gs_export;

typedef struct gs_opened {
    uint64_t dptr; /* 0: free */
    void *map;
    size_t len;
} gs_opened;

static pthread_mutex_t ipc_mu = PTHREAD_MUTEX_INITIALIZER;
static gs_export exports[GS_IPC_SLOTS]; /* by record index; base 0: free */
static gs_opened opened[GS_IPC_OPEN_MAX];

static uint64_t new_nonce(void)
{
    uint64_t n = 0;
    while (n == 0)
        if (getrandom(&n, sizeof n, 0) != (ssize_t)sizeof n)
            n = 0;
    return n;
}

static int write_rec(int fd, unsigned index, const gs_ipc_rec *r)
{
    off_t at = (off_t)index * (off_t)sizeof *r;
    return pwrite(fd, r, sizeof *r, at) == (ssize_t)sizeof *r ? 0 : -1;
}

/* a new export record for [base, base+size) on pdev; the caller holds ipc_mu */
static CUresult export_new(int fd, const gs_range *r, gs_ipc_handle *out)
{
    struct stat st;
    gs_ipc_rec rec = {.nonce = new_nonce(),
                      .offset = r->base - GS_ARENA_BASE,
                      .size = r->size,
                      .pdev = (uint32_t)r->pdev};
    unsigned i;
    for (i = 0; i < GS_IPC_SLOTS && exports[i].base; i++)
        ;
    if (i == GS_IPC_SLOTS || fstat(fd, &st) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (write_rec(fd, i, &rec) != 0)
        return CUDA_ERROR_UNKNOWN;
    exports[i].base = r->base;
    exports[i].h = (gs_ipc_handle){.magic = GS_IPC_MAGIC,
                                   .version = GS_IPC_VERSION,
                                   .pid = (int32_t)getpid(),
                                   .fd = fd,
                                   .ino = (uint64_t)st.st_ino,
                                   .nonce = rec.nonce,
                                   .offset = rec.offset,
                                   .size = rec.size,
                                   .index = i,
                                   .pdev = rec.pdev};
    *out = exports[i].h;
    return CUDA_SUCCESS;
}

GS_API CUresult cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)
{
    gs_range r;
    gs_ipc_handle h = {0};
    CUresult rc = CUDA_SUCCESS;
    int fd;
    GS_FAILPOINT("cuIpcGetMemHandle");
    NEED_INIT();
    if (!pHandle)
        return CUDA_ERROR_INVALID_VALUE;
    /* the base of a plain (cuMemAlloc / pitched) allocation with bytes behind it */
    if (!gs_range_find(dptr, 0, &r) || r.base != dptr || r.kind != GS_RANGE_DEVICE ||
        !gs_arena_backed(r.base, r.size))
        return CUDA_ERROR_INVALID_VALUE;
    fd = gs_arena_fd();
    pthread_mutex_lock(&ipc_mu);
    if (r.flags & GS_RANGE_EXPORTED) {
        rc = CUDA_ERROR_INVALID_VALUE; /* freed meanwhile */
        for (unsigned i = 0; i < GS_IPC_SLOTS; i++)
            if (exports[i].base == dptr)
                h = exports[i].h, rc = CUDA_SUCCESS;
    } else {
        rc = export_new(fd, &r, &h);
        if (rc == CUDA_SUCCESS)
            gs_range_set_flags(dptr, GS_RANGE_EXPORTED);
    }
    pthread_mutex_unlock(&ipc_mu);
    if (rc == CUDA_SUCCESS)
        memcpy(pHandle, &h, sizeof h);
    return rc;
}

void gs_ipc_forget(uint64_t base)
{
    static const gs_ipc_rec zero;
    int fd = gs_arena_fd();
    pthread_mutex_lock(&ipc_mu);
    for (unsigned i = 0; i < GS_IPC_SLOTS; i++) {
        if (exports[i].base != base)
            continue;
        if (fd >= 0)
            write_rec(fd, i, &zero);
        exports[i].base = 0;
    }
    pthread_mutex_unlock(&ipc_mu);
}

/* the exporter's memfd, if the handle names one: a sealable (memfd) regular
 * file of the arena's size with the handle's inode; -1 otherwise */
static int open_exporter(const gs_ipc_handle *h)
{
    char path[64];
    struct stat st;
    gf_cleanup_close int fd = -1;
    snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)h->pid, (int)h->fd);
    /* look before opening: a FIFO or a device must never be opened */
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_ino != h->ino)
        return -1;
    fd = open(path, O_RDWR | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return -1;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_ino != h->ino ||
        (uint64_t)st.st_size != GS_ARENA_HDR + GS_ARENA_SIZE || fcntl(fd, F_GET_SEALS) < 0)
        return -1;
    return gf_steal_fd(&fd);
}

static bool handle_sane(const gs_ipc_handle *h)
{
    return h->magic == GS_IPC_MAGIC && h->version == GS_IPC_VERSION && h->pid > 0 && h->fd >= 0 &&
           h->index < GS_IPC_SLOTS && h->nonce != 0 && h->size != 0 && h->size <= GS_ARENA_SIZE &&
           h->offset <= GS_ARENA_SIZE - h->size && (int)h->pdev >= 0 && (int)h->pdev < gs.ndev;
}

static bool record_matches(int fd, const gs_ipc_handle *h)
{
    gs_ipc_rec rec;
    off_t at = (off_t)h->index * (off_t)sizeof rec;
    if (pread(fd, &rec, sizeof rec, at) != (ssize_t)sizeof rec)
        return false;
    return rec.nonce == h->nonce && rec.offset == h->offset && rec.size == h->size &&
           rec.pdev == h->pdev;
}

static CUresult remember_open(uint64_t dptr, void *map, size_t len)
{
    CUresult rc = CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&ipc_mu);
    for (int i = 0; i < GS_IPC_OPEN_MAX; i++) {
        if (opened[i].dptr)
            continue;
        opened[i] = (gs_opened){.dptr = dptr, .map = map, .len = len};
        rc = CUDA_SUCCESS;
        break;
    }
    pthread_mutex_unlock(&ipc_mu);
    return rc;
}

static CUresult map_export(int fd, const gs_ipc_handle *h, CUcontext ctx, CUdeviceptr *out)
{
    uint64_t delta = h->offset % GS_PAGE;
    size_t len = (size_t)gs_round_up(delta + h->size, GS_PAGE);
    off_t at = (off_t)(GS_ARENA_HDR + h->offset - delta);
    uint64_t dptr;
    void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, at);
    if (m == MAP_FAILED)
        return CUDA_ERROR_OUT_OF_MEMORY;
    madvise(m, len, MADV_DONTFORK);
    dptr = (uint64_t)(uintptr_t)m + delta;
    if (gs_range_add(dptr, h->size, (int)h->pdev, GS_RANGE_IPC, ctx, 0) != 0) {
        munmap(m, len);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (remember_open(dptr, m, len) != CUDA_SUCCESS) {
        gs_range_del(dptr, GS_RANGE_IPC, NULL);
        munmap(m, len);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *out = dptr;
    return CUDA_SUCCESS;
}

GS_API CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags)
{
    gs_ipc_handle h;
    CUcontext ctx;
    CUresult rc;
    int p;
    gf_cleanup_close int fd = -1;
    GS_FAILPOINT("cuIpcOpenMemHandle_v2");
    NEED_INIT();
    if (!pdptr || (Flags & ~(unsigned)CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS))
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(&h, &handle, sizeof h);
    if (!handle_sane(&h))
        return CUDA_ERROR_INVALID_VALUE;
    if (h.pid == (int32_t)getpid())
        return CUDA_ERROR_INVALID_CONTEXT; /* as the driver: not in the exporting process */
    rc = gs_cur_pdev(&p, &ctx);
    if (rc)
        return rc;
    fd = open_exporter(&h);
    if (fd < 0)
        return CUDA_ERROR_INVALID_VALUE;
    return record_matches(fd, &h) ? map_export(fd, &h, ctx, pdptr) : CUDA_ERROR_INVALID_VALUE;
}

GS_API CUresult cuIpcCloseMemHandle(CUdeviceptr dptr)
{
    gs_opened o = {0};
    GS_FAILPOINT("cuIpcCloseMemHandle");
    NEED_INIT();
    pthread_mutex_lock(&ipc_mu);
    for (int i = 0; i < GS_IPC_OPEN_MAX && dptr; i++) {
        if (opened[i].dptr != dptr)
            continue;
        o = opened[i];
        opened[i] = (gs_opened){0};
        break;
    }
    pthread_mutex_unlock(&ipc_mu);
    if (!o.dptr)
        return CUDA_ERROR_INVALID_VALUE;
    gs_range_del(dptr, GS_RANGE_IPC, NULL);
    munmap(o.map, o.len);
    return CUDA_SUCCESS;
}

/* fork child: the parent's exports and mappings are not the child's */
void gs_ipc_after_fork(void)
{
    pthread_mutex_init(&ipc_mu, NULL);
    memset(exports, 0, sizeof exports);
    memset(opened, 0, sizeof opened);
}
