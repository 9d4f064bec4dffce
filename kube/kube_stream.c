/* SPDX-License-Identifier: Apache-2.0 */
/* Watch stream framing and event lines (no libcurl: fuzzed on its own). */
#include <stdlib.h>
#include <string.h>

#include "kube.h"

#define LINE_MAX_BYTES (64u << 20)

int gf_linebuf_feed(gf_linebuf *lb, const char *data, size_t n, gf_line_fn fn, void *cls,
                    gf_error *err)
{
    const char *nl;
    size_t take, cap;
    char *grown;

    while (n > 0) {
        nl = memchr(data, '\n', n);
        take = nl ? (size_t)(nl - data) : n;
        if (lb->len + take + 1 > (lb->max ? lb->max : LINE_MAX_BYTES))
            return gf_error_set(err, GF_ERANGE, "a watch event is longer than %zu bytes",
                                lb->max ? lb->max : (size_t)LINE_MAX_BYTES);
        if (lb->len + take + 1 > lb->cap) {
            for (cap = lb->cap ? lb->cap : 4096; cap < lb->len + take + 1;)
                cap *= 2;
            if (!(grown = realloc(lb->buf, cap)))
                return gf_error_set(err, GF_ENOSPACE, "out of memory buffering a watch event");
            lb->buf = grown;
            lb->cap = cap;
        }
        memcpy(lb->buf + lb->len, data, take);
        lb->len += take;
        lb->buf[lb->len] = '\0';
        if (!nl)
            return 0;
        data += take + 1;
        n -= take + 1;
        if (lb->len > 0 && fn(cls, lb->buf, lb->len, err) < 0)
            return -1;
        lb->len = 0;
    }
    return 0;
}

void gf_linebuf_free(gf_linebuf *lb)
{
    free(lb->buf);
    memset(lb, 0, sizeof(*lb));
}

int gf_kube_event_parse(const char *line, size_t len, json_t **root, const char **type,
                        json_t **object, long *code, gf_error *err)
{
    json_error_t je;
    json_t *c;

    *code = 0;
    *root = gf_kube_json_load(line, len, &je);
    if (!*root)
        return gf_error_set(err, GF_EINVAL, "watch event is not JSON: %s", je.text);
    *type = json_string_value(json_object_get(*root, "type"));
    *object = json_object_get(*root, "object");
    if (!*type || !json_is_object(*object)) {
        json_decref(*root);
        *root = NULL;
        return gf_error_set(err, GF_EINVAL, "watch event without type or object");
    }
    c = json_object_get(*object, "code");
    if (strcmp(*type, "ERROR") == 0 && json_is_integer(c))
        *code = (long)json_integer_value(c);
    return 0;
}
