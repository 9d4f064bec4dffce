/* SPDX-License-Identifier: Apache-2.0 */
/* Listening sockets of the agent: its own and one per fraction. */
#include "sock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "cleanup.h"
#include "statedir.h"

int gf_socket_listen(const char *path, uid_t owner, gf_error *err)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    gf_cleanup_close int fd = -1;

    if (strlen(path) >= sizeof(sa.sun_path))
        return gf_error_set(err, GF_EINVAL, "socket path \"%s\" is longer than %zu bytes", path,
                            sizeof(sa.sun_path) - 1);
    strcpy(sa.sun_path, path);
    fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return gf_error_sys(err, "creating socket %s", path);
    unlink(path); /* a stale one from a killed agent */
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 128) < 0 ||
        chmod(path, 0600) < 0 || (owner != 0 && chown(path, owner, (gid_t)-1) < 0))
        return gf_error_sys(err, "listening on %s", path);
    return gf_steal_fd(&fd);
}

int gf_socket_listen_in(gf_agent *a, int dfd, const char *name, uid_t owner, gf_error *err)
{
    return gf_socket_listen_in_mode(a, dfd, name, owner, 0600, err);
}

int gf_socket_listen_in_mode(gf_agent *a, int dfd, const char *name, uid_t owner, mode_t mode,
                             gf_error *err)
{
    static unsigned serial;
    char tmp[32], path[GF_PATH_MAX + 48];
    gf_cleanup_close int fd = -1;

    snprintf(tmp, sizeof(tmp), "s%u.%d", ++serial, (int)getpid());
    if ((size_t)snprintf(path, sizeof(path), "%s/" GF_STATE_AGENT_DIR "/%s", a->state_dir, tmp) >=
        sizeof(path))
        return gf_error_set(err, GF_EINVAL, "state directory path too long");
    unlinkat(a->priv_dfd, tmp, 0);
    /* <state>/agent is root's alone: binding, chmod and chown by path there
     * cannot be redirected; the rename then replaces whatever is at name
     * (a link included) without following it */
    if ((fd = gf_socket_listen(path, owner, err)) < 0)
        return -1;
    if (mode != 0600 && fchmodat(a->priv_dfd, tmp, mode, 0) < 0) {
        gf_error_sys(err, "setting the mode of socket %s", path);
        unlinkat(a->priv_dfd, tmp, 0);
        return -1;
    }
    if (renameat(a->priv_dfd, tmp, dfd, name) < 0) {
        gf_error_sys(err, "moving socket %s into place as %s", path, name);
        unlinkat(a->priv_dfd, tmp, 0);
        return -1;
    }
    return gf_steal_fd(&fd);
}

int gf_socket_listen_root(gf_agent *a, gf_error *err)
{
    char def[GF_PATH_MAX + 16];

    snprintf(def, sizeof(def), "%s/" GF_STATE_AGENT_SOCK, a->state_dir);
    if (strcmp(def, a->socket_path) == 0)
        return gf_socket_listen_in(a, a->state_dfd, GF_STATE_AGENT_SOCK, 0, err);
    return gf_socket_listen(a->socket_path, 0, err); /* a path the administrator chose */
}
