/* SPDX-License-Identifier: Apache-2.0 */
/* Evictions and watchdog kills by label set (metrics_idents.h). Each opened
 * fraction has a base: its counters when it was opened or last counted, so
 * what they grew by is known whichever of them changed; bases of fractions
 * gone are dropped when the table fills. The label sets are GF_IDENTS_MAX at
 * most: a new one replaces the oldest never hit, else the oldest. Journal
 * record (tokens %-encoded, "-" for empty):
 *   icount p NAMESPACE POD CONTAINER EVICTIONS KILLS
 *   icount u UID|- EVICTIONS KILLS */
#include "metrics_idents.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

typedef struct base {
    uint64_t fid, kills, evictions;
} base;

#define BASES_MAX (2 * GF_AGENT_FRACTIONS_MAX)

static base bases[BASES_MAX];
static size_t n_bases;
static gf_ident_count table[GF_IDENTS_MAX];
static size_t n_table;
static uint64_t clock_;

static void ident_of(gf_ident *id, const gf_afraction *f)
{
    memset(id, 0, sizeof(*id));
    if ((id->pod = f->pod[0] != '\0')) {
        memcpy(id->ns, f->ns, sizeof(id->ns));
        memcpy(id->pod_name, f->pod, sizeof(id->pod_name));
        memcpy(id->container, f->container, sizeof(id->container));
        return;
    }
    id->uid_known = f->ledger_fd >= 0;
    id->uid = id->uid_known ? f->owner : 0;
}

static bool same(const gf_ident *x, const gf_ident *y)
{
    if (x->pod != y->pod)
        return false;
    if (!x->pod)
        return x->uid_known == y->uid_known && x->uid == y->uid;
    return strcmp(x->ns, y->ns) == 0 && strcmp(x->pod_name, y->pod_name) == 0 &&
           strcmp(x->container, y->container) == 0;
}

/* The entry of id, made (replacing the oldest never hit, else the oldest)
 * when there is none; it is the newest now. */
static gf_ident_count *touch(const gf_ident *id)
{
    size_t i, drop = 0;

    for (i = 0; i < n_table && !same(&table[i].id, id); i++)
        ;
    if (i == n_table && n_table < GF_IDENTS_MAX) {
        table[n_table++] = (gf_ident_count){.id = *id};
    } else if (i == n_table) {
        for (size_t j = 1; j < n_table; j++) {
            bool hit_j = table[j].evictions || table[j].kills;
            bool hit_d = table[drop].evictions || table[drop].kills;
            if ((!hit_j && hit_d) || (hit_j == hit_d && table[j].seq < table[drop].seq))
                drop = j;
        }
        i = drop;
        table[i] = (gf_ident_count){.id = *id};
    }
    table[i].seq = ++clock_;
    return &table[i];
}

static uint64_t evictions_of(const gf_afraction *f)
{
    uint64_t n = 0;

    for (int d = 0; d < GF_CONFIG_DEVICES_MAX; d++)
        n += f->evictions[d];
    return n;
}

static int fid_cmp(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return a < b ? -1 : a > b;
}

/* Keeps the bases of the fractions the agent has open. */
static void prune_bases(const gf_agent *a)
{
    uint64_t *live = malloc(((size_t)a->n_fractions + 1) * sizeof(*live));
    size_t kept = 0;

    if (!live) { /* without memory: the oldest half goes */
        memmove(bases, bases + BASES_MAX / 2, (BASES_MAX / 2) * sizeof(*bases));
        n_bases = BASES_MAX / 2;
        return;
    }
    for (int i = 0; i < a->n_fractions; i++)
        live[i] = a->fractions[i].fid;
    qsort(live, (size_t)a->n_fractions, sizeof(*live), fid_cmp);
    for (size_t i = 0; i < n_bases; i++)
        if (bsearch(&bases[i].fid, live, (size_t)a->n_fractions, sizeof(*live), fid_cmp))
            bases[kept++] = bases[i];
    n_bases = kept;
    free(live);
}

void gf_idents_opened(gf_agent *a, const gf_afraction *f)
{
    gf_ident id;

    if (n_bases == BASES_MAX)
        prune_bases(a);
    if (n_bases == BASES_MAX) /* every one live: cannot be, fractions are fewer */
        return;
    bases[n_bases++] =
        (base){.fid = f->fid, .kills = f->watchdog_kills, .evictions = evictions_of(f)};
    ident_of(&id, f);
    touch(&id);
}

/* A token of a record: bytes other than printable ASCII, and % and -, as %XX. */
static void encode(char *out, size_t len, const char *s)
{
    size_t n = 0;

    if (!*s) {
        snprintf(out, len, "-");
        return;
    }
    for (; *s && n + 4 < len; s++) {
        unsigned char c = (unsigned char)*s;
        if (c <= ' ' || c >= 0x7f || c == '%' || c == '-')
            n += (size_t)snprintf(out + n, len - n, "%%%02X", c);
        else
            out[n++] = (char)c;
    }
    out[n] = '\0';
}

static bool decode(char *out, size_t len, const char *s)
{
    size_t n = 0;

    if (strcmp(s, "-") == 0) {
        out[0] = '\0';
        return true;
    }
    for (; *s; s++) {
        unsigned v;
        if (n + 1 >= len)
            return false;
        if (*s == '%') {
            if (sscanf(s + 1, "%2x", &v) != 1 || !v)
                return false;
            out[n++] = (char)v;
            s += 2;
        } else {
            out[n++] = *s;
        }
    }
    out[n] = '\0';
    return true;
}

static void record(char *line, size_t len, const gf_ident_count *e)
{
    char ns[3 * sizeof(e->id.ns)], pod[3 * sizeof(e->id.pod_name)], c[3 * sizeof(e->id.container)];

    if (!e->id.pod) {
        if (e->id.uid_known)
            snprintf(line, len, "icount u %u %" PRIu64 " %" PRIu64, (unsigned)e->id.uid,
                     e->evictions, e->kills);
        else
            snprintf(line, len, "icount u - %" PRIu64 " %" PRIu64, e->evictions, e->kills);
        return;
    }
    encode(ns, sizeof(ns), e->id.ns);
    encode(pod, sizeof(pod), e->id.pod_name);
    encode(c, sizeof(c), e->id.container);
    snprintf(line, len, "icount p %s %s %s %" PRIu64 " %" PRIu64, ns, pod, c, e->evictions,
             e->kills);
}

bool gf_idents_counted(gf_agent *a, const gf_afraction *f, char *line, size_t len)
{
    uint64_t kills = f->watchdog_kills, ev = evictions_of(f);
    gf_ident_count *e;
    gf_ident id;
    size_t i;

    for (i = 0; i < n_bases && bases[i].fid != f->fid; i++)
        ;
    if (i == n_bases) { /* opened before a restart of the table: from now on */
        gf_idents_opened(a, f);
        return false;
    }
    if (kills <= bases[i].kills && ev <= bases[i].evictions)
        return false;
    ident_of(&id, f);
    e = touch(&id);
    e->kills += kills > bases[i].kills ? kills - bases[i].kills : 0;
    e->evictions += ev > bases[i].evictions ? ev - bases[i].evictions : 0;
    bases[i].kills = kills;
    bases[i].evictions = ev;
    record(line, len, e);
    e->journaled = true;
    return true;
}

bool gf_idents_unjournaled(char *line, size_t len)
{
    for (size_t i = 0; i < n_table; i++)
        if (!table[i].journaled) {
            record(line, len, &table[i]);
            table[i].journaled = true;
            return true;
        }
    return false;
}

void gf_idents_replay(const char *line)
{
    char kind[2], t[3][400];
    gf_ident id = {0};
    gf_ident_count *e;
    uint64_t ev, kills;
    unsigned uid;

    if (sscanf(line, "icount %1s", kind) != 1)
        return;
    if (kind[0] == 'p') {
        if (sscanf(line, "icount p %399s %399s %399s %" SCNu64 " %" SCNu64, t[0], t[1], t[2], &ev,
                   &kills) != 5 ||
            !decode(id.ns, sizeof(id.ns), t[0]) ||
            !decode(id.pod_name, sizeof(id.pod_name), t[1]) ||
            !decode(id.container, sizeof(id.container), t[2]) || !id.pod_name[0])
            return;
        id.pod = true;
    } else if (sscanf(line, "icount u %u %" SCNu64 " %" SCNu64, &uid, &ev, &kills) == 3) {
        id.uid = (uid_t)uid;
        id.uid_known = true;
    } else if (sscanf(line, "icount u - %" SCNu64 " %" SCNu64, &ev, &kills) != 2) {
        return;
    }
    e = touch(&id);
    e->evictions = ev;
    e->kills = kills;
    e->journaled = true;
}

static int seq_cmp(const void *x, const void *y)
{
    uint64_t a = ((const gf_ident_count *)x)->seq, b = ((const gf_ident_count *)y)->seq;
    return a < b ? -1 : a > b;
}

size_t gf_idents_copy(gf_ident_count *out)
{
    memcpy(out, table, n_table * sizeof(*out));
    qsort(out, n_table, sizeof(*out), seq_cmp);
    return n_table;
}

void gf_idents_write(FILE *fp)
{
    static gf_ident_count sorted[GF_IDENTS_MAX];
    size_t n = gf_idents_copy(sorted);
    char line[GF_IDENTS_LINE_MAX];

    for (size_t i = 0; i < n; i++) {
        record(line, sizeof(line), &sorted[i]);
        fprintf(fp, "%s\n", line);
    }
    for (size_t i = 0; i < n_table; i++)
        table[i].journaled = true;
}
