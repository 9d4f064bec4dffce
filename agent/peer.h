/* SPDX-License-Identifier: Apache-2.0 */
/* Who is speaking on a connection, from the kernel alone, bound to the very
 * process that connected: SO_PEERCRED for its credentials at connect time,
 * and a pidfd of that process (SO_PEERPIDFD, Linux >= 6.5). A pid number is
 * never trusted on its own: it is used only while the pidfd says the
 * process that connected still lives, so a reused number names nobody. */
#ifndef GPUFRAC_AGENT_PEER_H
#define GPUFRAC_AGENT_PEER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct gf_peer {
    pid_t pid; /* host pid of the process that connected */
    uid_t uid; /* its credentials when it connected */
    gid_t gid;
    uint64_t start; /* its start time (/proc/<pid>/stat) */
    int pidfd;      /* that process; -1 in a peer that is not a connection's */
} gf_peer;

/* Fills p for connected socket fd; -1 when the process that connected is
 * already gone (or cannot be pinned down). On kernels without SO_PEERPIDFD
 * the pidfd is opened here, at accept time (docs/agent-trust.md says what
 * that leaves open). The caller owns p->pidfd. */
int gf_peer_of(int fd, gf_peer *p);
/* Whether the process that connected is still alive. */
bool gf_peer_alive(const gf_peer *p);
/* The pid a pidfd refers to in the agent's pid namespace, or -1 (exited,
 * or not a pidfd). */
pid_t gf_pidfd_pid(int pidfd);

#endif
