/* SPDX-License-Identifier: Apache-2.0 */
/* A structural reading of a TOML file (Podman's containers.conf), enough to
 * edit one key of one table and keep every other byte: statements are
 * table headers and key = value pairs whose value may span lines (arrays,
 * inline tables, multi-line strings). Invariant: a file this reader cannot
 * split into such statements is refused with its line, never edited. */
#include <stdio.h>
#include <string.h>

#include "install.h"

typedef struct scan {
    const char *t;
    size_t len, i;
    int line;
} scan;

static int bad(scan *s, gf_error *err, const char *what)
{
    return gf_error_set(err, GF_EINVAL, "line %d: %s", s->line, what);
}

static void skip_ws(scan *s)
{
    while (s->i < s->len && (s->t[s->i] == ' ' || s->t[s->i] == '\t'))
        s->i++;
}

static void skip_comment(scan *s)
{
    if (s->i < s->len && s->t[s->i] == '#')
        while (s->i < s->len && s->t[s->i] != '\n')
            s->i++;
}

/* At a quote: past the string. */
static int skip_string(scan *s, gf_error *err)
{
    char q = s->t[s->i];
    bool multi = s->i + 2 < s->len && s->t[s->i + 1] == q && s->t[s->i + 2] == q;

    s->i += multi ? 3 : 1;
    while (s->i < s->len) {
        char c = s->t[s->i];
        if (c == '\\' && q == '"') {
            s->i += 2;
            continue;
        }
        if (c == '\n') {
            if (!multi)
                return bad(s, err, "a string ends at the end of the line without its quote");
            s->line++;
        }
        if (c == q &&
            (!multi || (s->i + 2 < s->len && s->t[s->i + 1] == q && s->t[s->i + 2] == q))) {
            s->i += multi ? 3 : 1;
            return 0;
        }
        s->i++;
    }
    return bad(s, err, "a string is not closed before the end of the file");
}

/* A value, to the end of its last line. */
static int skip_value(scan *s, gf_error *err)
{
    int depth = 0, start = s->line;
    bool any = false;

    while (s->i < s->len) {
        char c = s->t[s->i];
        if (c == '"' || c == '\'') {
            if (skip_string(s, err) < 0)
                return -1;
            any = true;
            continue;
        }
        if (c == '#') {
            skip_comment(s);
            continue;
        }
        if (c == '\n') {
            if (depth == 0)
                break;
            s->line++;
        } else if (c == '[' || c == '{') {
            depth++;
        } else if (c == ']' || c == '}') {
            if (--depth < 0)
                return bad(s, err, "a closing bracket without its opening one");
        } else if (c != ' ' && c != '\t' && c != '\r') {
            any = true;
        }
        s->i++;
    }
    if (depth > 0) {
        s->line = start;
        return bad(s, err, "an array or inline table is not closed");
    }
    return any || depth ? 0 : bad(s, err, "a key without a value");
}

/* [name] or [[name]]: the name with its spaces removed. */
static int header(scan *s, toml_stmt *st, gf_error *err)
{
    size_t o = 0;
    bool arr = s->i + 1 < s->len && s->t[s->i + 1] == '[';

    s->i += arr ? 2 : 1;
    while (s->i < s->len && s->t[s->i] != ']' && s->t[s->i] != '\n') {
        if (s->t[s->i] != ' ' && s->t[s->i] != '\t' && o + 1 < sizeof(st->table))
            st->table[o++] = s->t[s->i];
        s->i++;
    }
    st->table[o] = '\0';
    if (s->i >= s->len || s->t[s->i] != ']' || o == 0)
        return bad(s, err, "a table header is not closed with ]");
    s->i += arr && s->i + 1 < s->len && s->t[s->i + 1] == ']' ? 2 : 1;
    st->is_header = true;
    return 0;
}

static int key_value(scan *s, toml_stmt *st, gf_error *err)
{
    size_t o = 0;

    while (s->i < s->len && s->t[s->i] != '=' && s->t[s->i] != '\n' && s->t[s->i] != '#') {
        if (s->t[s->i] != ' ' && s->t[s->i] != '\t' && o + 1 < sizeof(st->key))
            st->key[o++] = s->t[s->i];
        s->i++;
    }
    st->key[o] = '\0';
    if (s->i >= s->len || s->t[s->i] != '=' || o == 0)
        return bad(s, err, "expected key = value, a [table] header or a comment");
    s->i++;
    st->value_at = s->i;
    return skip_value(s, err);
}

int toml_scan(const char *text, size_t len, toml_stmt *out, size_t max, size_t *n, gf_error *err)
{
    scan s = {.t = text, .len = len, .line = 1};
    char table[sizeof(out->table)] = "";

    *n = 0;
    while (s.i < len) {
        toml_stmt st = {0};
        skip_ws(&s);
        skip_comment(&s);
        if (s.i < len && (text[s.i] == '\n' || text[s.i] == '\r')) {
            s.line += text[s.i] == '\n';
            s.i++;
            continue;
        }
        if (s.i >= len)
            break;
        if (*n == max)
            return bad(&s, err, "too many statements to edit safely");
        st.line = s.line;
        st.start = s.i;
        if (text[s.i] == '[' ? header(&s, &st, err) < 0 : key_value(&s, &st, err) < 0)
            return -1;
        if (st.is_header)
            snprintf(table, sizeof(table), "%s", st.table);
        else
            snprintf(st.table, sizeof(st.table), "%s", table);
        skip_ws(&s);
        skip_comment(&s);
        if (s.i < len && text[s.i] != '\n' && text[s.i] != '\r')
            return bad(&s, err, "something follows the statement on its line");
        st.end = s.i;
        out[(*n)++] = st;
    }
    return 0;
}
