/* SPDX-License-Identifier: Apache-2.0 */
/* v1.Pod / v1.Node JSON -> the model's records (decode.h). */
#include "decode.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "annotations.h"
#include "quantity.h"

#define CONTAINERS_MAX 256

/* obj[key] as a string into buf; missing or null -> "" (when !required). */
static int get_str(const json_t *obj, const char *key, bool required, char *buf, size_t len,
                   const char *what, gf_error *err)
{
    const json_t *v = obj != NULL ? json_object_get(obj, key) : NULL;
    const char *s;

    buf[0] = '\0';
    if (v == NULL || json_is_null(v)) {
        if (required)
            return gf_error_set(err, GF_EINVAL, "%s: %s is missing", what, key);
        return 0;
    }
    if (!json_is_string(v))
        return gf_error_set(err, GF_EINVAL, "%s: %s is not a string", what, key);
    s = json_string_value(v);
    if (strlen(s) >= len)
        return gf_error_set(err, GF_ERANGE, "%s: %s is longer than %zu bytes", what, key, len - 1);
    memcpy(buf, s, strlen(s) + 1);
    return 0;
}

/* obj[key] as an object (or NULL when missing/null). */
static int get_obj(const json_t *obj, const char *key, const json_t **out, const char *what,
                   gf_error *err)
{
    const json_t *v = obj != NULL ? json_object_get(obj, key) : NULL;

    *out = NULL;
    if (v == NULL || json_is_null(v))
        return 0;
    if (!json_is_object(v))
        return gf_error_set(err, GF_EINVAL, "%s: %s is not an object", what, key);
    *out = v;
    return 0;
}

/* --- pods --- */

static gf_pod_phase phase_of(const char *s)
{
    static const char *const names[] = {"Pending", "Running", "Succeeded", "Failed"};
    size_t i;

    if (*s == '\0')
        return GF_PHASE_PENDING;
    for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strcmp(s, names[i]) == 0)
            return (gf_pod_phase)i;
    return GF_PHASE_UNKNOWN;
}

/* metadata.annotations as key/value pairs (string values only). */
static int annotations_kv(const json_t *ann, gf_kv **out, size_t *n, gf_error *err)
{
    const char *key;
    const json_t *v;
    gf_kv *kv;

    *out = NULL;
    *n = 0;
    if (ann == NULL || json_object_size(ann) == 0)
        return 0;
    kv = calloc(json_object_size(ann), sizeof(*kv));
    if (kv == NULL)
        return gf_error_set(err, GF_ENOSPACE, "annotations: out of memory");
    json_object_foreach((json_t *)ann, key, v)
    {
        if (!json_is_string(v)) {
            free(kv);
            return gf_error_set(err, GF_EINVAL, "annotation %s is not a string", key);
        }
        kv[*n].key = key;
        kv[*n].value = json_string_value(v);
        (*n)++;
    }
    *out = kv;
    return 0;
}

/* spec[key][].name appended to names (borrowed from the JSON). */
static int names_of(const json_t *spec, const char *key, const char **names, size_t *n,
                    gf_error *err)
{
    const json_t *list = spec != NULL ? json_object_get(spec, key) : NULL;
    const json_t *c;
    size_t i;

    if (list == NULL || json_is_null(list))
        return 0;
    if (!json_is_array(list))
        return gf_error_set(err, GF_EINVAL, "pod: spec.%s is not a list", key);
    json_array_foreach(list, i, c)
    {
        const json_t *name = json_is_object(c) ? json_object_get(c, "name") : NULL;

        if (!json_is_string(name))
            return gf_error_set(err, GF_EINVAL, "pod: spec.%s[%zu].name is missing", key, i);
        if (*n == CONTAINERS_MAX)
            return gf_error_set(err, GF_ERANGE, "pod: more than %d containers", CONTAINERS_MAX);
        names[(*n)++] = json_string_value(name);
    }
    return 0;
}

/* spec.containers[].name, then spec.initContainers[].name from *n_regular on. */
static int container_names(const json_t *spec, const char **names, size_t *n, size_t *n_regular,
                           gf_error *err)
{
    *n = 0;
    if (names_of(spec, "containers", names, n, err) < 0)
        return -1;
    *n_regular = *n;
    return names_of(spec, "initContainers", names, n, err);
}

/* "<a><b>" into dst, cut to fit. */
static void join(char *dst, size_t len, const char *a, const char *b)
{
    if (snprintf(dst, len, "%s%s", a, b) >= (int)len)
        dst[len - 1] = '\0';
}

static void set_invalid(gf_sched_pod *out, const char *msg)
{
    char who[2 * GF_SCHED_NAME_MAX + 8];

    out->fractional = true;
    out->invalid = true;
    if (snprintf(who, sizeof(who), "pod %s/%s: ", out->ns, out->name) >= (int)sizeof(who))
        who[0] = '\0';
    join(out->error, sizeof(out->error), who, msg);
}

static void take_fraction(gf_sched_pod *out, const char *container, bool init,
                          const gf_pod_fraction *f)
{
    out->fractional = true;
    snprintf(out->container, sizeof(out->container), "%s", container);
    out->init = init;
    out->request = f->spec.request;
    out->limit = f->spec.limit;
    out->num_devices = f->num_devices;
    out->mode = f->spec.mode;
    out->has_compute = f->spec.has_compute;
    out->compute = f->spec.compute;
    snprintf(out->devices, sizeof(out->devices), "%s", f->spec.devices);
}

/* A further fractional container: on the same GPUs as the first, so in its
 * mode and on as many devices. */
static void take_more(gf_sched_pod *out, const char *container, bool init, const gf_pod_fraction *f)
{
    char msg[GF_ERROR_MSG_MAX];
    gf_sched_part *p;

    if (f->spec.mode != out->mode || f->num_devices != out->num_devices) {
        snprintf(msg, sizeof(msg),
                 "containers %s and %s ask %s on %d GPU(s) and %s on %d: a pod's fractional "
                 "containers share their GPUs (expected the same gpu-compute.mode and "
                 "number of devices)",
                 out->container, container, gf_mode_name(out->mode), out->num_devices,
                 gf_mode_name(f->spec.mode), f->num_devices);
        set_invalid(out, msg);
        return;
    }
    if (out->n_more == GF_SCHED_PARTS_MAX - 1) {
        snprintf(msg, sizeof(msg),
                 "more than %d containers ask GPU fractions (container %s); gpufrac-scheduler "
                 "places at most %d per pod",
                 GF_SCHED_PARTS_MAX, container, GF_SCHED_PARTS_MAX);
        set_invalid(out, msg);
        return;
    }
    p = &out->more[out->n_more++];
    memset(p, 0, sizeof(*p));
    snprintf(p->container, sizeof(p->container), "%s", container);
    p->init = init;
    p->request = f->spec.request;
    p->limit = f->spec.limit;
    p->has_compute = f->spec.has_compute;
    p->compute = f->spec.compute;
}

/* The fractions of every container (regular ones first, init containers
 * from index n_regular); malformed values mark out invalid. */
static void decode_fraction(const gf_kv *kv, size_t n_kv, const char **names, size_t n_names,
                            size_t n_regular, const char *prefix, gf_sched_pod *out)
{
    gf_annotation_opts o;
    gf_pod_fraction f;
    gf_error e;
    size_t i;

    memset(&o, 0, sizeof(o));
    o.prefix = prefix;
    o.containers = names;
    o.n_containers = n_names;
    o.allow_extensions = true;
    for (i = 0; i < n_names && !out->invalid; i++) {
        o.container = names[i];
        o.container_is_first = i == 0 && n_regular > 0;
        memset(&f, 0, sizeof(f));
        if (gf_annotations_decode(kv, n_kv, &o, &f, &e) < 0) {
            set_invalid(out, e.msg);
            return;
        }
        if (!f.fractional)
            continue;
        if (strlen(names[i]) >= sizeof(out->container)) {
            set_invalid(out, "container name too long");
            return;
        }
        if (out->fractional)
            take_more(out, names[i], i >= n_regular, &f);
        else
            take_fraction(out, names[i], i >= n_regular, &f);
    }
}

static int pod_meta(const json_t *pod, gf_sched_pod *out, const json_t **ann, gf_error *err)
{
    const json_t *meta, *del;

    if (!json_is_object(pod))
        return gf_error_set(err, GF_EINVAL, "pod: not a JSON object");
    if (get_obj(pod, "metadata", &meta, "pod", err) < 0)
        return -1;
    if (meta == NULL)
        return gf_error_set(err, GF_EINVAL, "pod: metadata is missing");
    if (get_str(meta, "name", true, out->name, sizeof(out->name), "pod", err) < 0 ||
        get_str(meta, "namespace", false, out->ns, sizeof(out->ns), "pod", err) < 0 ||
        get_str(meta, "uid", true, out->uid, sizeof(out->uid), "pod", err) < 0)
        return -1;
    if (out->ns[0] == '\0')
        snprintf(out->ns, sizeof(out->ns), "default");
    del = json_object_get(meta, "deletionTimestamp");
    out->deleting = del != NULL && !json_is_null(del);
    return get_obj(meta, "annotations", ann, "pod", err);
}

static int pod_spec_status(const json_t *pod, gf_sched_pod *out, const json_t **spec, gf_error *err)
{
    const json_t *status, *prio;
    char phase[32];

    if (get_obj(pod, "spec", spec, "pod", err) < 0 ||
        get_obj(pod, "status", &status, "pod", err) < 0)
        return -1;
    if (get_str(*spec, "nodeName", false, out->node, sizeof(out->node), "pod", err) < 0)
        return -1;
    prio = *spec != NULL ? json_object_get(*spec, "priority") : NULL;
    if (prio != NULL && !json_is_null(prio)) {
        if (!json_is_integer(prio) || json_integer_value(prio) < INT32_MIN ||
            json_integer_value(prio) > INT32_MAX)
            return gf_error_set(err, GF_EINVAL, "pod: spec.priority is not a 32-bit integer");
        out->priority = (int32_t)json_integer_value(prio);
    }
    if (get_str(status, "phase", false, phase, sizeof(phase), "pod", err) < 0)
        return -1;
    out->phase = phase_of(phase);
    return 0;
}

int gf_sched_pod_decode(const json_t *pod, const char *prefix, gf_sched_pod *out, gf_error *err)
{
    const char *names[CONTAINERS_MAX];
    const json_t *ann = NULL, *spec = NULL;
    gf_kv *kv = NULL;
    size_t n_kv = 0, n_names = 0, n_regular = 0;
    int rc = -1;

    memset(out, 0, sizeof(*out));
    out->num_devices = 1;
    if (pod_meta(pod, out, &ann, err) < 0 || pod_spec_status(pod, out, &spec, err) < 0)
        goto fail;
    if (container_names(spec, names, &n_names, &n_regular, err) < 0 ||
        annotations_kv(ann, &kv, &n_kv, err) < 0)
        goto fail;
    decode_fraction(kv, n_kv, names, n_names, n_regular, prefix, out);
    rc = 0;
fail:
    free(kv);
    if (rc < 0 && out->name[0] != '\0')
        gf_error_wrap(err, "pod %s/%s", out->ns[0] ? out->ns : "default", out->name);
    return rc;
}

/* --- nodes --- */

#define ANN GF_SCHED_GPUS_ANNOTATION

int gf_sched_gpus_annotation_parse(const char *value, const char *node, gf_sched_node *out,
                                   gf_error *err)
{
    return gf_node_gpus_parse(value, node, out->gpus, &out->n_gpus, err);
}

/* A whole decimal number, no sign, no spaces. */
static int whole(const char *s, unsigned long long *v)
{
    char *end;

    if (s[0] < '0' || s[0] > '9' || strlen(s) > 19)
        return -1;
    *v = strtoull(s, &end, 10);
    return *end == '\0' ? 0 : -1;
}

int gf_sched_gfd_labels_parse(const char *count, const char *memory, const char *node,
                              gf_sched_node *out, gf_error *err)
{
    unsigned long long n, mem = 0;
    size_t i;

    out->n_gpus = 0;
    if (whole(count, &n) < 0 || n > GF_SCHED_GPUS_MAX)
        return gf_error_set(err, GF_EINVAL,
                            "label " GF_SCHED_GFD_COUNT_LABEL "=\"%.64s\": "
                            "must be a whole number 0..%d",
                            count, GF_SCHED_GPUS_MAX);
    if (memory != NULL && (whole(memory, &mem) < 0 || mem == 0 || mem > (1ULL << 50)))
        return gf_error_set(err, GF_EINVAL,
                            "label " GF_SCHED_GFD_MEMORY_LABEL "=\"%.64s\": "
                            "must be a whole number of MiB > 0",
                            memory);
    if (mem != 0 && mem < 1048576ULL) /* MiB; larger values are bytes (GFD bug) */
        mem *= 1048576ULL;
    out->memory_known = memory != NULL;
    for (i = 0; i < n; i++) {
        snprintf(out->gpus[i].id, sizeof(out->gpus[i].id), "%s/gpu%zu", node, i);
        out->gpus[i].index = (int)i;
        out->gpus[i].has_uuid = false;
        out->gpus[i].memory = mem;
    }
    out->n_gpus = (size_t)n;
    return 0;
}

static const char *str_member(const json_t *obj, const char *key)
{
    const json_t *v = obj != NULL ? json_object_get(obj, key) : NULL;

    return json_is_string(v) ? json_string_value(v) : NULL;
}

static void node_inventory(const json_t *ann, const json_t *labels, gf_sched_node *out)
{
    const char *agent = str_member(ann, ANN), *count = str_member(labels, GF_SCHED_GFD_COUNT_LABEL);
    gf_error e;

    out->memory_known = false;
    if (agent != NULL) {
        out->source = GF_INV_AGENT;
        out->memory_known = true;
        if (gf_sched_gpus_annotation_parse(agent, out->name, out, &e) < 0)
            join(out->inventory_error, sizeof(out->inventory_error), "node annotation ", e.msg);
        return;
    }
    if (count == NULL)
        return;
    out->source = GF_INV_GFD;
    if (gf_sched_gfd_labels_parse(count, str_member(labels, GF_SCHED_GFD_MEMORY_LABEL), out->name,
                                  out, &e) < 0)
        join(out->inventory_error, sizeof(out->inventory_error), "node ", e.msg);
}

/* Ready unless a Ready condition says otherwise. */
static bool node_ready(const json_t *status)
{
    const json_t *conds = status != NULL ? json_object_get(status, "conditions") : NULL;
    const json_t *c;
    size_t i;

    if (!json_is_array(conds))
        return true;
    json_array_foreach(conds, i, c)
    {
        const char *type = str_member(c, "type"), *st = str_member(c, "status");

        if (type != NULL && strcmp(type, "Ready") == 0)
            return st != NULL && strcmp(st, "True") == 0;
    }
    return true;
}

/* status.allocatable nvidia.com/gpu: whole GPUs a device plugin hands out
 * (a quantity we only need as "none" or "some"; unreadable counts as some,
 * so the node's GPUs stay closed to fractions without a reservation). */
static unsigned device_plugin_gpus(const json_t *status)
{
    const json_t *alloc = status != NULL ? json_object_get(status, "allocatable") : NULL;
    const char *v = str_member(alloc, GF_SCHED_WHOLE_GPU_RESOURCE);
    unsigned long long n;

    if (v == NULL)
        return 0;
    if (whole(v, &n) < 0)
        return 1;
    return n > GF_SCHED_GPUS_MAX ? GF_SCHED_GPUS_MAX : (unsigned)n;
}

int gf_sched_node_decode(const json_t *node, gf_sched_node *out, gf_error *err)
{
    const json_t *meta, *ann, *labels, *spec, *status, *unsched;

    memset(out, 0, sizeof(*out));
    if (!json_is_object(node))
        return gf_error_set(err, GF_EINVAL, "node: not a JSON object");
    if (get_obj(node, "metadata", &meta, "node", err) < 0 ||
        get_obj(node, "spec", &spec, "node", err) < 0 ||
        get_obj(node, "status", &status, "node", err) < 0)
        return -1;
    if (meta == NULL)
        return gf_error_set(err, GF_EINVAL, "node: metadata is missing");
    if (get_str(meta, "name", true, out->name, sizeof(out->name), "node", err) < 0 ||
        get_obj(meta, "annotations", &ann, "node", err) < 0 ||
        get_obj(meta, "labels", &labels, "node", err) < 0)
        return -1;
    unsched = spec != NULL ? json_object_get(spec, "unschedulable") : NULL;
    out->unschedulable = json_is_true(unsched);
    out->ready = node_ready(status);
    out->dp_gpus = device_plugin_gpus(status);
    node_inventory(ann, labels, out);
    return 0;
}

/* --- namespaces --- */

int gf_sched_ns_decode(const json_t *ns, gf_sched_ns *out, gf_error *err)
{
    const json_t *meta, *ann;
    const char *v;
    gf_error e;

    memset(out, 0, sizeof(*out));
    if (!json_is_object(ns))
        return gf_error_set(err, GF_EINVAL, "namespace: not a JSON object");
    if (get_obj(ns, "metadata", &meta, "namespace", err) < 0)
        return -1;
    if (meta == NULL)
        return gf_error_set(err, GF_EINVAL, "namespace: metadata is missing");
    if (get_str(meta, "name", true, out->name, sizeof(out->name), "namespace", err) < 0 ||
        get_obj(meta, "annotations", &ann, "namespace", err) < 0)
        return -1;
    if (ann == NULL || json_object_get(ann, GF_SCHED_QUOTA_ANNOTATION) == NULL)
        return 0;
    out->has_quota = true;
    v = str_member(ann, GF_SCHED_QUOTA_ANNOTATION);
    if (v == NULL)
        snprintf(out->error, sizeof(out->error),
                 "annotation " GF_SCHED_QUOTA_ANNOTATION " of namespace %.63s is not a string",
                 out->name);
    else if (gf_quantity_parse(v, "annotation " GF_SCHED_QUOTA_ANNOTATION, &out->quota, &e) < 0)
        snprintf(out->error, sizeof(out->error),
                 "%.300s (namespace %.63s; a quantity of bytes such as 40Gi is accepted)", e.msg,
                 out->name);
    return 0;
}
