/* SPDX-License-Identifier: Apache-2.0 */
/* A fraction's own heap parts (agent.h): its config as the agent keeps it,
 * its paths, and the ledger entries of the GPUs it covers. Each is sized to
 * what it holds, so a thousand fractions cost a thousand small blocks, not a
 * thousand copies of every bound. */
#include "fraction.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "ledger_view.h"

int gf_aconfig_set(gf_aconfig *c, const gf_fraction_config *cfg, const char *ledger, gf_error *err)
{
    int e;

    memset(c, 0, sizeof(*c));
    snprintf(c->name, sizeof(c->name), "%s", cfg->name);
    c->mode = cfg->mode;
    if (cfg->n_devices > GF_CONFIG_DEVICES_MAX)
        return gf_error_set(err, GF_EINVAL, "%s: %zu devices, at most %d", cfg->name,
                            cfg->n_devices, GF_CONFIG_DEVICES_MAX);
    if (cfg->n_devices && !(c->devices = calloc(cfg->n_devices, sizeof(*c->devices))))
        goto fail;
    if (cfg->n_devices)
        memcpy(c->devices, cfg->devices, cfg->n_devices * sizeof(*c->devices));
    c->n_devices = cfg->n_devices;
    if (!(c->ledger = strdup(ledger)) || !(c->agent = strdup(cfg->agent)))
        goto fail;
    return 0;
fail:
    e = errno;
    free(c->devices);
    free(c->ledger);
    free(c->agent);
    memset(c, 0, sizeof(*c));
    errno = e;
    return gf_error_sys(err, "fraction %s", cfg->name);
}

const gf_config_device *gf_aconfig_device(const gf_aconfig *c, const char *uuid)
{
    const gf_config_device *any = NULL;

    for (size_t i = 0; i < c->n_devices; i++) {
        if (uuid != NULL && strcmp(c->devices[i].uuid, uuid) == 0)
            return &c->devices[i];
        if (any == NULL && strcmp(c->devices[i].uuid, "*") == 0)
            any = &c->devices[i];
    }
    return any;
}

void gf_fraction_free(gf_afraction *f)
{
    free(f->dir);
    free(f->termlog);
    free(f->cfg.devices);
    free(f->cfg.ledger);
    free(f->cfg.agent);
    free(f->view.entries);
    f->dir = f->termlog = f->cfg.ledger = f->cfg.agent = NULL;
    f->cfg.devices = NULL;
    f->cfg.n_devices = 0;
    f->view.entries = NULL;
    f->view.n_entries = 0;
}

int gf_fraction_view_init(gf_agent *a, gf_afraction *f, gf_error *err)
{
    int n = 0;

    free(f->view.entries);
    f->view = (gf_ledger_view){.ok = false, .why = "not read yet"};
    for (int g = 0; g < a->n_gpus; g++)
        n += gf_aconfig_device(&f->cfg, a->gpus[g].dev.uuid) != NULL;
    if (n && !(f->view.entries = calloc((size_t)n, sizeof(*f->view.entries))))
        return gf_error_sys(err, "fraction %s", f->cfg.name);
    for (int g = 0; g < a->n_gpus; g++)
        if (gf_aconfig_device(&f->cfg, a->gpus[g].dev.uuid)) {
            f->view.entries[f->view.n_entries].tag = g;
            f->view.entries[f->view.n_entries++].index = -1;
        }
    gf_fraction_view_read(a, f);
    return 0;
}

void gf_fraction_view_read(gf_agent *a, gf_afraction *f)
{
    gf_ledger_view_key keys[GF_AGENT_GPUS_MAX];

    /* the keys: each covered GPU's uuid, else the config entry it falls
     * under ("*" or that uuid), the entry the shim charges */
    for (int i = 0; i < f->view.n_entries && i < GF_AGENT_GPUS_MAX; i++) {
        const char *uuid = a->gpus[f->view.entries[i].tag].dev.uuid;
        const gf_config_device *cd = gf_aconfig_device(&f->cfg, uuid);
        keys[i] = (gf_ledger_view_key){.uuid = uuid, .fallback = cd ? cd->uuid : NULL};
    }
    gf_ledger_view_read(f->ledger_fd, keys, &f->view);
}

const gf_ledger_device *gf_fraction_ledger_device(const gf_afraction *f, int gpu, bool exact,
                                                  int *index)
{
    const gf_ledger_view_entry *e = gf_ledger_view_entry_of(&f->view, gpu, exact);

    if (index)
        *index = e ? e->index : -1;
    return e ? &e->dev : NULL;
}

gf_afraction *gf_fraction_find_fid(gf_agent *a, uint64_t fid)
{
    for (int i = 0; fid && i < a->n_fractions; i++)
        if (a->fractions[i].fid == fid)
            return &a->fractions[i];
    return NULL;
}
