/* SPDX-License-Identifier: Apache-2.0 */
/* JSON from the API server as the cache reads it. Any string in an object
 * can be a tenant's (an annotation, a termination message), and Kubernetes
 * lets a NUL byte through as \u0000: jansson refuses such a document, so one
 * pod would stop a watch and every re-list after it. Such strings are kept,
 * with each NUL written as U+FFFD, so no decoder ever reads a shorter C
 * string than the value (a request "1Gi\u0000x" is not "1Gi"): they fail
 * every check that expects a clean value, naming it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube.h"

static const char REPLACEMENT[] = "\xef\xbf\xbd"; /* U+FFFD in UTF-8 */

static json_t *clean_string(const json_t *s)
{
    const char *v = json_string_value(s);
    size_t n = json_string_length(s), out = 0;
    char *buf = malloc(n * 3 + 1);
    json_t *r;

    if (!buf)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        if (v[i] == '\0') {
            memcpy(buf + out, REPLACEMENT, 3);
            out += 3;
        } else {
            buf[out++] = v[i];
        }
    }
    r = json_stringn(buf, out);
    free(buf);
    return r;
}

static int scrub(json_t *j);

static int scrub_object(json_t *o)
{
    const char *key;
    json_t *v, *c;

    json_object_foreach(o, key, v)
    {
        if (json_is_string(v) && strlen(json_string_value(v)) != json_string_length(v)) {
            if (!(c = clean_string(v)) || json_object_set_new(o, key, c) < 0)
                return -1;
        } else if (scrub(v) < 0) {
            return -1;
        }
    }
    return 0;
}

static int scrub(json_t *j)
{
    size_t i;
    json_t *v, *c;

    if (json_is_object(j))
        return scrub_object(j);
    if (!json_is_array(j))
        return 0;
    json_array_foreach(j, i, v)
    {
        if (json_is_string(v) && strlen(json_string_value(v)) != json_string_length(v)) {
            if (!(c = clean_string(v)) || json_array_set_new(j, i, c) < 0)
                return -1;
        } else if (scrub(v) < 0) {
            return -1;
        }
    }
    return 0;
}

json_t *gf_kube_json_load(const char *text, size_t len, json_error_t *je)
{
    json_t *root;

    /* the common case costs one scan: no escaped NUL, the strict parser */
    if (!memmem(text, len, "\\u0000", 6))
        return json_loadb(text, len, 0, je);
    root = json_loadb(text, len, JSON_ALLOW_NUL, je);
    if (root && scrub(root) < 0) {
        json_decref(root);
        root = NULL;
        snprintf(je->text, sizeof(je->text), "out of memory");
    }
    return root;
}
