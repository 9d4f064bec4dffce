/* SPDX-License-Identifier: Apache-2.0 */
/* The registry: every <state>/fractions/<name> with a config and a ledger is
 * a fraction. A scan opens new ones, closes gone ones, refreshes each
 * ledger's view and recomputes what each GPU has guaranteed and lent.
 *
 * A fraction directory may belong to its user (gpufrac run): everything in
 * it is opened relative to a directory fd, O_NOFOLLOW | O_NONBLOCK, checked
 * to be a regular file, and read with a bound. The config is read once, when
 * the fraction first appears; the ledger is never mapped (ledger_view.h). */
#include "registry.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"
#include "attrib.h"
#include "cleanup.h"
#include "events.h"
#include "fraction.h"
#include "fsat.h"
#include "identity.h"
#include "journal.h"
#include "ledger_view.h"
#include "loop.h"
#include "proc.h"
#include "sock.h"
#include "statedir.h"

static void sums_add(gf_agent *a, const gf_afraction *f);

/* Names to fraction indexes: open addressing, twice the most fractions, so a
 * scan of n fractions costs n lookups, not n * n comparisons. Rebuilt when
 * fractions close (their slots move); added to when one opens. */
#define NAME_SLOTS (2 * GF_AGENT_FRACTIONS_MAX)
static int name_index[NAME_SLOTS]; /* fraction index + 1; 0: empty */

static unsigned name_hash(const char *name)
{
    unsigned h = 2166136261u;
    for (; *name; name++)
        h = (h ^ (unsigned char)*name) * 16777619u;
    return h % NAME_SLOTS;
}

static void index_add(gf_agent *a, int i)
{
    unsigned h = name_hash(a->fractions[i].cfg.name);
    while (name_index[h])
        h = (h + 1) % NAME_SLOTS;
    name_index[h] = i + 1;
}

static void index_rebuild(gf_agent *a)
{
    memset(name_index, 0, sizeof(name_index));
    for (int i = 0; i < a->n_fractions; i++)
        index_add(a, i);
}

static gf_afraction *by_name(gf_agent *a, const char *name)
{
    for (unsigned h = name_hash(name); name_index[h]; h = (h + 1) % NAME_SLOTS) {
        gf_afraction *f = &a->fractions[name_index[h] - 1];
        if (name_index[h] <= a->n_fractions && strcmp(f->cfg.name, name) == 0)
            return f;
    }
    return NULL;
}

/* Growing a ledger is tampering: cut back, said once per fraction. */
static void keep_ledger_size(gf_agent *a, gf_afraction *f)
{
    long long grown = gf_ledger_view_keep_size(f->ledger_fd);

    if (!grown)
        return;
    if (!f->ledger_grew)
        gf_agent_event(a,
                       "fraction %s: its ledger was grown to %lld bytes; cut back to %zu "
                       "(a ledger's size is fixed)",
                       f->cfg.name, grown, sizeof(gf_ledger_header));
    f->ledger_grew = true;
}

/* Kubernetes identity of a container fraction (written at admission). */
static void read_identity(gf_afraction *f, int dfd)
{
    char text[GF_IDENTITY_TEXT_MAX + 1];
    gf_identity id;
    ssize_t n = gf_at_read(dfd, GF_FRAC_IDENTITY, text, sizeof(text) - 1);

    if (n <= 0)
        return;
    f->has_identity = true;
    gf_identity_parse(text, (size_t)n, &id);
    snprintf(f->ns, sizeof(f->ns), "%s", id.ns);
    snprintf(f->pod, sizeof(f->pod), "%s", id.pod);
    snprintf(f->container, sizeof(f->container), "%s", id.container);
    f->admitted_at = id.admitted_at;
    if (id.termlog[0]) {
        free(f->termlog);
        f->termlog = strdup(id.termlog); /* NULL (none) without memory */
    }
}

/* The fraction's own socket, given to whoever owns its ledger. */
static void open_socket(gf_agent *a, gf_afraction *f, int dfd)
{
    gf_error err;

    f->listen_fd = gf_socket_listen_in(a, dfd, GF_FRAC_AGENT_SOCK, f->owner, &err);
    if (f->listen_fd < 0) {
        gf_agent_event(a, "fraction %s gets no agent socket: %s", f->cfg.name, err.msg);
        return;
    }
    gf_loop_watch(&a->loop, f->listen_fd, GF_EV_FRACTION, f->fid);
}

/* The supervisor the journal says the agent attached before a restart. */
static void restore_supervisor(gf_agent *a, gf_afraction *f)
{
    pid_t pid;
    uint64_t start;
    bool admitted;

    if (!gf_journal_supervisor(a, f->cfg.name, &pid, &start, &admitted))
        return;
    f->supervisor = pid;
    f->sup_start = start;
    f->sup_admitted = admitted;
    f->sup_seen = true;
    f->sup_pidfd = gf_pidfd_verified(pid, start); /* -1: gone while we were down */
    gf_loop_watch(&a->loop, f->sup_pidfd, GF_EV_SUP, f->fid);
}

static int load_config(int dfd, const char *name, gf_fraction_config *cfg, gf_error *err)
{
    char text[GF_CONFIG_TEXT_MAX + 1];
    ssize_t n = gf_at_read(dfd, GF_FRAC_CONFIG, text, sizeof(text));

    if (n < 0)
        return gf_error_sys(err, "opening %s/" GF_FRAC_CONFIG, name);
    if (n > GF_CONFIG_TEXT_MAX)
        return gf_error_set(err, GF_ERANGE, "%s/" GF_FRAC_CONFIG " is larger than %d bytes", name,
                            GF_CONFIG_TEXT_MAX);
    if (gf_config_parse(text, (size_t)n, cfg, err) < 0)
        return gf_error_wrap(err, "%s/" GF_FRAC_CONFIG, name);
    if (strcmp(cfg->name, name) != 0)
        return gf_error_set(err, GF_EINVAL,
                            "%s/" GF_FRAC_CONFIG " names fraction \"%s\", not its directory", name,
                            cfg->name);
    return 0;
}

/* f's config, ledger and view, from its directory dfd at path dir; on a
 * failure f holds what was filled in, for the caller to free. */
static int fill_fraction(gf_agent *a, gf_afraction *f, const char *name, const char *dir, int dfd,
                         gf_error *err)
{
    gf_fraction_config cfg;
    char ledger[GF_PATH_MAX + 8];
    struct stat st;

    /* the shim's ledger path in the config is the tenant's business: the
     * agent's is always the one in the fraction's directory */
    snprintf(ledger, sizeof(ledger), "%s/" GF_FRAC_LEDGER, dir);
    if (load_config(dfd, name, &cfg, err) < 0 || gf_aconfig_set(&f->cfg, &cfg, ledger, err) < 0)
        return -1;
    if (!(f->dir = strdup(dir)))
        return gf_error_sys(err, "fraction %s", name);
    if ((f->ledger_fd = gf_at_file(dfd, GF_FRAC_LEDGER, O_RDWR, &st)) < 0)
        return gf_error_sys(err, "opening %s/" GF_FRAC_LEDGER, dir);
    f->owner = st.st_uid;
    return gf_fraction_view_init(a, f, err);
}

static int open_fraction(gf_agent *a, const char *name, gf_error *err)
{
    gf_cleanup_close int dfd = -1;
    char dir[GF_PATH_MAX];
    struct stat st;
    gf_afraction *f;

    if (a->n_fractions == GF_AGENT_FRACTIONS_MAX)
        return gf_error_set(err, GF_ENOSPACE, "more than %d fractions: %s is not watched",
                            GF_AGENT_FRACTIONS_MAX, name);
    f = &a->fractions[a->n_fractions];
    memset(f, 0, sizeof(*f));
    f->ledger_fd = f->listen_fd = f->sup_pidfd = -1;
    if ((size_t)snprintf(dir, sizeof(dir), "%s/" GF_STATE_FRACTIONS "/%s", a->state_dir, name) >=
        sizeof(dir) - 16)
        return gf_error_set(err, GF_EINVAL, "path too long: %s", name);
    if ((dfd = gf_at_dir(a->frac_dfd, name)) < 0)
        return gf_error_sys(err, "opening %s", dir);
    if (fstat(dfd, &st) == 0)
        f->made_at = st.st_ctime; /* before its socket is put in it */
    if (fill_fraction(a, f, name, dir, dfd, err) < 0) {
        if (f->ledger_fd >= 0)
            close(f->ledger_fd);
        gf_fraction_free(f);
        return -1;
    }
    if (!f->view.ok)
        gf_agent_event(a, "fraction %s: ledger %s; judged by the driver only", name, f->view.why);
    f->fid = ++a->next_fid;
    read_identity(f, dfd);
    open_socket(a, f, dfd);
    restore_supervisor(a, f);
    gf_journal_restore_counts(a, f);
    f->seen = true;
    a->n_fractions++;
    index_add(a, a->n_fractions - 1);
    gf_attrib_added(a, a->n_fractions - 1); /* the others keep their slots */
    sums_add(a, f);
    return 0;
}

static void close_fraction(gf_agent *a, gf_afraction *f)
{
    if (f->ledger_fd >= 0)
        close(f->ledger_fd);
    gf_loop_close(&a->loop, &f->listen_fd);
    gf_loop_close(&a->loop, &f->sup_pidfd);
    gf_fraction_free(f);
}

static void close_unseen(gf_agent *a)
{
    bool closed = false;

    for (int i = 0; i < a->n_fractions;) {
        if (a->fractions[i].seen) {
            i++;
            continue;
        }
        close_fraction(a, &a->fractions[i]);
        a->fractions[i] = a->fractions[--a->n_fractions];
        closed = true;
        gf_attrib_dirty();
    }
    if (closed)
        index_rebuild(a);
}

/* One more fraction in the per-GPU sums (the full ones are recomputed
 * whenever fractions go). */
static void sums_add(gf_agent *a, const gf_afraction *f)
{
    for (int g = 0; g < a->n_gpus; g++) {
        const gf_config_device *cd = gf_aconfig_device(&f->cfg, a->gpus[g].dev.uuid);
        if (!cd)
            continue;
        a->gpus[g].n_fractions++;
        a->gpus[g].mode = f->cfg.mode;
        a->gpus[g].guaranteed += cd->request;
    }
}

void gf_registry_sums(gf_agent *a)
{
    for (int g = 0; g < a->n_gpus; g++) {
        gf_agent_gpu *gpu = &a->gpus[g];
        gpu->guaranteed = gpu->lent = 0;
        gpu->n_fractions = 0;
        for (int i = 0; i < a->n_fractions; i++) {
            gf_afraction *f = &a->fractions[i];
            const gf_config_device *cd = gf_aconfig_device(&f->cfg, gpu->dev.uuid);
            if (!cd)
                continue;
            gpu->n_fractions++;
            gpu->mode = f->cfg.mode;
            gpu->guaranteed += cd->request;
        }
    }
    for (int i = 0; i < a->loans_high; i++)
        if (a->loans[i].used)
            a->gpus[a->loans[i].gpu].lent += a->loans[i].bytes;
}

int gf_registry_scan_if_changed(gf_agent *a, gf_error *err)
{
    struct stat st;

    if (fstat(a->frac_dfd, &st) == 0 && st.st_mtim.tv_sec == a->scanned_mtime.tv_sec &&
        st.st_mtim.tv_nsec == a->scanned_mtime.tv_nsec)
        return 0;
    return gf_registry_scan(a, err);
}

/* A fraction seen again: its ledger's size kept, its view read again. */
static void refresh(gf_agent *a, gf_afraction *f)
{
    bool was_ok = f->view.ok;

    f->seen = true;
    keep_ledger_size(a, f);
    gf_fraction_view_read(a, f);
    if (was_ok != f->view.ok)
        gf_agent_event(a, "fraction %s: ledger %s", f->cfg.name,
                       f->view.ok ? "readable again" : f->view.why);
    if (was_ok && !f->view.ok)
        gf_agent_event(a, "fraction %s: judged by the driver only", f->cfg.name);
}

int gf_registry_scan(gf_agent *a, gf_error *err)
{
    gf_cleanup_closedir DIR *d = NULL;
    gf_cleanup_close int fd = -1;
    struct dirent *de;
    struct stat st;

    /* taken before reading: a change during the scan shows as a newer mtime */
    if (fstat(a->frac_dfd, &st) == 0)
        a->scanned_mtime = st.st_mtim;
    for (int i = 0; i < a->n_fractions; i++)
        a->fractions[i].seen = false;
    if ((fd = openat(a->frac_dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 ||
        !(d = fdopendir(fd)))
        return gf_error_sys(err, "reading %s/" GF_STATE_FRACTIONS, a->state_dir);
    gf_steal_fd(&fd); /* the DIR's now */
    while ((de = readdir(d))) {
        gf_afraction *f;
        gf_error ferr;
        if (de->d_name[0] == '.' || !gf_name_valid(de->d_name))
            continue; /* ".", "..", and fractions being made or removed */
        if ((f = by_name(a, de->d_name)))
            refresh(a, f);
        else if (open_fraction(a, de->d_name, &ferr) < 0 && ferr.code != GF_ESYS)
            gf_agent_event(a, "ignoring %s/" GF_STATE_FRACTIONS "/%s: %s", a->state_dir, de->d_name,
                           ferr.msg);
    }
    close_unseen(a);
    gf_registry_sums(a);
    return 0;
}

gf_afraction *gf_registry_find_name_fresh(gf_agent *a, const char *name)
{
    gf_error err;
    gf_afraction *f = by_name(a, name);
    /* rescanned only for a name that is on disk: asking for new names
     * (every admission does) costs no scan */
    if (!f && faccessat(a->frac_dfd, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0 &&
        gf_registry_scan(a, &err) == 0)
        f = by_name(a, name);
    return f;
}

/* After a change the agent made itself: the directory as it is now counts
 * as scanned. What another process made in the same instant is opened by
 * the tick's full scan. */
static void own_change_seen(gf_agent *a)
{
    struct stat st;

    if (fstat(a->frac_dfd, &st) == 0)
        a->scanned_mtime = st.st_mtim;
}

void gf_registry_forget(gf_agent *a, gf_afraction *f)
{
    int i = (int)(f - a->fractions);

    if (i < 0 || i >= a->n_fractions)
        return;
    close_fraction(a, f);
    a->fractions[i] = a->fractions[--a->n_fractions];
    index_rebuild(a);
    gf_registry_sums(a);
    gf_attrib_dirty();
    own_change_seen(a);
}

gf_afraction *gf_registry_open_new(gf_agent *a, const char *name, gf_error *err)
{
    gf_afraction *f = by_name(a, name);

    if (f)
        return f;
    if (open_fraction(a, name, err) < 0)
        return NULL;
    own_change_seen(a);
    return by_name(a, name);
}

gf_afraction *gf_registry_find_name(gf_agent *a, const char *name)
{
    return by_name(a, name);
}
