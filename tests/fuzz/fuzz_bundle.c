/* SPDX-License-Identifier: Apache-2.0 */
/* A whole config.json, as gpufrac-runtime's create reads it up to admission
 * (rt_bundle_parse, rt_bundle_decode), under each setting of nvfractions
 * and each answer of the pod's first-container claim. The bundle is refused
 * with a message, or its fraction is exactly what the annotations ask (read
 * again here by a reader of this file's own and decoded independently), or
 * it is not fractional and no annotation names the container. */
#include "fuzz.h"

#include "runtime.h"

#define FALLBACK "ctr-id" /* the container id create would fall back to */
#define DEPTH_MAX 4096    /* deeper than jansson's own bound */
#define KV_MAX 16384
#define INPUT_MAX (64 << 10) /* config.json files of a realistic size */

/* ---- an independent strict JSON reader: top-level annotations only ------ */
typedef struct reader {
    const char *p, *end;
    char *arena; /* decoded strings */
    size_t used, cap;
    gf_kv kv[KV_MAX];
    size_t n;
    bool has_annotations;
} reader;

static void ws(reader *r)
{
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r'))
        r->p++;
}

static bool lit(reader *r, const char *s)
{
    size_t n = strlen(s);

    if ((size_t)(r->end - r->p) < n || memcmp(r->p, s, n) != 0)
        return false;
    r->p += n;
    return true;
}

static bool put(reader *r, uint32_t cp)
{
    char b[4];
    size_t n = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;

    if (r->used + n >= r->cap)
        return false;
    if (n == 1)
        b[0] = (char)cp;
    else {
        for (size_t i = n - 1; i > 0; i--, cp >>= 6)
            b[i] = (char)(0x80 | (cp & 0x3f));
        b[0] = (char)((n == 2 ? 0xc0 : n == 3 ? 0xe0 : 0xf0) | cp);
    }
    memcpy(r->arena + r->used, b, n);
    r->used += n;
    return true;
}

static int hex4(reader *r)
{
    int v = 0;

    if (r->end - r->p < 4)
        return -1;
    for (int i = 0; i < 4; i++) {
        char c = *r->p++;
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

static bool escape(reader *r)
{
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    const char *e;
    int u, lo;

    if (r->p >= r->end)
        return false;
    if (*r->p != 'u') {
        e = strchr(from, *r->p++);
        return e && *e && put(r, (uint8_t)to[e - from]);
    }
    r->p++;
    if ((u = hex4(r)) <= 0 || (u >= 0xdc00 && u < 0xe000))
        return false; /* \u0000 is never a C string's */
    if (u < 0xd800 || u >= 0xdc00)
        return put(r, (uint32_t)u);
    if (!lit(r, "\\u") || (lo = hex4(r)) < 0xdc00 || lo >= 0xe000)
        return false;
    return put(r, 0x10000 + (((uint32_t)u - 0xd800) << 10) + ((uint32_t)lo - 0xdc00));
}

/* One UTF-8 sequence, well formed (no overlongs, no surrogates). */
static bool utf8(reader *r)
{
    uint8_t c = (uint8_t)*r->p;
    size_t n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
    uint32_t cp = c & (n == 2 ? 0x1f : n == 3 ? 0x0f : 0x07);

    if (c < 0xc2 || c > 0xf4 || (size_t)(r->end - r->p) < n)
        return false;
    for (size_t i = 1; i < n; i++) {
        if (((uint8_t)r->p[i] & 0xc0) != 0x80)
            return false;
        cp = (cp << 6) | ((uint8_t)r->p[i] & 0x3f);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp < 0xe000))
        return false;
    r->p += n;
    return put(r, cp);
}

/* A string into the arena; *out NULL-terminated. */
static bool string(reader *r, const char **out)
{
    size_t start = r->used;

    if (r->p >= r->end || *r->p++ != '"')
        return false;
    while (r->p < r->end && *r->p != '"') {
        uint8_t c = (uint8_t)*r->p;
        if (c < 0x20)
            return false;
        if (c == '\\') {
            r->p++;
            if (!escape(r))
                return false;
        } else if (c >= 0x80) {
            if (!utf8(r))
                return false;
        } else if (!put(r, c)) {
            return false;
        } else {
            r->p++;
        }
    }
    if (r->p >= r->end || r->used >= r->cap)
        return false;
    r->p++;
    r->arena[r->used++] = '\0';
    *out = r->arena + start;
    return true;
}

static bool digits(reader *r)
{
    const char *s = r->p;

    while (r->p < r->end && *r->p >= '0' && *r->p <= '9')
        r->p++;
    return r->p > s;
}

static bool number(reader *r)
{
    if (r->p < r->end && *r->p == '-')
        r->p++;
    if (r->p < r->end && *r->p == '0')
        r->p++;
    else if (!digits(r))
        return false;
    if (r->p < r->end && *r->p == '.' && (r->p++, !digits(r)))
        return false;
    if (r->p < r->end && (*r->p == 'e' || *r->p == 'E')) {
        r->p++;
        if (r->p < r->end && (*r->p == '+' || *r->p == '-'))
            r->p++;
        return digits(r);
    }
    return true;
}

static bool value(reader *r, int depth);

/* An object or array after its opening bracket; members go to kv when
 * annotations (then every value must be a string). */
static bool members(reader *r, int depth, char close, bool annotations)
{
    const char *k, *v;

    ws(r);
    if (r->p < r->end && *r->p == close)
        return r->p++, true;
    for (;;) {
        ws(r);
        if (close == '}') {
            if (!string(r, &k))
                return false;
            ws(r);
            if (r->p >= r->end || *r->p++ != ':')
                return false;
            ws(r);
            if (annotations) {
                if (!string(r, &v) || r->n == KV_MAX)
                    return false;
                r->kv[r->n].key = k;
                r->kv[r->n++].value = v;
            } else if (!value(r, depth + 1)) {
                return false;
            }
        } else if (!value(r, depth + 1)) {
            return false;
        }
        ws(r);
        if (r->p < r->end && *r->p == ',') {
            r->p++;
            continue;
        }
        return r->p < r->end && *r->p++ == close;
    }
}

static bool value(reader *r, int depth)
{
    const char *s;

    if (depth > DEPTH_MAX || r->p >= r->end)
        return false;
    switch (*r->p) {
    case '{': r->p++; return members(r, depth, '}', false);
    case '[': r->p++; return members(r, depth, ']', false);
    case '"': return string(r, &s);
    case 't': return lit(r, "true");
    case 'f': return lit(r, "false");
    case 'n': return lit(r, "null");
    default: return number(r);
    }
}

/* The document: one object; its "annotations" null or an object of strings. */
static bool read_doc(reader *r)
{
    const char *k;

    ws(r);
    if (r->p >= r->end || *r->p++ != '{')
        return false;
    ws(r);
    if (r->p < r->end && *r->p == '}')
        r->p++;
    else
        for (;;) {
            ws(r);
            if (!string(r, &k))
                return false;
            ws(r);
            if (r->p >= r->end || *r->p++ != ':')
                return false;
            ws(r);
            if (strcmp(k, "annotations") != 0 || lit(r, "null")) {
                if (strcmp(k, "annotations") != 0 && !value(r, 1))
                    return false;
            } else {
                if (r->p >= r->end || *r->p++ != '{' || !members(r, 1, '}', true))
                    return false;
                r->has_annotations = true;
            }
            ws(r);
            if (r->p < r->end && *r->p == ',') {
                r->p++;
                continue;
            }
            if (r->p >= r->end || *r->p++ != '}')
                return false;
            break;
        }
    ws(r);
    return r->p == r->end;
}

/* ---- the expectation, from the second reading ---------------------------- */
static const char *get(const reader *r, const char *key)
{
    for (size_t i = 0; i < r->n; i++)
        if (strcmp(r->kv[i].key, key) == 0)
            return r->kv[i].value;
    return NULL;
}

static bool starts(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* Whether key is <prefix><c>.<anything> */
static bool keyed(const char *key, const char *prefix, const char *c)
{
    size_t pl = strlen(prefix), cl = strlen(c);

    return starts(key, prefix) && strncmp(key + pl, c, cl) == 0 && key[pl + cl] == '.';
}

static bool names(const reader *r, const char *c)
{
    size_t kl = strlen(GF_KAI_CONTAINER_PREFIX) + strlen(c);

    for (size_t i = 0; i < r->n; i++) {
        const gf_kv *kv = &r->kv[i];
        if (keyed(kv->key, GF_NVFRACTIONS_PREFIX, c) ||
            (keyed(kv->key, GF_KAI_CONTAINER_PREFIX, c) &&
             strcmp(kv->key + kl, ".gpu-memory.portion.limit") == 0) ||
            (strcmp(kv->key, "gpu-fraction-container-name") == 0 && strcmp(kv->value, c) == 0))
            return true;
    }
    return false;
}

typedef struct setting {
    bool nvfractions;
    int claim; /* 1 mine, 0 another container's, -1 cannot tell */
} setting;

static int claim(const void *ctx, const char *sandbox, const char *container, bool *mine,
                 gf_error *err)
{
    const setting *s = ctx;

    (void)sandbox;
    FUZZ_CHECK(container && *container);
    if (s->claim < 0)
        return gf_error_set(err, GF_ESTATE, "fuzz: no claim");
    *mine = s->claim == 1;
    return 0;
}

/* The fraction the second reading asks, by the rules of docs/runtime.md. */
static int expected(const reader *r, const setting *s, const char *c, gf_pod_fraction *pf,
                    gf_error *err)
{
    gf_annotation_opts o = {.prefix = GF_NVFRACTIONS_PREFIX, .allow_extensions = true};
    static gf_kv kv[KV_MAX];
    bool own = false, any_nv = false;
    size_t n = 0;

    for (size_t i = 0; i < r->n; i++) {
        own = own || keyed(r->kv[i].key, GF_NVFRACTIONS_PREFIX, c);
        any_nv = any_nv || starts(r->kv[i].key, GF_NVFRACTIONS_PREFIX);
        if (s->nvfractions || starts(r->kv[i].key, GF_NVFRACTIONS_PREFIX))
            kv[n++] = r->kv[i];
    }
    o.container = c;
    o.container_is_first = own ||
                           (s->nvfractions && !get(r, "gpu-fraction-container-name") && !any_nv &&
                            (get(r, "gpu-fraction") || get(r, "gpu-memory")) && s->claim == 1);
    return gf_annotations_decode(kv, n, &o, pf, err);
}

static bool same_amount(const gf_amount *a, const gf_amount *b)
{
    return a->is_portion == b->is_portion && a->bytes == b->bytes && a->portion == b->portion;
}

static bool same(const gf_pod_fraction *a, const gf_pod_fraction *b)
{
    return a->fractional == b->fractional && a->num_devices == b->num_devices &&
           a->spec.has_request == b->spec.has_request && a->spec.has_limit == b->spec.has_limit &&
           same_amount(&a->spec.request, &b->spec.request) &&
           same_amount(&a->spec.limit, &b->spec.limit) && a->spec.mode == b->spec.mode &&
           a->spec.has_compute == b->spec.has_compute && a->spec.compute == b->spec.compute &&
           strcmp(a->spec.devices, b->spec.devices) == 0;
}

static void check(rt_bundle *b, const reader *r, const setting *s)
{
    rt_bundle_opts o = {
        .nvfractions = s->nvfractions, .fallback_name = FALLBACK, .claim = claim, .claim_ctx = s};
    const char *c = get(r, "io.kubernetes.cri.container-name");
    gf_pod_fraction want;
    gf_error err = {0}, err2 = {0};

    c = c && *c ? c : FALLBACK;
    if (rt_bundle_decode(b, &o, &err) < 0) {
        FUZZ_CHECK(err.msg[0] != '\0');
        FUZZ_CHECK(!b->pf.fractional);
        return;
    }
    if (b->engine == RT_ENGINE_PODMAN) { /* a lone container, never with a pod's identity */
        for (size_t i = 0; i < r->n; i++)
            FUZZ_CHECK(!starts(r->kv[i].key, "io.kubernetes.cri."));
        FUZZ_CHECK(b->pf.fractional || !names(r, b->id.container));
        return;
    }
    FUZZ_CHECK(strcmp(b->id.container, c) == 0);
    FUZZ_CHECK(expected(r, s, c, &want, &err2) == 0);
    FUZZ_CHECK(same(&b->pf, &want));
    /* never the whole GPU for a container an annotation names */
    FUZZ_CHECK(b->pf.fractional || !names(r, c));
}

static bool env_asks(json_t *spec)
{
    json_t *env = json_object_get(json_object_get(spec, "process"), "env"), *e;
    size_t i;

    json_array_foreach(env, i, e)
    {
        const char *v = json_string_value(e);
        if (v && strncmp(v, RT_ENV_PREFIX, strlen(RT_ENV_PREFIX)) == 0)
            return true;
    }
    return false;
}

/* As create decodes it (the env form read): a container whose environment
 * asks gpufrac anything is fractional or refused, never the whole GPU. */
static void check_env_form(rt_bundle *b, const setting *s)
{
    rt_bundle_opts o = {.nvfractions = s->nvfractions,
                        .fallback_name = FALLBACK,
                        .claim = claim,
                        .claim_ctx = s,
                        .id = FALLBACK,
                        .bundle_dir = "/nonexistent/fuzz"};
    gf_error err = {0};

    if (rt_bundle_decode(b, &o, &err) < 0) {
        FUZZ_CHECK(err.msg[0] != '\0');
        FUZZ_CHECK(!b->pf.fractional);
        return;
    }
    FUZZ_CHECK(b->pf.fractional || !env_asks(b->spec));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const setting settings[] = {{true, 1},  {true, 0},  {true, -1},
                                       {false, 1}, {false, 0}, {false, -1}};
    static reader r;
    gf_error err = {0};
    rt_bundle b;
    const char *type;

    if (size > INPUT_MAX)
        return 0;
    if (rt_bundle_parse((const char *)data, size, &b, &err) < 0) {
        FUZZ_CHECK(err.msg[0] != '\0');
        FUZZ_CHECK(b.spec == NULL && b.kv == NULL);
        return 0;
    }
    memset(&r, 0, sizeof(r));
    r.p = (const char *)data;
    r.end = r.p + size;
    r.cap = size + 1;
    r.arena = malloc(r.cap);
    FUZZ_CHECK(r.arena != NULL);
    /* what jansson read, this reader reads the same */
    FUZZ_CHECK(read_doc(&r));
    FUZZ_CHECK(r.n == b.n_kv);
    for (size_t i = 0; i < r.n; i++)
        FUZZ_CHECK(strcmp(r.kv[i].key, b.kv[i].key) == 0 &&
                   strcmp(r.kv[i].value, b.kv[i].value) == 0);
    type = get(&r, "io.kubernetes.cri.container-type");
    FUZZ_CHECK(b.sandbox == (type && strcmp(type, "sandbox") == 0));
    for (size_t i = 0; !b.sandbox && i < sizeof(settings) / sizeof(settings[0]); i++) {
        check(&b, &r, &settings[i]);
        check_env_form(&b, &settings[i]);
    }
    rt_bundle_free(&b);
    free(r.arena);
    return 0;
}
