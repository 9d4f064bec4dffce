/* SPDX-License-Identifier: Apache-2.0 */
/* Every local user's `gpufrac run` through the agent:
 *
 *   <state>/users.sock     0666: anyone may connect; who they are is
 *                          SO_PEERCRED, decided per request
 *   run   name= mode= compute= devices=uuid/request/limit,...
 *         -> a fraction of the caller's, admitted against every fraction on
 *            those GPUs (all users, all containers) and the policy file
 *   end   name= exit=   (its supervisor or root) -> moved to <state>/ended
 *
 * A user fraction's directory, config and supervisor record are root's
 * (the supervisor is the caller's host pid as SO_PEERCRED reported it,
 * attached through a pidfd and journaled like every supervisor, so
 * attribution, the watchdog and stale release cover it); only the ledger,
 * which the user's processes must write, and the fraction's socket are given
 * to the user. The caller holds an OFD read lock on the supervisor file while
 * it runs (for gpufrac stop; the agent never reads that file). */
#ifndef GPUFRAC_AGENT_USER_ADMIT_H
#define GPUFRAC_AGENT_USER_ADMIT_H

#include <stdbool.h>

#include "agent.h"
#include "conn.h"
#include "user_policy.h"

#define GF_USER_POLICY_DEFAULT "/etc/gpufrac/policy.conf"

/* The policy file, as the agent reads it at start, for --check-config and at
 * each user's run: none at path is no policy (*present false; the built-in
 * bounds). A symbolic link, anything but a regular file, a file another user
 * owns, or one others (or a group other than root) may write is refused with
 * the reason named, as a file that does not parse is: fail closed. */
int gf_user_load_policy(const char *path, gf_user_policy *p, bool *present, gf_error *err);

/* Opens <state>/users.sock (in the state directory's fd, never through a
 * link) and returns its listening descriptor; the loop accepts on it as
 * GF_SOCKET_USERS, on which only ping, run and end are served (verbs.c). */
int gf_user_listen(gf_agent *a, const char *policy, gf_error *err);

/* A fraction users.sock made: no container identity, a ledger the agent
 * gave to a user other than root, a supervisor the agent attached. */
bool gf_user_fraction(gf_agent *a, const gf_afraction *f);

/* The verbs run and end (verbs.c). */
void gf_serve_run(gf_agent *a, gf_request *r, const gf_msg *in, gf_msg *out);
void gf_serve_end(gf_agent *a, gf_request *r, const gf_msg *in, gf_msg *out);

/* A user fraction whose run died without "end" (its supervisor's pidfd
 * fired, no process holds a slot; found by gf_release_stale): moved to
 * <state>/ended like an ended one. */
void gf_user_end_stale(gf_agent *a, gf_afraction *f);

/* From the tick: removes ended records older than GF_USER_ENDED_KEEP_S. */
#define GF_USER_ENDED_KEEP_S 600
void gf_user_reconcile(gf_agent *a);

#endif
