/* SPDX-License-Identifier: Apache-2.0 */
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpus.h"

static bool all_digits(const char *s, size_t len)
{
    if (len == 0)
        return false;
    for (size_t i = 0; i < len; i++)
        if (!isdigit((unsigned char)s[i]))
            return false;
    return true;
}

static int describe(const gf_gpu_list *all, char *buf, size_t len)
{
    size_t off = 0;
    for (size_t i = 0; i < all->n && off < len; i++) {
        int w = snprintf(buf + off, len - off, "%s%u=%s", i ? ", " : "", all->gpus[i].index,
                         all->gpus[i].uuid);
        if (w < 0)
            return -1;
        off += (size_t)w;
    }
    return 0;
}

/* One entry: an index, a UUID or unique UUID prefix ("GPU-6b7f"), or a CDI
 * name whose part after '=' is one of those. */
static int find_one(const gf_gpu_list *all, const char *ent, size_t len, const char *what,
                    const gf_gpu **found, gf_error *err)
{
    char known[1024] = "";
    const char *eq = memchr(ent, '=', len);
    int matches = 0;

    if (eq) {
        len -= (size_t)(eq + 1 - ent);
        ent = eq + 1;
    }
    *found = NULL;
    if (all_digits(ent, len)) {
        unsigned long idx = strtoul(ent, NULL, 10);
        for (size_t i = 0; i < all->n; i++)
            if (all->gpus[i].index == idx)
                *found = &all->gpus[i];
    } else if (len > 4 && strncmp(ent, "GPU-", 4) == 0) {
        for (size_t i = 0; i < all->n; i++)
            if (strncmp(all->gpus[i].uuid, ent, len) == 0 && matches++ == 0)
                *found = &all->gpus[i];
        if (matches > 1)
            return gf_error_set(err, GF_EINVAL, "%s: \"%.*s\" matches more than one GPU", what,
                                (int)len, ent);
    } else {
        return gf_error_set(err, GF_EINVAL,
                            "%s: \"%.*s\" is not a GPU index or UUID (accepted: a comma list of "
                            "indices like 0,1 or UUIDs like GPU-6b7f…)",
                            what, (int)len, ent);
    }
    if (*found)
        return 0;
    describe(all, known, sizeof(known));
    return gf_error_set(err, GF_EINVAL, "%s: \"%.*s\" matches no GPU on this host (GPUs: %s)", what,
                        (int)len, ent, known);
}

static int add_unique(gf_gpu_list *out, const gf_gpu *g, const char *what, gf_error *err)
{
    for (size_t i = 0; i < out->n; i++)
        if (strcmp(out->gpus[i].uuid, g->uuid) == 0)
            return gf_error_set(err, GF_EINVAL, "%s: GPU %u (%s) is listed twice", what, g->index,
                                g->uuid);
    if (out->n >= GF_CONFIG_DEVICES_MAX)
        return gf_error_set(err, GF_ERANGE, "%s: at most %d GPUs per fraction", what,
                            GF_CONFIG_DEVICES_MAX);
    out->gpus[out->n++] = *g;
    return 0;
}

int gf_gpus_select(const gf_gpu_list *all, const char *list, const char *what, gf_gpu_list *out,
                   gf_error *err)
{
    const char *p = list;

    out->n = 0;
    for (;;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const gf_gpu *g;

        if (len == 0)
            return gf_error_set(err, GF_EINVAL,
                                "%s: \"%s\" has an empty entry (accepted: a comma list of "
                                "indices like 0,1 or UUIDs like GPU-6b7f…)",
                                what, list);
        if (find_one(all, p, len, what, &g, err) < 0 || add_unique(out, g, what, err) < 0)
            return -1;
        if (!end)
            return 0;
        p = end + 1;
    }
}

static int select_all(const gf_gpu_list *all, gf_gpu_list *out, gf_error *err)
{
    out->n = 0;
    for (size_t i = 0; i < all->n; i++)
        if (add_unique(out, &all->gpus[i], "GPUs", err) < 0)
            return gf_error_wrap(err, "this host has %zu GPUs; choose some with --devices", all->n);
    return 0;
}

int gf_gpus_select_default(const gf_gpu_list *all, gf_gpu_list *out, gf_error *err)
{
    static const char *const vars[] = {"CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"};

    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        const char *v = getenv(vars[i]);
        if (!v)
            continue;
        if (strcmp(v, "all") == 0)
            break;
        if (v[0] == '\0' || strcmp(v, "none") == 0 || strcmp(v, "void") == 0 ||
            strcmp(v, "-1") == 0)
            return gf_error_set(err, GF_EINVAL, "%s=\"%s\" makes no GPU visible", vars[i], v);
        return gf_gpus_select(all, v, vars[i], out, err);
    }
    return select_all(all, out, err);
}
