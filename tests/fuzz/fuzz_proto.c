/* SPDX-License-Identifier: Apache-2.0 */
/* The agent's wire protocol: decode -> encode -> decode is the identity,
 * every refusal carries a message, and a message built field by field either
 * is refused by the encoder or decodes back to itself. */
#include "fuzz.h"

#include "proto.h"

static void check_same(const gf_msg *a, const gf_msg *b)
{
    FUZZ_CHECK(strcmp(a->verb, b->verb) == 0);
    FUZZ_CHECK(a->n == b->n);
    for (int i = 0; i < a->n; i++) {
        FUZZ_CHECK(strcmp(a->kv[i].key, b->kv[i].key) == 0);
        FUZZ_CHECK(strcmp(a->kv[i].val, b->kv[i].val) == 0);
    }
}

/* m must encode, decode back to itself, and encode to the same bytes. */
static void check_roundtrip(const gf_msg *m)
{
    static char text[GF_PROTO_MAX + 1], text2[GF_PROTO_MAX + 1];
    static gf_msg back;
    gf_error err;
    int n = gf_msg_encode(m, text, sizeof(text));

    FUZZ_CHECK(n > 0 && n <= GF_PROTO_MAX);
    FUZZ_CHECK((size_t)n == strlen(text));
    err.msg[0] = '\0';
    if (gf_msg_decode(text, (size_t)n, &back, &err) < 0) {
        fprintf(stderr, "re-decode of \"%s\" failed: %s\n", text, err.msg);
        abort();
    }
    check_same(m, &back);
    FUZZ_CHECK(gf_msg_encode(&back, text2, sizeof(text2)) == n);
    FUZZ_CHECK(memcmp(text, text2, (size_t)n) == 0);
    for (int i = 0; i < m->n; i++)
        FUZZ_CHECK(gf_msg_get(&back, m->kv[i].key) == back.kv[i].val);
}

/* The datagram as received: exactly size bytes, not NUL-terminated. */
static void check_decode(const uint8_t *data, size_t size)
{
    static gf_msg m;
    char *copy = malloc(size ? size : 1);
    gf_error err;
    uint64_t v;

    FUZZ_CHECK(copy != NULL);
    memcpy(copy, data, size);
    err.msg[0] = '\0';
    if (gf_msg_decode(copy, size, &m, &err) < 0) {
        FUZZ_CHECK(err.msg[0] != '\0');
        FUZZ_CHECK(m.n == 0);
        free(copy);
        return;
    }
    free(copy);
    FUZZ_CHECK(size >= 1 && size <= GF_PROTO_MAX);
    check_roundtrip(&m);
    for (int i = 0; i < m.n; i++) {
        err.msg[0] = '\0';
        if (gf_msg_get_u64(&m, m.kv[i].key, &v, &err) < 0)
            FUZZ_CHECK(strstr(err.msg, "key \"") != NULL);
    }
}

/* Splits the input at 0xff bytes into verb, key, value, key, value... and
 * copies each into its field, possibly filling it without a NUL. */
static void check_built(const uint8_t *data, size_t size)
{
    static gf_msg m;
    static char text[GF_PROTO_MAX + 1];
    size_t start = 0, field = 0;

    memset(&m, 0, sizeof(m));
    for (size_t i = 0; i <= size; i++) {
        char *dst;
        size_t cap, n = i - start;

        if (i < size && data[i] != 0xff)
            continue;
        if (field == 0) {
            dst = m.verb, cap = sizeof(m.verb);
        } else if ((field - 1) / 2 < GF_PROTO_PAIRS) {
            size_t k = (field - 1) / 2;
            dst = field % 2 ? m.kv[k].key : m.kv[k].val;
            cap = field % 2 ? sizeof(m.kv[k].key) : sizeof(m.kv[k].val);
            m.n = (int)k + 1;
        } else {
            break;
        }
        memcpy(dst, data + start, n < cap ? n : cap);
        field++;
        start = i + 1;
    }
    if (gf_msg_encode(&m, text, sizeof(text)) < 0)
        return;
    check_roundtrip(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > GF_PROTO_MAX + 16)
        return 0;
    check_decode(data, size);
    check_built(data, size);
    return 0;
}
