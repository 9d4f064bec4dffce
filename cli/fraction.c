/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fraction.h"
#include "ledger.h"
#include "statedir.h"

int gf_fraction_path(char *buf, size_t len, const char *state, const char *name, const char *file,
                     gf_error *err)
{
    int n = file ? snprintf(buf, len, "%s/" GF_STATE_FRACTIONS "/%s/%s", state, name, file)
                 : snprintf(buf, len, "%s/" GF_STATE_FRACTIONS "/%s", state, name);
    if (n < 0 || (size_t)n >= len)
        return gf_error_set(err, GF_EINVAL, "path too long under state directory %s", state);
    return 0;
}

int gf_path_join(char *buf, size_t len, const char *dir, const char *file)
{
    int n = snprintf(buf, len, "%s/%s", dir, file);
    if (n < 0 || (size_t)n >= len) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return 0;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    if (flag == FTW_DP)
        rmdir(path);
    else
        unlink(path);
    return 0;
}

void gf_rm_tree(const char *path)
{
    nftw(path, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

const char *gf_fraction_state_name(gf_fraction_state s)
{
    switch (s) {
    case GF_FRACTION_RUNNING: return "running";
    case GF_FRACTION_ORPHANED: return "orphaned";
    case GF_FRACTION_STALE: return "stale";
    }
    return "?";
}

bool gf_fraction_supervised(const char *dir, pid_t *pid)
{
    char path[GF_PATH_MAX], text[32] = "";
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    bool held;
    ssize_t n;
    int fd;

    *pid = 0;
    if (snprintf(path, sizeof(path), "%s/" GF_FRAC_SUPERVISOR, dir) >= (int)sizeof(path))
        return false;
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    n = read(fd, text, sizeof(text) - 1);
    if (n > 0)
        *pid = (pid_t)strtol(text, NULL, 10);
    /* a failed query counts as held: never take a live fraction away */
    held = fcntl(fd, F_OFD_GETLK, &fl) < 0 || fl.l_type != F_UNLCK;
    close(fd);
    return held;
}

/* A container fraction (its identity written by the agent) has no lock
 * holder: its supervisor is the container's init, alive or not. */
static bool container_alive(const char *dir, pid_t sup)
{
    char path[GF_PATH_MAX];

    if (sup <= 0 || gf_path_join(path, sizeof(path), dir, GF_FRAC_IDENTITY) < 0 ||
        access(path, F_OK) < 0)
        return false;
    return kill(sup, 0) == 0 || errno == EPERM;
}

int gf_fraction_inspect(const char *dir, gf_fraction_state *state, pid_t *pids, size_t max,
                        size_t *n_pids, gf_error *err)
{
    char path[GF_PATH_MAX];
    gf_ledger lg = {.fd = -1};
    pid_t sup;

    *n_pids = 0;
    if (snprintf(path, sizeof(path), "%s/" GF_FRAC_LEDGER, dir) >= (int)sizeof(path))
        return gf_error_set(err, GF_EINVAL, "path too long: %s", dir);
    bool supervised = gf_fraction_supervised(dir, &sup) || container_alive(dir, sup);
    if (gf_ledger_open(path, &lg, err) < 0) {
        if (err->code != GF_ESYS || err->sys_errno != ENOENT)
            return -1;
        *state = supervised ? GF_FRACTION_RUNNING : GF_FRACTION_STALE;
        return 0;
    }
    for (int i = 0, high = gf_ledger_slot_high(&lg); i < high; i++) {
        pid_t pid = atomic_load(&lg.hdr->slots[i].pid);
        if (pid == 0 || !gf_ledger_slot_live(&lg, i))
            continue;
        if (pids && *n_pids < max)
            pids[*n_pids] = pid;
        (*n_pids)++;
    }
    gf_ledger_close(&lg);
    *state = supervised ? GF_FRACTION_RUNNING : *n_pids ? GF_FRACTION_ORPHANED : GF_FRACTION_STALE;
    return 0;
}

bool gf_fraction_made_by_run(const char *dir)
{
    char path[GF_PATH_MAX];
    struct stat st;
    /* the agent's container fractions carry their Kubernetes identity; they
     * are the agent's and the runtime's to release, never a gpufrac run's */
    if (gf_path_join(path, sizeof(path), dir, GF_FRAC_IDENTITY) < 0)
        return false;
    return lstat(path, &st) < 0 && errno == ENOENT;
}

/* A users.sock fraction: the agent made the directory (root's) and gave its
 * ledger to a user. Only the agent, which holds its supervisor's pidfd,
 * decides when it ends. */
static bool made_by_agent_for_a_user(const char *dir)
{
    char path[GF_PATH_MAX];
    struct stat d, l;

    return gf_path_join(path, sizeof(path), dir, GF_FRAC_LEDGER) == 0 && lstat(dir, &d) == 0 &&
           lstat(path, &l) == 0 && d.st_uid == 0 && l.st_uid != 0;
}

/* Whether the pid its supervisor record names still runs (a reused number
 * keeps the fraction: keeping a stale one is the safe mistake). */
static bool supervisor_alive(const char *dir)
{
    pid_t pid;

    gf_fraction_supervised(dir, &pid);
    return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
}

static bool fraction_stale(const char *dir)
{
    gf_fraction_state st;
    size_t n;
    gf_error err;

    if (!gf_fraction_made_by_run(dir) || made_by_agent_for_a_user(dir) || supervisor_alive(dir))
        return false;
    if (gf_fraction_inspect(dir, &st, NULL, 0, &n, &err) < 0)
        return false; /* cannot tell: leave it */
    return st == GF_FRACTION_STALE;
}

/* Renames it aside first so two cleaners never remove a fresh fraction
 * that reused the name in between. */
static void remove_stale(const char *fractions, const char *name)
{
    char dir[GF_PATH_MAX], aside[GF_PATH_MAX];

    if (snprintf(dir, sizeof(dir), "%s/%s", fractions, name) >= (int)sizeof(dir) ||
        snprintf(aside, sizeof(aside), "%s/" GF_STATE_OLD_PREFIX "%s-%d", fractions, name,
                 (int)getpid()) >= (int)sizeof(aside))
        return;
    if (!fraction_stale(dir) || rename(dir, aside) < 0)
        return;
    gf_rm_tree(aside);
}

/* A half-built (.new-) or half-removed (.old-) directory left by a gpufrac
 * run that died; the age check keeps us off one being built right now. */
static void remove_abandoned(const char *fractions, const char *name)
{
    char dir[GF_PATH_MAX];
    struct stat st;
    pid_t pid;

    if (snprintf(dir, sizeof(dir), "%s/%s", fractions, name) >= (int)sizeof(dir))
        return;
    if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode) || time(NULL) - st.st_mtime < 60)
        return;
    if (!gf_fraction_supervised(dir, &pid))
        gf_rm_tree(dir);
}

time_t gf_fraction_ended_at(const char *dir, int *exit_code)
{
    char path[GF_PATH_MAX + 16];
    long long when = 0;
    int code = 0;
    FILE *fp;

    if (gf_path_join(path, sizeof(path), dir, GF_FRAC_ENDED) < 0 || !(fp = fopen(path, "re")))
        return 0;
    if (fscanf(fp, "time=%lld exit=%d", &when, &code) < 1)
        when = 0;
    fclose(fp);
    if (exit_code)
        *exit_code = code;
    return (time_t)when;
}

/* Ended fractions are kept GF_ENDED_KEEP_S for `gpufrac status`. */
static void gc_ended(const char *state)
{
    char ended[GF_PATH_MAX], dir[GF_PATH_MAX];
    time_t now = time(NULL);
    struct dirent *de;
    DIR *d;

    if (snprintf(ended, sizeof(ended), "%s/" GF_STATE_ENDED, state) >= (int)sizeof(ended) ||
        !(d = opendir(ended)))
        return;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.' || gf_path_join(dir, sizeof(dir), ended, de->d_name) < 0)
            continue;
        time_t at = gf_fraction_ended_at(dir, NULL);
        struct stat st;
        if (at == 0 && lstat(dir, &st) == 0)
            at = st.st_mtime;
        if (now - at > GF_ENDED_KEEP_S)
            gf_rm_tree(dir);
    }
    closedir(d);
}

void gf_fraction_gc(const char *state)
{
    gc_ended(state);
    char fractions[GF_PATH_MAX];
    struct dirent *de;
    DIR *d;

    if (snprintf(fractions, sizeof(fractions), "%s/" GF_STATE_FRACTIONS, state) >=
        (int)sizeof(fractions))
        return;
    d = opendir(fractions);
    if (!d)
        return;
    while ((de = readdir(d))) {
        if (de->d_name[0] != '.' && gf_name_valid(de->d_name))
            remove_stale(fractions, de->d_name);
        else if (strncmp(de->d_name, GF_STATE_NEW_PREFIX, strlen(GF_STATE_NEW_PREFIX)) == 0 ||
                 strncmp(de->d_name, GF_STATE_OLD_PREFIX, strlen(GF_STATE_OLD_PREFIX)) == 0)
            remove_abandoned(fractions, de->d_name);
    }
    closedir(d);
}
