/* SPDX-License-Identifier: Apache-2.0 */
/* The fast path of ExtenderArgs: finds the top-level "NodeNames" array of
 * plain node names without building a JSON string per name (a full parse
 * spends most of filter's time there). It only ever says "here it is" or
 * "not for me": anything unusual (an escape or non-ASCII byte in a name, a
 * top-level key with an escape or spelled in another case, nesting deeper
 * than it follows, bad syntax) sends the body to the full parser, which
 * decides. What it accepts, the full parse of the rest of the body
 * confirms: the caller replaces the array with null and parses that. */
#include <string.h>

#include "extender.h"

#define SCAN_DEPTH_MAX 64

typedef struct scan {
    const char *p, *end;
    int depth;
} scan;

static void ws(scan *s)
{
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
        s->p++;
}

static bool is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* A string at s->p (its quote); *escaped says whether it held an escape. */
static bool skip_string(scan *s, bool *escaped)
{
    *escaped = false;
    if (s->p >= s->end || *s->p != '"')
        return false;
    for (s->p++; s->p < s->end; s->p++) {
        unsigned char c = (unsigned char)*s->p;

        if (c == '"') {
            s->p++;
            return true;
        }
        if (c < 0x20)
            return false;
        if (c != '\\')
            continue;
        *escaped = true;
        if (++s->p >= s->end)
            return false;
        if (*s->p == 'u') {
            if (s->end - s->p < 5 || !is_hex(s->p[1]) || !is_hex(s->p[2]) || !is_hex(s->p[3]) ||
                !is_hex(s->p[4]))
                return false;
            s->p += 4;
        } else if (!strchr("\"\\/bfnrt", *s->p) || *s->p == '\0') {
            return false;
        }
    }
    return false;
}

static bool digits(scan *s)
{
    const char *start = s->p;

    while (s->p < s->end && *s->p >= '0' && *s->p <= '9')
        s->p++;
    return s->p > start;
}

static bool skip_number(scan *s)
{
    if (s->p < s->end && *s->p == '-')
        s->p++;
    if (s->p < s->end && *s->p == '0')
        s->p++;
    else if (!digits(s))
        return false;
    if (s->p < s->end && *s->p == '.') {
        s->p++;
        if (!digits(s))
            return false;
    }
    if (s->p < s->end && (*s->p == 'e' || *s->p == 'E')) {
        s->p++;
        if (s->p < s->end && (*s->p == '+' || *s->p == '-'))
            s->p++;
        if (!digits(s))
            return false;
    }
    return true;
}

static bool skip_literal(scan *s, const char *word)
{
    size_t n = strlen(word);

    if ((size_t)(s->end - s->p) < n || memcmp(s->p, word, n) != 0)
        return false;
    s->p += n;
    return true;
}

static bool skip_value(scan *s);

/* The members or elements of a container after its opening bracket. */
static bool skip_items(scan *s, char close, bool members)
{
    bool escaped;

    if (++s->depth > SCAN_DEPTH_MAX)
        return false;
    ws(s);
    if (s->p < s->end && *s->p == close) {
        s->p++;
        s->depth--;
        return true;
    }
    for (;;) {
        if (members) {
            if (!skip_string(s, &escaped))
                return false;
            ws(s);
            if (s->p >= s->end || *s->p++ != ':')
                return false;
        }
        if (!skip_value(s))
            return false;
        ws(s);
        if (s->p >= s->end)
            return false;
        if (*s->p == close) {
            s->p++;
            s->depth--;
            return true;
        }
        if (*s->p++ != ',')
            return false;
    }
}

static bool skip_value(scan *s)
{
    bool escaped;

    ws(s);
    if (s->p >= s->end)
        return false;
    switch (*s->p) {
    case '{': s->p++; return skip_items(s, '}', true);
    case '[': s->p++; return skip_items(s, ']', false);
    case '"': return skip_string(s, &escaped);
    case 't': return skip_literal(s, "true");
    case 'f': return skip_literal(s, "false");
    case 'n': return skip_literal(s, "null");
    default: return skip_number(s);
    }
}

/* An array of plain names (printable ASCII, no escape, 1 to
 * GF_SCHED_NAME_MAX - 1 bytes) at s->p; counts them. */
static bool plain_names(scan *s, size_t *n)
{
    const char *start;

    *n = 0;
    if (s->p >= s->end || *s->p++ != '[')
        return false;
    ws(s);
    if (s->p < s->end && *s->p == ']') {
        s->p++;
        return true;
    }
    for (;;) {
        if (s->p >= s->end || *s->p++ != '"')
            return false;
        for (start = s->p; s->p < s->end && *s->p != '"'; s->p++)
            if ((unsigned char)*s->p < 0x20 || (unsigned char)*s->p >= 0x7f || *s->p == '\\')
                return false;
        if (s->p >= s->end || s->p == start || s->p - start >= GF_SCHED_NAME_MAX)
            return false;
        s->p++;
        if (++*n > GF_EXT_NODES_MAX)
            return false;
        ws(s);
        if (s->p >= s->end)
            return false;
        if (*s->p == ']') {
            s->p++;
            return true;
        }
        if (*s->p++ != ',')
            return false;
        ws(s);
    }
}

static bool is_key(const char *k, size_t n, const char *want)
{
    return n == strlen(want) && memcmp(k, want, n) == 0;
}

static bool same_ci(const char *k, size_t n, const char *want)
{
    return n == strlen(want) && strncasecmp(k, want, n) == 0;
}

/* One top-level member; records the span of an exact "NodeNames" array. */
static bool member(scan *s, gf_ext_names_span *out, bool *found)
{
    const char *key = s->p + 1;
    size_t n;
    bool escaped;

    if (!skip_string(s, &escaped) || escaped)
        return false;
    n = (size_t)(s->p - 1 - key);
    ws(s);
    if (s->p >= s->end || *s->p++ != ':')
        return false;
    ws(s);
    if (!is_key(key, n, "NodeNames"))
        return !same_ci(key, n, "NodeNames") && skip_value(s);
    if (*found || s->p >= s->end || *s->p != '[')
        return false;
    *found = true;
    out->start = s->p;
    if (!plain_names(s, &out->n))
        return false;
    out->end = s->p;
    return true;
}

bool gf_ext_names_scan(const char *body, size_t len, gf_ext_names_span *out)
{
    scan s = {body, body + len, 1};
    bool found = false;

    memset(out, 0, sizeof(*out));
    ws(&s);
    if (s.p >= s.end || *s.p++ != '{')
        return false;
    ws(&s);
    if (s.p < s.end && *s.p == '}')
        return false;
    for (;;) {
        ws(&s);
        if (!member(&s, out, &found))
            return false;
        ws(&s);
        if (s.p >= s.end)
            return false;
        if (*s.p == '}')
            break;
        if (*s.p++ != ',')
            return false;
    }
    s.p++;
    ws(&s);
    return found && s.p == s.end;
}
