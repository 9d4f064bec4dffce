/* SPDX-License-Identifier: Apache-2.0 */
/* Fraction directories (fracdir.h). */
#include "fracdir.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "events.h"
#include "fsat.h"
#include "journal.h"
#include "registry.h"
#include "statedir.h"

static int set_paths(gf_agent *a, gf_fraction_config *cfg, gf_error *err)
{
    if ((size_t)snprintf(cfg->ledger, sizeof(cfg->ledger),
                         "%s/" GF_STATE_FRACTIONS "/%s/" GF_FRAC_LEDGER, a->state_dir,
                         cfg->name) >= sizeof(cfg->ledger) ||
        (size_t)snprintf(cfg->agent, sizeof(cfg->agent),
                         "%s/" GF_STATE_FRACTIONS "/%s/" GF_FRAC_AGENT_SOCK, a->state_dir,
                         cfg->name) >= sizeof(cfg->agent))
        return gf_error_set(err, GF_EINVAL, "state directory path too long");
    return 0;
}

/* config, the extra file and the ledger in dfd (.new-<name>), each given to
 * whom the spec says. */
static int fill(gf_agent *a, const gf_fracdir_spec *s, int dfd, const char *tmp, gf_error *err)
{
    char text[GF_CONFIG_TEXT_MAX], ledger[GF_PATH_MAX + 128];

    snprintf(ledger, sizeof(ledger), "%s/" GF_STATE_FRACTIONS "/%s/" GF_FRAC_LEDGER, a->state_dir,
             tmp);
    if (gf_config_format(s->cfg, text, sizeof(text)) < 0)
        return gf_error_set(err, GF_ENOSPACE, "fraction config too long");
    if (gf_at_write(dfd, GF_FRAC_CONFIG, text, s->config_mode, err) < 0 ||
        gf_at_write(dfd, s->extra.name, s->extra.text, s->extra.mode, err) < 0 ||
        gf_ledger_create_for(ledger, s->cfg, 0600, err) < 0)
        return -1;
    if (s->group != (gid_t)-1 &&
        (fchownat(dfd, GF_FRAC_CONFIG, 0, s->group, AT_SYMLINK_NOFOLLOW) < 0 ||
         fchownat(dfd, s->extra.name, 0, s->group, AT_SYMLINK_NOFOLLOW) < 0))
        return gf_error_sys(err, "giving %s/" GF_STATE_FRACTIONS "/%s to gid %u", a->state_dir, tmp,
                            (unsigned)s->group);
    /* the one file the tenant's processes write (and, made by the registry,
     * the fraction's socket) */
    if (s->ledger_uid != (uid_t)-1 &&
        fchownat(dfd, GF_FRAC_LEDGER, s->ledger_uid, s->ledger_gid, AT_SYMLINK_NOFOLLOW) < 0)
        return gf_error_sys(err, "giving %s to uid %u", ledger, (unsigned)s->ledger_uid);
    return 0;
}

int gf_fracdir_make(gf_agent *a, const gf_fracdir_spec *s, gf_error *err)
{
    const char *name = s->cfg->name;
    char tmp[GF_NAME_MAX + 16];
    int dfd, rc;

    if (set_paths(a, s->cfg, err) < 0)
        return -1;
    snprintf(tmp, sizeof(tmp), GF_STATE_NEW_PREFIX "%s", name);
    gf_at_rmdir(a->frac_dfd, tmp);
    if (mkdirat(a->frac_dfd, tmp, 0711) < 0)
        return gf_error_sys(err, "creating %s/" GF_STATE_FRACTIONS "/%s", a->state_dir, tmp);
    if ((dfd = gf_at_dir(a->frac_dfd, tmp)) < 0) {
        gf_error_sys(err, "opening %s/" GF_STATE_FRACTIONS "/%s", a->state_dir, tmp);
        gf_at_rmdir(a->frac_dfd, tmp);
        return -1;
    }
    rc = fill(a, s, dfd, tmp, err);
    close(dfd);
    if (rc == 0 && renameat(a->frac_dfd, tmp, a->frac_dfd, name) < 0)
        rc = gf_error_sys(err, "installing %s/" GF_STATE_FRACTIONS "/%s", a->state_dir, name);
    if (rc < 0)
        gf_at_rmdir(a->frac_dfd, tmp);
    return rc;
}

void gf_fracdir_remove(gf_agent *a, const char *name)
{
    char old[GF_NAME_MAX + 16];

    snprintf(old, sizeof(old), GF_STATE_OLD_PREFIX "%s", name);
    if (renameat(a->frac_dfd, name, a->frac_dfd, old) == 0)
        gf_at_rmdir(a->frac_dfd, old);
}

void gf_release_fraction(gf_agent *a, gf_afraction *f)
{
    char name[GF_NAME_MAX];

    snprintf(name, sizeof(name), "%s", f->cfg.name);
    gf_fracdir_remove(a, name);
    gf_journal(a, "unsup %s", name);
    gf_registry_forget(a, f);
    gf_agent_event(a, "released fraction %s", name);
}

void gf_fracdir_reply(const gf_afraction *f, gf_msg *out)
{
    char config[GF_PATH_MAX + 16];

    snprintf(config, sizeof(config), "%s/" GF_FRAC_CONFIG, f->dir);
    gf_msg_init(out, "ok");
    gf_msg_add(out, "config", config);
    gf_msg_add(out, "ledger", f->cfg.ledger);
    gf_msg_add(out, "socket", f->cfg.agent);
}
