/* SPDX-License-Identifier: Apache-2.0 */
/* gpusim shared state: devices from the environment, one shared file per
 * simulated host counting device memory across processes, and process
 * liveness by OFD locks (see README.md). Shared by libcuda and libnvidia-ml. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gs.h"

gs_sim gs = {.lock_fd = -1, .slot = -1, .reclaim_mu = PTHREAD_MUTEX_INITIALIZER};

static pthread_mutex_t boot_mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int booted; /* 0 not yet, 1 ok, else the error */

void gs_log(const char *fmt, ...)
{
    va_list ap;
    if (!gs.log)
        return;
    va_start(ap, fmt);
    fputs("gpusim: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* "16Gi", "512Mi", "1Ki", "2Ti", or plain bytes; [s, end). */
int gs_parse_size(const char *s, const char *end, uint64_t *out)
{
    uint64_t v = 0;
    unsigned shift = 0;
    const char *p = s;

    if (p == end)
        return -1;
    for (; p < end && *p >= '0' && *p <= '9'; p++) {
        if (v > (UINT64_MAX - 9) / 10)
            return -1;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    if (p == s)
        return -1;
    if (end - p == 2 && p[1] == 'i') {
        const char *u = strchr("KMGT", p[0]);
        if (!u || !p[0])
            return -1;
        shift = 10U * (unsigned)(u - "KMGT" + 1);
    } else if (p != end) {
        return -1;
    }
    if (shift && v > (UINT64_MAX >> shift))
        return -1;
    *out = v << shift;
    return 0;
}

static void format_size(uint64_t v, char *buf, size_t len)
{
    static const char *const units[] = {"", "Ki", "Mi", "Gi", "Ti"};
    unsigned u = 0;
    while (u < 4 && v && (v & 1023) == 0) {
        v >>= 10;
        u++;
    }
    snprintf(buf, len, "%" PRIu64 "%s", v, units[u]);
}

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static void make_device(int i, uint64_t size)
{
    gs_devinfo *d = &gs.dev[i];
    uint64_t a = mix64(((uint64_t)i << 56) ^ size), b = mix64(a ^ 0x67707573696dULL);
    const unsigned char *u;
    char sz[32];

    d->size = size;
    for (int k = 0; k < 8; k++) {
        d->uuid.bytes[k] = (char)(a >> (8 * k));
        d->uuid.bytes[8 + k] = (char)(b >> (8 * k));
    }
    u = (const unsigned char *)d->uuid.bytes;
    snprintf(d->uuid_str, sizeof d->uuid_str,
             "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
             u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14],
             u[15]);
    format_size(size, sz, sizeof sz);
    snprintf(d->name, sizeof d->name, "gpusim %s", sz);
}

static int parse_devices(const char *list)
{
    const char *p = list;
    int n = 0;

    for (;;) {
        const char *e = strchr(p, ',');
        uint64_t size;
        if (!e)
            e = p + strlen(p);
        if (n == GS_MAX_DEV || gs_parse_size(p, e, &size) != 0 || size == 0) {
            gs_log("bad GPUSIM_DEVICES '%s'", list);
            return -1;
        }
        make_device(n++, size);
        if (!*e)
            break;
        p = e + 1;
    }
    gs.ndev = n;
    return 0;
}

/* One size for every device, or one per device ("64Mi,96Mi"); the last
 * entry repeats for devices past the list. */
static int parse_overheads(const char *list)
{
    const char *p = list;
    int n = 0;

    for (int i = 0; i < GS_MAX_DEV; i++)
        gs.ctx_overhead[i] = GS_DEFAULT_CTX_OVERHEAD;
    if (!list || !*list)
        return 0;
    for (;;) {
        const char *e = strchr(p, ',');
        if (!e)
            e = p + strlen(p);
        if (n == GS_MAX_DEV || gs_parse_size(p, e, &gs.ctx_overhead[n]) != 0)
            return -1;
        n++;
        if (!*e)
            break;
        p = e + 1;
    }
    for (int i = n; i < GS_MAX_DEV; i++)
        gs.ctx_overhead[i] = gs.ctx_overhead[n - 1];
    return 0;
}

static int read_env(void)
{
    const char *v = getenv("GPUSIM_LOG");
    const char *devs = getenv("GPUSIM_DEVICES");
    const char *state = getenv("GPUSIM_STATE");

    gs.log = v && strcmp(v, "1") == 0;
    v = getenv("GPUSIM_STRICT_CTX");
    gs.strict_ctx = v && strcmp(v, "1") == 0;
    v = getenv("GPUSIM_CTX_HOLD");
    snprintf(gs.ctx_hold, sizeof gs.ctx_hold, "%s", v ? v : "");
    v = getenv("GPUSIM_RECLAIM_HOLD");
    snprintf(gs.reclaim_hold, sizeof gs.reclaim_hold, "%s", v ? v : "");
    v = getenv("GPUSIM_FREE_ASYNC_HOLD");
    snprintf(gs.free_async_hold, sizeof gs.free_async_hold, "%s", v ? v : "");
    if (!devs || !*devs)
        devs = GS_DEFAULT_DEVICES;
    if (parse_devices(devs) != 0)
        return -1;
    v = getenv("GPUSIM_CTX_OVERHEAD");
    if (parse_overheads(v) != 0) {
        gs_log("bad GPUSIM_CTX_OVERHEAD '%s'", v);
        return -1;
    }
    if (state && *state) {
        snprintf(gs.path, sizeof gs.path, "%s", state);
    } else {
        uint64_t h = 0xcbf29ce484222325ULL;
        for (int i = 0; i < gs.ndev; i++)
            h = mix64(h ^ gs.dev[i].size);
        snprintf(gs.path, sizeof gs.path, "/dev/shm/gpusim-%u-%016" PRIx64, (unsigned)getuid(), h);
    }
    return 0;
}

/* Test stand-ins (GPUSIM_*_HOLD): says it got here (PATH.reached), then
 * waits until the test creates PATH. */
static void hold_at(const char *path)
{
    char reached[512 + 16];
    int fd;
    if (!path[0])
        return;
    snprintf(reached, sizeof reached, "%s.reached", path);
    fd = open(reached, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0)
        close(fd);
    while (access(path, F_OK) != 0)
        usleep(1000);
}

void gs_ctx_hold(void)
{
    hold_at(gs.ctx_hold);
}

void gs_free_async_hold(void)
{
    hold_at(gs.free_async_hold);
}

static int ofd_lock(int fd, short type, long long off, int wait)
{
    struct flock fl = {.l_type = type, .l_whence = SEEK_SET, .l_start = off, .l_len = 1};
    int rc;
    do
        rc = fcntl(fd, wait ? F_OFD_SETLKW : F_OFD_SETLK, &fl);
    while (rc != 0 && errno == EINTR);
    return rc;
}

static int init_contents(gs_shm *m)
{
    if (atomic_load_explicit(&m->magic, memory_order_acquire) == GS_SHM_MAGIC) {
        if (m->version != GS_SHM_VERSION || m->ndev != (uint32_t)gs.ndev)
            return -1;
        for (int i = 0; i < gs.ndev; i++)
            if (m->size[i] != gs.dev[i].size)
                return -1;
        return 0;
    }
    m->version = GS_SHM_VERSION;
    m->ndev = (uint32_t)gs.ndev;
    for (int i = 0; i < gs.ndev; i++)
        m->size[i] = gs.dev[i].size;
    atomic_store_explicit(&m->magic, GS_SHM_MAGIC, memory_order_release);
    return 0;
}

/* The lock fd and the mapping use two different open file descriptions: a
 * mapping keeps its file description alive, and OFD locks live as long as
 * their description, so locks must never be taken through the mapped one
 * (a fork child would otherwise keep its parent's slot "alive"). */
static int map_state(void)
{
    int mfd = -1, lfd = -1;
    struct stat st;
    void *m = MAP_FAILED;

    mfd = open(gs.path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (mfd < 0)
        goto fail;
    lfd = open(gs.path, O_RDWR | O_CLOEXEC);
    if (lfd < 0 || ofd_lock(lfd, F_WRLCK, GS_LOCK_INIT, 1) != 0)
        goto fail;
    if (fstat(mfd, &st) != 0)
        goto fail;
    if ((size_t)st.st_size < sizeof(gs_shm) && ftruncate(mfd, (off_t)sizeof(gs_shm)) != 0)
        goto fail;
    m = mmap(NULL, sizeof(gs_shm), PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
    if (m == MAP_FAILED)
        goto fail;
    if (init_contents(m) != 0) {
        gs_log("state file %s was made for other devices", gs.path);
        goto fail;
    }
    ofd_lock(lfd, F_UNLCK, GS_LOCK_INIT, 0);
    close(mfd);
    gs.shm = m;
    gs.lock_fd = lfd;
    return 0;
fail:
    gs_log("cannot use state file %s: %s", gs.path, strerror(errno));
    if (m != MAP_FAILED)
        munmap(m, sizeof(gs_shm));
    if (lfd >= 0)
        close(lfd);
    if (mfd >= 0)
        close(mfd);
    return -1;
}

int gs_boot(void)
{
    int rc = atomic_load_explicit(&booted, memory_order_acquire);
    if (rc == 1)
        return 0;
    pthread_mutex_lock(&boot_mu);
    rc = atomic_load_explicit(&booted, memory_order_relaxed);
    if (rc == 0) {
        if (read_env() != 0)
            rc = CUDA_ERROR_NO_DEVICE;
        else if (map_state() != 0)
            rc = CUDA_ERROR_UNKNOWN;
        else
            rc = 1;
        if (rc == 1)
            pthread_atfork(NULL, NULL, gs_drop_slot);
        atomic_store_explicit(&booted, rc, memory_order_release);
    }
    pthread_mutex_unlock(&boot_mu);
    return rc == 1 ? 0 : rc;
}

/* Reclaim slot i if its owner is gone. Caller holds reclaim_mu. */
static void reclaim_slot(int i, bool keep_lock)
{
    gs_slot *s = &gs.shm->slot[i];
    for (int d = 0; d < GS_MAX_DEV; d++)
        if (atomic_load(&s->used[d])) {
            hold_at(gs.reclaim_hold); /* a dead process's memory, still counted */
            break;
        }
    for (int d = 0; d < GS_MAX_DEV; d++) {
        uint64_t u = atomic_exchange(&s->used[d], 0);
        if (u)
            atomic_fetch_sub(&gs.shm->used[d], u);
        atomic_store(&s->contexts[d], 0);
    }
    atomic_store(&s->pid, 0);
    if (!keep_lock)
        ofd_lock(gs.lock_fd, F_UNLCK, GS_LOCK_SLOT(i), 0);
}

/* Reclaims run one at a time across processes: a slot another process is
 * reclaiming looks live (its lock is held), so without this a reclaim could
 * return while dead memory is still counted in the device word, and a peak
 * read after it would count memory no live process holds. */
static void reclaim_lock(short type)
{
    ofd_lock(gs.lock_fd, type, GS_LOCK_RECLAIM, type == F_WRLCK);
}

void gs_reclaim(void)
{
    if (!gs.shm || gs.lock_fd < 0)
        return;
    pthread_mutex_lock(&gs.reclaim_mu);
    reclaim_lock(F_WRLCK);
    for (int i = 0; i < GS_MAX_SLOTS; i++) {
        if (i == gs.slot || atomic_load_explicit(&gs.shm->slot[i].pid, memory_order_relaxed) == 0)
            continue;
        if (ofd_lock(gs.lock_fd, F_WRLCK, GS_LOCK_SLOT(i), 0) == 0) {
            gs_log("reclaiming slot %d of dead pid %d", i, (int)atomic_load(&gs.shm->slot[i].pid));
            reclaim_slot(i, false);
        }
    }
    reclaim_lock(F_UNLCK);
    pthread_mutex_unlock(&gs.reclaim_mu);
}

/* The pid NVML reports for this process: like the real driver, the host's
 * (the initial PID namespace's), also for a process in a container's PID
 * namespace. /proc/self resolves in the namespace of the procfs mount, so
 * with the host's /proc (a container that did not mount its own) it names
 * the host pid; otherwise the namespace's own is all there is. */
static int32_t host_pid(void)
{
    char link[32];
    ssize_t n = readlink("/proc/self", link, sizeof(link) - 1);
    long pid;

    if (n > 0) {
        link[n] = '\0';
        if ((pid = strtol(link, NULL, 10)) > 0)
            return (int32_t)pid;
    }
    return (int32_t)getpid();
}

int gs_claim_slot(void)
{
    int rc = -1;
    pthread_mutex_lock(&gs.reclaim_mu);
    if (gs.slot >= 0) {
        rc = 0;
        goto out;
    }
    if (gs.lock_fd < 0) {
        gs.lock_fd = open(gs.path, O_RDWR | O_CLOEXEC);
        if (gs.lock_fd < 0)
            goto out;
    }
    reclaim_lock(F_WRLCK);
    for (int i = 0; i < GS_MAX_SLOTS && rc != 0; i++) {
        if (ofd_lock(gs.lock_fd, F_WRLCK, GS_LOCK_SLOT(i), 0) != 0)
            continue;
        reclaim_slot(i, true);
        atomic_store(&gs.shm->slot[i].pid, host_pid());
        gs.slot = i;
        rc = 0;
    }
    reclaim_lock(F_UNLCK);
    if (rc != 0)
        gs_log("no free process slot in %s", gs.path);
out:
    pthread_mutex_unlock(&gs.reclaim_mu);
    return rc;
}

/* In a fork child: the parent's slot and lock are the parent's. Closing our
 * copy of the lock fd leaves the parent's lock in place; the child probes and
 * claims through a description of its own (two processes sharing one
 * description would both "win" a dead slot's lock). Atfork child handler. */
void gs_drop_slot(void)
{
    if (gs.lock_fd >= 0)
        close(gs.lock_fd);
    gs.lock_fd = gs.shm ? open(gs.path, O_RDWR | O_CLOEXEC) : -1;
    gs.slot = -1;
    pthread_mutex_init(&gs.reclaim_mu, NULL);
}

int gs_charge(int p, uint64_t bytes)
{
    _Atomic uint64_t *u = &gs.shm->used[p];
    uint64_t cap = gs.shm->size[p];
    uint64_t cur = atomic_load_explicit(u, memory_order_relaxed);

    if (bytes == 0)
        return 0;
    do {
        if (cur > cap || bytes > cap - cur)
            return -1;
    } while (!atomic_compare_exchange_weak_explicit(u, &cur, cur + bytes, memory_order_acq_rel,
                                                    memory_order_relaxed));
    atomic_fetch_add_explicit(&gs.shm->slot[gs.slot].used[p], bytes, memory_order_relaxed);
    cur += bytes;
    uint64_t peak = atomic_load_explicit(&gs.shm->peak[p], memory_order_relaxed);
    if (GS_UNLIKELY(cur > peak)) {
        /* a new high: what dead processes held is not live memory (a real
         * driver frees it at exit; gpusim returns it lazily), so it goes
         * first and the peak counts live processes only */
        gs_reclaim();
        uint64_t now = atomic_load_explicit(u, memory_order_acquire);
        cur = now < cur ? now : cur;
        while (cur > peak &&
               !atomic_compare_exchange_weak_explicit(&gs.shm->peak[p], &peak, cur,
                                                      memory_order_relaxed, memory_order_relaxed))
            ;
    }
    return 0;
}

void gs_context_count(int p, int delta)
{
    if (gs.slot >= 0)
        atomic_fetch_add(&gs.shm->slot[gs.slot].contexts[p], (uint32_t)delta);
}

void gs_uncharge(int p, uint64_t bytes)
{
    if (bytes == 0 || gs.slot < 0)
        return;
    atomic_fetch_sub_explicit(&gs.shm->slot[gs.slot].used[p], bytes, memory_order_relaxed);
    atomic_fetch_sub_explicit(&gs.shm->used[p], bytes, memory_order_release);
}

int gs_charge_retry(int p, uint64_t bytes)
{
    if (gs_charge(p, bytes) == 0)
        return 0;
    gs_reclaim();
    return gs_charge(p, bytes);
}

uint64_t gs_used(int p)
{
    gs_reclaim();
    return atomic_load_explicit(&gs.shm->used[p], memory_order_acquire);
}

uint64_t gs_free(int p)
{
    uint64_t u = gs_used(p), t = gs.shm->size[p];
    return u >= t ? 0 : t - u;
}

unsigned gs_processes(int p, unsigned *pids, uint64_t *used, unsigned max)
{
    unsigned n = 0;
    gs_reclaim();
    for (int i = 0; i < GS_MAX_SLOTS; i++) {
        int32_t pid = atomic_load(&gs.shm->slot[i].pid);
        uint64_t u = atomic_load(&gs.shm->slot[i].used[p]);
        /* like NVML: a process with a context on the device is listed, even
         * one that holds no memory there */
        if (pid == 0 || (u == 0 && atomic_load(&gs.shm->slot[i].contexts[p]) == 0))
            continue;
        if (n < max) {
            pids[n] = (unsigned)pid;
            used[n] = u;
        }
        n++;
    }
    return n;
}
