/* SPDX-License-Identifier: Apache-2.0 */
/* Releasing stale fractions (stale.c). */
#ifndef GPUFRAC_AGENT_STALE_H
#define GPUFRAC_AGENT_STALE_H

#include "agent.h"

/* Releases fractions whose supervisor and processes are all gone (a user's
 * is ended, kept a while for its owner's gpufrac status), and containers'
 * admitted but never attached within a->attach_timeout_s. */
void gf_release_stale(gf_agent *a);

#endif
