/* SPDX-License-Identifier: Apache-2.0 */
/* Every open HTTP connection must make progress: a whole request within
 * GF_SERVER_REQUEST_S of being opened or of its last answer, unless it
 * waits for a bind's answer. libmicrohttpd's idle timeout restarts on every
 * byte, so a client sending one byte every few seconds would keep its
 * connection for good; enough of them hold every slot and shut
 * kube-scheduler out. A reaper thread shuts overdue connections down. */
#ifndef GPUFRAC_SCHED_SERVER_DEADLINE_H
#define GPUFRAC_SCHED_SERVER_DEADLINE_H

#include <microhttpd.h>
#include <stdbool.h>

#include "error.h"

#define GF_SERVER_REQUEST_S 30

typedef struct gf_deadlines gf_deadlines;

int gf_deadlines_start(gf_deadlines **out, unsigned limit_s, gf_error *err);
/* Stops the reaper; after MHD_stop_daemon (every connection closed). */
void gf_deadlines_stop(gf_deadlines *d);
/* MHD_OPTION_NOTIFY_CONNECTION's callback, cls the gf_deadlines. */
void gf_deadlines_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                         enum MHD_ConnectionNotificationCode code);
/* c delivered a request's headers, or had a request answered: its clock
 * starts again. */
void gf_deadlines_progress(gf_deadlines *d, struct MHD_Connection *c);
/* c waits for a bind's answer (exempt), or waits no more. */
void gf_deadlines_waiting(gf_deadlines *d, struct MHD_Connection *c, bool waiting);

#endif
