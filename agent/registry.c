/* The registry is the state directory: every <state>/fractions/<name> with a
 * config and a ledger is a fraction. A scan opens new ones, closes gone ones
 * and recomputes what each GPU has guaranteed and lent. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/stat.h>

#include "agent.h"
#include "server.h"

static gf_afraction *by_dir(gf_agent *a, const char *dir)
{
    for (int i = 0; i < a->n_fractions; i++)
        if (strcmp(a->fractions[i].dir, dir) == 0)
            return &a->fractions[i];
    return NULL;
}

static pid_t read_supervisor(const char *dir)
{
    char path[GF_PATH_MAX + 16];
    long pid = 0;
    FILE *fp;

    if (snprintf(path, sizeof(path), "%s/supervisor", dir) >= (int)sizeof(path))
        return 0;
    fp = fopen(path, "re");
    if (!fp)
        return 0;
    if (fscanf(fp, "%ld", &pid) != 1)
        pid = 0;
    fclose(fp);
    return (pid_t)pid;
}

/* Kubernetes identity of a container fraction (written at admission). */
static void read_identity(gf_afraction *f)
{
    char path[GF_PATH_MAX + 16], line[256];
    FILE *fp;

    snprintf(path, sizeof(path), "%s/identity", f->dir);
    if (!(fp = fopen(path, "re")))
        return;
    while (fgets(line, sizeof(line), fp)) {
        line[strcspn(line, "\n")] = '\0';
        if (strncmp(line, "namespace=", 10) == 0)
            snprintf(f->ns, sizeof(f->ns), "%.63s", line + 10);
        else if (strncmp(line, "pod=", 4) == 0)
            snprintf(f->pod, sizeof(f->pod), "%.127s", line + 4);
        else if (strncmp(line, "container=", 10) == 0)
            snprintf(f->container, sizeof(f->container), "%.63s", line + 10);
    }
    fclose(fp);
}

/* The fraction's own socket, given to whoever owns its ledger. */
static void open_socket(gf_agent *a, gf_afraction *f)
{
    char path[GF_PATH_MAX + 16];
    struct stat st;
    gf_error err;

    f->listen_fd = -1;
    snprintf(path, sizeof(path), "%s/agent.sock", f->dir);
    if (fstat(f->ledger.fd, &st) < 0 ||
        (f->listen_fd = gf_socket_listen(path, st.st_uid, &err)) < 0) {
        gf_agent_event(a, "fraction %s gets no agent socket: %s", f->cfg.name, err.msg);
        return;
    }
    /* one epoll for all of them: the loop polls a single descriptor, however
     * many fractions there are */
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = f->listen_fd};
    if (a->epfd >= 0)
        epoll_ctl(a->epfd, EPOLL_CTL_ADD, f->listen_fd, &ev);
}

static int open_fraction(gf_agent *a, const char *dir, gf_error *err)
{
    char path[GF_PATH_MAX + 32];
    gf_afraction *f;

    if (a->n_fractions == GF_AGENT_FRACTIONS_MAX)
        return gf_error_set(err, GF_ENOSPACE, "more than %d fractions: %s is not watched",
                            GF_AGENT_FRACTIONS_MAX, dir);
    if (strlen(dir) + sizeof("/config") > sizeof(f->dir))
        return gf_error_set(err, GF_EINVAL, "path too long: %s", dir);
    f = &a->fractions[a->n_fractions];
    memset(f, 0, sizeof(*f));
    f->ledger.fd = -1;
    f->listen_fd = -1;
    memcpy(f->dir, dir, strlen(dir) + 1);
    snprintf(path, sizeof(path), "%s/config", f->dir);
    if (gf_config_load(path, &f->cfg, err) < 0 ||
        gf_ledger_open(f->cfg.ledger, &f->ledger, err) < 0)
        return -1;
    f->supervisor = read_supervisor(dir);
    read_identity(f);
    open_socket(a, f);
    f->seen = true;
    a->n_fractions++;
    return 0;
}

static void close_unseen(gf_agent *a)
{
    for (int i = 0; i < a->n_fractions;) {
        if (a->fractions[i].seen) {
            i++;
            continue;
        }
        gf_ledger_close(&a->fractions[i].ledger);
        if (a->fractions[i].listen_fd >= 0)
            close(a->fractions[i].listen_fd);
        a->fractions[i] = a->fractions[--a->n_fractions];
    }
}

/* Which of the fraction's config devices is GPU g (exact UUID, else "*"). */
static const gf_config_device *device_on(const gf_afraction *f, const gf_gpu *g)
{
    return gf_config_find_device(&f->cfg, g->uuid);
}

static void gpu_sums(gf_agent *a)
{
    for (int g = 0; g < a->n_gpus; g++) {
        gf_gpu *gpu = &a->gpus[g];
        gpu->guaranteed = gpu->lent = 0;
        gpu->n_fractions = 0;
        for (int i = 0; i < a->n_fractions; i++) {
            gf_afraction *f = &a->fractions[i];
            const gf_config_device *cd = device_on(f, gpu);
            gf_error err;
            if (!cd)
                continue;
            gpu->n_fractions++;
            gpu->mode = f->cfg.mode;
            gpu->guaranteed += cd->request;
            int d = gf_ledger_device_index(&f->ledger, gpu->uuid, cd->request, cd->limit, &err);
            if (d >= 0)
                gpu->lent += atomic_load(&f->ledger.hdr->devices[d].lent);
        }
    }
}

int gf_registry_scan_if_changed(gf_agent *a, gf_error *err)
{
    char dir[GF_PATH_MAX + 16];
    struct stat st;

    snprintf(dir, sizeof(dir), "%s/fractions", a->state_dir);
    if (stat(dir, &st) == 0 && st.st_mtim.tv_sec == a->scanned_mtime.tv_sec &&
        st.st_mtim.tv_nsec == a->scanned_mtime.tv_nsec)
        return 0;
    return gf_registry_scan(a, err);
}

int gf_registry_scan(gf_agent *a, gf_error *err)
{
    char dir[GF_PATH_MAX + 16], path[GF_PATH_MAX + 300];
    struct dirent *de;
    struct stat st;
    DIR *d;

    snprintf(dir, sizeof(dir), "%s/fractions", a->state_dir);
    /* taken before reading: a change during the scan shows as a newer mtime */
    if (stat(dir, &st) == 0)
        a->scanned_mtime = st.st_mtim;
    for (int i = 0; i < a->n_fractions; i++)
        a->fractions[i].seen = false;
    d = opendir(dir);
    if (!d && errno != ENOENT)
        return gf_error_sys(err, "reading %s", dir);
    while (d && (de = readdir(d))) {
        gf_afraction *f;
        gf_error ferr;
        if (de->d_name[0] == '.')
            continue; /* ".", "..", and fractions being made or removed */
        snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
        if ((f = by_dir(a, path))) {
            f->seen = true;
            if (!f->supervisor)
                f->supervisor = read_supervisor(path);
        } else if (open_fraction(a, path, &ferr) < 0 && ferr.code != GF_ESYS) {
            gf_agent_event(a, "ignoring %s: %s", path, ferr.msg);
        }
    }
    if (d)
        closedir(d);
    close_unseen(a);
    gpu_sums(a);
    return 0;
}

static gf_afraction *find_pid(gf_agent *a, pid_t pid, int *slot);
static gf_afraction *find_name(gf_agent *a, const char *name);

/* A directory's mtime is coarse (a clock tick): a fraction made in the same
 * tick as the last scan may not be known yet, so a miss rescans once. */
gf_afraction *gf_registry_find_pid_fresh(gf_agent *a, pid_t pid, int *slot)
{
    gf_error err;
    gf_afraction *f = find_pid(a, pid, slot);
    if (!f && gf_registry_scan(a, &err) == 0)
        f = find_pid(a, pid, slot);
    return f;
}

gf_afraction *gf_registry_find_name_fresh(gf_agent *a, const char *name)
{
    gf_error err;
    gf_afraction *f = find_name(a, name);
    if (!f && gf_registry_scan(a, &err) == 0)
        f = find_name(a, name);
    return f;
}

gf_afraction *gf_registry_find_pid(gf_agent *a, pid_t pid, int *slot)
{
    return find_pid(a, pid, slot);
}

gf_afraction *gf_registry_find_name(gf_agent *a, const char *name)
{
    return find_name(a, name);
}

static gf_afraction *find_pid(gf_agent *a, pid_t pid, int *slot)
{
    for (int i = 0; i < a->n_fractions; i++) {
        gf_ledger *lg = &a->fractions[i].ledger;
        for (int s = 0, high = gf_ledger_slot_high(lg); s < high; s++) {
            if (atomic_load(&lg->hdr->slots[s].pid) != pid || !gf_ledger_slot_live(lg, s))
                continue;
            if (slot)
                *slot = s;
            return &a->fractions[i];
        }
    }
    return NULL;
}

static gf_afraction *find_name(gf_agent *a, const char *name)
{
    for (int i = 0; i < a->n_fractions; i++)
        if (strcmp(a->fractions[i].cfg.name, name) == 0)
            return &a->fractions[i];
    return NULL;
}

int gf_gpu_index(const gf_agent *a, const char *uuid)
{
    for (int g = 0; g < a->n_gpus; g++)
        if (strcmp(a->gpus[g].uuid, uuid) == 0)
            return g;
    return -1;
}
