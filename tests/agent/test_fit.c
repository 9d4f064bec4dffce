/* SPDX-License-Identifier: Apache-2.0 */
/* The fit table (tests/unit/fit_cases.h) through the agent's
 * gf_admit_check_fit: each row's GPU is the node's one GPU. */
#include "../unit/unit.h"

#include <stdbool.h>
#include <stdio.h>

#include "../unit/fit_cases.h"
#include "admit.h"
#include "agent.h"

#define UUID "GPU-0f1e2d3c-fit0-0000-0000-000000000000"

static gf_agent agent;

static gf_fit_verdict run_case(const fit_case *c, gf_error *err)
{
    gf_agent_gpu *g = &agent.gpus[0];
    gf_fraction_config cfg = {
        .version = GF_CONFIG_VERSION, .mode = c->ask.mode, .compute_percent = 100, .n_devices = 1};

    memset(g, 0, sizeof(*g));
    g->dev.total = c->gpu.total;
    snprintf(g->dev.uuid, sizeof(g->dev.uuid), UUID);
    g->guaranteed = c->gpu.guaranteed;
    g->n_fractions = c->gpu.has_fractions;
    g->mode = c->gpu.mode;
    agent.n_gpus = 1;
    snprintf(cfg.name, sizeof(cfg.name), "new");
    snprintf(cfg.devices[0].uuid, sizeof(cfg.devices[0].uuid), UUID);
    cfg.devices[0].request = cfg.devices[0].limit = c->ask.request;
    if (gf_admit_check_fit(&agent, &cfg, err) == 0)
        return GF_FIT_OK;
    if (strstr(err->msg, "cannot share it"))
        return GF_FIT_MODE;
    if (strstr(err->msg, "not guaranteed to other fractions"))
        return GF_FIT_MEMORY;
    fail_msg("%s: unexpected message: %s", c->what, err->msg);
    return GF_FIT_OK;
}

/* the agent asks mode and memory */
static void test_table(void **state)
{
    (void)state;
    fit_cases_run_admission(run_case, NULL, "GPU " UUID " has ", "runs ");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
