/* Talking to gpufracd: one SOCK_SEQPACKET datagram each way (core/proto.h).
 * Used by the CLI, the runtime wrapper and the shim. */
#ifndef GPUFRAC_AGENT_CLIENT_H
#define GPUFRAC_AGENT_CLIENT_H

#include "error.h"
#include "proto.h"

/* Connects to the agent socket at path; timeout_s > 0 bounds every later
 * send and receive (0: no bound). Returns the descriptor or -1. */
int gf_agent_connect(const char *path, int timeout_s, gf_error *err);

/* One request, one reply on a connected socket. A refusal ("error msg=…") is
 * GF_ESTATE carrying the agent's message; a broken connection is GF_ESYS. */
int gf_agent_exchange(int fd, const char *path, const gf_msg *req, gf_msg *reply,
                      gf_error *err);

/* Connect, exchange, close. */
int gf_agent_request(const char *path, int timeout_s, const gf_msg *req, gf_msg *reply,
                     gf_error *err);

#endif
