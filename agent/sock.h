/* SPDX-License-Identifier: Apache-2.0 */
/* The agent's listening sockets (SEQPACKET): root's, users.sock and one per
 * fraction. */
#ifndef GPUFRAC_AGENT_SOCK_H
#define GPUFRAC_AGENT_SOCK_H

#include <sys/types.h>

#include "agent.h"

/* A listening socket at path, mode 0600, owned by owner. */
int gf_socket_listen(const char *path, uid_t owner, gf_error *err);
/* A listening socket at name in directory dfd, owned by owner, mode 0600: made
 * in <state>/agent (root's alone) and renamed into place, so nothing a user
 * put at that name is followed or chowned. */
int gf_socket_listen_in(gf_agent *a, int dfd, const char *name, uid_t owner, gf_error *err);
/* The same with another mode (users.sock: 0666, each request judged by the
 * caller's credentials). */
int gf_socket_listen_in_mode(gf_agent *a, int dfd, const char *name, uid_t owner, mode_t mode,
                             gf_error *err);
/* Root's socket at a->socket_path; returns the descriptor. */
int gf_socket_listen_root(gf_agent *a, gf_error *err);

#endif
