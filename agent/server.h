#ifndef GPUFRAC_AGENT_SERVER_H
#define GPUFRAC_AGENT_SERVER_H

#include "agent.h"

/* A SEQPACKET listening socket at path, mode 0600, owned by owner. */
int gf_socket_listen(const char *path, uid_t owner, gf_error *err);
/* Binds and listens on a->socket_path (root only); returns the descriptor. */
int gf_server_listen(gf_agent *a, gf_error *err);
/* Serves one datagram on a connected client; -1 when the client is gone. */
int gf_server_serve(gf_agent *a, int fd);

#endif
