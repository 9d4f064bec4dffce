/* SPDX-License-Identifier: Apache-2.0 */
/* Supervisors (supervisors.h). */
#include "supervisors.h"

#include <inttypes.h>

#include "attrib.h"
#include "cleanup.h"
#include "journal.h"
#include "loop.h"
#include "proc.h"

int gf_sup_attach(gf_agent *a, gf_afraction *f, pid_t pid, uint64_t start, bool admitted,
                  gf_error *err)
{
    gf_cleanup_close int fd = gf_pidfd_verified(pid, start);
    bool replaced = f->sup_pidfd >= 0;

    if (fd < 0 || !gf_proc_stat(pid, &start, NULL) || gf_pidfd_exited(fd))
        return gf_error_set(err, GF_ENOTFOUND, "pid= is no live process of this node");
    /* a supervisor the journal does not hold would be lost to a restart */
    if (gf_journal_refuses(a, "a supervisor", err) < 0 ||
        gf_journal(a, "sup %s %d %" PRIu64 " %d", f->cfg.name, (int)pid, start, admitted) < 0)
        return gf_journal_refuses(a, "a supervisor", err);
    gf_loop_close(&a->loop, &f->sup_pidfd);
    f->supervisor = pid;
    f->sup_start = start;
    f->sup_pidfd = gf_steal_fd(&fd);
    f->sup_admitted = admitted;
    f->sup_seen = true;
    gf_loop_watch(&a->loop, f->sup_pidfd, GF_EV_SUP, f->fid);
    if (replaced)
        gf_attrib_dirty();
    else
        gf_attrib_added(a, (int)(f - a->fractions));
    return 0;
}

void gf_sup_lost(gf_agent *a, gf_afraction *f)
{
    if (f->sup_pidfd < 0)
        return;
    gf_loop_close(&a->loop, &f->sup_pidfd);
    gf_attrib_dirty();
}

bool gf_sup_alive(const gf_afraction *f)
{
    return f->sup_pidfd >= 0 && !gf_pidfd_exited(f->sup_pidfd);
}
