/* SPDX-License-Identifier: Apache-2.0 */
/* What the agent holds of one fraction (fraction.c): its config's parts,
 * its ledger's private view, and the lookup by fid. */
#ifndef GPUFRAC_AGENT_FRACTION_H
#define GPUFRAC_AGENT_FRACTION_H

#include <stdbool.h>
#include <stdint.h>

#include "agent.h"

/* Fills c from a parsed config and the agent's ledger path. */
int gf_aconfig_set(gf_aconfig *c, const gf_fraction_config *cfg, const char *ledger, gf_error *err);
/* The entry for uuid: an exact match first, else "*", else NULL (as
 * gf_config_find_device). */
const gf_config_device *gf_aconfig_device(const gf_aconfig *c, const char *uuid);
/* Frees what f holds (not its descriptors) and clears the pointers. */
void gf_fraction_free(gf_afraction *f);

/* Sizes f's ledger view to the node GPUs its config covers (after f->cfg is
 * set), then reads it. */
int gf_fraction_view_init(gf_agent *a, gf_afraction *f, gf_error *err);
/* Reads f's ledger again into its view. */
void gf_fraction_view_read(gf_agent *a, gf_afraction *f);
/* The private copy of f's ledger entry for node GPU gpu and its index in the
 * ledger, or NULL (exact: only an entry named by the GPU's own uuid). */
const gf_ledger_device *gf_fraction_ledger_device(const gf_afraction *f, int gpu, bool exact,
                                                  int *index);
/* The fraction the agent opened with this fid (never reused), or NULL. */
gf_afraction *gf_fraction_find_fid(gf_agent *a, uint64_t fid);

#endif
