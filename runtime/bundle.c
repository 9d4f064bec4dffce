/* SPDX-License-Identifier: Apache-2.0 */
/* The bundle's config.json is read completely or refused: every byte parsed
 * under jansson's strictest rules, every annotation a string the decoder sees
 * whole. What the wrapper cannot read so never reaches the real runtime: runc
 * (Go) takes some of it (\u0000, a second document after the first), and a
 * bundle handed over unread is one whose fraction nobody enforces. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "fsat.h"
#include "runtime.h"

static const char *type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER:
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

static int annotations(rt_bundle *b, gf_error *err)
{
    json_t *ann = json_object_get(b->spec, "annotations"), *v;
    char q[GF_QUOTE_MAX];
    const char *key;

    if (!ann || json_is_null(ann))
        return 0;
    if (!json_is_object(ann))
        return gf_error_set(err, GF_EINVAL, "annotations is %s, not a JSON object", type_name(ann));
    if (!(b->kv = calloc(json_object_size(ann) + 1, sizeof(*b->kv))))
        return gf_error_sys(err, "allocating annotations");
    json_object_foreach(ann, key, v)
    {
        if (!json_is_string(v))
            return gf_error_set(err, GF_EINVAL, "annotation \"%s\" is %s, not a string",
                                gf_quote(key, q, sizeof(q)), type_name(v));
        /* only with JSON_ALLOW_NUL, never set here; the decoder reads C strings */
        if (strlen(json_string_value(v)) != json_string_length(v))
            return gf_error_set(err, GF_EINVAL, "annotation \"%s\" holds a NUL character",
                                gf_quote(key, q, sizeof(q)));
        b->kv[b->n_kv].key = key;
        b->kv[b->n_kv++].value = json_string_value(v);
    }
    return 0;
}

int rt_bundle_parse(const char *text, size_t len, rt_bundle *b, gf_error *err)
{
    const char *type;
    json_error_t je;

    memset(b, 0, sizeof(*b));
    if (len > RT_SPEC_MAX)
        return gf_error_set(err, GF_ERANGE, "larger than %u MiB (%zu bytes)", RT_SPEC_MAX >> 20,
                            len);
    /* JSON has no raw NUL byte; jansson's reader would take one as the end
     * of a number and go on, reading a document no other reader agrees on */
    const char *nul = memchr(text, '\0', len);
    if (nul)
        return gf_error_set(err, GF_EINVAL, "a NUL byte at offset %zu (not JSON)",
                            (size_t)(nul - text));
    b->spec = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!b->spec)
        return gf_error_set(err, GF_EINVAL, "%s (line %d)", je.text, je.line);
    if (!json_is_object(b->spec)) {
        gf_error_set(err, GF_EINVAL, "the document is %s, not a JSON object", type_name(b->spec));
        rt_bundle_free(b);
        return -1;
    }
    if (annotations(b, err) < 0) {
        rt_bundle_free(b);
        return -1;
    }
    type = rt_spec_annotation(b->spec, "io.kubernetes.cri.container-type");
    b->sandbox = type && strcmp(type, "sandbox") == 0;
    return 0;
}

/* Reads until end of file or past RT_SPEC_MAX (the file may have grown
 * since fstat). */
static int read_bounded(int fd, char **text, size_t *len, gf_error *err)
{
    size_t cap = 64 << 10, n = 0;
    gf_cleanup_free char *buf = malloc(cap);
    char *more;
    ssize_t r;

    if (!buf)
        return gf_error_sys(err, "allocating");
    for (;;) {
        if (n == cap) {
            if (!(more = realloc(buf, cap * 2)))
                return gf_error_sys(err, "allocating");
            buf = more, cap *= 2;
        }
        r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0 || (n += (size_t)r) > RT_SPEC_MAX)
            break;
    }
    if (r < 0 || n > RT_SPEC_MAX) {
        if (r < 0)
            gf_error_sys(err, "reading it");
        else
            gf_error_set(err, GF_ERANGE, "larger than %u MiB", RT_SPEC_MAX >> 20);
        return -1;
    }
    *text = gf_steal_ptr(&buf);
    *len = n;
    return 0;
}

int rt_bundle_read(const char *path, rt_bundle *b, gf_error *err)
{
    struct stat st;
    gf_cleanup_close int fd = gf_at_file(AT_FDCWD, path, O_RDONLY, &st);
    gf_cleanup_free char *text = NULL;
    size_t len = 0;
    int rc;

    memset(b, 0, sizeof(*b));
    if (fd < 0 && errno == ELOOP)
        return gf_error_set(err, GF_EINVAL, "not a regular file (a symbolic link)");
    if (fd < 0 && errno == EINVAL)
        return gf_error_set(err, GF_EINVAL, "not a regular file");
    if (fd < 0)
        return gf_error_sys(err, "cannot be opened");
    if ((unsigned long long)st.st_size > RT_SPEC_MAX)
        rc = gf_error_set(err, GF_ERANGE, "larger than %u MiB (%lld bytes)", RT_SPEC_MAX >> 20,
                          (long long)st.st_size);
    else
        rc = read_bounded(fd, &text, &len, err);
    if (rc < 0)
        return -1;
    return rt_bundle_parse(text, len, b, err);
}

void rt_bundle_free(rt_bundle *b)
{
    free(b->kv);
    free(b->env_keys);
    b->env_keys = NULL;
    json_decref(b->spec);
    b->kv = NULL;
    b->spec = NULL;
    b->n_kv = 0;
}
