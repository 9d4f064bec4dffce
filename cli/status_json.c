/* SPDX-License-Identifier: Apache-2.0 */
/* gpufrac status --json: {"version", "gpus", "fractions"}, each state as the
 * table names it. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "status.h"

/* The document's shape, docs/status.schema.json: raised when a field changes
 * meaning or goes away (a new field keeps it). */
enum { STATUS_JSON_VERSION = 1 };

static const gf_gpu *gpu_of(const status_view *v, const char *uuid)
{
    for (size_t g = 0; v->have_gpus && g < v->gpus.n; g++)
        if (strcmp(v->gpus.gpus[g].uuid, uuid) == 0)
            return &v->gpus.gpus[g];
    return NULL;
}

static json_t *processes_json(const status_view *v, const status_fraction *f, const gf_gpu *g)
{
    json_t *arr = json_array();

    for (size_t p = 0; arr && g && p < f->n_pids && p < STATUS_PIDS_MAX; p++)
        for (size_t k = 0; k < v->n_procs; k++)
            if (v->procs[k].gpu == g->index && v->procs[k].pid == f->pids[p]) {
                char name[64];
                status_proc_name(f->pids[p], name, sizeof(name));
                json_array_append_new(arr,
                                      json_pack("{s:i, s:s, s:I}", "pid", (int)f->pids[p], "name",
                                                name, "driver_used", (json_int_t)v->procs[k].used));
            }
    return arr;
}

static json_t *device_json(const status_view *v, const status_fraction *f, const status_device *d)
{
    const gf_gpu *g = gpu_of(v, d->uuid);
    json_t *o = json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "uuid", d->uuid,
                          "request", (json_int_t)d->request, "limit", (json_int_t)d->limit, "used",
                          (json_int_t)d->used, "peak", (json_int_t)d->peak, "denied",
                          (json_int_t)d->denied, "burst", (json_int_t)d->lent, "evictions",
                          (json_int_t)d->evictions, "driver_used", (json_int_t)d->driver_used);
    if (!o)
        return NULL;
    json_object_set_new(o, "index", g ? json_integer(g->index) : json_null());
    json_object_set_new(o, "processes", processes_json(v, f, g));
    return o;
}

/* The per-device amount when every device has the same, else null. */
static json_t *common(const status_fraction *f, bool limit)
{
    uint64_t v0 = limit ? f->devices[0].limit : f->devices[0].request;
    for (size_t i = 1; i < f->n_devices; i++)
        if ((limit ? f->devices[i].limit : f->devices[i].request) != v0)
            return json_null();
    return json_integer((json_int_t)v0);
}

static json_t *fraction_json(const status_view *v, const status_fraction *f)
{
    json_t *o = json_pack("{s:s, s:s, s:s}", "name", f->name, "dir", f->dir, "state",
                          status_state_name(f));
    json_t *devs = json_array(), *pids = json_array();

    if (!o || !devs || !pids)
        goto fail;
    json_object_set_new(o, "supervisor_pid",
                        f->supervisor ? json_integer(f->supervisor) : json_null());
    if (!f->readable) {
        json_object_set_new(o, "error", json_string(f->error));
        json_decref(devs);
        json_decref(pids);
        return o;
    }
    for (size_t i = 0; i < f->n_devices; i++)
        json_array_append_new(devs, device_json(v, f, &f->devices[i]));
    for (size_t i = 0; i < f->n_pids && i < STATUS_PIDS_MAX; i++)
        json_array_append_new(pids, json_integer(f->pids[i]));
    json_object_set_new(o, "owner", json_string(f->owner));
    json_object_set_new(o, "uid", json_integer((json_int_t)f->uid));
    if (f->pod[0]) {
        json_object_set_new(o, "namespace", json_string(f->ns));
        json_object_set_new(o, "pod", json_string(f->pod));
        json_object_set_new(o, "container", json_string(f->container));
    }
    json_object_set_new(o, "mode", json_string(gf_mode_name(f->mode)));
    json_object_set_new(o, "compute_percent", json_integer(f->compute_percent));
    json_object_set_new(o, "request", f->n_devices ? common(f, false) : json_null());
    json_object_set_new(o, "limit", f->n_devices ? common(f, true) : json_null());
    /* sums over the fraction's GPUs; the per-GPU figures are in devices[] */
    json_object_set_new(o, "used", json_integer((json_int_t)f->used));
    json_object_set_new(o, "denied", json_integer((json_int_t)f->denied));
    json_object_set_new(o, "burst", json_integer((json_int_t)f->lent));
    json_object_set_new(o, "evictions", json_integer((json_int_t)f->evictions));
    json_object_set_new(o, "processes", json_integer((json_int_t)f->n_pids));
    json_object_set_new(o, "pids", pids);
    json_object_set_new(o, "devices", devs);
    json_object_set_new(o, "terminated", json_integer((json_int_t)f->n_terminated));
    json_object_set_new(o, "terminated_reason",
                        f->n_terminated ? json_string(f->last_reason) : json_null());
    if (f->ended) {
        json_object_set_new(o, "ended_at", json_integer((json_int_t)f->ended_at));
        json_object_set_new(o, "exit_code", json_integer(f->exit_code));
    }
    return o;
fail:
    json_decref(o);
    json_decref(devs);
    json_decref(pids);
    return NULL;
}

/* A GPU as the table's block shows it: guaranteed and lent are the sums
 * over its live fractions. */
static json_t *gpu_json(const status_view *v, const gf_gpu *g)
{
    uint64_t guaranteed = 0, lent = 0;
    int n = 0;

    for (size_t i = 0; i < v->n; i++)
        for (size_t d = 0; d < v->f[i].n_devices; d++)
            if (!v->f[i].ended && strcmp(v->f[i].devices[d].uuid, g->uuid) == 0) {
                guaranteed += v->f[i].devices[d].request;
                lent += v->f[i].devices[d].lent;
                n++;
            }
    return json_pack("{s:i, s:s, s:s, s:I, s:I, s:I, s:I, s:i}", "index", (int)g->index, "uuid",
                     g->uuid, "name", g->name, "total", (json_int_t)g->total, "used",
                     (json_int_t)g->used, "guaranteed", (json_int_t)guaranteed, "lent",
                     (json_int_t)lent, "fractions", n);
}

static json_t *document(const status_view *v)
{
    json_t *gpus = json_array(), *fracs = json_array();
    json_t *doc = json_pack("{s:i, s:s, s:b, s:b}", "version", STATUS_JSON_VERSION, "state_dir",
                            v->state, "agent", v->agent, "all_users", v->all_users);

    if (!doc || !gpus || !fracs || json_object_set(doc, "gpus", gpus) < 0 ||
        json_object_set(doc, "fractions", fracs) < 0)
        goto fail;
    for (size_t g = 0; v->have_gpus && g < v->gpus.n; g++)
        if (json_array_append_new(gpus, gpu_json(v, &v->gpus.gpus[g])) < 0)
            goto fail;
    for (size_t i = 0; i < v->n; i++)
        if (json_array_append_new(fracs, fraction_json(v, &v->f[i])) < 0)
            goto fail;
    json_decref(gpus);
    json_decref(fracs);
    return doc;
fail:
    json_decref(doc);
    json_decref(gpus);
    json_decref(fracs);
    return NULL;
}

int status_print_json(const status_view *v, gf_error *err)
{
    json_t *doc = document(v);
    int rc = -1;

    if (!doc)
        return gf_error_set(err, GF_ENOSPACE, "out of memory");
    if (json_dumpf(doc, stdout, JSON_INDENT(2)) < 0) {
        gf_error_sys(err, "writing JSON");
        goto out;
    }
    putchar('\n');
    rc = 0;
out:
    json_decref(doc);
    return rc;
}
