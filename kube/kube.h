/* SPDX-License-Identifier: Apache-2.0 */
/* A small Kubernetes REST client on libcurl: in-cluster or
 * flag-given endpoint, bearer token re-read as the kubelet rotates it, CA
 * verification, paged lists, watches with bookmarks, pod bindings.
 * Thread-safe: every call uses its own curl handle; connections and TLS
 * sessions are shared. */
#ifndef GPUFRAC_SCHED_KUBE_H
#define GPUFRAC_SCHED_KUBE_H

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define GF_KUBE_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"
#define GF_KUBE_TOKEN_REFRESH_S 60
#define GF_KUBE_RV_MAX 128

typedef struct gf_kube_opts {
    const char *api_server; /* "https://host:port"; NULL = in-cluster */
    const char *token_file; /* NULL = in-cluster token (none outside a cluster) */
    const char *ca_file;    /* NULL = in-cluster ca.crt (system CAs outside) */
    bool insecure;          /* --insecure-skip-tls-verify */
    const char *sa_dir;     /* NULL = GF_KUBE_SA_DIR (tests point it elsewhere) */
    /* Requests from every thread share one connection (HTTP/2 where the
     * server speaks it), driven by a thread of the client's; watches keep
     * their own connections. */
    bool multiplex;
} gf_kube_opts;

typedef struct gf_kube gf_kube;

int gf_kube_open(gf_kube **out, const gf_kube_opts *opts, gf_error *err);
void gf_kube_close(gf_kube *k);
/* Closes the kept-alive connections and frees the idle request handles
 * unused for idle_s seconds or more (their TLS state and buffers are most of
 * what a burst of binds leaves resident); returns how many it released. */
size_t gf_kube_idle_close(gf_kube *k, unsigned idle_s);
const char *gf_kube_base(const gf_kube *k);
/* Connections opened to the API server so far. */
uint64_t gf_kube_connections(const gf_kube *k);

/* Base URL from KUBERNETES_SERVICE_HOST/PORT, IPv6 hosts bracketed. */
int gf_kube_incluster_url(char *buf, size_t len, gf_error *err);

/* One request. body may be NULL. *resp (NUL-terminated, malloc'd) and
 * *status are set whenever the server answered, whatever the status; a
 * transport failure returns -1. A 401 re-reads the token and retries once. */
int gf_kube_request(gf_kube *k, const char *method, const char *path, const char *body,
                    const char *content_type, long *status, char **resp, gf_error *err);

/* GET a list (path without query or with one) page by page (limit/continue);
 * fn is called for every item. rv receives the list's resourceVersion. */
typedef int (*gf_kube_item_fn)(void *cls, json_t *item, gf_error *err);
int gf_kube_list(gf_kube *k, const char *path, gf_kube_item_fn fn, void *cls, char *rv,
                 size_t rv_len, gf_error *err);

/* Watch from rv. fn gets every ADDED/MODIFIED/DELETED event; BOOKMARKs and
 * events update rv. Returns 0 when the stream ended normally (resume from
 * rv), GF_KUBE_GONE when the version is too old (re-list), -1 on error. */
#define GF_KUBE_GONE 1
typedef int (*gf_kube_event_fn)(void *cls, const char *type, json_t *object, gf_error *err);
int gf_kube_watch(gf_kube *k, const char *path, char *rv, size_t rv_len, gf_kube_event_fn fn,
                  void *cls, const atomic_bool *stop, gf_error *err);

/* POST the pod's binding subresource with annotations (object of strings,
 * may be NULL). uid may be NULL or "" (no precondition). */
int gf_kube_bind(gf_kube *k, const char *ns, const char *name, const char *uid, const char *node,
                 json_t *annotations, gf_error *err);

/* As gf_kube_bind, but returns at once: 0, and done(cls, rc, err) runs
 * exactly once with the outcome, on the multiplexer's thread (before the
 * return without multiplex). -1: not started (err says why), done never
 * runs. The annotations are read before the return. */
typedef void (*gf_kube_bind_fn)(void *cls, int rc, gf_error *err);
int gf_kube_bind_async(gf_kube *k, const char *ns, const char *name, const char *uid,
                       const char *node, json_t *annotations, gf_kube_bind_fn done, void *cls,
                       gf_error *err);

/* GET the v1.Pod ns/name (new reference in *pod); GF_ENOTFOUND on 404. */
int gf_kube_get_pod(gf_kube *k, const char *ns, const char *name, json_t **pod, gf_error *err);

/* Parses a document from the API server: as json_loadb, but a string with a
 * NUL byte (\u0000, which Kubernetes lets through) is kept with U+FFFD in
 * place of each NUL instead of failing the whole document. */
json_t *gf_kube_json_load(const char *text, size_t len, json_error_t *je);

/* The binding body the API server expects (exposed for tests). */
json_t *gf_kube_binding_body(const char *ns, const char *name, const char *uid, const char *node,
                             json_t *annotations);

/* Watch stream framing: bytes in, one callback per complete line (events
 * are newline-delimited; chunk boundaries are not). */
typedef struct gf_linebuf {
    char *buf;
    size_t len, cap;
    size_t max; /* a line longer than this is an error */
} gf_linebuf;
typedef int (*gf_line_fn)(void *cls, const char *line, size_t len, gf_error *err);
int gf_linebuf_feed(gf_linebuf *lb, const char *data, size_t n, gf_line_fn fn, void *cls,
                    gf_error *err);
void gf_linebuf_free(gf_linebuf *lb);

/* One watch event line: sets type and object (borrowed from *root, which the
 * caller json_decref()s). An ERROR event yields its Status code in *code. */
int gf_kube_event_parse(const char *line, size_t len, json_t **root, const char **type,
                        json_t **object, long *code, gf_error *err);

#endif
