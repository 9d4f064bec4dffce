/* SPDX-License-Identifier: Apache-2.0 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "status.h"

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

static const char *state_name(const status_fraction *f)
{
    if (!f->readable)
        return "unreadable";
    return f->ended ? "ended" : gf_fraction_state_name(f->state);
}

static json_t *fraction_json(const status_view *v, const status_fraction *f)
{
    json_t *o = json_pack("{s:s, s:s, s:s}", "name", f->name, "dir", f->dir, "state",
                          state_name(f));
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

int status_print_json(const status_view *v, gf_error *err)
{
    json_t *arr = json_array();
    int rc = -1;

    if (!arr)
        return gf_error_set(err, GF_ENOSPACE, "out of memory");
    for (size_t i = 0; i < v->n; i++) {
        json_t *o = fraction_json(v, &v->f[i]);
        if (!o || json_array_append_new(arr, o) < 0) {
            gf_error_set(err, GF_ENOSPACE, "out of memory");
            goto out;
        }
    }
    if (json_dumpf(arr, stdout, JSON_INDENT(2)) < 0) {
        gf_error_sys(err, "writing JSON");
        goto out;
    }
    putchar('\n');
    rc = 0;
out:
    json_decref(arr);
    return rc;
}
