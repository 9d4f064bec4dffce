/* SPDX-License-Identifier: Apache-2.0 */
/* User names for the metrics page (usernames.c). */
#ifndef GPUFRAC_AGENT_USERNAMES_H
#define GPUFRAC_AGENT_USERNAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "error.h"

/* uid -> user name for the page, from a cache a thread of its
 * own fills (never the caller: a slow name service blocks nobody else).
 * gf_username writes the cached name, else the numeric uid, and has a
 * missing or expired entry looked up. */
#define GF_USERNAME_MAX 64
#define GF_USERNAME_TTL_S 300          /* a resolved name is looked up again after this */
#define GF_USERNAME_NEG_TTL_S 60       /* the same for a uid without a passwd entry */
int gf_usernames_start(gf_error *err); /* once per process; later calls do nothing */
void gf_username(uid_t uid, char *out, size_t len);
/* Waits until no lookup is pending (at most timeout_ms); true when none is. */
bool gf_usernames_settle(int timeout_ms);
#define GF_USERNAMES_START_WAIT_MS 2000 /* at start, before the first page */

#endif
