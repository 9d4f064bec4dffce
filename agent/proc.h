/* SPDX-License-Identifier: Apache-2.0 */
/* What the kernel says about a process: pidfds, identity (pid + start time),
 * parent, cgroup, namespaced pids. The agent attributes processes only from
 * these, never from a ledger or a file a tenant can write. */
#ifndef GPUFRAC_AGENT_PROC_H
#define GPUFRAC_AGENT_PROC_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define GF_CGROUP_MAX 256

/* A pidfd for pid (> 0), or -1. */
int gf_pidfd_open(pid_t pid);
/* SIGKILL through a pidfd; never a pid. */
int gf_pidfd_kill(int pidfd);
/* Whether the process behind a pidfd has exited (poll, no wait). */
bool gf_pidfd_exited(int pidfd);

/* The process's start time (clock ticks since boot, /proc/<pid>/stat field
 * 22) and parent; false when it is gone or unreadable. */
bool gf_proc_stat(pid_t pid, uint64_t *start, pid_t *ppid);
/* Its real uid (/proc/<pid>/status). */
bool gf_proc_uid(pid_t pid, uid_t *uid);
/* Its cgroup: the v2 path, else the v1 memory one; false for "/" or none. */
bool gf_proc_cgroup(pid_t pid, char *out, size_t len);
/* Opens a pidfd for pid and checks it is still the process that started at
 * `start` (0: any); -1 when it is gone or was replaced. */
int gf_pidfd_verified(pid_t pid, uint64_t start);

/* CLOCK_MONOTONIC in milliseconds. */
int64_t gf_now_ms(void);

#endif
