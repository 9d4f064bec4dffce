/* SPDX-License-Identifier: Apache-2.0 */
/* The table of families, from families.def. The only file that names every
 * family: the shim's core (init.c's after-fork, device.c's gf_reconcile)
 * walks the table and calls no family by name. */
#include <stddef.h>

#include "shim.h"

#define GF_FAMILY(name) GF_HIDDEN extern const gf_family gf_family_##name;
#include "families.def"

GF_HIDDEN const gf_family *const gf_families[] = {
#define GF_FAMILY(name) &gf_family_##name,
#include "families.def"
    NULL,
};
