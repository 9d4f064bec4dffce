/* SPDX-License-Identifier: Apache-2.0 */
/* The agent's placement of a container fraction without gpus.devices. */
#ifndef GPUFRAC_AGENT_PLACE_H
#define GPUFRAC_AGENT_PLACE_H

#include "agent.h"
#include "proto.h"

/* Reads place=, request=, limit= and fills cfg->devices (mode from cfg);
 * when nothing fits, the message says what was asked and what is free. */
int gf_place(gf_agent *a, const gf_msg *in, gf_fraction_config *cfg, gf_error *err);
/* devices=uuid/request/limit,... of an admitted fraction, for the admit reply
 * (the runtime takes the placed GPUs from it). */
void gf_place_reply(gf_msg *out, const gf_config_device *devices, size_t n_devices);

#endif
