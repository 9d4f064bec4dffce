/* SPDX-License-Identifier: Apache-2.0 */
/* `gpufrac demo`: runs gpufrac-probe with and without a fraction and reads
 * its key=value lines. */
#ifndef GPUFRAC_CLI_DEMO_H
#define GPUFRAC_CLI_DEMO_H

#include <stdbool.h>
#include <stdint.h>

#include "error.h"

#define DEMO_KV_MAX 32

typedef struct demo_output {
    int exit_code;
    size_t n;
    struct {
        char key[32];
        char val[128];
    } kv[DEMO_KV_MAX];
} demo_output;

/* Runs argv (argv[0] a path) with stdout captured; stderr passes through. */
int demo_spawn(const char *const argv[], demo_output *out, gf_error *err);

const char *demo_get(const demo_output *o, const char *key);
bool demo_get_u64(const demo_output *o, const char *key, uint64_t *v);

#endif
