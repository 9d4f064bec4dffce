/* SPDX-License-Identifier: Apache-2.0 */
/* Talking to gpufracd: one SOCK_SEQPACKET datagram each way (core/proto.h).
 * Used by the CLI, the runtime wrapper and the shim. */
#ifndef GPUFRAC_AGENT_CLIENT_H
#define GPUFRAC_AGENT_CLIENT_H

#include <stdbool.h>

#include "error.h"
#include "proto.h"

/* Connects to the agent socket at path; timeout_s > 0 bounds the connect (an
 * agent that is stopped with its backlog full) and every later send and
 * receive (0: no bound). Returns the descriptor or -1. */
int gf_agent_connect(const char *path, int timeout_s, gf_error *err);

/* One request, one reply on a connected socket. A refusal ("error msg=…") is
 * GF_ESTATE carrying the agent's message; a broken connection is GF_ESYS (one
 * the agent closed before answering: ECONNRESET). */
int gf_agent_exchange(int fd, const char *path, const gf_msg *req, gf_msg *reply, gf_error *err);

/* As gf_agent_exchange, waiting at most wait_ms for the reply (GF_ESYS,
 * ETIMEDOUT past it; the connection is then out of step: close it, or a late
 * answer is read as the next request's). */
int gf_agent_exchange_within(int fd, const char *path, const gf_msg *req, gf_msg *reply,
                             int wait_ms, gf_error *err);

/* Connect, exchange, close. */
int gf_agent_request(const char *path, int timeout_s, const gf_msg *req, gf_msg *reply,
                     gf_error *err);

/* Was err a request lost to an agent that is not there right now, one that
 * is restarting: its socket missing or refusing, the connection cut before an
 * answer? Such a request may be sent again. A refusal, a timeout (an agent
 * that is there and did not answer) or any other failure may not. */
bool gf_agent_unreachable(const gf_error *err);

/* gf_agent_request, sent again on a new connection every
 * GF_AGENT_RETRY_PAUSE_MS while the agent is unreachable (above), for up to
 * retry_ms. Only for requests that are safe to send twice. */
#define GF_AGENT_RETRY_PAUSE_MS 50
int gf_agent_request_retry(const char *path, int timeout_s, int retry_ms, const gf_msg *req,
                           gf_msg *reply, gf_error *err);

#endif
