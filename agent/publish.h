/* SPDX-License-Identifier: Apache-2.0 */
/* The node annotation (publish.c). */
#ifndef GPUFRAC_AGENT_PUBLISH_H
#define GPUFRAC_AGENT_PUBLISH_H

#include "agent.h"

/* the node annotation gpufrac.io/gpus (when --node-name is set). */
void gf_publish_tick(gf_agent *a);

#endif
