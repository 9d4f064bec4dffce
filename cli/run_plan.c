/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "amount.h"
#include "cli.h"
#include "fraction.h"
#include "quantity.h"
#include "run.h"
#include "statedir.h"

/* The least memory a fraction may be given: a CUDA context alone needs more,
 * so a smaller quantity is a missing unit ("--memory 2" is 2 bytes). */
#define RUN_MEMORY_FLOOR GF_MIB

/* The least memory one CUDA context takes before any allocation (the limit
 * bounds the whole footprint, context included): gpusim's default context;
 * a real GPU's is larger. The CLI knows no device's real figure before a
 * process of the fraction measures it, so a limit below this cannot run
 * anything and is refused up front instead of ending in an out-of-memory. */
#define RUN_CONTEXT_MIN (64 * GF_MIB)

static int check_floor(const char *flag, const char *text, const gf_amount *a, gf_error *err)
{
    size_t digits = strspn(text, "0123456789.");

    if (a->is_portion || a->bytes >= RUN_MEMORY_FLOOR)
        return 0;
    if (digits == 0 || digits > 16)
        return gf_error_set(err, GF_EINVAL,
                            "%s: \"%s\" is %llu bytes; a fraction needs at least 1Mi", flag, text,
                            (unsigned long long)a->bytes);
    return gf_error_set(err, GF_EINVAL,
                        "%s: \"%s\" is %llu bytes; a fraction needs at least 1Mi (did you "
                        "mean %.*sGi?)",
                        flag, text, (unsigned long long)a->bytes, (int)digits, text);
}

/* Every flag value on its own; returns GF_EXIT_USAGE on the first bad one. */
static int parse_values(const run_opts *o, gf_spec *s, gf_error *err)
{
    memset(s, 0, sizeof(*s));
    s->mode = GF_MODE_TIME_SLICING;
    if (o->memory && (gf_amount_parse(o->memory, "--memory", &s->request, err) < 0 ||
                      check_floor("--memory", o->memory, &s->request, err) < 0))
        return GF_EXIT_USAGE;
    s->has_request = o->memory != NULL;
    if (o->limit && (gf_amount_parse(o->limit, "--limit", &s->limit, err) < 0 ||
                     check_floor("--limit", o->limit, &s->limit, err) < 0))
        return GF_EXIT_USAGE;
    s->has_limit = o->limit != NULL;
    if (!s->has_request && !s->has_limit) {
        gf_error_set(err, GF_EINVAL,
                     "--memory is required: how much GPU memory COMMAND may use, as a "
                     "quantity (8Gi) or a portion of the GPU (0.5, 50%%)");
        return GF_EXIT_USAGE;
    }
    if (o->mode && gf_mode_parse(o->mode, "--mode", &s->mode, err) < 0)
        return GF_EXIT_USAGE;
    if (o->compute && gf_compute_portion_parse(o->compute, "--compute", &s->compute, err) < 0)
        return GF_EXIT_USAGE;
    s->has_compute = o->compute != NULL;
    if (s->has_compute && s->mode != GF_MODE_SM_SHARING) {
        gf_error_set(err, GF_EINVAL,
                     "--compute needs --mode sm-sharing (time-slicing shares "
                     "the whole GPU by turns)");
        return GF_EXIT_USAGE;
    }
    /* --devices is matched against the GPUs by choose_gpus, not kept in the spec */
    if (gf_spec_finish(s, err) < 0) {
        if (o->memory && o->limit)
            gf_error_wrap(err, "--memory %s, --limit %s", o->memory, o->limit);
        return GF_EXIT_USAGE;
    }
    return 0;
}

static int parse_name(const run_opts *o, gf_fraction_config *cfg, gf_error *err)
{
    if (!o->name) {
        snprintf(cfg->name, sizeof(cfg->name), "run-%d", (int)getpid());
        return 0;
    }
    if (!gf_name_valid(o->name)) {
        gf_error_set(err, GF_EINVAL,
                     "--name: \"%s\" is not a valid name (1 to %d of A-Z a-z 0-9 _ . -)", o->name,
                     GF_NAME_MAX - 1);
        return GF_EXIT_USAGE;
    }
    snprintf(cfg->name, sizeof(cfg->name), "%s", o->name);
    return 0;
}

static int choose_gpus(const run_opts *o, run_plan *p, gf_error *err)
{
    gf_gpu_list all;

    if (gf_gpus_probe(&all, err) < 0)
        return GF_EXIT_FAIL;
    if (o->devices) {
        if (gf_gpus_select(&all, o->devices, "--devices", &p->gpus, err) < 0)
            return GF_EXIT_USAGE;
        if (p->spec.mode == GF_MODE_SM_SHARING && p->gpus.n > 1) {
            gf_error_set(err, GF_EINVAL,
                         "--devices \"%s\": an sm-sharing fraction runs on one GPU (one MPS "
                         "daemon per GPU serves it); name one",
                         o->devices);
            return GF_EXIT_USAGE;
        }
        p->set_visible = true;
        return 0;
    }
    if (gf_gpus_select_default(&all, &p->gpus, err) < 0)
        return GF_EXIT_USAGE;
    /* NVIDIA_VISIBLE_DEVICES means nothing to CUDA outside a container */
    p->set_visible = !getenv("CUDA_VISIBLE_DEVICES") && p->gpus.n != all.n;
    /* one MPS daemon per GPU serves an sm-sharing fraction: it gets one GPU,
     * the first of those visible, and CUDA is shown only that one */
    if (p->spec.mode == GF_MODE_SM_SHARING && p->gpus.n > 1) {
        p->gpus.n = 1;
        p->set_visible = true;
    }
    return 0;
}

static int resolve_devices(const run_opts *o, run_plan *p, gf_error *err)
{
    gf_fraction_config *cfg = &p->cfg;

    cfg->n_devices = p->gpus.n;
    for (size_t i = 0; i < p->gpus.n; i++) {
        const gf_gpu *g = &p->gpus.gpus[i];
        gf_config_device *d = &cfg->devices[i];
        char total[32];

        snprintf(d->uuid, sizeof(d->uuid), "%s", g->uuid);
        if (gf_spec_resolve(&p->spec, g->total, &d->request, &d->limit, err) < 0) {
            gf_bytes_human(g->total, total, sizeof(total));
            gf_error_wrap(err, "%s%s%s%s%s: GPU %u (%s, %s)", o->memory ? "--memory " : "",
                          o->memory ? o->memory : "", o->memory && o->limit ? ", " : "",
                          o->limit ? "--limit " : "", o->limit ? o->limit : "", g->index, g->uuid,
                          total);
            return GF_EXIT_USAGE;
        }
        if (d->limit < RUN_CONTEXT_MIN) {
            char got[32];

            gf_bytes_human(d->limit, got, sizeof(got));
            gf_error_set(err, GF_EINVAL,
                         "%s \"%s\": %s on GPU %u is less than one CUDA context needs; a "
                         "fraction needs at least 64Mi (a context alone takes 64 MiB on gpusim, "
                         "more on a real GPU)",
                         o->limit ? "--limit" : "--memory", o->limit ? o->limit : o->memory, got,
                         g->index);
            return GF_EXIT_USAGE;
        }
    }
    return 0;
}

int run_plan_make(const run_opts *o, run_plan *p, gf_error *err)
{
    gf_fraction_config *cfg = &p->cfg;
    int rc;

    memset(p, 0, sizeof(*p));
    if ((rc = parse_values(o, &p->spec, err)) || (rc = parse_name(o, cfg, err)) ||
        (rc = choose_gpus(o, p, err)) || (rc = resolve_devices(o, p, err)))
        return rc;
    cfg->version = GF_CONFIG_VERSION;
    cfg->mode = p->spec.mode;
    cfg->compute_percent = p->spec.has_compute ? gf_compute_percent(p->spec.compute) : 100;
    if (gf_state_dir_given(o->state_dir, err) < 0)
        return GF_EXIT_USAGE;
    if (gf_state_dir(o->state_dir, true, p->state, sizeof(p->state), err) < 0)
        return GF_EXIT_FAIL;
    if (gf_fraction_path(cfg->ledger, sizeof(cfg->ledger), p->state, cfg->name, GF_FRAC_LEDGER,
                         err) < 0)
        return GF_EXIT_FAIL;
    return 0;
}
