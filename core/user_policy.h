/* SPDX-License-Identifier: Apache-2.0 */
/* The administrator's policy for a shared host (/etc/gpufrac/policy.conf):
 * what each local user may ask of gpufracd.
 *
 *   # comment
 *   [default]                       applies to everyone
 *   max-guaranteed = 8Gi            most --memory per GPU (quantity or portion: 0.5)
 *   max-limit = 16Gi                most --limit per GPU (guaranteed + burstable)
 *   modes = time-slicing            allowed --mode values, comma separated
 *   max-compute = 0.5               most --compute (sm-sharing SM share)
 *   max-fractions = 2               most fractions of that user at once
 *
 *   [group students]                members of the group (any of their groups)
 *   max-fractions = 1
 *
 *   [user alice]                    that user
 *   max-guaranteed = 40Gi
 *
 * For each key the most specific section that sets it decides: [user],
 * else the most generous of the user's [group]s, else [default], else no
 * limit (max-fractions: GF_USER_POLICY_MAX_FRACTIONS_DEFAULT). Root is never limited. A refusal
 * names the file, line, section and key of the rule that decided. */
#ifndef GPUFRAC_USER_POLICY_H
#define GPUFRAC_USER_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "amount.h"
#include "error.h"
#include "spec.h"

#define GF_USER_POLICY_SECTIONS_MAX 256
#define GF_USER_POLICY_NAME_MAX 33 /* user and group names: 32 characters */
/* Fractions one user may hold at once where no max-fractions rule applies
 * to them (no policy file, or none that sets it): every user is bounded. */
#define GF_USER_POLICY_MAX_FRACTIONS_DEFAULT 32

typedef enum gf_user_policy_key {
    GF_POL_MAX_GUARANTEED,
    GF_POL_MAX_LIMIT,
    GF_POL_MODES,
    GF_POL_MAX_COMPUTE,
    GF_POL_MAX_FRACTIONS,
    GF_POL_KEYS
} gf_user_policy_key;

typedef enum gf_user_policy_scope {
    GF_POL_DEFAULT,
    GF_POL_GROUP,
    GF_POL_USER
} gf_user_policy_scope;

/* One key's value in one section. */
typedef struct gf_user_policy_value {
    bool set;
    int line;
    gf_amount amount; /* max-guaranteed, max-limit */
    unsigned modes;   /* modes: bit (1 << gf_mode) */
    double compute;   /* max-compute, (0,1] */
    uint64_t count;   /* max-fractions */
} gf_user_policy_value;

typedef struct gf_user_policy_section {
    gf_user_policy_scope scope;
    char name[GF_USER_POLICY_NAME_MAX]; /* user or group; "" for [default] */
    int line;
    gf_user_policy_value v[GF_POL_KEYS];
} gf_user_policy_section;

typedef struct gf_user_policy {
    char file[256]; /* for messages */
    size_t n;
    gf_user_policy_section s[GF_USER_POLICY_SECTIONS_MAX];
} gf_user_policy;

/* Parses the text (need not be NUL-terminated). A bad line fails the whole
 * file with its line number, what is wrong and what is accepted. */
int gf_user_policy_parse(const char *text, size_t len, const char *file, gf_user_policy *out,
                         gf_error *err);

/* What applies to one user: per key the deciding section (NULL: no limit). */
typedef struct gf_user_policy_rules {
    const gf_user_policy_section *from[GF_POL_KEYS];
} gf_user_policy_rules;

void gf_user_policy_rules_for(const gf_user_policy *p, const char *user, const char *const *groups,
                              size_t n_groups, gf_user_policy_rules *out);

/* One device of a requested fraction, with its GPU's size (for portions). */
typedef struct gf_user_policy_device {
    uint64_t request, limit, gpu_total;
} gf_user_policy_device;

typedef struct gf_user_policy_ask {
    gf_mode mode;
    int compute_percent; /* 100 unless sm-sharing with a share */
    size_t n_devices;
    const gf_user_policy_device *devices;
    size_t fractions_held; /* the user's live fractions before this one */
} gf_user_policy_ask;

/* 0, or GF_ERANGE with "policy <file>:<line> [<section>] <key> = <value>:
 * <what was asked>". */
int gf_user_policy_check(const gf_user_policy *p, const gf_user_policy_rules *r,
                         const gf_user_policy_ask *ask, gf_error *err);

const char *gf_user_policy_key_name(gf_user_policy_key k);

#endif
