/* Listening sockets of the agent: its own and one per fraction. */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "server.h"

int gf_socket_listen(const char *path, uid_t owner, gf_error *err)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd;

    if (strlen(path) >= sizeof(sa.sun_path))
        return gf_error_set(err, GF_EINVAL, "socket path \"%s\" is longer than %zu bytes", path,
                            sizeof(sa.sun_path) - 1);
    strcpy(sa.sun_path, path);
    fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return gf_error_sys(err, "creating socket %s", path);
    unlink(path); /* a stale one from a killed agent */
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 128) < 0 ||
        chmod(path, 0600) < 0 || (owner != 0 && chown(path, owner, (gid_t)-1) < 0)) {
        gf_error_sys(err, "listening on %s", path);
        close(fd);
        return -1;
    }
    return fd;
}

