/* SPDX-License-Identifier: Apache-2.0 */
/* The fit table (fit_cases.h) through the CLI's gf_admit_check: each row's
 * GPU is one planned GPU, its guarantees one other fraction's config on disk
 * in a fresh state directory. */
#include "unit.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "admit.h"
#include "fit_cases.h"

#define UUID "GPU-0f1e2d3c-fit0-0000-0000-000000000000"

static void write_other(const char *state, const fit_case *c)
{
    gf_fraction_config o = {
        .version = GF_CONFIG_VERSION, .mode = c->gpu.mode, .compute_percent = 100, .n_devices = 1};
    char dir[GF_PATH_MAX], path[GF_PATH_MAX + 16], text[GF_CONFIG_TEXT_MAX];
    FILE *fp;

    snprintf(o.name, sizeof(o.name), "other");
    snprintf(dir, sizeof(dir), "%s/fractions/other", state);
    snprintf(o.ledger, sizeof(o.ledger), "/run/gpufrac/fractions/other/ledger");
    snprintf(o.devices[0].uuid, sizeof(o.devices[0].uuid), UUID);
    o.devices[0].request = o.devices[0].limit = c->gpu.guaranteed;
    assert_int_equal(mkdir(dir, 0700), 0);
    assert_true(gf_config_format(&o, text, sizeof(text)) > 0);
    snprintf(path, sizeof(path), "%s/config", dir);
    assert_non_null(fp = fopen(path, "w"));
    fputs(text, fp);
    fclose(fp);
}

static gf_fit_verdict run_case(const fit_case *c, gf_error *err)
{
    static run_plan p;
    char state[] = "/tmp/gf-fit-cli-XXXXXX", cmd[64];
    char frac[sizeof(state) + 16];
    int rc;

    memset(&p, 0, sizeof(p));
    assert_non_null(mkdtemp(state));
    snprintf(frac, sizeof(frac), "%s/fractions", state);
    assert_int_equal(mkdir(frac, 0700), 0);
    if (c->gpu.has_fractions)
        write_other(state, c);
    snprintf(p.state, sizeof(p.state), "%s", state);
    p.gpus.n = 1;
    p.gpus.gpus[0] = (gf_gpu){.index = 0, .total = c->gpu.total};
    snprintf(p.gpus.gpus[0].uuid, sizeof(p.gpus.gpus[0].uuid), UUID);
    snprintf(p.cfg.name, sizeof(p.cfg.name), "new");
    p.cfg.mode = c->ask.mode;
    p.cfg.n_devices = 1;
    p.cfg.devices[0].request = c->ask.request;
    p.cfg.devices[0].limit = c->ask.request;
    rc = gf_admit_check(&p, err);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", state);
    assert_int_equal(system(cmd), 0);
    if (rc == 0)
        return GF_FIT_OK;
    if (strstr(err->msg, "cannot share it"))
        return GF_FIT_MODE;
    if (strstr(err->msg, "not guaranteed to other fractions"))
        return GF_FIT_MEMORY;
    fail_msg("%s: unexpected message: %s", c->what, err->msg);
    return GF_FIT_OK;
}

/* a fraction on disk holds some memory: the CLI cannot see one that holds none */
static bool unseen(const fit_case *c)
{
    return c->gpu.has_fractions && !c->gpu.guaranteed;
}

/* the CLI asks mode and memory */
static void test_table(void **state)
{
    (void)state;
    fit_cases_run_admission(run_case, unseen, "GPU 0 (" UUID ") has ", "fraction \"other\"");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
