/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "admit.h"
#include "cleanup.h"
#include "identity.h"
#include "ledger.h"
#include "run.h"
#include "statedir.h"
#include "status.h"

static void read_ledger(status_fraction *f, gf_ledger *lg)
{
    for (size_t i = 0; i < f->n_devices; i++) {
        status_device *d = &f->devices[i];
        for (int k = 0; k < GF_LEDGER_DEVICES; k++) {
            gf_ledger_device *ld = &lg->hdr->devices[k];
            if (atomic_load(&ld->state) != GF_DEV_READY || strcmp(ld->uuid, d->uuid) != 0)
                continue;
            d->used = atomic_load(&ld->used);
            d->peak = atomic_load(&ld->peak);
            d->denied = atomic_load(&ld->denied);
            d->lent = atomic_load(&ld->lent);
            d->evictions = atomic_load(&ld->evictions);
        }
        f->used += d->used;
        f->denied += d->denied;
        f->lent += d->lent;
        f->evictions += d->evictions;
    }
}

/* Kubernetes identity, written by the agent at admission. */
static void read_identity(status_fraction *f)
{
    char path[GF_PATH_MAX + 16], text[GF_IDENTITY_TEXT_MAX];
    gf_identity id;
    size_t n;
    FILE *fp;

    if (gf_path_join(path, sizeof(path), f->dir, GF_FRAC_IDENTITY) < 0 || !(fp = fopen(path, "re")))
        return;
    n = fread(text, 1, sizeof(text), fp);
    fclose(fp);
    gf_identity_parse(text, n, &id);
    snprintf(f->ns, sizeof(f->ns), "%s", id.ns);
    snprintf(f->pod, sizeof(f->pod), "%s", id.pod);
    snprintf(f->container, sizeof(f->container), "%s", id.container);
}

static void read_terminated(status_fraction *f)
{
    char path[GF_PATH_MAX + 16], line[1024];
    run_termination t;
    FILE *fp;

    if (gf_path_join(path, sizeof(path), f->dir, GF_FRAC_TERMINATED) < 0 ||
        !(fp = fopen(path, "re")))
        return;
    while (fgets(line, sizeof(line), fp))
        if (run_ended_parse_line(line, &t) == 0) {
            f->n_terminated++;
            f->last_by_watchdog = t.watchdog;
            snprintf(f->last_reason, sizeof(f->last_reason), "%s", t.reason);
        }
    fclose(fp);
}

static void owner_name(uid_t uid, char *out, size_t len)
{
    struct passwd pw, *res = NULL;
    char buf[1024];

    if (getpwuid_r(uid, &pw, buf, sizeof(buf), &res) == 0 && res)
        snprintf(out, len, "%s", pw.pw_name);
    else
        snprintf(out, len, "%u", (unsigned)uid);
}

/* An ended run's figures, written by the agent in place of its ledger:
 * "uid=N" and one "dev=UUID used=N peak=N denied=N lent=N evictions=N" line
 * per GPU. False when there is no such file. */
static bool read_figures(status_fraction *f)
{
    char path[GF_PATH_MAX + 16], line[GF_UUID_MAX + 160], uuid[GF_UUID_MAX];
    unsigned long long used, peak, denied, lent, ev;
    unsigned uid;
    FILE *fp;

    if (gf_path_join(path, sizeof(path), f->dir, GF_FRAC_FIGURES) < 0 || !(fp = fopen(path, "re")))
        return false;
    while (fgets(line, sizeof(line), fp)) {
        if (sscanf(line, "uid=%u", &uid) == 1) {
            f->uid = (uid_t)uid;
            continue;
        }
        if (sscanf(line, "dev=%95s used=%llu peak=%llu denied=%llu lent=%llu evictions=%llu", uuid,
                   &used, &peak, &denied, &lent, &ev) != 6)
            continue;
        for (size_t i = 0; i < f->n_devices; i++) {
            status_device *d = &f->devices[i];
            if (strcmp(d->uuid, uuid) != 0 && strcmp(d->uuid, "*") != 0)
                continue;
            d->used = used, d->peak = peak, d->denied = denied, d->lent = lent;
            d->evictions = ev;
            f->used += used, f->denied += denied, f->lent += lent, f->evictions += ev;
            break;
        }
    }
    fclose(fp);
    return true;
}

static int read_fraction(status_fraction *f, gf_error *err)
{
    char path[GF_PATH_MAX + 16];
    gf_fraction_config cfg;
    gf_ledger lg = {.fd = -1};
    struct stat st;

    if (f->ended) {
        f->state = GF_FRACTION_STALE;
        f->ended_at = gf_fraction_ended_at(f->dir, &f->exit_code);
    } else if (gf_fraction_inspect(f->dir, &f->state, f->pids, STATUS_PIDS_MAX, &f->n_pids, err) <
               0) {
        return -1;
    }
    gf_fraction_supervised(f->dir, &f->supervisor);
    read_identity(f);
    read_terminated(f);
    if (gf_path_join(path, sizeof(path), f->dir, GF_FRAC_CONFIG) < 0)
        return gf_error_sys(err, "%s", f->dir);
    if (gf_config_load(path, &cfg, err) < 0)
        return -1;
    f->mode = cfg.mode;
    f->compute_percent = cfg.compute_percent;
    f->n_devices = cfg.n_devices;
    for (size_t i = 0; i < cfg.n_devices; i++) {
        snprintf(f->devices[i].uuid, sizeof(f->devices[i].uuid), "%s", cfg.devices[i].uuid);
        f->devices[i].request = cfg.devices[i].request;
        f->devices[i].limit = cfg.devices[i].limit;
    }
    if (f->ended && read_figures(f)) {
        owner_name(f->uid, f->owner, sizeof(f->owner));
        return 0;
    }
    /* an ended fraction's config still names its old place */
    if (gf_path_join(path, sizeof(path), f->dir, GF_FRAC_LEDGER) < 0)
        return gf_error_sys(err, "%s", f->dir);
    if (gf_ledger_open(path, &lg, err) < 0)
        return -1;
    /* the owner is whom the ledger was given to */
    f->uid = fstat(lg.fd, &st) == 0 ? st.st_uid : (uid_t)-1;
    owner_name(f->uid, f->owner, sizeof(f->owner));
    read_ledger(f, &lg);
    gf_ledger_close(&lg);
    return 0;
}

static int by_name(const void *a, const void *b)
{
    const status_fraction *x = a, *y = b;
    if (x->ended != y->ended)
        return x->ended ? 1 : -1;
    return strcmp(x->name, y->name);
}

static int add(const char *parent, const char *entry, bool ended, status_view *v, size_t *cap,
               gf_error *err)
{
    status_fraction *f;
    size_t len = strlen(entry);

    if (v->n == *cap) {
        size_t ncap = *cap ? *cap * 2 : 8;
        status_fraction *nv = realloc(v->f, ncap * sizeof(*nv));
        if (!nv)
            return gf_error_sys(err, "listing fractions");
        v->f = nv;
        *cap = ncap;
    }
    f = &v->f[v->n];
    memset(f, 0, sizeof(*f));
    if (ended) { /* "<name>.<pid>" */
        const char *dot = strrchr(entry, '.');
        if (!dot)
            return 0;
        len = (size_t)(dot - entry);
    }
    if (len >= sizeof(f->name) || gf_path_join(f->dir, sizeof(f->dir), parent, entry) < 0)
        return 0; /* not one of ours */
    memcpy(f->name, entry, len);
    f->name[len] = '\0';
    f->ended = ended;
    /* a user sees their own fractions (whose ledger is theirs); root sees all */
    char lpath[GF_PATH_MAX + 16];
    struct stat st;
    if (!v->all_users && gf_path_join(lpath, sizeof(lpath), f->dir, GF_FRAC_LEDGER) == 0 &&
        stat(lpath, &st) == 0 && st.st_uid != getuid())
        return 0;
    gf_error e = {0};
    f->readable = read_fraction(f, &e) == 0;
    if (!f->readable)
        snprintf(f->error, sizeof(f->error), "%s", e.msg);
    if (ended && time(NULL) - f->ended_at > GF_ENDED_KEEP_S)
        return 0;
    /* a user sees their own fractions; root sees all */
    if (!v->all_users && f->readable && f->uid != getuid())
        return 0;
    v->n++;
    return 0;
}

static int scan(const char *state, const char *sub, bool ended, status_view *v, size_t *cap,
                gf_error *err)
{
    char dir[GF_PATH_MAX];
    struct dirent *de;
    gf_cleanup_closedir DIR *d = NULL;

    snprintf(dir, sizeof(dir), "%s/%s", state, sub);
    if (!(d = opendir(dir)))
        return 0; /* nothing has run here yet */
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.' || (!ended && !gf_name_valid(de->d_name)))
            continue;
        if (add(dir, de->d_name, ended, v, cap, err) < 0)
            return -1;
    }
    return 0;
}

/* Each fraction's driver-measured memory per GPU: its pids in NVML's list. */
static void driver_figures(status_view *v)
{
    for (size_t i = 0; i < v->n; i++) {
        status_fraction *f = &v->f[i];
        for (size_t d = 0; d < f->n_devices; d++)
            for (size_t g = 0; g < v->gpus.n; g++) {
                if (strcmp(v->gpus.gpus[g].uuid, f->devices[d].uuid) != 0)
                    continue;
                for (size_t k = 0; k < v->n_procs; k++)
                    for (size_t p = 0; p < f->n_pids && p < STATUS_PIDS_MAX; p++)
                        if (v->procs[k].gpu == v->gpus.gpus[g].index &&
                            v->procs[k].pid == f->pids[p])
                            f->devices[d].driver_used += v->procs[k].used;
            }
    }
}

int status_collect(const char *state, bool ended, status_view *v, gf_error *err)
{
    size_t cap = 0;
    gf_error ignored;

    memset(v, 0, sizeof(*v));
    snprintf(v->state, sizeof(v->state), "%s", state);
    v->all_users = geteuid() == 0;
    v->agent = gf_agent_present(state);
    v->have_gpus = gf_gpus_probe(&v->gpus, &ignored) == 0;
    if (v->have_gpus)
        gf_gpus_processes(v->procs, STATUS_PROCS_MAX, &v->n_procs, &ignored);
    if (scan(state, GF_STATE_FRACTIONS, false, v, &cap, err) < 0 ||
        (ended && scan(state, GF_STATE_ENDED, true, v, &cap, err) < 0)) {
        status_view_free(v);
        return -1;
    }
    if (v->n)
        qsort(v->f, v->n, sizeof(*v->f), by_name);
    driver_figures(v);
    return 0;
}

void status_view_free(status_view *v)
{
    free(v->f);
    v->f = NULL;
    v->n = 0;
}

void status_proc_name(pid_t pid, char *buf, size_t len)
{
    char path[64];
    ssize_t n;
    int fd;

    snprintf(buf, len, "?");
    snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
        return;
    n = read(fd, buf, len - 1);
    close(fd);
    if (n <= 0) {
        snprintf(buf, len, "?");
        return;
    }
    buf[n] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
}
