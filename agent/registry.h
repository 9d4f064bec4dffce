/* SPDX-License-Identifier: Apache-2.0 */
/* The registry (registry.c): the fractions of <state>/fractions. */
#ifndef GPUFRAC_AGENT_REGISTRY_H
#define GPUFRAC_AGENT_REGISTRY_H

#include "agent.h"

/* (re)reads <state>/fractions, opening new fractions (config
 * once, ledger O_NOFOLLOW, never mapped) and closing those that are gone;
 * refreshes each ledger's view and recomputes per-GPU sums (guarantees from
 * the configs, loans from the agent's own record). */
int gf_registry_scan(gf_agent *a, gf_error *err);
/* As gf_registry_scan, but skipped when the fractions directory has not
 * changed since the last scan (what requests use). The tick does the full one. */
int gf_registry_scan_if_changed(gf_agent *a, gf_error *err);
gf_afraction *gf_registry_find_name(gf_agent *a, const char *name);
/* The same, rescanning once on a miss (a fraction made since the last scan). */
gf_afraction *gf_registry_find_name_fresh(gf_agent *a, const char *name);
/* Opens the one fraction the agent just made at <state>/fractions/name (no
 * full scan: an admission costs the same however many fractions there are);
 * NULL with why when it cannot be opened. */
gf_afraction *gf_registry_open_new(gf_agent *a, const char *name, gf_error *err);
/* Forgets f, whose directory is gone (released or ended): closes what it
 * holds, without a rescan of every fraction. f's slot then holds another. */
void gf_registry_forget(gf_agent *a, gf_afraction *f);
void gf_registry_sums(gf_agent *a);

#endif
