/* SPDX-License-Identifier: Apache-2.0 */
/* GPUSIM_FAIL="name:N[:error],name2:M": the Nth call (1-based, per process)
 * of entry point `name` fails with `error` (default 2, out of memory) before
 * doing anything. */
#include <stdlib.h>
#include <string.h>

#include "gs.h"

#define GS_MAX_RULES 32

typedef struct rule {
    char name[64];
    unsigned long nth;
    int err;
    _Atomic unsigned long calls;
} rule;

static rule rules[GS_MAX_RULES];
static int nrules;
static _Atomic int parsed; /* 0 no, 1 yes */
static pthread_mutex_t parse_mu = PTHREAD_MUTEX_INITIALIZER;

static int parse_rule(const char *p, const char *e, rule *r)
{
    const char *c1 = memchr(p, ':', (size_t)(e - p)), *c2;
    char num[32];
    char *end;
    size_t len;

    if (!c1 || c1 == p || (size_t)(c1 - p) >= sizeof r->name)
        return -1;
    memcpy(r->name, p, (size_t)(c1 - p));
    r->name[c1 - p] = 0;
    c2 = memchr(c1 + 1, ':', (size_t)(e - c1 - 1));
    len = (size_t)((c2 ? c2 : e) - c1 - 1);
    if (len == 0 || len >= sizeof num)
        return -1;
    memcpy(num, c1 + 1, len);
    num[len] = 0;
    r->nth = strtoul(num, &end, 10);
    if (*end || r->nth == 0)
        return -1;
    r->err = CUDA_ERROR_OUT_OF_MEMORY;
    if (c2) {
        len = (size_t)(e - c2 - 1);
        if (len == 0 || len >= sizeof num)
            return -1;
        memcpy(num, c2 + 1, len);
        num[len] = 0;
        long v = strtol(num, &end, 10);
        if (*end || v < 0 || v > 100000)
            return -1;
        r->err = (int)v;
    }
    return 0;
}

static void parse_rules(void)
{
    pthread_mutex_lock(&parse_mu);
    if (!atomic_load(&parsed)) {
        const char *v = getenv("GPUSIM_FAIL"), *p = v;
        while (p && *p && nrules < GS_MAX_RULES) {
            const char *e = strchr(p, ',');
            if (!e)
                e = p + strlen(p);
            if (parse_rule(p, e, &rules[nrules]) == 0)
                nrules++;
            else
                gs_log("ignoring bad GPUSIM_FAIL entry in '%s'", v);
            p = *e ? e + 1 : e;
        }
        atomic_store_explicit(&parsed, 1, memory_order_release);
    }
    pthread_mutex_unlock(&parse_mu);
}

bool gs_fail_hit(const char *name, int *cache, int *err)
{
    int idx;
    if (GS_UNLIKELY(!atomic_load_explicit(&parsed, memory_order_acquire)))
        parse_rules();
    if (GS_UNLIKELY(nrules == 0))
        return false;
    idx = __atomic_load_n(cache, __ATOMIC_RELAXED);
    if (idx == -2) {
        idx = -1;
        for (int i = nrules - 1; i >= 0; i--)
            if (strcmp(rules[i].name, name) == 0)
                idx = i;
        __atomic_store_n(cache, idx, __ATOMIC_RELAXED);
    }
    if (idx < 0)
        return false;
    bool hit = false;
    for (int i = idx; i < nrules; i++) {
        if (strcmp(rules[i].name, name) != 0)
            continue;
        if (atomic_fetch_add(&rules[i].calls, 1) + 1 == rules[i].nth && !hit) {
            gs_log("injected failure %d in %s", rules[i].err, name);
            *err = rules[i].err;
            hit = true;
        }
    }
    return hit;
}
