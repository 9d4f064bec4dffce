/* SPDX-License-Identifier: Apache-2.0 */
/* Fraction directories the agent makes: <state>/fractions/<name>, built
 * whole under .new-<name> (root's, new, so no path into it is redirected)
 * and renamed into place, so a fraction is seen complete or not at all; a
 * failure leaves nothing. Removal renames it aside to .old-<name> first. */
#ifndef GPUFRAC_AGENT_FRACDIR_H
#define GPUFRAC_AGENT_FRACDIR_H

#include <sys/types.h>

#include "agent.h"
#include "proto.h"

/* A file of the directory besides config and ledger. */
typedef struct gf_fracdir_file {
    const char *name, *text;
    mode_t mode;
} gf_fracdir_file;

typedef struct gf_fracdir_spec {
    gf_fraction_config *cfg; /* its ledger= and agent= are set to the directory's */
    mode_t config_mode;
    gf_fracdir_file extra; /* identity (a container's) or supervisor (a user's) */
    gid_t group;           /* (gid_t)-1: config and extra stay root's group */
    uid_t ledger_uid;      /* (uid_t)-1: the ledger stays root's */
    gid_t ledger_gid;      /* (gid_t)-1: unchanged */
} gf_fracdir_spec;

int gf_fracdir_make(gf_agent *a, const gf_fracdir_spec *s, gf_error *err);
/* Removes <state>/fractions/name (renamed aside first, then emptied). */
void gf_fracdir_remove(gf_agent *a, const char *name);
/* Removes a fraction's directory, journals that it has no supervisor, and
 * forgets it. */
void gf_release_fraction(gf_agent *a, gf_afraction *f);
/* An ok reply naming where f's config, ledger and socket are (what run and
 * admit answer). */
void gf_fracdir_reply(const gf_afraction *f, gf_msg *out);

#endif
