/* SPDX-License-Identifier: Apache-2.0 */
/* The fraction config file: what a fraction's processes are allowed, written
 * by `gpufrac run` or the runtime wrapper, read (only) by the shim.
 *
 *   # gpufrac fraction config
 *   version=1
 *   name=demo-a
 *   ledger=/run/gpufrac/fractions/demo-a/ledger
 *   mode=time-slicing
 *   compute_percent=100
 *   agent=/run/gpufrac/agent.sock                (optional: where to borrow burst memory)
 *   device=GPU-6b7f...,6442450944,6442450944     (uuid or *, request bytes, limit bytes)
 *
 * One key per line, no spaces around '=', '#' comments, unknown keys refused. */
#ifndef GPUFRAC_CONFIG_H
#define GPUFRAC_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "spec.h"

#define GF_CONFIG_VERSION 1
#define GF_CONFIG_DEVICES_MAX 16
#define GF_UUID_MAX 96
#define GF_NAME_MAX 64
#define GF_PATH_MAX 1024
#define GF_CONFIG_TEXT_MAX 8192

typedef struct gf_config_device {
    char uuid[GF_UUID_MAX]; /* "GPU-..." or "*" (every device) */
    uint64_t request;
    uint64_t limit;
} gf_config_device;

typedef struct gf_fraction_config {
    unsigned version;
    char name[GF_NAME_MAX];   /* [A-Za-z0-9_.-], 1..63 */
    char ledger[GF_PATH_MAX]; /* absolute path */
    gf_mode mode;
    int compute_percent;     /* 1..100 */
    char agent[GF_PATH_MAX]; /* the agent's socket, "" = no agent (no burst) */
    size_t n_devices;        /* >= 1 */
    gf_config_device devices[GF_CONFIG_DEVICES_MAX];
} gf_fraction_config;

int gf_config_parse(const char *text, size_t len, gf_fraction_config *out, gf_error *err);

/* Returns the length written (NUL-terminated), or -1 when buf is too small. */
int gf_config_format(const gf_fraction_config *cfg, char *buf, size_t len);

/* The entry for uuid: an exact match first, else "*", else NULL. */
const gf_config_device *gf_config_find_device(const gf_fraction_config *cfg, const char *uuid);

/* Reads and parses a file (at most GF_CONFIG_TEXT_MAX bytes). */
int gf_config_load(const char *path, gf_fraction_config *out, gf_error *err);

int gf_name_valid(const char *name);

#endif
