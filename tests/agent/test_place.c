/* SPDX-License-Identifier: Apache-2.0 */
/* The agent's placement of a container fraction without gpus.devices
 * (agent/place.c): binpack, modes apart, and the message when nothing fits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "place.h"

#define GiB (1024ULL * 1024ULL * 1024ULL)

static gf_agent agent;

static void gpu(int i, uint64_t total, uint64_t guaranteed, int n, gf_mode mode)
{
    gf_agent_gpu *g = &agent.gpus[i];
    memset(g, 0, sizeof(*g));
    g->dev.index = i;
    snprintf(g->dev.uuid, sizeof(g->dev.uuid), "GPU-%d", i);
    g->dev.total = total;
    g->guaranteed = guaranteed;
    g->n_fractions = n;
    g->mode = mode;
    if (i + 1 > agent.n_gpus)
        agent.n_gpus = i + 1;
}

static int place(const char *count, const char *req, const char *lim, gf_mode mode,
                 gf_fraction_config *cfg, gf_error *err)
{
    gf_msg m;
    gf_msg_init(&m, "admit");
    gf_msg_add(&m, "place", count);
    gf_msg_add(&m, "request", req);
    gf_msg_add(&m, "limit", lim);
    memset(cfg, 0, sizeof(*cfg));
    cfg->mode = mode;
    return gf_place(&agent, &m, cfg, err);
}

static int setup(void **state)
{
    (void)state;
    memset(&agent, 0, sizeof(agent));
    return 0;
}

static void binpack_takes_the_fullest_gpu_that_fits(void **state)
{
    gf_fraction_config cfg;
    gf_error err;
    (void)state;
    gpu(0, 8 * GiB, 1 * GiB, 1, GF_MODE_TIME_SLICING);
    gpu(1, 8 * GiB, 5 * GiB, 2, GF_MODE_TIME_SLICING);
    gpu(2, 8 * GiB, 7 * GiB, 1, GF_MODE_TIME_SLICING); /* 1 GiB left: too little */
    assert_int_equal(place("1", "2147483648", "4294967296", GF_MODE_TIME_SLICING, &cfg, &err), 0);
    assert_int_equal(cfg.n_devices, 1);
    assert_string_equal(cfg.devices[0].uuid, "GPU-1");
    assert_int_equal(cfg.devices[0].request, 2 * GiB);
    assert_int_equal(cfg.devices[0].limit, 4 * GiB);
}

static void ties_go_to_the_lower_index_and_portions_resolve_per_gpu(void **state)
{
    gf_fraction_config cfg;
    gf_error err;
    (void)state;
    gpu(0, 4 * GiB, 0, 0, GF_MODE_TIME_SLICING);
    gpu(1, 4 * GiB, 0, 0, GF_MODE_TIME_SLICING);
    assert_int_equal(place("2", "0.25", "0.5", GF_MODE_TIME_SLICING, &cfg, &err), 0);
    assert_int_equal(cfg.n_devices, 2);
    assert_string_equal(cfg.devices[0].uuid, "GPU-0");
    assert_string_equal(cfg.devices[1].uuid, "GPU-1");
    assert_int_equal(cfg.devices[0].request, 1 * GiB);
    assert_int_equal(cfg.devices[1].limit, 2 * GiB);
}

static void modes_never_share_a_gpu(void **state)
{
    gf_fraction_config cfg;
    gf_error err;
    (void)state;
    gpu(0, 8 * GiB, 6 * GiB, 1, GF_MODE_SM_SHARING); /* fuller, but the other mode */
    gpu(1, 8 * GiB, 0, 0, GF_MODE_TIME_SLICING);
    assert_int_equal(place("1", "1073741824", "1073741824", GF_MODE_TIME_SLICING, &cfg, &err), 0);
    assert_string_equal(cfg.devices[0].uuid, "GPU-1");
    assert_int_equal(place("1", "1073741824", "1073741824", GF_MODE_SM_SHARING, &cfg, &err), 0);
    assert_string_equal(cfg.devices[0].uuid, "GPU-0");
}

static void nothing_fits_says_what_was_asked_and_what_is_free(void **state)
{
    gf_fraction_config cfg;
    gf_error err;
    (void)state;
    gpu(0, 8 * GiB, 7 * GiB, 2, GF_MODE_TIME_SLICING);
    gpu(1, 8 * GiB, 2 * GiB, 1, GF_MODE_SM_SHARING);
    assert_int_equal(place("1", "2147483648", "2147483648", GF_MODE_TIME_SLICING, &cfg, &err), -1);
    assert_non_null(strstr(err.msg, "asks for 1 GPU(s) with 2.00 GiB guaranteed each "
                                    "(time-slicing), 0 fit"));
    assert_non_null(strstr(err.msg, "GPU 0 (GPU-0): 1.00 GiB not guaranteed, runs time-slicing"));
    assert_non_null(strstr(err.msg, "GPU 1 (GPU-1): 6.00 GiB not guaranteed, runs sm-sharing"));
    assert_int_equal(cfg.n_devices, 0);
}

static void bad_requests_are_refused(void **state)
{
    gf_fraction_config cfg;
    gf_error err;
    (void)state;
    gpu(0, 8 * GiB, 0, 0, GF_MODE_TIME_SLICING);
    assert_int_equal(place("0", "1073741824", "1073741824", GF_MODE_TIME_SLICING, &cfg, &err), -1);
    assert_non_null(strstr(err.msg, "place= must be a GPU count"));
    assert_int_equal(place("1", "lots", "1073741824", GF_MODE_TIME_SLICING, &cfg, &err), -1);
    assert_non_null(strstr(err.msg, "request="));
    /* limit below request on every GPU: nothing fits */
    assert_int_equal(place("1", "2147483648", "1073741824", GF_MODE_TIME_SLICING, &cfg, &err), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(binpack_takes_the_fullest_gpu_that_fits, setup),
        cmocka_unit_test_setup(ties_go_to_the_lower_index_and_portions_resolve_per_gpu, setup),
        cmocka_unit_test_setup(modes_never_share_a_gpu, setup),
        cmocka_unit_test_setup(nothing_fits_says_what_was_asked_and_what_is_free, setup),
        cmocka_unit_test_setup(bad_requests_are_refused, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
