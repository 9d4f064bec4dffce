/* SPDX-License-Identifier: Apache-2.0 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quantity.h"
#include "user_policy.h"

static const char *const key_names[GF_POL_KEYS] = {
    [GF_POL_MAX_GUARANTEED] = "max-guaranteed",
    [GF_POL_MAX_LIMIT] = "max-limit",
    [GF_POL_MODES] = "modes",
    [GF_POL_MAX_COMPUTE] = "max-compute",
    [GF_POL_MAX_FRACTIONS] = "max-fractions",
};

const char *gf_user_policy_key_name(gf_user_policy_key k)
{
    return k < GF_POL_KEYS ? key_names[k] : "?";
}

#define ACCEPTED_KEYS "max-guaranteed, max-limit, modes, max-compute, max-fractions"

static void trim(char **s, char **end)
{
    while (*s < *end && isspace((unsigned char)**s))
        (*s)++;
    while (*end > *s && isspace((unsigned char)(*end)[-1]))
        (*end)--;
}

static bool name_ok(const char *s, size_t len)
{
    if (len == 0 || len >= GF_USER_POLICY_NAME_MAX)
        return false;
    for (size_t i = 0; i < len; i++)
        if (!isalnum((unsigned char)s[i]) && !strchr("._-$", s[i]))
            return false;
    return true;
}

/* "[default]", "[user NAME]", "[group NAME]" */
static int parse_section(const char *file, int line, char *s, char *end, gf_user_policy *p,
                         gf_error *err)
{
    gf_user_policy_section *sec;
    char *word, *wend, *name;

    if (end[-1] != ']')
        return gf_error_set(err, GF_EINVAL,
                            "policy %s:%d: \"%.*s\" is not a section (accepted: "
                            "[default], [user NAME], [group NAME])",
                            file, line, (int)(end - s), s);
    s++;
    end--;
    trim(&s, &end);
    if (p->n == GF_USER_POLICY_SECTIONS_MAX)
        return gf_error_set(err, GF_ENOSPACE, "policy %s:%d: more than %d sections", file, line,
                            GF_USER_POLICY_SECTIONS_MAX);
    sec = &p->s[p->n];
    memset(sec, 0, sizeof(*sec));
    sec->line = line;
    for (wend = s; wend < end && !isspace((unsigned char)*wend); wend++)
        ;
    word = s;
    name = wend;
    trim(&name, &end);
    if ((size_t)(wend - word) == 7 && strncmp(word, "default", 7) == 0 && name == end) {
        sec->scope = GF_POL_DEFAULT;
    } else if (((size_t)(wend - word) == 4 && strncmp(word, "user", 4) == 0) ||
               ((size_t)(wend - word) == 5 && strncmp(word, "group", 5) == 0)) {
        if (!name_ok(name, (size_t)(end - name)))
            return gf_error_set(err, GF_EINVAL,
                                "policy %s:%d: [%.*s]: \"%.*s\" is not a user or "
                                "group name (1 to %d of A-Z a-z 0-9 . _ - $)",
                                file, line, (int)(wend - word), word, (int)(end - name), name,
                                GF_USER_POLICY_NAME_MAX - 1);
        sec->scope = word[0] == 'u' ? GF_POL_USER : GF_POL_GROUP;
        memcpy(sec->name, name, (size_t)(end - name));
    } else {
        return gf_error_set(err, GF_EINVAL,
                            "policy %s:%d: [%.*s] is not a section (accepted: "
                            "[default], [user NAME], [group NAME])",
                            file, line, (int)(end - word), word);
    }
    for (size_t i = 0; i < p->n; i++)
        if (p->s[i].scope == sec->scope && strcmp(p->s[i].name, sec->name) == 0)
            return gf_error_set(err, GF_EINVAL,
                                "policy %s:%d: this section was already given at "
                                "line %d",
                                file, line, p->s[i].line);
    p->n++;
    return 0;
}

static int parse_modes(const char *v, unsigned *out, gf_error *err)
{
    char buf[128], *save = NULL;
    gf_mode m;

    *out = 0;
    if (strlen(v) >= sizeof(buf))
        return gf_error_set(err, GF_EINVAL, "\"%s\" is too long", v);
    snprintf(buf, sizeof(buf), "%s", v);
    for (char *t = strtok_r(buf, ", \t", &save); t; t = strtok_r(NULL, ", \t", &save)) {
        if (gf_mode_parse(t, "modes", &m, err) < 0)
            return -1;
        *out |= 1u << m;
    }
    if (!*out)
        return gf_error_set(err, GF_EINVAL,
                            "modes names no mode (accepted: time-slicing, "
                            "sm-sharing)");
    return 0;
}

static int parse_value(gf_user_policy_key k, const char *v, gf_user_policy_value *out,
                       gf_error *err)
{
    char *end;

    switch (k) {
    case GF_POL_MAX_GUARANTEED:
    case GF_POL_MAX_LIMIT: return gf_amount_parse(v, key_names[k], &out->amount, err);
    case GF_POL_MODES: return parse_modes(v, &out->modes, err);
    case GF_POL_MAX_COMPUTE: return gf_compute_portion_parse(v, key_names[k], &out->compute, err);
    case GF_POL_MAX_FRACTIONS:
        if (!isdigit((unsigned char)v[0]) || (out->count = strtoull(v, &end, 10), *end) ||
            out->count > 100000)
            return gf_error_set(err, GF_EINVAL,
                                "max-fractions: \"%s\" is not a whole number "
                                "from 0 to 100000",
                                v);
        return 0;
    case GF_POL_KEYS: break;
    }
    return gf_error_set(err, GF_EINVAL, "unknown key");
}

static int parse_setting(const char *file, int line, char *s, char *end, gf_user_policy *p,
                         gf_error *err)
{
    char *eq = memchr(s, '=', (size_t)(end - s)), *kend, *v, value[160];
    gf_user_policy_key k;

    if (!eq)
        return gf_error_set(err, GF_EINVAL, "policy %s:%d: \"%.*s\" is not \"key = value\"", file,
                            line, (int)(end - s), s);
    kend = eq;
    trim(&s, &kend);
    v = eq + 1;
    trim(&v, &end);
    for (k = 0; k < GF_POL_KEYS; k++)
        if ((size_t)(kend - s) == strlen(key_names[k]) &&
            strncmp(s, key_names[k], (size_t)(kend - s)) == 0)
            break;
    if (k == GF_POL_KEYS)
        return gf_error_set(err, GF_EINVAL,
                            "policy %s:%d: unknown key \"%.*s\" (accepted: " ACCEPTED_KEYS ")",
                            file, line, (int)(kend - s), s);
    if (p->n == 0)
        return gf_error_set(err, GF_EINVAL,
                            "policy %s:%d: %s before any section (start with "
                            "[default], [user NAME] or [group NAME])",
                            file, line, key_names[k]);
    if ((size_t)(end - v) >= sizeof(value) || end == v)
        return gf_error_set(err, GF_EINVAL,
                            "policy %s:%d: %s needs a value of 1 to %zu "
                            "characters",
                            file, line, key_names[k], sizeof(value) - 1);
    memcpy(value, v, (size_t)(end - v));
    value[end - v] = '\0';
    gf_user_policy_value *pv = &p->s[p->n - 1].v[k];
    if (pv->set)
        return gf_error_set(err, GF_EINVAL,
                            "policy %s:%d: %s is already set in this section at "
                            "line %d",
                            file, line, key_names[k], pv->line);
    if (parse_value(k, value, pv, err) < 0)
        return gf_error_wrap(err, "policy %s:%d", file, line);
    pv->set = true;
    pv->line = line;
    return 0;
}

int gf_user_policy_parse(const char *text, size_t len, const char *file, gf_user_policy *out,
                         gf_error *err)
{
    char buf[512];
    size_t off = 0;
    int line = 0;

    memset(out, 0, sizeof(*out));
    snprintf(out->file, sizeof(out->file), "%s", file ? file : "(policy)");
    file = out->file;
    while (off < len) {
        const char *nl = memchr(text + off, '\n', len - off);
        size_t n = nl ? (size_t)(nl - (text + off)) : len - off;
        char *s = buf, *end;

        line++;
        if (n >= sizeof(buf))
            return gf_error_set(err, GF_EINVAL, "policy %s:%d: line longer than %zu bytes", file,
                                line, sizeof(buf) - 1);
        memcpy(buf, text + off, n);
        buf[n] = '\0';
        off += n + (nl ? 1 : 0);
        if (memchr(buf, '\0', n))
            return gf_error_set(err, GF_EINVAL, "policy %s:%d: a NUL byte", file, line);
        if ((end = strchr(buf, '#')))
            *end = '\0';
        end = buf + strlen(buf);
        trim(&s, &end);
        if (s == end)
            continue;
        *end = '\0';
        if (*s == '[' ? parse_section(file, line, s, end, out, err) < 0
                      : parse_setting(file, line, s, end, out, err) < 0)
            return -1;
    }
    return 0;
}

/* Is a more generous than b for key k (compared on a GPU of gpu_total)? */
static bool more_generous(gf_user_policy_key k, const gf_user_policy_value *a,
                          const gf_user_policy_value *b)
{
    uint64_t x, y;
    gf_error ignored;

    switch (k) {
    case GF_POL_MAX_GUARANTEED:
    case GF_POL_MAX_LIMIT:
        /* portions and quantities compared on an 80 GiB GPU: a rough order is enough */
        if (gf_amount_resolve(&a->amount, 80 * GF_GIB, "", &x, &ignored) < 0)
            x = a->amount.bytes;
        if (gf_amount_resolve(&b->amount, 80 * GF_GIB, "", &y, &ignored) < 0)
            y = b->amount.bytes;
        return x > y;
    case GF_POL_MODES: return __builtin_popcount(a->modes) > __builtin_popcount(b->modes);
    case GF_POL_MAX_COMPUTE: return a->compute > b->compute;
    case GF_POL_MAX_FRACTIONS: return a->count > b->count;
    case GF_POL_KEYS: break;
    }
    return false;
}

void gf_user_policy_rules_for(const gf_user_policy *p, const char *user, const char *const *groups,
                              size_t n_groups, gf_user_policy_rules *out)
{
    memset(out, 0, sizeof(*out));
    for (gf_user_policy_key k = 0; k < GF_POL_KEYS; k++) {
        const gf_user_policy_section *dflt = NULL, *grp = NULL, *usr = NULL;
        for (size_t i = 0; i < p->n; i++) {
            const gf_user_policy_section *s = &p->s[i];
            if (!s->v[k].set)
                continue;
            if (s->scope == GF_POL_DEFAULT)
                dflt = s;
            else if (s->scope == GF_POL_USER && user && strcmp(s->name, user) == 0)
                usr = s;
            else if (s->scope == GF_POL_GROUP)
                for (size_t g = 0; g < n_groups; g++)
                    if (groups[g] && strcmp(s->name, groups[g]) == 0 &&
                        (!grp || more_generous(k, &s->v[k], &grp->v[k])))
                        grp = s;
        }
        out->from[k] = usr ? usr : grp ? grp : dflt;
    }
}

static int refuse(const gf_user_policy *p, const gf_user_policy_section *s, gf_user_policy_key k,
                  const char *value, gf_error *err, const char *fmt, const char *what)
{
    char sec[64];

    if (s->scope == GF_POL_DEFAULT)
        snprintf(sec, sizeof(sec), "[default]");
    else
        snprintf(sec, sizeof(sec), "[%s %s]", s->scope == GF_POL_USER ? "user" : "group", s->name);
    return gf_error_set(err, GF_ERANGE, "refused by policy %s:%d %s %s = %s: %s%s", p->file,
                        s->v[k].line, sec, key_names[k], value, fmt, what);
}

static void amount_text(const gf_amount *a, char *buf, size_t len)
{
    if (a->is_portion)
        snprintf(buf, len, "%g", a->portion);
    else
        gf_quantity_format(a->bytes, buf, len);
}

static int check_amount(const gf_user_policy *p, const gf_user_policy_rules *r,
                        gf_user_policy_key k, const gf_user_policy_ask *ask, gf_error *err)
{
    const gf_user_policy_section *s = r->from[k];
    char val[48], asked[160], h[32];
    gf_error ignored;

    if (!s)
        return 0;
    for (size_t i = 0; i < ask->n_devices; i++) {
        const gf_user_policy_device *d = &ask->devices[i];
        uint64_t max, want = k == GF_POL_MAX_GUARANTEED ? d->request : d->limit;
        if (gf_amount_resolve(&s->v[k].amount, d->gpu_total, "", &max, &ignored) < 0)
            max = d->gpu_total; /* a quantity past the GPU: the whole GPU */
        if (want <= max)
            continue;
        amount_text(&s->v[k].amount, val, sizeof(val));
        gf_bytes_human(want, h, sizeof(h));
        snprintf(asked, sizeof(asked), "%s %s per GPU asked",
                 k == GF_POL_MAX_GUARANTEED ? "--memory" : "--limit", h);
        return refuse(p, s, k, val, err, "", asked);
    }
    return 0;
}

int gf_user_policy_check(const gf_user_policy *p, const gf_user_policy_rules *r,
                         const gf_user_policy_ask *ask, gf_error *err)
{
    const gf_user_policy_section *s;
    char val[64], asked[96];

    if (check_amount(p, r, GF_POL_MAX_GUARANTEED, ask, err) < 0 ||
        check_amount(p, r, GF_POL_MAX_LIMIT, ask, err) < 0)
        return -1;
    if ((s = r->from[GF_POL_MODES]) && !(s->v[GF_POL_MODES].modes & (1u << ask->mode))) {
        snprintf(val, sizeof(val), "%s%s%s", s->v[GF_POL_MODES].modes & 1u ? "time-slicing" : "",
                 s->v[GF_POL_MODES].modes == 3u ? "," : "",
                 s->v[GF_POL_MODES].modes & 2u ? "sm-sharing" : "");
        snprintf(asked, sizeof(asked), "--mode %s asked", gf_mode_name(ask->mode));
        return refuse(p, s, GF_POL_MODES, val, err, "", asked);
    }
    if ((s = r->from[GF_POL_MAX_COMPUTE]) && ask->mode == GF_MODE_SM_SHARING &&
        ask->compute_percent > (int)(s->v[GF_POL_MAX_COMPUTE].compute * 100.0 + 1e-9)) {
        snprintf(val, sizeof(val), "%g", s->v[GF_POL_MAX_COMPUTE].compute);
        snprintf(asked, sizeof(asked), "--compute %d%% asked%s", ask->compute_percent,
                 ask->compute_percent == 100 ? " (no --compute is the whole GPU)" : "");
        return refuse(p, s, GF_POL_MAX_COMPUTE, val, err, "", asked);
    }
    if (!r->from[GF_POL_MAX_FRACTIONS] &&
        ask->fractions_held + 1 > GF_USER_POLICY_MAX_FRACTIONS_DEFAULT)
        return gf_error_set(err, GF_ERANGE,
                            "refused by policy %s: no max-fractions rule applies to you, so the "
                            "built-in bound of %d fractions at once does; you hold %zu already "
                            "(an administrator sets max-fractions in %s to change it)",
                            p->file, GF_USER_POLICY_MAX_FRACTIONS_DEFAULT, ask->fractions_held,
                            p->file);
    if ((s = r->from[GF_POL_MAX_FRACTIONS]) &&
        ask->fractions_held + 1 > s->v[GF_POL_MAX_FRACTIONS].count) {
        snprintf(val, sizeof(val), "%llu", (unsigned long long)s->v[GF_POL_MAX_FRACTIONS].count);
        snprintf(asked, sizeof(asked), "you hold %zu fraction(s) already", ask->fractions_held);
        return refuse(p, s, GF_POL_MAX_FRACTIONS, val, err, "", asked);
    }
    return 0;
}
