/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "fraction.h"
#include "ledger.h"
#include "replace.h"
#include "statedir.h"

static int write_config(const char *dir, const gf_fraction_config *cfg, gf_error *err)
{
    char text[GF_CONFIG_TEXT_MAX], path[GF_PATH_MAX];
    int len;

    len = gf_config_format(cfg, text, sizeof(text));
    if (len < 0)
        return gf_error_set(err, GF_ENOSPACE, "fraction config does not fit in %d bytes",
                            GF_CONFIG_TEXT_MAX);
    if (gf_path_join(path, sizeof(path), dir, GF_FRAC_CONFIG) < 0)
        return gf_error_sys(err, "fraction config path");
    return gf_file_replace(path, text, (size_t)len, 0444, err);
}

static int make_ledger(const char *dir, const gf_fraction_config *cfg, gf_error *err)
{
    char path[GF_PATH_MAX];

    if (gf_path_join(path, sizeof(path), dir, GF_FRAC_LEDGER) < 0)
        return gf_error_sys(err, "fraction ledger path");
    return gf_ledger_create_for(path, cfg, 0600, err);
}

static int take_supervisor_lock(const char *dir, gf_error *err)
{
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    char path[GF_PATH_MAX], text[32];
    gf_cleanup_close int fd = -1;
    int len;

    if (gf_path_join(path, sizeof(path), dir, GF_FRAC_SUPERVISOR) < 0)
        return gf_error_sys(err, "fraction supervisor path");
    fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
        return gf_error_sys(err, "creating %s", path);
    len = snprintf(text, sizeof(text), "%d\n", (int)getpid());
    if (fcntl(fd, F_OFD_SETLK, &fl) < 0 || write(fd, text, (size_t)len) != len)
        return gf_error_sys(err, "locking %s", path);
    return gf_steal_fd(&fd);
}

/* Moves the new directory into place; a stale namesake is cleared away. */
static int install(const char *tmp, const char *dir, const char *name, gf_error *err)
{
    char aside[GF_PATH_MAX + 16];
    gf_fraction_state st;
    pid_t pid;
    size_t n;

    for (int attempt = 0; attempt < 3; attempt++) {
        if (rename(tmp, dir) == 0)
            return 0;
        if (errno != EEXIST && errno != ENOTEMPTY)
            return gf_error_sys(err, "installing fraction %s", dir);
        if (gf_fraction_inspect(dir, &st, NULL, 0, &n, err) < 0)
            return gf_error_wrap(err, "fraction \"%s\" exists and cannot be inspected", name);
        if (st != GF_FRACTION_STALE || !gf_fraction_made_by_run(dir)) {
            gf_fraction_supervised(dir, &pid);
            return gf_error_set(err, GF_ESTATE,
                                "a fraction named \"%s\" is in use (%s, gpufrac run pid %d, "
                                "%zu processes); choose another --name",
                                name, gf_fraction_state_name(st), (int)pid, n);
        }
        snprintf(aside, sizeof(aside), "%s" GF_STATE_OLD_PREFIX "%d", tmp, attempt);
        if (rename(dir, aside) == 0)
            gf_rm_tree(aside);
    }
    return gf_error_set(err, GF_ESTATE, "fraction \"%s\" keeps reappearing; try again", name);
}

int gf_fraction_create(gf_fraction *f, const char *state, const gf_fraction_config *cfg,
                       gf_error *err)
{
    char tmp[GF_PATH_MAX];
    int n;

    f->lock_fd = -1;
    if (gf_fraction_path(f->dir, sizeof(f->dir), state, cfg->name, NULL, err) < 0)
        return -1;
    n = snprintf(tmp, sizeof(tmp), "%s/" GF_STATE_FRACTIONS "/" GF_STATE_NEW_PREFIX "%s-%d", state,
                 cfg->name, (int)getpid());
    if (n < 0 || (size_t)n >= sizeof(tmp) - 32)
        return gf_error_set(err, GF_EINVAL, "path too long under state directory %s", state);
    if (mkdir(tmp, 0755) < 0)
        return gf_error_sys(err, "creating %s", tmp);
    f->lock_fd = take_supervisor_lock(tmp, err);
    if (f->lock_fd < 0 || write_config(tmp, cfg, err) < 0 || make_ledger(tmp, cfg, err) < 0 ||
        install(tmp, f->dir, cfg->name, err) < 0)
        goto fail;
    return 0;
fail:
    gf_rm_tree(tmp);
    if (f->lock_fd >= 0)
        close(f->lock_fd);
    f->lock_fd = -1;
    return -1;
}

void gf_fraction_remove(gf_fraction *f)
{
    char aside[GF_PATH_MAX + 32];
    const char *slash = strrchr(f->dir, '/');

    if (f->lock_fd < 0 || !slash)
        return;
    /* moved aside while the lock is still held, so nobody mistakes the
     * half-removed directory for a stale fraction of the same name */
    snprintf(aside, sizeof(aside), "%.*s/" GF_STATE_OLD_PREFIX "%s-%d", (int)(slash - f->dir),
             f->dir, slash + 1, (int)getpid());
    if (rename(f->dir, aside) == 0)
        gf_rm_tree(aside);
    close(f->lock_fd);
    f->lock_fd = -1;
}

void gf_fraction_end(gf_fraction *f, const char *state, int exit_code)
{
    char ended[GF_PATH_MAX + 16], dest[GF_PATH_MAX + 128], text[64];
    const char *slash = strrchr(f->dir, '/');
    int n;

    if (f->lock_fd < 0 || !slash)
        return;
    n = snprintf(text, sizeof(text), "time=%lld\nexit=%d\n", (long long)time(NULL), exit_code);
    if (snprintf(ended, sizeof(ended), "%s/" GF_STATE_ENDED, state) >= (int)sizeof(ended) ||
        snprintf(dest, sizeof(dest), "%s/%s.%d", ended, slash + 1, (int)getpid()) >=
            (int)sizeof(dest) ||
        (mkdir(ended, geteuid() == 0 ? 0755 : 0700) < 0 && errno != EEXIST))
        goto remove;
    if (gf_path_join(ended, sizeof(ended), f->dir, GF_FRAC_ENDED) < 0)
        goto remove;
    { /* closed before the move */
        gf_cleanup_close int fd = open(ended, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
                                       0644);
        if (fd < 0 || write(fd, text, (size_t)n) != n)
            goto remove;
    }
    /* the lock is still held while it moves: no cleaner takes it for stale */
    if (rename(f->dir, dest) < 0)
        goto remove;
    close(f->lock_fd);
    f->lock_fd = -1;
    return;
remove:
    gf_fraction_remove(f);
}
