/* SPDX-License-Identifier: Apache-2.0 */
#include "netaddr.h"

#include <string.h>

int gf_listen_split(const char *listen, const char *what, const char *example, char *host,
                    size_t hlen, char *port, size_t plen, gf_error *err)
{
    const char *colon = strrchr(listen, ':');
    const char *h = listen;
    size_t n;

    if (!colon || !colon[1] || strspn(colon + 1, "0123456789") != strlen(colon + 1))
        return gf_error_set(err, GF_EINVAL, "%s \"%s\" is not HOST:PORT (e.g. %s)", what, listen,
                            example);
    n = (size_t)(colon - listen);
    if (n >= 2 && h[0] == '[' && h[n - 1] == ']') {
        h++;
        n -= 2;
    }
    if (n == 0) {
        h = "127.0.0.1";
        n = strlen(h);
    }
    if (n >= hlen || strlen(colon + 1) >= plen)
        return gf_error_set(err, GF_EINVAL, "%s \"%s\" is too long", what, listen);
    memcpy(host, h, n);
    host[n] = '\0';
    memcpy(port, colon + 1, strlen(colon + 1) + 1);
    return 0;
}
