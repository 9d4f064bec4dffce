/* SPDX-License-Identifier: Apache-2.0 */
/* Stale fractions: a fraction whose supervisor and processes are all gone,
 * or a container's that never attached, does not keep its guarantee. From
 * the tick and when a supervisor's pidfd fires. */
#include "stale.h"

#include "attrib.h"
#include "events.h"
#include "fracdir.h"
#include "ledger_view.h"
#include "proc.h"
#include "supervisors.h"
#include "user_admit.h"

/* A container admitted whose init never attached (its runtime died, or
 * never ran it) does not keep its guarantee: past a->attach_timeout_s, with
 * no process holding a slot, it is released. */
static bool never_attached(gf_agent *a, const gf_afraction *f)
{
    return f->has_identity && !f->sup_seen && f->sup_pidfd < 0 && f->admitted_at > 0 &&
           time(NULL) - f->admitted_at > a->attach_timeout_s &&
           !gf_ledger_view_any_live(f->ledger_fd);
}

static bool release_unattached(gf_agent *a, gf_afraction *f)
{
    if (!never_attached(a, f))
        return false;
    gf_agent_event(a, "fraction %s: admitted %lld s ago and its container never attached: "
                      "releasing its guarantee", f->cfg.name,
                   (long long)(time(NULL) - f->admitted_at));
    gf_release_fraction(a, f);
    return true;
}

/* A fraction whose supervisor (attached by the agent) is gone and that no
 * process holds a slot of any more (the kernel's lock table says so) is
 * released: its guarantee ends within a tick, whoever made it. */
void gf_release_stale(gf_agent *a)
{
    for (int i = 0; i < a->n_fractions; i++) {
        gf_afraction *f = &a->fractions[i];
        if (release_unattached(a, f)) {
            i = -1; /* the registry changed under us: start over */
            continue;
        }
        if (f->sup_pidfd >= 0 && gf_pidfd_exited(f->sup_pidfd))
            gf_sup_lost(a, f);
        if (!f->sup_seen || f->sup_pidfd >= 0 || gf_ledger_view_any_live(f->ledger_fd) ||
            gf_attrib_has_member(a, f))
            continue;
        int before = a->n_fractions;
        f->sup_seen = false; /* tried once: a fraction that cannot be removed is not retried */
        if (gf_user_fraction(a, f)) { /* kept a while for its owner's gpufrac status */
            gf_user_end_stale(a, f);
        } else {
            gf_agent_event(a, "fraction %s: its supervisor and all its processes are gone: "
                              "releasing its guarantee", f->cfg.name);
            gf_release_fraction(a, f);
        }
        if (a->n_fractions < before)
            i = -1; /* the registry changed under us: start over */
    }
}
