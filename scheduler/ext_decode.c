/* SPDX-License-Identifier: Apache-2.0 */
/* Decoding of the extender's request bodies. Keys are matched as Go's
 * encoding/json does: exact first, then case-insensitively. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "extender.h"

static json_t *get_ci(const json_t *obj, const char *key)
{
    const char *k;
    json_t *v;

    if ((v = json_object_get(obj, key)))
        return v;
    json_object_foreach((json_t *)obj, k, v)
    {
        if (strcasecmp(k, key) == 0)
            return v;
    }
    return NULL;
}

static json_t *load(const char *body, size_t len, const char *what, gf_error *err)
{
    json_error_t je;
    json_t *root;

    if (len > GF_EXT_BODY_MAX) {
        gf_error_set(err, GF_ERANGE, "%s: body of %zu bytes is over the %u byte limit", what, len,
                     GF_EXT_BODY_MAX);
        return NULL;
    }
    root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        gf_error_set(err, GF_EINVAL, "%s: not JSON (%s at line %d column %d)", what, je.text,
                     je.line, je.column);
        return NULL;
    }
    if (!json_is_object(root)) {
        json_decref(root);
        gf_error_set(err, GF_EINVAL, "%s: expected a JSON object", what);
        return NULL;
    }
    return root;
}

/* a->n = n and room for n names, n within the limit. */
static int alloc_names(gf_ext_args *a, size_t n, gf_error *err)
{
    a->n = n;
    if (a->n > GF_EXT_NODES_MAX)
        return gf_error_set(err, GF_ERANGE, "ExtenderArgs: %zu nodes, at most %d accepted", a->n,
                            GF_EXT_NODES_MAX);
    a->names = calloc(a->n ? a->n : 1, sizeof(*a->names));
    if (!a->names)
        return gf_error_set(err, GF_ENOSPACE, "out of memory");
    return 0;
}

static int names_from_array(gf_ext_args *a, json_t *arr, gf_error *err)
{
    size_t i;
    json_t *v;

    if (alloc_names(a, json_array_size(arr), err) < 0)
        return -1;
    json_array_foreach(arr, i, v)
    {
        if (!json_is_string(v) || json_string_length(v) == 0 ||
            json_string_length(v) >= GF_SCHED_NAME_MAX)
            return gf_error_set(err, GF_EINVAL, "ExtenderArgs: NodeNames[%zu] is not a node name",
                                i);
        a->names[i] = json_string_value(v);
    }
    return 0;
}

static int names_from_list(gf_ext_args *a, json_t *list, gf_error *err)
{
    json_t *items = json_is_object(list) ? get_ci(list, "items") : NULL;
    json_t *v, *name;
    size_t i;

    if (!json_is_array(items) && !json_is_null(items) && items)
        return gf_error_set(err, GF_EINVAL, "ExtenderArgs: Nodes.items is not a list");
    a->from_nodes = true;
    a->items = items;
    if (alloc_names(a, json_array_size(items), err) < 0)
        return -1;
    json_array_foreach(items, i, v)
    {
        name = json_object_get(json_object_get(v, "metadata"), "name");
        if (!json_is_string(name) || json_string_length(name) == 0 ||
            json_string_length(name) >= GF_SCHED_NAME_MAX)
            return gf_error_set(err, GF_EINVAL,
                                "ExtenderArgs: Nodes.items[%zu] has no metadata.name", i);
        a->names[i] = json_string_value(name);
    }
    return 0;
}

static int pod_of(gf_ext_args *out, gf_error *err)
{
    out->pod = get_ci(out->root, "Pod");
    if (!json_is_object(out->pod))
        return gf_error_set(err, GF_EINVAL, "ExtenderArgs: \"Pod\" is missing or not an object");
    return 0;
}

/* The names the span holds, copied NUL-terminated into one buffer. */
static int names_from_span(gf_ext_args *a, const gf_ext_names_span *sp, gf_error *err)
{
    const char *p = sp->start + 1, *q;
    char *dst;
    size_t i = 0;

    if (alloc_names(a, sp->n, err) < 0)
        return -1;
    if (!(a->name_buf = dst = malloc((size_t)(sp->end - sp->start))))
        return gf_error_set(err, GF_ENOSPACE, "out of memory");
    while (i < sp->n) {
        p = (const char *)memchr(p, '"', (size_t)(sp->end - p)) + 1;
        q = memchr(p, '"', (size_t)(sp->end - p));
        memcpy(dst, p, (size_t)(q - p));
        dst[q - p] = '\0';
        a->names[i++] = dst;
        dst += q - p + 1;
        p = q + 1;
    }
    return 0;
}

/* The body with the span's array replaced by null, parsed in full. */
static int parse_fast(const char *body, size_t len, const gf_ext_names_span *sp, gf_ext_args *out,
                      gf_error *err)
{
    size_t head = (size_t)(sp->start - body), tail = len - (size_t)(sp->end - body);
    char *rest = malloc(head + 4 + tail);

    if (!rest)
        return gf_error_set(err, GF_ENOSPACE, "out of memory");
    memcpy(rest, body, head);
    memcpy(rest + head, "null", 4);
    memcpy(rest + head + 4, sp->end, tail);
    out->root = load(rest, head + 4 + tail, "ExtenderArgs", err);
    free(rest);
    if (!out->root || pod_of(out, err) < 0 || names_from_span(out, sp, err) < 0) {
        gf_ext_args_free(out);
        return -1;
    }
    return 0;
}

int gf_ext_args_parse(const char *body, size_t len, gf_ext_args *out, gf_error *err)
{
    gf_ext_names_span sp;

    memset(out, 0, sizeof(*out));
    if (len <= GF_EXT_BODY_MAX && gf_ext_names_scan(body, len, &sp) &&
        parse_fast(body, len, &sp, out, err) == 0)
        return 0;
    /* the full parse decides, and names what is wrong where */
    return gf_ext_args_parse_full(body, len, out, err);
}

int gf_ext_args_parse_full(const char *body, size_t len, gf_ext_args *out, gf_error *err)
{
    json_t *names, *nodes;

    memset(out, 0, sizeof(*out));
    if (!(out->root = load(body, len, "ExtenderArgs", err)))
        return -1;
    if (pod_of(out, err) < 0)
        goto fail;
    names = get_ci(out->root, "NodeNames");
    nodes = get_ci(out->root, "Nodes");
    if (json_is_array(names)) {
        if (names_from_array(out, names, err) < 0)
            goto fail;
    } else if (names && !json_is_null(names)) {
        gf_error_set(err, GF_EINVAL, "ExtenderArgs: \"NodeNames\" is not a list of strings");
        goto fail;
    } else if (nodes && !json_is_null(nodes)) {
        if (names_from_list(out, nodes, err) < 0)
            goto fail;
    } else {
        gf_error_set(err, GF_EINVAL,
                     "ExtenderArgs: neither \"NodeNames\" nor \"Nodes\" given (configure the "
                     "extender with nodeCacheCapable: true)");
        goto fail;
    }
    return 0;
fail:
    gf_ext_args_free(out);
    return -1;
}

void gf_ext_args_free(gf_ext_args *a)
{
    free(a->names);
    free(a->name_buf);
    json_decref(a->root);
    memset(a, 0, sizeof(*a));
}

static int field(json_t *root, const char *key, char *dst, size_t cap, bool required, gf_error *err)
{
    json_t *v = get_ci(root, key);

    dst[0] = '\0';
    if (!v || json_is_null(v)) {
        if (required)
            return gf_error_set(err, GF_EINVAL, "ExtenderBindingArgs: \"%s\" is missing", key);
        return 0;
    }
    if (!json_is_string(v))
        return gf_error_set(err, GF_EINVAL, "ExtenderBindingArgs: \"%s\" is not a string", key);
    if (json_string_length(v) >= cap || strlen(json_string_value(v)) != json_string_length(v))
        return gf_error_set(err, GF_EINVAL, "ExtenderBindingArgs: \"%s\" is too long or has NUL",
                            key);
    if (required && json_string_length(v) == 0)
        return gf_error_set(err, GF_EINVAL, "ExtenderBindingArgs: \"%s\" is empty", key);
    memcpy(dst, json_string_value(v), json_string_length(v) + 1);
    return 0;
}

int gf_ext_bind_args_parse(const char *body, size_t len, gf_ext_bind_args *out, gf_error *err)
{
    json_t *root = load(body, len, "ExtenderBindingArgs", err);
    int rc = -1;

    memset(out, 0, sizeof(*out));
    if (!root)
        return -1;
    if (field(root, "PodName", out->name, sizeof(out->name), true, err) < 0 ||
        field(root, "PodNamespace", out->ns, sizeof(out->ns), true, err) < 0 ||
        field(root, "PodUID", out->uid, sizeof(out->uid), false, err) < 0 ||
        field(root, "Node", out->node, sizeof(out->node), true, err) < 0)
        goto out;
    rc = 0;
out:
    json_decref(root);
    return rc;
}
