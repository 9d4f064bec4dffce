/* SPDX-License-Identifier: Apache-2.0 */
/* Private to the kube client's files. */
#ifndef GPUFRAC_SCHED_KUBE_IMPL_H
#define GPUFRAC_SCHED_KUBE_IMPL_H

#include <curl/curl.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "kube.h"

#define GF_KUBE_TOKEN_MAX 65536
#define GF_KUBE_SHARE_LOCKS 8
#define GF_KUBE_BODY_MAX (256u << 20) /* one response (a list page) */
/* Idle easy handles kept: each keeps its own keep-alive connection, so a
 * request rarely pays a TLS handshake (on both sides) or a CA load. */
#define GF_KUBE_IDLE_MAX 16

typedef struct gf_kube_mux gf_kube_mux;

struct gf_kube {
    char base[512];
    char token_file[PATH_MAX]; /* "" = no token */
    char ca_file[PATH_MAX];    /* "" = system CAs */
    bool insecure;
    pthread_mutex_t lock; /* token, token_read */
    char *token;
    time_t token_read;
    CURLSH *share; /* DNS and TLS sessions, not connections */
    pthread_mutex_t share_locks[GF_KUBE_SHARE_LOCKS];
    pthread_mutex_t idle_lock;
    CURL *idle[GF_KUBE_IDLE_MAX]; /* a stack: the oldest at the bottom */
    time_t idle_since[GF_KUBE_IDLE_MAX];
    size_t n_idle;
    gf_kube_mux *mux;          /* NULL unless opts.multiplex */
    _Atomic uint64_t connects; /* connections opened, over every transfer */
};

/* kube_mux.c: request/response transfers over one multi handle (one
 * HTTP/2 connection); perform blocks until c's transfer is done. submit
 * returns at once: CURLE_OK, and fn(cls, code) runs exactly once on the mux
 * thread when c's transfer is done (fn may submit again); any other code,
 * and fn never runs. */
typedef void (*gf_kube_mux_fn)(void *cls, CURLcode code);
int gf_kube_mux_start(gf_kube_mux **out, gf_error *err);
CURLcode gf_kube_mux_perform(gf_kube_mux *m, CURL *c);
CURLcode gf_kube_mux_submit(gf_kube_mux *m, CURL *c, gf_kube_mux_fn fn, void *cls);
size_t gf_kube_mux_idle_close(gf_kube_mux *m, unsigned idle_s);
void gf_kube_mux_stop(gf_kube_mux *m);

time_t gf_kube_now(void); /* CLOCK_MONOTONIC seconds */
int gf_kube_token(gf_kube *k, bool force, char **out, gf_error *err);

/* One transfer. write_fn gets the body (curl semantics); progress, when set,
 * is polled about once a second (non-zero aborts). timeout_s 0 = none. */
typedef struct gf_kube_xfer {
    const char *method, *path, *body, *content_type;
    curl_write_callback write_fn;
    void *write_cls;
    curl_xferinfo_callback progress;
    void *progress_cls;
    long timeout_s;
    CURL *curl;    /* out: the handle, valid while callbacks run */
    long status;   /* out: HTTP status, 0 when none */
    CURLcode code; /* out */
} gf_kube_xfer;

/* Transport errors return -1; any HTTP status returns 0 with x->status set.
 * fresh_token re-reads the token file first (after a 401). */
int gf_kube_perform(gf_kube *k, gf_kube_xfer *x, bool fresh_token, gf_error *err);

/* As gf_kube_request, but returns at once: 0, and done(cls, rc, status,
 * resp, err) runs exactly once, on the multiplexer's thread (before the
 * return when k has none); resp (NULL when rc < 0) is done's to free. -1:
 * not started (err says why), done never runs. */
typedef void (*gf_kube_answer_fn)(void *cls, int rc, long status, char *resp, gf_error *err);
int gf_kube_request_async(gf_kube *k, const char *method, const char *path, const char *body,
                          const char *content_type, gf_kube_answer_fn done, void *cls,
                          gf_error *err);

/* Growing body buffer for write callbacks. */
typedef struct gf_kube_buf {
    char *data;
    size_t len, cap, max;
} gf_kube_buf;
size_t gf_kube_buf_write(char *p, size_t size, size_t n, void *cls);

/* The "message" of a Kubernetes Status body, or the body's start. */
void gf_kube_status_message(const char *body, char *buf, size_t len);

#endif
