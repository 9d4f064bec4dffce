/* SPDX-License-Identifier: Apache-2.0 */
#include "admit.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "fit.h"
#include "quantity.h"
#include "statedir.h"

int gf_state_lock(const char *state, gf_error *err)
{
    char path[GF_PATH_MAX + 32];
    int fd;

    snprintf(path, sizeof(path), "%s/" GF_STATE_FRACTIONS "/" GF_STATE_LOCK, state);
    /* never through a link: root's run may use a state directory a user can write */
    fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
    if (fd < 0)
        return gf_error_sys(err, "opening %s", path);
    if (flock(fd, LOCK_EX) < 0) {
        gf_error_sys(err, "locking %s", path);
        close(fd);
        return -1;
    }
    return fd;
}

void gf_state_unlock(int fd)
{
    if (fd >= 0)
        close(fd);
}

/* What the fractions already on the planned GPUs hold of them. */
typedef struct others {
    gf_fit_gpu gpu[GF_GPUS_MAX];
    bool conflict;       /* a fraction of the other mode, the first one found: */
    size_t conflict_gpu; /* on this planned GPU */
    char conflict_name[GF_NAME_MAX];
} others;

/* Adds one existing fraction's config to what the planned GPUs hold. */
static void add_one(const run_plan *p, const gf_fraction_config *other, others *o)
{
    for (size_t i = 0; i < p->gpus.n; i++) {
        gf_fit_gpu *g = &o->gpu[i];
        const gf_config_device *d = gf_config_find_device(other, p->gpus.gpus[i].uuid);
        if (!d)
            continue;
        if (!g->has_fractions || other->mode != p->cfg.mode)
            g->mode = other->mode;
        g->has_fractions = true;
        g->guaranteed += d->request;
        if (!o->conflict && other->mode != p->cfg.mode) {
            o->conflict = true;
            o->conflict_gpu = i;
            snprintf(o->conflict_name, sizeof(o->conflict_name), "%s", other->name);
        }
    }
}

static int check_gpu(const run_plan *p, const others *o, size_t i, gf_error *err)
{
    const gf_gpu *g = &p->gpus.gpus[i];
    const gf_fit_gpu *s = &o->gpu[i];
    const gf_fit_ask ask = {.request = p->cfg.devices[i].request, .mode = p->cfg.mode};
    char h1[32], h2[32], h3[32];
    uint64_t free_bytes;

    switch (gf_fit_check(s, &ask, &free_bytes)) {
    case GF_FIT_OK: return 0;
    case GF_FIT_MODE:
        return gf_error_set(err, GF_ESTATE,
                            "GPU %u (%s) runs %s fraction \"%s\"; a %s fraction cannot share "
                            "it (choose other --devices or --mode %s)",
                            g->index, g->uuid, gf_mode_name(s->mode), o->conflict_name,
                            gf_mode_name(p->cfg.mode), gf_mode_name(s->mode));
    default: /* memory: the request is never 0 (resolved), compute and limit not asked */
        gf_bytes_human(free_bytes, h1, sizeof(h1));
        gf_bytes_human(ask.request, h2, sizeof(h2));
        gf_bytes_human(s->guaranteed, h3, sizeof(h3));
        return gf_error_set(err, GF_ESTATE,
                            "GPU %u (%s) has %s not guaranteed to other fractions (they hold "
                            "%s); --memory asks %s",
                            g->index, g->uuid, h1, h3, h2);
    }
}

int gf_admit_check(const run_plan *p, gf_error *err)
{
    char dir[GF_PATH_MAX + 16], path[GF_PATH_MAX + 300];
    others o;
    struct dirent *de;
    DIR *d;

    memset(&o, 0, sizeof(o));
    for (size_t i = 0; i < p->gpus.n; i++)
        o.gpu[i].total = p->gpus.gpus[i].total;
    snprintf(dir, sizeof(dir), "%s/" GF_STATE_FRACTIONS, p->state);
    if (!(d = opendir(dir)))
        return errno == ENOENT ? 0 : gf_error_sys(err, "reading %s", dir);
    while (!o.conflict && (de = readdir(d))) {
        gf_fraction_config other;
        gf_error ignored;
        if (de->d_name[0] == '.' || strcmp(de->d_name, p->cfg.name) == 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s/" GF_FRAC_CONFIG, dir, de->d_name);
        if (gf_config_load(path, &other, &ignored) == 0)
            add_one(p, &other, &o);
    }
    closedir(d);
    /* a fraction of the other mode in the way is named before any memory shortfall */
    if (o.conflict && check_gpu(p, &o, o.conflict_gpu, err) < 0)
        return -1;
    for (size_t i = 0; i < p->gpus.n; i++)
        if (check_gpu(p, &o, i, err) < 0)
            return -1;
    return 0;
}

bool gf_agent_present(const char *state)
{
    char path[GF_PATH_MAX + 16];
    struct stat st;

    snprintf(path, sizeof(path), "%s/" GF_STATE_AGENT_SOCK, state);
    return stat(path, &st) == 0 && S_ISSOCK(st.st_mode);
}

/* Does the socket accept? The agent binds (the file appears) before it
 * listens and hands it to its owner: the file alone is not enough. */
static bool accepts(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    bool ok;
    int fd;

    if (strlen(path) >= sizeof(sa.sun_path))
        return true; /* let the real connect say why */
    memcpy(sa.sun_path, path, strlen(path) + 1);
    if ((fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0)) < 0)
        return true;
    ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
    close(fd);
    return ok;
}

int gf_agent_wait_socket(const char *path, gf_error *err)
{
    struct timespec ts = {0, 5 * 1000 * 1000};
    struct stat st;
    for (int i = 0; i < 1000; i++) {
        if (stat(path, &st) == 0 && S_ISSOCK(st.st_mode) && accepts(path))
            return 0;
        nanosleep(&ts, NULL);
    }
    return gf_error_set(err, GF_ESTATE, "gpufracd did not open %s within 5 s (is it running?)",
                        path);
}
