#ifndef GPUFRAC_AGENT_SERVER_H
#define GPUFRAC_AGENT_SERVER_H

#include "agent.h"

/* Binds and listens on a->socket_path; returns the listening descriptor. */
int gf_server_listen(gf_agent *a, gf_error *err);
/* Serves one datagram on a connected client; -1 when the client is gone. */
int gf_server_serve(gf_agent *a, int fd);

#endif
