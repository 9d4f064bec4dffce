/* SPDX-License-Identifier: Apache-2.0 */
#include "proto.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "number.h"

#define MAGIC_PREFIX "gpufrac/"
#define MAGIC_PREFIX_LEN (sizeof(MAGIC_PREFIX) - 1)
#define VERB_MAX ((int)sizeof(((gf_msg *)0)->verb))
#define MSG_KEY "msg"

/* A span of the datagram: not NUL-terminated. */
typedef struct span {
    const char *p;
    size_t n;
} span;

/* Quotes a span (enough of it for gf_quote to show its cut). */
static const char *quote_span(span s, char *buf, size_t len)
{
    char tmp[GF_QUOTE_INPUT_MAX + 2];
    size_t n = s.n < GF_QUOTE_INPUT_MAX + 1 ? s.n : GF_QUOTE_INPUT_MAX + 1;

    memcpy(tmp, s.p, n);
    tmp[n] = '\0';
    return gf_quote(tmp, buf, len);
}

static int is_ident_char(char c)
{
    return (c >= 'a' && c <= 'z') || c == '_';
}

/* True when s is 1 to max of [a-z_]. */
static int is_ident(span s, size_t max)
{
    if (s.n == 0 || s.n > max)
        return 0;
    for (size_t i = 0; i < s.n; i++) {
        if (!is_ident_char(s.p[i]))
            return 0;
    }
    return 1;
}

static int is_control(unsigned char c)
{
    return c < 0x20 || c == 0x7f;
}

static int span_is(span s, const char *lit)
{
    return s.n == strlen(lit) && memcmp(s.p, lit, s.n) == 0;
}

/* The token at *pos (after any run of spaces); advances *pos past it. */
static span next_token(const char *buf, size_t len, size_t *pos)
{
    span t;

    while (*pos < len && buf[*pos] == ' ')
        (*pos)++;
    t.p = buf + *pos;
    t.n = 0;
    while (*pos < len && buf[*pos] != ' ')
        (*pos)++, t.n++;
    return t;
}

static int check_bytes(const char *buf, size_t len, gf_error *err)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)buf[i];

        if (c == '\0')
            return gf_error_set(err, GF_EINVAL, "NUL byte at offset %zu of the request", i);
        if (is_control(c))
            return gf_error_set(err, GF_EINVAL, "control byte 0x%02x at offset %zu of the request",
                                c, i);
    }
    return 0;
}

static int check_header(const char *buf, size_t len, size_t *pos, gf_error *err)
{
    char q[GF_QUOTE_MAX];
    span s = {buf, len < 16 ? len : 16};

    if (len < MAGIC_PREFIX_LEN || memcmp(buf, MAGIC_PREFIX, MAGIC_PREFIX_LEN) != 0)
        return gf_error_set(err, GF_EINVAL, "not a gpufrac request: it starts with \"%s\"",
                            quote_span(s, q, sizeof(q)));
    if (check_bytes(buf, len, err) < 0)
        return -1;
    *pos = MAGIC_PREFIX_LEN;
    s.p = buf + *pos;
    for (s.n = 0; *pos < len && buf[*pos] != ' '; (*pos)++)
        s.n++;
    if (!span_is(s, &GF_PROTO_MAGIC[MAGIC_PREFIX_LEN]))
        return gf_error_set(err, GF_EINVAL,
                            "protocol version \"%s\" is not supported (this agent speaks %s)",
                            quote_span(s, q, sizeof(q)), GF_PROTO_MAGIC);
    return 0;
}

static int decode_verb(const char *buf, size_t len, size_t *pos, gf_msg *out, gf_error *err)
{
    char q[GF_QUOTE_MAX];
    span v = next_token(buf, len, pos);

    if (v.n == 0)
        return gf_error_set(err, GF_EINVAL, "request has no verb after \"%s\"", GF_PROTO_MAGIC);
    if (!is_ident(v, VERB_MAX - 1))
        return gf_error_set(err, GF_EINVAL, "verb \"%s\" is not 1 to %d of the letters a-z and _",
                            quote_span(v, q, sizeof(q)), VERB_MAX - 1);
    memcpy(out->verb, v.p, v.n);
    out->verb[v.n] = '\0';
    return 0;
}

/* Splits pair at its first '=' into key and value, checking both. */
static int split_pair(span pair, span *key, span *val, gf_error *err)
{
    char q[GF_QUOTE_MAX], q2[GF_QUOTE_MAX];
    const char *eq = memchr(pair.p, '=', pair.n);

    if (eq == NULL)
        return gf_error_set(err, GF_EINVAL, "pair \"%s\" has no '=' (expected key=value)",
                            quote_span(pair, q, sizeof(q)));
    key->p = pair.p;
    key->n = (size_t)(eq - pair.p);
    val->p = eq + 1;
    val->n = pair.n - key->n - 1;
    if (!is_ident(*key, GF_PROTO_KEY_MAX - 1))
        return gf_error_set(err, GF_EINVAL, "key \"%s\" is not 1 to %d of the letters a-z and _",
                            quote_span(*key, q, sizeof(q)), GF_PROTO_KEY_MAX - 1);
    if (val->n > GF_PROTO_VAL_MAX - 1)
        return gf_error_set(err, GF_ERANGE,
                            "value of key \"%s\" is %zu bytes, longer than the %d accepted: \"%s\"",
                            quote_span(*key, q, sizeof(q)), val->n, GF_PROTO_VAL_MAX - 1,
                            quote_span(*val, q2, sizeof(q2)));
    return 0;
}

static int store_pair(gf_msg *out, span key, span val, gf_error *err)
{
    char q[GF_QUOTE_MAX];

    for (int i = 0; i < out->n; i++) {
        if (span_is(key, out->kv[i].key))
            return gf_error_set(err, GF_EINVAL, "key \"%s\" appears more than once",
                                quote_span(key, q, sizeof(q)));
    }
    if (out->n >= GF_PROTO_PAIRS)
        return gf_error_set(err, GF_ENOSPACE, "more than %d key=value pairs (at key \"%s\")",
                            GF_PROTO_PAIRS, quote_span(key, q, sizeof(q)));
    memcpy(out->kv[out->n].key, key.p, key.n);
    out->kv[out->n].key[key.n] = '\0';
    memcpy(out->kv[out->n].val, val.p, val.n);
    out->kv[out->n].val[val.n] = '\0';
    out->n++;
    return 0;
}

static int decode_pairs(const char *buf, size_t len, size_t *pos, gf_msg *out, gf_error *err)
{
    static const char msg_eq[] = MSG_KEY "=";

    for (;;) {
        span pair = next_token(buf, len, pos), key, val;

        if (pair.n == 0)
            return 0;
        if (pair.n >= sizeof(msg_eq) - 1 && memcmp(pair.p, msg_eq, sizeof(msg_eq) - 1) == 0) {
            pair.n = (size_t)(buf + len - pair.p); /* msg= takes the rest of the line */
            *pos = len;
        }
        if (split_pair(pair, &key, &val, err) < 0 || store_pair(out, key, val, err) < 0)
            return -1;
    }
}

int gf_msg_decode(const char *buf, size_t len, gf_msg *out, gf_error *err)
{
    size_t pos = 0;

    gf_msg_init(out, "");
    if (buf == NULL || len == 0)
        return gf_error_set(err, GF_EINVAL, "empty request");
    if (len > GF_PROTO_MAX)
        return gf_error_set(err, GF_ERANGE, "request of %zu bytes is longer than the %d accepted",
                            len, GF_PROTO_MAX);
    if (buf[len - 1] == '\n')
        len--;
    if (check_header(buf, len, &pos, err) < 0 || decode_verb(buf, len, &pos, out, err) < 0 ||
        decode_pairs(buf, len, &pos, out, err) < 0) {
        gf_msg_init(out, "");
        return -1;
    }
    return 0;
}

/* Length of a NUL-terminated field of at most max bytes, or -1 without NUL. */
static int field_len(const char *s, size_t max)
{
    size_t n = strnlen(s, max);

    return n < max ? (int)n : -1;
}

/* True when v fits a value: no control bytes, spaces only when allowed. */
static int value_ok(const char *v, int spaces_ok)
{
    int n = field_len(v, GF_PROTO_VAL_MAX);

    if (n < 0)
        return 0;
    for (int i = 0; i < n; i++) {
        if (is_control((unsigned char)v[i]) || (v[i] == ' ' && !spaces_ok))
            return 0;
    }
    return 1;
}

static int key_ok(const char *k)
{
    int n = field_len(k, GF_PROTO_KEY_MAX);
    span s = {k, n < 0 ? 0 : (size_t)n};

    return n > 0 && is_ident(s, GF_PROTO_KEY_MAX - 1);
}

/* True when m would decode back to itself. */
static int msg_encodable(const gf_msg *m)
{
    int vn = field_len(m->verb, sizeof(m->verb));
    span verb = {m->verb, vn < 0 ? 0 : (size_t)vn};

    if (vn <= 0 || !is_ident(verb, sizeof(m->verb) - 1) || m->n < 0 || m->n > GF_PROTO_PAIRS)
        return 0;
    for (int i = 0; i < m->n; i++) {
        int is_msg = strcmp(m->kv[i].key, MSG_KEY) == 0;

        if (!key_ok(m->kv[i].key) || (is_msg && i != m->n - 1) || !value_ok(m->kv[i].val, is_msg))
            return 0;
        for (int j = 0; j < i; j++) {
            if (strcmp(m->kv[i].key, m->kv[j].key) == 0)
                return 0;
        }
    }
    return 1;
}

/* Appends s at *off; 0, or -1 when it does not fit before end. */
static int append(char *buf, size_t end, size_t *off, const char *s)
{
    size_t n = strlen(s);

    if (n > end - *off)
        return -1;
    memcpy(buf + *off, s, n);
    *off += n;
    return 0;
}

int gf_msg_encode(const gf_msg *m, char *buf, size_t len)
{
    size_t off = 0, end;

    if (m == NULL || buf == NULL || len == 0 || !msg_encodable(m))
        return -1;
    end = len - 1 < GF_PROTO_MAX ? len - 1 : GF_PROTO_MAX; /* room for the NUL */
    if (append(buf, end, &off, GF_PROTO_MAGIC " ") < 0 || append(buf, end, &off, m->verb) < 0)
        return -1;
    for (int i = 0; i < m->n; i++) {
        if (append(buf, end, &off, " ") < 0 || append(buf, end, &off, m->kv[i].key) < 0 ||
            append(buf, end, &off, "=") < 0 || append(buf, end, &off, m->kv[i].val) < 0)
            return -1;
    }
    buf[off] = '\0';
    return (int)off;
}

void gf_msg_init(gf_msg *m, const char *verb)
{
    size_t n;

    if (m == NULL)
        return;
    memset(m, 0, sizeof(*m));
    if (verb == NULL)
        return;
    n = strnlen(verb, sizeof(m->verb) - 1);
    memcpy(m->verb, verb, n);
}

int gf_msg_add(gf_msg *m, const char *key, const char *val)
{
    int vn;

    if (m == NULL || key == NULL || val == NULL || m->n < 0 || m->n >= GF_PROTO_PAIRS)
        return -1;
    if (!key_ok(key) || !value_ok(val, strcmp(key, MSG_KEY) == 0) || gf_msg_get(m, key) != NULL)
        return -1;
    vn = field_len(val, GF_PROTO_VAL_MAX);
    memcpy(m->kv[m->n].key, key, strlen(key) + 1);
    memcpy(m->kv[m->n].val, val, (size_t)vn + 1);
    m->n++;
    return 0;
}

int gf_msg_add_u64(gf_msg *m, const char *key, uint64_t v)
{
    char text[24];

    snprintf(text, sizeof(text), "%" PRIu64, v);
    return gf_msg_add(m, key, text);
}

const char *gf_msg_get(const gf_msg *m, const char *key)
{
    if (m == NULL || key == NULL)
        return NULL;
    for (int i = 0; i < m->n && i < GF_PROTO_PAIRS; i++) {
        if (strncmp(m->kv[i].key, key, sizeof(m->kv[i].key)) == 0)
            return m->kv[i].val;
    }
    return NULL;
}

int gf_msg_get_u64(const gf_msg *m, const char *key, uint64_t *v, gf_error *err)
{
    char qk[GF_QUOTE_MAX], qv[GF_QUOTE_MAX];
    const char *s = gf_msg_get(m, key);
    int rc;

    if (s == NULL)
        return gf_error_set(err, GF_ENOTFOUND, "missing key \"%s\"", gf_quote(key, qk, sizeof(qk)));
    rc = gf_parse_udec(s, UINT64_MAX, v);
    if (rc == 0)
        return 0;
    gf_quote(key, qk, sizeof(qk));
    gf_quote(s, qv, sizeof(qv));
    if (rc == GF_NUMBER_RANGE)
        return gf_error_set(err, GF_ERANGE, "key \"%s\": \"%s\" is larger than %" PRIu64, qk, qv,
                            UINT64_MAX);
    return gf_error_set(err, GF_EINVAL, "key \"%s\": \"%s\" is not an unsigned decimal number", qk,
                        qv);
}
