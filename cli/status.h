/* What `gpufrac status` knows about one fraction. */
#ifndef GPUFRAC_CLI_STATUS_H
#define GPUFRAC_CLI_STATUS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "config.h"
#include "fraction.h"

#define STATUS_PIDS_MAX 64

typedef struct status_device {
    char uuid[GF_UUID_MAX];
    uint64_t request, limit, used, peak, denied, lent, evictions;
} status_device;

typedef struct status_fraction {
    char name[GF_NAME_MAX];
    char dir[GF_PATH_MAX];
    bool readable;  /* config and ledger could be read */
    char error[GF_ERROR_MSG_MAX];
    gf_fraction_state state;
    pid_t supervisor;
    gf_mode mode;
    int compute_percent;
    size_t n_devices;
    status_device devices[GF_CONFIG_DEVICES_MAX];
    uint64_t used, denied, lent, evictions;
    size_t n_pids; /* may exceed STATUS_PIDS_MAX */
    pid_t pids[STATUS_PIDS_MAX];
} status_fraction;

/* Reads every fraction under <state>/fractions, sorted by name. */
int status_collect(const char *state, status_fraction **out, size_t *n, gf_error *err);

void status_print_table(const status_fraction *f, size_t n, const char *state);
int status_print_json(const status_fraction *f, size_t n, gf_error *err);

#endif
