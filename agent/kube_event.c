/* SPDX-License-Identifier: Apache-2.0 */
/* Tells a pod's owner why the agent terminated one of its processes: a
 * Warning Event on the pod, so `kubectl describe pod` shows it. Only for
 * container fractions (their namespace/pod from the agent's own admission
 * record) and when the agent talks to the API server (--node-name). */
#include "kube_event.h"

#include <ctype.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kube.h"
#include "log.h"

/* What one Event needs, copied: posted by the worker without the agent's
 * lock, so no request, scrape or tick waits behind the API server. */
typedef struct pending_event {
    char ns[64], pod[128], container[64], reason[512];
    pid_t pid;
    bool watchdog;
} pending_event;

#define EVENTS_QUEUED_MAX 64
static pending_event queue[EVENTS_QUEUED_MAX];
static unsigned q_head, q_len;
static pthread_mutex_t q_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t q_cond = PTHREAD_COND_INITIALIZER;
static bool worker_started;

static void post_event(gf_agent *a, const pending_event *f);

static void *event_worker(void *arg)
{
    gf_agent *a = arg;
    pending_event ev;

    for (;;) {
        pthread_mutex_lock(&q_lock);
        while (!q_len)
            pthread_cond_wait(&q_cond, &q_lock);
        ev = queue[q_head];
        q_head = (q_head + 1) % EVENTS_QUEUED_MAX;
        q_len--;
        pthread_mutex_unlock(&q_lock);
        post_event(a, &ev);
    }
    return NULL;
}

void gf_kube_event_terminated(gf_agent *a, const gf_afraction *f, pid_t pid, bool watchdog,
                              const char *reason)
{
    pending_event *ev;
    bool dropped = false;

    if (!f->pod[0] || !f->ns[0] || !a->node_name[0])
        return;
    pthread_mutex_lock(&q_lock);
    if (!worker_started) {
        pthread_t t;
        sigset_t all, old;
        sigfillset(&all); /* the loop's signalfd alone sees the signals */
        pthread_sigmask(SIG_SETMASK, &all, &old);
        worker_started = pthread_create(&t, NULL, event_worker, a) == 0;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (worker_started)
            pthread_detach(t);
    }
    if (!worker_started || q_len == EVENTS_QUEUED_MAX) {
        dropped = true;
    } else {
        ev = &queue[(q_head + q_len++) % EVENTS_QUEUED_MAX];
        snprintf(ev->ns, sizeof(ev->ns), "%s", f->ns);
        snprintf(ev->pod, sizeof(ev->pod), "%s", f->pod);
        snprintf(ev->container, sizeof(ev->container), "%s", f->container);
        snprintf(ev->reason, sizeof(ev->reason), "%s", reason);
        ev->pid = pid;
        ev->watchdog = watchdog;
        pthread_cond_signal(&q_cond);
    }
    pthread_mutex_unlock(&q_lock);
    if (dropped)
        gf_log_write(a->log_fd, GF_LOG_WARN, "gpufracd",
                     "no Event for pod %s/%s: %d are "
                     "already waiting for the API server",
                     f->ns, f->pod, EVENTS_QUEUED_MAX);
}

static void post_event(gf_agent *a, const pending_event *f)
{
    gf_kube_opts o = {.api_server = a->api_server[0] ? a->api_server : NULL,
                      .token_file = a->token_file[0] ? a->token_file : NULL,
                      .ca_file = a->api_ca_file[0] ? a->api_ca_file : NULL,
                      .insecure = a->api_insecure};
    char name[253], path[512], stamp[32], field[128];
    char *body = NULL, *resp = NULL;
    time_t now = time(NULL);
    long status = 0;
    gf_kube *k = NULL;
    gf_error err;
    json_t *ev;
    struct tm tm;

    gmtime_r(&now, &tm);
    strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", &tm);
    snprintf(name, sizeof(name), "%.200s.gpufrac-%d-%lld", f->pod, (int)f->pid, (long long)now);
    for (char *c = name; *c; c++)
        *c = (char)tolower((unsigned char)*c);
    snprintf(field, sizeof(field), "spec.containers{%s}", f->container);
    ev = json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:s, s:s, s:s, s:s, s:s}, s:s, s:s, s:s, "
                   "s:{s:s, s:s}, s:s, s:s, s:i}",
                   "apiVersion", "v1", "kind", "Event", "metadata", "name", name, "namespace",
                   f->ns, "involvedObject", "kind", "Pod", "apiVersion", "v1", "namespace", f->ns,
                   "name", f->pod, "fieldPath", field, "reason",
                   f->watchdog ? "GpufracWatchdogKilled" : "GpufracEvicted", "message", f->reason,
                   "type", "Warning", "source", "component", "gpufracd", "host", a->node_name,
                   "firstTimestamp", stamp, "lastTimestamp", stamp, "count", 1);
    snprintf(path, sizeof(path), "/api/v1/namespaces/%s/events", f->ns);
    if (!ev || !(body = json_dumps(ev, JSON_COMPACT)))
        gf_error_set(&err, GF_ENOSPACE, "out of memory building the event");
    else if (gf_kube_open(&k, &o, &err) == 0 &&
             gf_kube_request(k, "POST", path, body, "application/json", &status, &resp, &err) ==
                 0 &&
             (status < 200 || status > 299))
        gf_error_set(&err, GF_ESTATE, "POST %s: HTTP %ld", path, status);
    if (status < 200 || status > 299)
        gf_log_write(a->log_fd, GF_LOG_WARN, "gpufracd", "no Event for pod %s/%s: %s", f->ns,
                     f->pod, err.msg);
    if (k)
        gf_kube_close(k);
    free(body);
    free(resp);
    json_decref(ev);
}
