/* SPDX-License-Identifier: Apache-2.0 */
/* `gpufrac run` by a user other than root where gpufracd serves the state
 * directory: the agent makes the fraction (<state>/users.sock, see
 * agent/user_admit.h), admitted against every fraction on the GPU and the
 * administrator's policy; the run holds a read lock on its supervisor record
 * while it lives, and asks the agent to end the fraction when it is over.
 * Both requests ride out an agent restart (GF_RUN_AGENT_RESTART_MS). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "admit.h"
#include "cli.h"
#include "fraction.h"
#include "run.h"
#include "statedir.h"

static void users_socket(const char *state, char *out, size_t len)
{
    snprintf(out, len, "%s/" GF_STATE_USERS_SOCK, state);
}

bool run_via_agent(const char *state)
{
    char path[GF_PATH_MAX + 16];
    struct stat st;

    if (geteuid() == 0)
        return false; /* root makes its own, in a directory it owns */
    users_socket(state, path, sizeof(path));
    if (stat(path, &st) < 0 || !S_ISSOCK(st.st_mode))
        return false;
    snprintf(path, sizeof(path), "%s/" GF_STATE_FRACTIONS, state);
    return access(path, W_OK) < 0;
}

static int lock_supervisor(gf_fraction *f, gf_error *err)
{
    struct flock fl = {.l_type = F_RDLCK, .l_whence = SEEK_SET};
    char path[GF_PATH_MAX + 16];

    if (gf_path_join(path, sizeof(path), f->dir, GF_FRAC_SUPERVISOR) < 0)
        return gf_error_sys(err, "fraction supervisor path");
    f->lock_fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (f->lock_fd < 0)
        return gf_error_sys(err, "opening %s", path);
    if (fcntl(f->lock_fd, F_OFD_SETLK, &fl) < 0) {
        gf_error_sys(err, "locking %s", path);
        close(f->lock_fd);
        f->lock_fd = -1;
        return -1;
    }
    return 0;
}

int run_via_agent_create(run_plan *p, gf_fraction *f, gf_error *err)
{
    char sock[GF_PATH_MAX + 16], devices[GF_PROTO_VAL_MAX] = "", item[160];
    gf_msg req, reply;
    const char *v;

    f->lock_fd = -1;
    for (size_t i = 0; i < p->cfg.n_devices; i++) {
        size_t off = strlen(devices);
        int n = snprintf(item, sizeof(item), "%s%s/%" PRIu64 "/%" PRIu64, i ? "," : "",
                         p->cfg.devices[i].uuid, p->cfg.devices[i].request,
                         p->cfg.devices[i].limit);
        if (n < 0 || off + (size_t)n >= sizeof(devices))
            return gf_error_set(err, GF_ENOSPACE, "too many devices for one request");
        memcpy(devices + off, item, (size_t)n + 1);
    }
    gf_msg_init(&req, "run");
    gf_msg_add(&req, "name", p->cfg.name);
    gf_msg_add(&req, "mode", gf_mode_name(p->cfg.mode));
    gf_msg_add_u64(&req, "compute", (uint64_t)p->cfg.compute_percent);
    gf_msg_add(&req, "devices", devices);
    users_socket(p->state, sock, sizeof(sock));
    /* sent again only if the agent never answered; one cut after the agent
     * made the fraction is refused then ("in use"), never made twice */
    if (gf_agent_request_retry(sock, 30, GF_RUN_AGENT_RESTART_MS, &req, &reply, err) < 0)
        return gf_error_wrap(err, "gpufracd refused the fraction");
    if ((v = gf_msg_get(&reply, "ledger")))
        snprintf(p->cfg.ledger, sizeof(p->cfg.ledger), "%s", v);
    if ((v = gf_msg_get(&reply, "socket")))
        snprintf(p->cfg.agent, sizeof(p->cfg.agent), "%s", v);
    if (gf_fraction_path(f->dir, sizeof(f->dir), p->state, p->cfg.name, NULL, err) < 0)
        return -1;
    if (lock_supervisor(f, err) < 0) {
        run_via_agent_end(p, f, GF_EXIT_FAIL);
        return -1;
    }
    return 0;
}

void run_via_agent_end(const run_plan *p, gf_fraction *f, int code)
{
    char sock[GF_PATH_MAX + 16];
    gf_msg req, reply;
    gf_error err;

    gf_msg_init(&req, "end");
    gf_msg_add(&req, "name", p->cfg.name);
    gf_msg_add_u64(&req, "exit", (uint64_t)(code < 0 ? 0 : code));
    users_socket(p->state, sock, sizeof(sock));
    if (gf_agent_request_retry(sock, 30, GF_RUN_AGENT_RESTART_MS, &req, &reply, &err) < 0)
        fprintf(stderr, "gpufrac run: %s (gpufracd ends the fraction itself shortly)\n", err.msg);
    if (f->lock_fd >= 0)
        close(f->lock_fd);
    f->lock_fd = -1;
}
