/* SPDX-License-Identifier: Apache-2.0 */
/* Listen addresses for the HTTP endpoints (the agent's /metrics, the
 * scheduler extender): "host:port", "[v6]:port" or ":port" (loopback),
 * split into a host and a port for getaddrinfo. Pure: resolves nothing. */
#ifndef GPUFRAC_NETADDR_H
#define GPUFRAC_NETADDR_H

#include <stddef.h>

#include "error.h"

/* Splits listen into host (brackets of a v6 literal removed; "127.0.0.1" when
 * empty) and port (digits only, never empty). "what" names the setting in
 * messages ("--listen"), "example" is a valid address shown with them.
 * Fails with GF_EINVAL when listen is not of that form or a part does not fit
 * its buffer; host and port are left untouched then. */
int gf_listen_split(const char *listen, const char *what, const char *example, char *host,
                    size_t hlen, char *port, size_t plen, gf_error *err);

#endif
