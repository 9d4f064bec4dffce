/* SPDX-License-Identifier: Apache-2.0 */
/* The extender's request decoders (ExtenderArgs, ExtenderBindingArgs) and
 * the watch stream framing + event parser, on arbitrary bytes. ExtenderArgs'
 * fast path must agree with the full parse on every input: the same answer,
 * the same pod, the same names. */
#include "fuzz.h"

#include "extender.h"
#include "kube.h"

static int on_line(void *cls, const char *line, size_t len, gf_error *err)
{
    json_t *root = NULL, *obj;
    const char *type;
    long code;

    (void)cls;
    FUZZ_CHECK(len > 0 && memchr(line, '\n', len) == NULL && line[len] == '\0');
    if (gf_kube_event_parse(line, len, &root, &type, &obj, &code, err) == 0) {
        FUZZ_CHECK(type != NULL && json_is_object(obj));
        FUZZ_CHECK(code == 0 || strcmp(type, "ERROR") == 0);
        json_decref(root);
    }
    return 0;
}

static void args(const uint8_t *data, size_t size)
{
    gf_ext_args a, full;
    gf_error err, full_err;
    int rc = gf_ext_args_parse((const char *)data, size, &a, &err);
    int full_rc = gf_ext_args_parse_full((const char *)data, size, &full, &full_err);

    FUZZ_CHECK(rc == full_rc);
    if (rc == 0) {
        FUZZ_CHECK(json_is_object(a.pod) && json_equal(a.pod, full.pod));
        FUZZ_CHECK(a.n == full.n && a.from_nodes == full.from_nodes);
        for (size_t i = 0; i < a.n; i++)
            FUZZ_CHECK(a.names[i] != NULL && a.names[i][0] != '\0' &&
                       strlen(a.names[i]) < GF_SCHED_NAME_MAX &&
                       strcmp(a.names[i], full.names[i]) == 0);
        gf_ext_args_free(&a);
        gf_ext_args_free(&full);
    } else {
        FUZZ_CHECK(err.msg[0] != '\0' && strcmp(err.msg, full_err.msg) == 0);
    }
}

static void bind_args(const uint8_t *data, size_t size)
{
    gf_ext_bind_args b;
    gf_error err;

    if (gf_ext_bind_args_parse((const char *)data, size, &b, &err) == 0)
        FUZZ_CHECK(b.name[0] && b.ns[0] && b.node[0]);
    else
        FUZZ_CHECK(err.msg[0] != '\0');
}

static void stream(const uint8_t *data, size_t size)
{
    gf_linebuf lb = {.max = 1u << 16};
    gf_error err;
    size_t off = 0, chunk = size ? (size_t)data[0] % 17 + 1 : 1;

    while (off < size) {
        size_t n = size - off < chunk ? size - off : chunk;
        if (gf_linebuf_feed(&lb, (const char *)data + off, n, on_line, NULL, &err) < 0)
            break;
        off += n;
    }
    gf_linebuf_free(&lb);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > (1u << 16))
        return 0;
    args(data, size);
    bind_args(data, size);
    stream(data, size);
    return 0;
}
