/* SPDX-License-Identifier: Apache-2.0 */
/* Fractions on disk. A fraction made by `gpufrac run` is a directory
 *
 *   <state>/fractions/<name>/config      gf_config_format text, 0444
 *   <state>/fractions/<name>/ledger      the shared ledger, 0600
 *   <state>/fractions/<name>/supervisor  "<pid>\n", OFD-locked by `gpufrac run`
 *
 * It is built under a hidden temporary name and renamed into place, so a
 * fraction directory that can be seen is always complete and its
 * supervisor lock is already held. */
#ifndef GPUFRAC_CLI_FRACTION_H
#define GPUFRAC_CLI_FRACTION_H

#include <stdbool.h>
#include <sys/types.h>
#include <time.h>

#include "config.h"
#include "error.h"

/* --state-dir, else $GPUFRAC_STATE_DIR, else /run/gpufrac when we may write
 * there, else $XDG_RUNTIME_DIR/gpufrac, else /tmp/gpufrac-<uid>. The last is
 * refused when it is not a directory of ours that others cannot write. With
 * create, missing directories are made. */
int gf_state_dir(const char *flag, bool create, char *out, size_t len, gf_error *err);
/* A --state-dir a user gave must be an existing directory (a mistyped one is
 * refused, naming it, rather than made); the default /run/gpufrac may be made.
 * gf_state_dir checks it itself without create; a caller that creates and
 * takes the directory from the user checks first. */
int gf_state_dir_given(const char *flag, gf_error *err);

typedef struct gf_fraction {
    char dir[GF_PATH_MAX];
    int lock_fd; /* holds the supervisor lock; -1 when none */
} gf_fraction;

/* Installs <state>/fractions/<cfg->name> holding cfg (whose ledger path must
 * already point into that directory) and a ledger with cfg's devices. A
 * leftover fraction of the same name whose supervisor and processes are all
 * gone is removed first; a live one is an error (GF_ESTATE). */
int gf_fraction_create(gf_fraction *f, const char *state, const gf_fraction_config *cfg,
                       gf_error *err);
void gf_fraction_remove(gf_fraction *f);

/* How long an ended fraction stays in <state>/ended for `gpufrac status`. */
#define GF_ENDED_KEEP_S 600

/* Moves the fraction to <state>/ended/<name>.<pid> with a file "ended"
 * ("time=<unix>\nexit=<code>\n"), where `gpufrac status` shows its last
 * figures for GF_ENDED_KEEP_S; removes it when that fails. */
void gf_fraction_end(gf_fraction *f, const char *state, int exit_code);

/* "<state>/fractions/<name>/<file>" into buf. */
int gf_fraction_path(char *buf, size_t len, const char *state, const char *name, const char *file,
                     gf_error *err);

typedef enum gf_fraction_state {
    GF_FRACTION_RUNNING,  /* its gpufrac run is alive */
    GF_FRACTION_ORPHANED, /* gpufrac run is gone, processes of the fraction remain */
    GF_FRACTION_STALE,    /* nothing of it remains but the directory */
} gf_fraction_state;

const char *gf_fraction_state_name(gf_fraction_state s);

/* Supervisor pid (0 when unknown) and whether it still holds its lock. */
bool gf_fraction_supervised(const char *dir, pid_t *pid);

/* The state of the fraction in dir; pids (may be NULL) receives up to max
 * pids of its live processes, *n_pids their total count. */
int gf_fraction_inspect(const char *dir, gf_fraction_state *state, pid_t *pids, size_t max,
                        size_t *n_pids, gf_error *err);

/* When the ended fraction in dir ended (0: not an ended one), and how. */
time_t gf_fraction_ended_at(const char *dir, int *exit_code);

/* Removes the stale fractions in <state>/fractions and ended ones past
 * GF_ENDED_KEEP_S (best effort). */
void gf_fraction_gc(const char *state);

/* "<dir>/<file>" into buf; -1 (errno ENAMETOOLONG) when it does not fit. */
int gf_path_join(char *buf, size_t len, const char *dir, const char *file);

/* Removes a directory tree (best effort, does not follow links). */
void gf_rm_tree(const char *path);

/* Whether dir is a fraction gpufrac run made (not a container's, which the
 * agent made for the runtime): the only kind gpufrac run ever removes. */
bool gf_fraction_made_by_run(const char *dir);

#endif
