/* SPDX-License-Identifier: Apache-2.0 */
/* The state directory's layout: every file and directory name in it, named
 * once. Each entry says who writes it and who reads it, and whether a tenant
 * can write it (then every reader parses it with bounds and trusts nothing in
 * it). The names are string literals, so they join into paths and messages
 * ("%s/" GF_STATE_FRACTIONS "/%s"). Tests in Python spell them literally. */
#ifndef GPUFRAC_STATEDIR_H
#define GPUFRAC_STATEDIR_H

/* --- <state>/ --- */

/* The state directory of the node (gpufracd's default, the runtime's, and
 * gpufrac's when it may write there or an agent serves it). */
#define GF_STATE_DIR_DEFAULT "/run/gpufrac"

/* <state>/fractions/: one directory per live fraction. Made by gpufrac run
 * (0755 as root, else 0700) or gpufracd (0755); listed by gpufrac status/run
 * and the agent's registry. Whoever may write it may make fractions: on a node
 * it is root's. */
#define GF_STATE_FRACTIONS "fractions"
/* <state>/fractions/.lock: the state lock (flock), taken by gpufrac run while
 * it checks that fractions fit and creates one; opened never through a link.
 * Holds no data. */
#define GF_STATE_LOCK ".lock"
/* <state>/fractions/.new-<name>...: a fraction being made (gpufrac run,
 * gpufracd), renamed into place when complete; .old-<name>...: one being
 * removed. Scanners skip both. */
#define GF_STATE_NEW_PREFIX ".new-"
#define GF_STATE_OLD_PREFIX ".old-"
/* <state>/ended/<name>.<pid>/: a run's fraction after it ended, kept for
 * gpufrac status --ended. Moved there by gpufrac run, or by gpufracd for a
 * users.sock fraction; read by gpufrac status. */
#define GF_STATE_ENDED "ended"
/* <state>/agent.sock: root's socket of gpufracd (its own, 0600 root; see
 * core/proto.h). gpufrac run as root, the runtime and the CLI connect. */
#define GF_STATE_AGENT_SOCK "agent.sock"
/* <state>/users.sock: gpufracd's socket for every local user's gpufrac run
 * (0666; only ping/run/end, agent/user_admit.h). */
#define GF_STATE_USERS_SOCK "users.sock"
/* <state>/agent/: gpufracd's private directory (0700 root): trusted. */
#define GF_STATE_AGENT_DIR "agent"
/* <state>/agent/journal (and journal.tmp while it is rewritten): the agent's
 * loans, supervisors and counters; written and read by gpufracd only. */
#define GF_STATE_JOURNAL "journal"
#define GF_STATE_JOURNAL_TMP "journal.tmp"
/* <state>/agent/lock: held by the gpufracd that serves the directory; a
 * second one reads the holder from it and exits. */
#define GF_STATE_AGENT_LOCK "lock"
/* <state>/mps/<short-uuid>/: MPS pipe directories of sm-sharing GPUs, made by
 * gpufracd; the MPS control daemons and their clients use them. */
#define GF_STATE_MPS "mps"
/* <state>/events.log, events.log.1: one line per reclaim, eviction or kill;
 * written (bounded, rotated) by gpufracd, read by gpufrac status. */
#define GF_STATE_EVENTS "events.log"
#define GF_STATE_EVENTS_OLD "events.log.1"
/* <state>/containers/<id>: the OCI runtime wrapper's map of a container to its
 * fraction (name, then the environment for exec); <state>/pods/<sandbox>: the
 * container that took a pod's pod-level annotations. Written and read by
 * gpufrac-runtime (root) only. */
#define GF_STATE_CONTAINERS "containers"
#define GF_STATE_PODS "pods"
/* <state>/ld.so.preload: naming the shim as containers see it; written by
 * gpufrac-runtime when missing, mounted read-only into fractional containers. */
#define GF_STATE_PRELOAD "ld.so.preload"

/* --- <state>/fractions/<name>/ --- */

/* The fraction config (core/config.h), 0444/0440, written once before the
 * directory is renamed into place by whoever makes the fraction (gpufrac run,
 * or gpufracd for containers and users.sock). Read by the shim
 * (GPUFRAC_CONFIG), gpufracd (once, when the fraction appears) and gpufrac
 * status. Parsed with core/config.c's bounded parser by every reader. */
#define GF_FRAC_CONFIG "config"
/* The shared ledger (core/ledger.h): written by every process of the
 * fraction through the shim: tenant-written. gpufracd reads it only through
 * bounded copies (agent/ledger_view.h); gpufrac status maps it. */
#define GF_FRAC_LEDGER "ledger"
/* The supervisor's pid (its OFD lock held while gpufrac run supervises):
 * written by gpufrac run (tenant) or by gpufracd for containers and
 * users.sock. Read by gpufrac status/stop/run, never by the agent. */
#define GF_FRAC_SUPERVISOR "supervisor"
/* A container fraction's Kubernetes identity (core/identity.h), 0444: written
 * by gpufracd at admission in its own new directory: trusted. Read by
 * gpufracd's registry and gpufrac status. */
#define GF_FRAC_IDENTITY "identity"
/* Why gpufracd terminated a process of the fraction, one line each: appended
 * by gpufracd (0644), read by gpufrac run and gpufrac status. */
#define GF_FRAC_TERMINATED "terminated"
/* The fraction's own socket: gpufracd listens, owned by the ledger's owner;
 * the fraction's processes (shim) and gpufrac run connect. */
#define GF_FRAC_AGENT_SOCK "agent.sock"
/* In <state>/ended/<name>.<pid>/: when and how the run ended; written by
 * gpufrac run or gpufracd as it moves the fraction, read by gpufrac status. */
#define GF_FRAC_ENDED "ended"
/* In an ended users.sock fraction: the ledger's figures, written by gpufracd
 * in place of the ledger; read by gpufrac status. */
#define GF_FRAC_FIGURES "figures"

#endif
