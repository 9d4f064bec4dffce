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
/* A container admitted whose init never attached (its runtime died, or
 * never ran it), or a user's fraction whose run never became its supervisor
 * (the agent died between making it and attaching the run, and the run did
 * not ask again), does not keep its guarantee: past a->attach_timeout_s, with
 * no process holding a slot, it is released. Since when, or 0 when it is not
 * such a fraction. */
static time_t unattached_since(gf_agent *a, const gf_afraction *f)
{
    time_t since = f->has_identity ? f->admitted_at : gf_user_fraction(a, f) ? f->made_at : 0;

    if (f->sup_seen || f->sup_pidfd >= 0 || since <= 0 ||
        time(NULL) - since <= a->attach_timeout_s || gf_ledger_view_any_live(f->ledger_fd))
        return 0;
    return since;
}

static bool release_unattached(gf_agent *a, gf_afraction *f)
{
    time_t since = unattached_since(a, f);

    if (!since)
        return false;
    if (f->has_identity)
        gf_agent_event(a,
                       "fraction %s: admitted %lld s ago and its container never attached: "
                       "releasing its guarantee",
                       f->cfg.name, (long long)(time(NULL) - since));
    else
        gf_agent_event(a,
                       "fraction %s: made %lld s ago and its gpufrac run never attached: "
                       "releasing its guarantee",
                       f->cfg.name, (long long)(time(NULL) - since));
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
            gf_agent_event(a,
                           "fraction %s: its supervisor and all its processes are gone: "
                           "releasing its guarantee",
                           f->cfg.name);
            gf_release_fraction(a, f);
        }
        if (a->n_fractions < before)
            i = -1; /* the registry changed under us: start over */
    }
}
