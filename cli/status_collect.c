#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ledger.h"
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

static int read_fraction(status_fraction *f, gf_error *err)
{
    char path[GF_PATH_MAX + 16];
    gf_fraction_config cfg;
    gf_ledger lg = {.fd = -1};

    if (gf_fraction_inspect(f->dir, &f->state, f->pids, STATUS_PIDS_MAX, &f->n_pids, err) < 0)
        return -1;
    gf_fraction_supervised(f->dir, &f->supervisor);
    if (gf_path_join(path, sizeof(path), f->dir, "config") < 0)
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
    if (gf_ledger_open(cfg.ledger, &lg, err) < 0)
        return -1;
    read_ledger(f, &lg);
    gf_ledger_close(&lg);
    return 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const status_fraction *)a)->name, ((const status_fraction *)b)->name);
}

static int add(const char *fractions, const char *name, status_fraction **v, size_t *n,
               size_t *cap, gf_error *err)
{
    status_fraction *f;

    if (*n == *cap) {
        size_t ncap = *cap ? *cap * 2 : 8;
        status_fraction *nv = realloc(*v, ncap * sizeof(*nv));
        if (!nv)
            return gf_error_sys(err, "listing fractions");
        *v = nv;
        *cap = ncap;
    }
    f = &(*v)[*n];
    memset(f, 0, sizeof(*f));
    if (strlen(name) >= sizeof(f->name) || gf_path_join(f->dir, sizeof(f->dir), fractions, name) < 0)
        return 0; /* not one of ours */
    memcpy(f->name, name, strlen(name) + 1);
    (*n)++;
    gf_error e = {0};
    f->readable = read_fraction(f, &e) == 0;
    if (!f->readable)
        snprintf(f->error, sizeof(f->error), "%s", e.msg);
    return 0;
}

int status_collect(const char *state, status_fraction **out, size_t *n, gf_error *err)
{
    char fractions[GF_PATH_MAX];
    size_t cap = 0;
    struct dirent *de;
    DIR *d;

    *out = NULL;
    *n = 0;
    snprintf(fractions, sizeof(fractions), "%s/fractions", state);
    d = opendir(fractions);
    if (!d)
        return 0; /* nothing has run here yet */
    while ((de = readdir(d)))
        if (de->d_name[0] != '.' && gf_name_valid(de->d_name) &&
            add(fractions, de->d_name, out, n, &cap, err) < 0) {
            closedir(d);
            free(*out);
            *out = NULL;
            return -1;
        }
    closedir(d);
    if (*n)
        qsort(*out, *n, sizeof(**out), by_name);
    return 0;
}
