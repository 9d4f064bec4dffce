/* SPDX-License-Identifier: Apache-2.0 */
#include "annotations.h"

#include <stdio.h>
#include <string.h>

#include "number.h"
#include "quantity.h"

#define NAME_PART_MAX 63 /* Kubernetes: the part of an annotation key after '/' */
#define NUM_DEVICES_MAX 1024

enum { S_REQUEST, S_LIMIT, S_DEVICES, S_MODE, S_PORTION, S_COUNT };

static const char *const nv_suffixes[S_COUNT] = {
    ".gpu-memory.request", ".gpu-memory.limit",    ".gpus.devices",
    ".gpu-compute.mode",   ".gpu-compute.portion",
};
static const char kai_plim_suffix[] = ".gpu-memory.portion.limit";

enum {
    P_FRACTION,
    P_MEMORY,
    P_NUM_DEVICES,
    P_CONTAINER,
    P_FRACTION_LIMIT,
    P_MEMORY_LIMIT,
    P_COUNT
};

static const char *const pod_keys[P_COUNT] = {
    "gpu-fraction",
    "gpu-memory",
    "gpu-fraction-num-devices",
    "gpu-fraction-container-name",
    "gpu-fraction.limit",
    "gpu-memory.limit",
};

/* A container segment of a key: [s, s + len). */
typedef struct seg {
    const char *s;
    size_t len;
} seg;

typedef struct decoder {
    const gf_annotation_opts *opts;
    const char *prefix;
    const char *container;
    /* per-container NvFractions keys of our container */
    const gf_kv *nv[S_COUNT];
    gf_amount req, lim;
    gf_mode mode;
    double compute;
    int n_devices;
    /* containers with a memory key: ours, and the first other one */
    bool ours_mem;
    seg other_mem;
    const gf_kv *other_mem_kv;
    /* kai.scheduler/container.<c>.gpu-memory.portion.limit */
    const gf_kv *plim;
    seg plim_container;
    double plim_value;
    /* pod-level keys */
    const gf_kv *pod[P_COUNT];
    double fraction, fraction_limit;
    uint64_t memory, memory_limit; /* bytes */
    int num_devices;
} decoder;

static const char *val(const gf_kv *kv)
{
    return kv->value != NULL ? kv->value : "";
}

static bool seg_is(seg s, const char *name)
{
    return name != NULL && strlen(name) == s.len && memcmp(s.s, name, s.len) == 0;
}

static bool seg_eq(seg a, seg b)
{
    return a.len == b.len && memcmp(a.s, b.s, a.len) == 0;
}

static bool known_container(const gf_annotation_opts *o, seg s)
{
    size_t i;

    if (o->containers == NULL)
        return true;
    for (i = 0; i < o->n_containers; i++) {
        if (seg_is(s, o->containers[i]))
            return true;
    }
    return false;
}

static int value_error(const gf_kv *kv, const char *rule, gf_error *err)
{
    char q[GF_QUOTE_MAX];

    return gf_error_set(err, GF_EINVAL, "%s: \"%s\" %s", kv->key, gf_quote(val(kv), q, sizeof(q)),
                        rule);
}

/* A decimal in (0,1) as KAI takes gpu-fraction; max_places < 0: unlimited. */
static int parse_open_portion(const gf_kv *kv, long max_places, const char *rule, double *out,
                              gf_error *err)
{
    gf_decimal d;
    const char *p = gf_decimal_scan(val(kv), true, &d);

    if (p == NULL || *p != '\0' || d.negative || d.too_long || d.ndigits == 0 ||
        gf_decimal_cmp_one(&d) >= 0)
        return value_error(kv, rule, err);
    if (max_places >= 0 && gf_decimal_places(&d) > max_places)
        return value_error(kv, rule, err);
    *out = gf_decimal_to_double(&d);
    if (!(*out > 0.0))
        return value_error(kv, rule, err);
    return 0;
}

static int parse_memory(const decoder *d, const gf_kv *kv, gf_amount *out, gf_error *err)
{
    gf_error tmp;
    uint64_t b;

    if (d->opts->allow_extensions) {
        if (gf_amount_parse(val(kv), kv->key, out, err) < 0)
            return -1;
        return 0;
    }
    if (gf_quantity_parse(val(kv), kv->key, &b, &tmp) < 0 || b == 0)
        return value_error(kv,
                           "must be a valid Kubernetes memory quantity greater than 0 (expected "
                           "e.g. 512Mi, 8Gi or 1G)",
                           err);
    out->is_portion = false;
    out->portion = 0.0;
    out->bytes = b;
    return 0;
}

static int key_error(const char *key, gf_error *err)
{
    char q[GF_QUOTE_MAX];

    return gf_error_set(err, GF_EINVAL,
                        "invalid NvFractions annotation key: %s (expected <prefix><container>"
                        "%s, %s, %s, %s or %s)",
                        gf_quote(key, q, sizeof(q)), nv_suffixes[0], nv_suffixes[1], nv_suffixes[2],
                        nv_suffixes[3], nv_suffixes[4]);
}

/* The name part of a key (after '/') must fit Kubernetes' 63 characters; a
 * longer one can only come from a container name too long for these keys. */
static int check_name_part(const char *key, seg c, const char *suffix, gf_error *err)
{
    const char *slash = strchr(key, '/');
    size_t name_len = strlen(slash != NULL ? slash + 1 : key);
    char q[GF_QUOTE_MAX], cq[GF_QUOTE_MAX];

    if (name_len <= NAME_PART_MAX)
        return 0;
    snprintf(cq, sizeof(cq), "%.*s", (int)(c.len < 64 ? c.len : 64), c.s);
    return gf_error_set(err, GF_ERANGE,
                        "annotation key %s is longer than Kubernetes allows (%d characters after "
                        "'/'): container name %s has %zu characters, at most %zu fit with %s",
                        gf_quote(key, q, sizeof(q)), NAME_PART_MAX, cq, c.len,
                        c.len + NAME_PART_MAX >= name_len ? c.len + NAME_PART_MAX - name_len : 0,
                        suffix);
}

static int not_found(seg c, gf_error *err)
{
    return gf_error_set(err, GF_ENOTFOUND,
                        "container %.*s not found in pod spec, but a fractional annotation "
                        "referencing it was found",
                        (int)(c.len < 253 ? c.len : 253), c.s);
}

static int note_memory_container(decoder *d, const gf_kv *kv, seg c, bool ours, gf_error *err)
{
    if (ours) {
        d->ours_mem = true;
        return 0;
    }
    if (d->other_mem.s == NULL) {
        d->other_mem = c;
        d->other_mem_kv = kv;
        return 0;
    }
    if (seg_eq(d->other_mem, c) || d->opts->allow_extensions)
        return 0;
    return gf_error_set(err, GF_EINVAL,
                        "only one container per pod may request a GPU fraction, but %s and %s "
                        "both do",
                        d->other_mem_kv->key, kv->key);
}

static int decode_nv_value(decoder *d, int sfx, const gf_kv *kv, bool ours, gf_error *err)
{
    char q[GF_QUOTE_MAX];
    gf_amount a;
    gf_mode m;
    double c;
    int n;

    switch (sfx) {
    case S_REQUEST:
    case S_LIMIT:
        if (parse_memory(d, kv, &a, err) < 0)
            return -1;
        if (ours)
            *(sfx == S_REQUEST ? &d->req : &d->lim) = a;
        return 0;
    case S_DEVICES:
        if (strlen(val(kv)) >= GF_DEVICES_MAX)
            return value_error(kv, "is too long (expected a comma list of GPU UUIDs)", err);
        if ((n = gf_devices_count(val(kv), err)) <= 0)
            return gf_error_set(err, GF_EINVAL,
                                "%s: \"%s\" is not a device list (expected a comma list of GPU "
                                "UUIDs, CDI names or indices without spaces or empty entries)",
                                kv->key, gf_quote(val(kv), q, sizeof(q)));
        if (ours)
            d->n_devices = n;
        return 0;
    case S_MODE:
        if (gf_mode_parse(val(kv), kv->key, &m, err) < 0)
            return -1;
        if (ours)
            d->mode = m;
        return 0;
    default:
        if (gf_compute_portion_parse(val(kv), kv->key, &c, err) < 0)
            return -1;
        if (ours)
            d->compute = c;
        return 0;
    }
}

static int decode_nv_key(decoder *d, const gf_kv *kv, gf_error *err)
{
    const char *rest = kv->key + strlen(d->prefix);
    const char *dot = strchr(rest, '.');
    seg c;
    int sfx;
    bool ours;

    if (dot == NULL || dot == rest)
        return key_error(kv->key, err);
    for (sfx = 0; sfx < S_COUNT; sfx++) {
        if (strcmp(dot, nv_suffixes[sfx]) == 0)
            break;
    }
    if (sfx == S_COUNT)
        return key_error(kv->key, err);
    c = (seg){rest, (size_t)(dot - rest)};
    if (check_name_part(kv->key, c, nv_suffixes[sfx], err) < 0)
        return -1;
    if (!known_container(d->opts, c))
        return not_found(c, err);
    ours = seg_is(c, d->container);
    if (ours && d->nv[sfx] != NULL)
        return gf_error_set(err, GF_EINVAL, "duplicate annotation key %s", kv->key);
    if (decode_nv_value(d, sfx, kv, ours, err) < 0)
        return -1;
    if (ours)
        d->nv[sfx] = kv;
    if (sfx == S_REQUEST || sfx == S_LIMIT)
        return note_memory_container(d, kv, c, ours, err);
    return 0;
}

static int decode_kai_key(decoder *d, const gf_kv *kv, gf_error *err)
{
    const char *rest = kv->key + strlen(GF_KAI_CONTAINER_PREFIX);
    size_t rlen = strlen(rest), slen = strlen(kai_plim_suffix);
    seg c;

    /* other kai.scheduler/container.* keys are KAI's business, not ours */
    if (rlen < slen || strcmp(rest + rlen - slen, kai_plim_suffix) != 0)
        return 0;
    c = (seg){rest, rlen - slen};
    if (c.len == 0 || memchr(c.s, '.', c.len) != NULL)
        return gf_error_set(err, GF_EINVAL,
                            "invalid KAI annotation key: %s (expected %s<container>%s)", kv->key,
                            GF_KAI_CONTAINER_PREFIX, kai_plim_suffix);
    if (check_name_part(kv->key, c, kai_plim_suffix, err) < 0)
        return -1;
    if (!known_container(d->opts, c))
        return not_found(c, err);
    if (d->plim != NULL)
        return gf_error_set(err, GF_EINVAL,
                            "%s and %s: only one container may have a portion limit", d->plim->key,
                            kv->key);
    if (parse_open_portion(kv, 5,
                           "must be a decimal in (0,1) with at most 5 digits after the decimal "
                           "point (expected e.g. 0.8)",
                           &d->plim_value, err) < 0)
        return -1;
    d->plim = kv;
    d->plim_container = c;
    return 0;
}

static int decode_pod_value(decoder *d, int k, const gf_kv *kv, gf_error *err)
{
    const char *v = val(kv);
    uint64_t n;

    switch (k) {
    case P_FRACTION:
        return parse_open_portion(kv, -1,
                                  "gpu-fraction annotation value must be a positive number "
                                  "smaller than 1.0 (expected a decimal in (0,1) such as 0.5)",
                                  &d->fraction, err);
    case P_MEMORY:
        if (gf_parse_udec(v, INT64_MAX / GF_MIB, &n) < 0 || n == 0)
            return value_error(kv,
                               "gpu-memory annotation value must be a positive integer greater "
                               "than 0 (expected whole MiB such as 4096)",
                               err);
        d->memory = n * GF_MIB;
        return 0;
    case P_NUM_DEVICES:
        if (gf_parse_udec(v, NUM_DEVICES_MAX, &n) < 0 || n == 0)
            return value_error(kv,
                               "fraction count annotation value must be a positive integer "
                               "greater than 0 (expected the number of GPUs, e.g. 2)",
                               err);
        d->num_devices = (int)n;
        return 0;
    case P_CONTAINER:
        if (v[0] == '\0' || strlen(v) > NAME_PART_MAX || strchr(v, '.') != NULL)
            return value_error(kv,
                               "is not a container name (expected the name of a container "
                               "of this pod)",
                               err);
        if (!known_container(d->opts, (seg){v, strlen(v)}))
            return not_found((seg){v, strlen(v)}, err);
        return 0;
    case P_FRACTION_LIMIT:
        return parse_open_portion(kv, 5,
                                  "gpu-fraction.limit annotation value must be a decimal in "
                                  "(0,1) with at most 5 digits after the decimal point "
                                  "(expected e.g. 0.8)",
                                  &d->fraction_limit, err);
    default: {
        gf_error tmp;
        size_t len = strlen(v);

        if (gf_quantity_parse(v, kv->key, &n, &tmp) < 0 || n == 0 || len == 0 ||
            (v[len - 1] >= '0' && v[len - 1] <= '9') || v[len - 1] == '.')
            return value_error(kv,
                               "gpu-memory.limit must be a positive Kubernetes memory quantity "
                               "with a unit (expected e.g. 8Gi or 8000Mi)",
                               err);
        d->memory_limit = n;
        return 0;
    }
    }
}

static int decode_key(decoder *d, const gf_kv *kv, gf_error *err)
{
    int k;

    if (strncmp(kv->key, d->prefix, strlen(d->prefix)) == 0)
        return decode_nv_key(d, kv, err);
    if (strncmp(kv->key, GF_KAI_CONTAINER_PREFIX, strlen(GF_KAI_CONTAINER_PREFIX)) == 0)
        return decode_kai_key(d, kv, err);
    for (k = 0; k < P_COUNT; k++) {
        if (strcmp(kv->key, pod_keys[k]) == 0)
            break;
    }
    if (k == P_COUNT)
        return 0;
    if (d->pod[k] != NULL)
        return gf_error_set(err, GF_EINVAL, "duplicate annotation key %s", kv->key);
    d->pod[k] = kv;
    return decode_pod_value(d, k, kv, err);
}

/* Rules between the pod-level keys. */
static int check_pod_keys(const decoder *d, gf_error *err)
{
    const gf_kv *const *p = d->pod;

    if (p[P_FRACTION] != NULL && p[P_MEMORY] != NULL)
        return gf_error_set(err, GF_EINVAL,
                            "cannot request both gpu-fraction and GPU memory request "
                            "(gpu-fraction: \"%s\", gpu-memory: \"%s\"; expected one of them)",
                            val(p[P_FRACTION]), val(p[P_MEMORY]));
    if (p[P_NUM_DEVICES] != NULL && p[P_FRACTION] == NULL && p[P_MEMORY] == NULL)
        return gf_error_set(err, GF_EINVAL,
                            "gpu-fraction-num-devices: \"%s\": cannot request multiple fractional "
                            "devices without specifying fraction details (expected gpu-fraction "
                            "or gpu-memory as well)",
                            val(p[P_NUM_DEVICES]));
    if (p[P_FRACTION_LIMIT] != NULL && p[P_FRACTION] == NULL)
        return value_error(p[P_FRACTION_LIMIT],
                           "gpu-fraction.limit annotation can only be used together with the "
                           "gpu-fraction annotation",
                           err);
    if (p[P_FRACTION_LIMIT] != NULL && !(d->fraction_limit > d->fraction))
        return gf_error_set(err, GF_EINVAL,
                            "gpu-fraction.limit: \"%s\" must be greater than gpu-fraction (\"%s\")",
                            val(p[P_FRACTION_LIMIT]), val(p[P_FRACTION]));
    if (p[P_MEMORY_LIMIT] != NULL && p[P_MEMORY] == NULL)
        return value_error(p[P_MEMORY_LIMIT],
                           "gpu-memory.limit annotation can only be used together with the "
                           "gpu-memory annotation",
                           err);
    if (p[P_MEMORY_LIMIT] != NULL && d->memory_limit < d->memory)
        return gf_error_set(err, GF_EINVAL,
                            "gpu-memory.limit: \"%s\" must not be smaller than gpu-memory (\"%s\" "
                            "MiB)",
                            val(p[P_MEMORY_LIMIT]), val(p[P_MEMORY]));
    return 0;
}

/* Whether our container is the one the pod-level forms apply to. */
static bool ours_is_target(const decoder *d)
{
    if (d->pod[P_CONTAINER] != NULL)
        return strcmp(val(d->pod[P_CONTAINER]), d->container) == 0;
    return d->opts->container_is_first;
}

static int mismatch(const decoder *d, seg c, gf_error *err)
{
    if (d->pod[P_CONTAINER] != NULL)
        return gf_error_set(err, GF_EINVAL,
                            "gpu-fraction-container-name annotation value %s does not match "
                            "container name %.*s (expected the container named in the %s keys)",
                            val(d->pod[P_CONTAINER]), (int)c.len, c.s, d->prefix);
    return gf_error_set(err, GF_EINVAL,
                        "the pod-level fraction annotations (gpu-fraction, gpu-memory) apply to "
                        "the first container, but %s keys name container %.*s (expected "
                        "gpu-fraction-container-name: %.*s)",
                        d->prefix, (int)c.len, c.s, (int)c.len, c.s);
}

/* The container that carries the fraction, checked across every form. */
static int check_target(const decoder *d, gf_error *err)
{
    bool legacy = d->pod[P_FRACTION] != NULL || d->pod[P_MEMORY] != NULL;
    bool named = d->pod[P_CONTAINER] != NULL;
    bool target = ours_is_target(d);
    seg ours = {d->container, strlen(d->container)};

    if (d->ours_mem && d->other_mem.s != NULL && !d->opts->allow_extensions)
        return gf_error_set(err, GF_EINVAL,
                            "only one container per pod may request a GPU fraction, but "
                            "containers %s and %.*s both do",
                            d->container, (int)d->other_mem.len, d->other_mem.s);
    if (legacy || named) {
        if (d->ours_mem && !target)
            return mismatch(d, ours, err);
        if (d->other_mem.s != NULL &&
            (named ? !seg_is(d->other_mem, val(d->pod[P_CONTAINER])) : target))
            return mismatch(d, d->other_mem, err);
    }
    if (d->plim != NULL) {
        bool ok;

        if (named)
            ok = seg_is(d->plim_container, val(d->pod[P_CONTAINER]));
        else if (d->ours_mem || d->other_mem.s != NULL)
            ok = seg_is(d->plim_container, d->container) ? d->ours_mem
                                                         : seg_eq(d->plim_container, d->other_mem);
        else if (legacy && seg_is(d->plim_container, d->container))
            ok = target;
        else
            ok = !(legacy && target);
        if (!ok)
            return gf_error_set(err, GF_EINVAL,
                                "%s: the container %.*s is not the pod's fractional container "
                                "(expected the container that carries the GPU fraction)",
                                d->plim->key, (int)d->plim_container.len, d->plim_container.s);
    }
    return 0;
}

static bool same_amount(const gf_amount *a, uint64_t bytes)
{
    return !a->is_portion && a->bytes == bytes;
}

/* The translated forms (admission copies gpu-memory into the request key,
 * the shorthands into limit keys) must agree with their sources. */
static int check_translations(const decoder *d, gf_error *err)
{
    const gf_kv *req = d->nv[S_REQUEST], *lim = d->nv[S_LIMIT];
    const gf_kv *const *p = d->pod;
    bool plim_ours = d->plim != NULL && seg_is(d->plim_container, d->container);
    char q[GF_QUOTE_MAX];

    if (req != NULL && p[P_MEMORY] != NULL && !same_amount(&d->req, d->memory))
        return gf_error_set(err, GF_EINVAL,
                            "NvFractions memory request (%s: \"%s\") does not match gpu-memory "
                            "annotation value (%s MiB)",
                            req->key, gf_quote(val(req), q, sizeof(q)), val(p[P_MEMORY]));
    /* a binder writes the request from gpu-fraction together with gpus.devices;
     * before that, both are a person's two answers to one question */
    if (req != NULL && p[P_FRACTION] != NULL && d->nv[S_DEVICES] == NULL)
        return gf_error_set(err, GF_EINVAL,
                            "cannot combine gpu-fraction annotation (\"%s\") with %s (\"%s\"): "
                            "both request GPU memory (expected one of them)",
                            val(p[P_FRACTION]), req->key, gf_quote(val(req), q, sizeof(q)));
    if (lim != NULL && p[P_FRACTION] != NULL && !plim_ours && p[P_FRACTION_LIMIT] == NULL)
        return gf_error_set(err, GF_EINVAL,
                            "cannot combine %s limit annotation (%s) with gpu-fraction annotation "
                            "(expected gpu-fraction.limit for a burstable fraction)",
                            d->prefix, lim->key);
    if (lim != NULL && p[P_MEMORY] != NULL && p[P_MEMORY_LIMIT] == NULL)
        return gf_error_set(err, GF_EINVAL,
                            "cannot combine %s limit annotation (%s) with gpu-memory annotation "
                            "(expected gpu-memory.limit for a burstable fraction)",
                            d->prefix, lim->key);
    if (lim != NULL && p[P_MEMORY_LIMIT] != NULL && !same_amount(&d->lim, d->memory_limit))
        return gf_error_set(err, GF_EINVAL,
                            "gpu-memory.limit annotation (\"%s\") conflicts with %s annotation "
                            "(\"%s\")",
                            val(p[P_MEMORY_LIMIT]), lim->key, gf_quote(val(lim), q, sizeof(q)));
    if (plim_ours && p[P_FRACTION_LIMIT] != NULL && d->plim_value != d->fraction_limit)
        return gf_error_set(err, GF_EINVAL,
                            "gpu-fraction.limit annotation (\"%s\") conflicts with %s annotation "
                            "(\"%s\")",
                            val(p[P_FRACTION_LIMIT]), d->plim->key, val(d->plim));
    if (plim_ours && p[P_FRACTION] != NULL && !(d->plim_value > d->fraction))
        return gf_error_set(err, GF_EINVAL, "%s: \"%s\" must be greater than gpu-fraction (\"%s\")",
                            d->plim->key, val(d->plim), val(p[P_FRACTION]));
    return 0;
}

static void portion_amount(gf_amount *a, double portion)
{
    a->is_portion = true;
    a->portion = portion;
    a->bytes = 0;
}

static void bytes_amount(gf_amount *a, uint64_t bytes)
{
    a->is_portion = false;
    a->portion = 0.0;
    a->bytes = bytes;
}

static int check_name_length(const decoder *d, gf_error *err)
{
    const char *slash = strchr(d->prefix, '/');
    size_t fixed = strlen(slash != NULL ? slash + 1 : d->prefix) + strlen(nv_suffixes[S_REQUEST]);
    size_t max = fixed < NAME_PART_MAX ? NAME_PART_MAX - fixed : 0;

    if (strlen(d->container) <= max)
        return 0;
    return gf_error_set(err, GF_ERANGE,
                        "container name %s has %zu characters, but %s<container>%s annotation "
                        "keys allow at most %zu (Kubernetes limits the name part of a key to %d); "
                        "rename the container to use a GPU fraction",
                        d->container, strlen(d->container), d->prefix, nv_suffixes[S_REQUEST], max,
                        NAME_PART_MAX);
}

static int build_spec(decoder *d, gf_pod_fraction *out, gf_error *err)
{
    gf_spec *s = &out->spec;
    bool target = ours_is_target(d);
    const gf_kv *const *p = d->pod;
    char q[GF_QUOTE_MAX];

    if (d->nv[S_REQUEST] != NULL)
        s->request = d->req, s->has_request = true;
    else if (target && p[P_FRACTION] != NULL)
        portion_amount(&s->request, d->fraction), s->has_request = true;
    else if (target && p[P_MEMORY] != NULL)
        bytes_amount(&s->request, d->memory), s->has_request = true;
    if (d->nv[S_LIMIT] != NULL)
        s->limit = d->lim, s->has_limit = true;
    else if (d->plim != NULL && seg_is(d->plim_container, d->container))
        portion_amount(&s->limit, d->plim_value), s->has_limit = true;
    else if (target && p[P_FRACTION_LIMIT] != NULL)
        portion_amount(&s->limit, d->fraction_limit), s->has_limit = true;
    else if (target && p[P_MEMORY_LIMIT] != NULL)
        bytes_amount(&s->limit, d->memory_limit), s->has_limit = true;
    s->mode = d->mode;
    if (d->nv[S_PORTION] != NULL) {
        if (d->mode != GF_MODE_SM_SHARING)
            return gf_error_set(err, GF_EINVAL,
                                "%s: \"%s\" is only allowed with %s%s%s set to sm-sharing (the "
                                "compute mode is time-slicing)",
                                d->nv[S_PORTION]->key,
                                gf_quote(val(d->nv[S_PORTION]), q, sizeof(q)), d->prefix,
                                d->container, nv_suffixes[S_MODE]);
        s->has_compute = true;
        s->compute = d->compute;
    }
    if (d->nv[S_DEVICES] != NULL)
        snprintf(s->devices, sizeof(s->devices), "%s", val(d->nv[S_DEVICES]));
    if (gf_spec_finish(s, err) < 0)
        return gf_error_wrap(
            err, "invalid fraction request for container %s (request %s, limit %s)", d->container,
            d->nv[S_REQUEST] != NULL ? d->nv[S_REQUEST]->key : "from pod-level keys",
            d->nv[S_LIMIT] != NULL ? d->nv[S_LIMIT]->key : "defaulted or pod-level");
    if (p[P_NUM_DEVICES] != NULL && d->n_devices > 0 && d->n_devices != d->num_devices)
        return gf_error_set(err, GF_EINVAL,
                            "%s lists %d devices but gpu-fraction-num-devices is \"%s\" (expected "
                            "the same number)",
                            d->nv[S_DEVICES]->key, d->n_devices, val(p[P_NUM_DEVICES]));
    out->num_devices = p[P_NUM_DEVICES] != NULL ? d->num_devices
                       : d->n_devices > 0       ? d->n_devices
                                                : 1;
    return 0;
}

int gf_annotations_decode(const gf_kv *kv, size_t n, const gf_annotation_opts *opts,
                          gf_pod_fraction *out, gf_error *err)
{
    decoder d;
    size_t i;

    memset(out, 0, sizeof(*out));
    out->num_devices = 1;
    if (opts == NULL || opts->container == NULL || opts->container[0] == '\0')
        return gf_error_set(err, GF_EINVAL, "annotations: no container to decode for");
    memset(&d, 0, sizeof(d));
    d.opts = opts;
    d.prefix = opts->prefix != NULL && opts->prefix[0] != '\0' ? opts->prefix
                                                               : GF_NVFRACTIONS_PREFIX;
    d.container = opts->container;
    d.mode = GF_MODE_TIME_SLICING;
    for (i = 0; i < n; i++) {
        if (kv[i].key != NULL && decode_key(&d, &kv[i], err) < 0)
            return -1;
    }
    if (check_pod_keys(&d, err) < 0 || check_target(&d, err) < 0)
        return -1;
    if (!d.ours_mem &&
        !(ours_is_target(&d) && (d.pod[P_FRACTION] != NULL || d.pod[P_MEMORY] != NULL)))
        return 0;
    /* pod-level forms need per-container keys written for us later */
    if (check_translations(&d, err) < 0 || (!d.ours_mem && check_name_length(&d, err) < 0))
        return -1;
    if (build_spec(&d, out, err) < 0) {
        memset(out, 0, sizeof(*out));
        out->num_devices = 1;
        return -1;
    }
    out->fractional = true;
    return 0;
}
