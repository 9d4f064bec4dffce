/* SPDX-License-Identifier: Apache-2.0 */
/* What a new fraction must not break: on each GPU the requests of all
 * fractions fit in the device (a guarantee is real), and time-slicing and
 * sm-sharing fractions never share a GPU. Checked and installed under one
 * lock on the state directory, so two runs cannot both pass. Also the
 * agent: whether gpufracd serves this state directory. */
#ifndef GPUFRAC_CLI_ADMIT_H
#define GPUFRAC_CLI_ADMIT_H

#include "agent_client.h"
#include "error.h"
#include "proto.h"
#include "run.h"

/* Takes the state directory's lock; returns its descriptor. */
int gf_state_lock(const char *state, gf_error *err);
void gf_state_unlock(int fd);

/* Fails (GF_ESTATE) naming the GPU, the figures and the fraction in the way. */
int gf_admit_check(const run_plan *p, gf_error *err);

/* Does gpufracd serve this state directory (<state>/agent.sock exists)? Its
 * own socket is root's; a fraction talks to it through <fraction>/agent.sock. */
bool gf_agent_present(const char *state);
/* Waits (at most 5 s) for the agent to open a fraction's socket. */
int gf_agent_wait_socket(const char *path, gf_error *err);

#endif
