/* Tells a pod's owner why the agent terminated one of its processes: a
 * Warning Event on the pod, so `kubectl describe pod` shows it. Only for
 * container fractions (their namespace/pod from the agent's own admission
 * record) and when the agent talks to the API server (--node-name). */
#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kube.h"
#include "log.h"
#include "terminated.h"

void gf_kube_event_terminated(gf_agent *a, const gf_afraction *f, pid_t pid, bool watchdog,
                              const char *reason)
{
    gf_kube_opts o = {.api_server = a->api_server[0] ? a->api_server : NULL,
                      .token_file = a->token_file[0] ? a->token_file : NULL,
                      .insecure = a->api_insecure};
    char name[253], path[512], stamp[32], field[128];
    char *body = NULL, *resp = NULL;
    time_t now = time(NULL);
    long status = 0;
    gf_kube *k = NULL;
    gf_error err;
    json_t *ev;
    struct tm tm;

    if (!f->pod[0] || !f->ns[0] || !a->node_name[0])
        return;
    gmtime_r(&now, &tm);
    strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%SZ", &tm);
    snprintf(name, sizeof(name), "%.200s.gpufrac-%d-%lld", f->pod, (int)pid, (long long)now);
    for (char *c = name; *c; c++)
        *c = (char)tolower((unsigned char)*c);
    snprintf(field, sizeof(field), "spec.containers{%s}", f->container);
    ev = json_pack("{s:s, s:s, s:{s:s, s:s}, s:{s:s, s:s, s:s, s:s, s:s}, s:s, s:s, s:s, "
                   "s:{s:s, s:s}, s:s, s:s, s:i}",
                   "apiVersion", "v1", "kind", "Event", "metadata", "name", name, "namespace",
                   f->ns, "involvedObject", "kind", "Pod", "apiVersion", "v1", "namespace",
                   f->ns, "name", f->pod, "fieldPath", field, "reason",
                   watchdog ? "GpufracWatchdogKilled" : "GpufracEvicted", "message", reason,
                   "type", "Warning", "source", "component", "gpufracd", "host", a->node_name,
                   "firstTimestamp", stamp, "lastTimestamp", stamp, "count", 1);
    snprintf(path, sizeof(path), "/api/v1/namespaces/%s/events", f->ns);
    if (!ev || !(body = json_dumps(ev, JSON_COMPACT)))
        gf_error_set(&err, GF_ENOSPACE, "out of memory building the event");
    else if (gf_kube_open(&k, &o, &err) == 0 &&
             gf_kube_request(k, "POST", path, body, "application/json", &status, &resp, &err) == 0 &&
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
