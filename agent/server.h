/* SPDX-License-Identifier: Apache-2.0 */
#ifndef GPUFRAC_AGENT_SERVER_H
#define GPUFRAC_AGENT_SERVER_H

#include <stdint.h>

#include "agent.h"

/* A SEQPACKET listening socket at path, mode 0600, owned by owner. */
int gf_socket_listen(const char *path, uid_t owner, gf_error *err);
/* Binds and listens on a->socket_path (root only); returns the descriptor. */
int gf_server_listen(gf_agent *a, gf_error *err);
void gf_server_init(void);
/* Accepts what waits on listening socket lfd (of fraction fid; 0: root's). */
void gf_server_accept(gf_agent *a, int lfd, uint64_t fid);
/* Serves client i (the loop's epoll said it is ready). */
void gf_server_client(gf_agent *a, int i, uint32_t events);
/* Closes connections idle for longer than a->client_idle_s. */
void gf_server_sweep(gf_agent *a);

#endif
