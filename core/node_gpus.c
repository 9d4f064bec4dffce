/* SPDX-License-Identifier: Apache-2.0 */
/* The node GPU-inventory annotation's writer and its bounded reader
 * (node_gpus.h); the reader refuses duplicate keys, duplicate GPUs and more
 * than GF_NODE_GPUS_MAX entries. */
#include "node_gpus.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#define ANN GF_NODE_GPUS_ANNOTATION

char *gf_node_gpus_format(const gf_node_gpu *gpus, size_t n)
{
    json_t *list = json_array();
    char *s;

    for (size_t g = 0; g < n; g++)
        json_array_append_new(list, json_pack("{s:s, s:i, s:I}", "uuid", gpus[g].id, "index",
                                              gpus[g].index, "memory", (json_int_t)gpus[g].memory));
    s = json_dumps(list, JSON_COMPACT);
    json_decref(list);
    return s;
}

static int gpu_entry(const json_t *e, size_t i, const char *node, gf_node_gpu *g, gf_error *err)
{
    const json_t *uuid = json_object_get(e, "uuid"), *idx = json_object_get(e, "index");
    const json_t *mem = json_object_get(e, "memory");

    if (!json_is_object(e))
        return gf_error_set(err, GF_EINVAL, ANN ": entry %zu is not an object", i);
    if (!json_is_integer(idx) || json_integer_value(idx) < 0 || json_integer_value(idx) > 9999)
        return gf_error_set(err, GF_EINVAL,
                            ANN ": entry %zu: \"index\" must be an integer "
                                "0..9999",
                            i);
    if (!json_is_integer(mem) || json_integer_value(mem) <= 0)
        return gf_error_set(err, GF_EINVAL,
                            ANN ": entry %zu: \"memory\" must be an integer "
                                "number of bytes > 0",
                            i);
    g->index = (int)json_integer_value(idx);
    g->memory = (uint64_t)json_integer_value(mem);
    if (uuid != NULL && !json_is_null(uuid)) {
        if (!json_is_string(uuid) || json_string_length(uuid) == 0 ||
            json_string_length(uuid) >= sizeof(g->id) || strchr(json_string_value(uuid), ','))
            return gf_error_set(err, GF_EINVAL,
                                ANN ": entry %zu: \"uuid\" must be a non-empty "
                                    "string without commas",
                                i);
        snprintf(g->id, sizeof(g->id), "%s", json_string_value(uuid));
        g->has_uuid = true;
    } else {
        snprintf(g->id, sizeof(g->id), "%s/gpu%d", node, g->index);
    }
    return 0;
}

static int unique_gpus(const gf_node_gpu *gpus, size_t n, gf_error *err)
{
    size_t i, j;

    for (i = 0; i < n; i++)
        for (j = 0; j < i; j++)
            if (gpus[i].index == gpus[j].index || strcmp(gpus[i].id, gpus[j].id) == 0)
                return gf_error_set(err, GF_EINVAL,
                                    ANN ": entries %zu and %zu name the same "
                                        "GPU (%s)",
                                    j, i, gpus[i].id);
    return 0;
}

int gf_node_gpus_parse(const char *value, const char *node, gf_node_gpu *gpus, size_t *n,
                       gf_error *err)
{
    json_error_t je;
    json_t *list = json_loads(value, JSON_REJECT_DUPLICATES, &je);
    const json_t *e;
    size_t i;
    int rc = -1;

    *n = 0;
    if (list == NULL) {
        gf_error_set(err, GF_EINVAL, ANN ": not JSON (%s at line %d, column %d)", je.text, je.line,
                     je.column);
        goto out;
    }
    if (!json_is_array(list) || json_array_size(list) > GF_NODE_GPUS_MAX) {
        gf_error_set(err, GF_EINVAL, ANN ": must be a list of at most %d GPU objects",
                     GF_NODE_GPUS_MAX);
        goto out;
    }
    json_array_foreach(list, i, e)
    {
        if (gpu_entry(e, i, node, &gpus[i], err) < 0)
            goto out;
        *n = i + 1;
    }
    rc = unique_gpus(gpus, *n, err);
out:
    if (rc < 0)
        *n = 0;
    json_decref(list);
    return rc;
}
