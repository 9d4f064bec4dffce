/* SPDX-License-Identifier: Apache-2.0 */
/* One HTTP exchange with the API server, with the token retried on 401. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube_impl.h"

size_t gf_kube_buf_write(char *p, size_t size, size_t n, void *cls)
{
    gf_kube_buf *b = cls;
    size_t add = size * n;
    char *grown;
    size_t cap;

    if (b->len + add + 1 > b->max)
        return 0;
    if (b->len + add + 1 > b->cap) {
        cap = b->cap ? b->cap : 1024; /* most answers (a Status, a pod) are small */
        while (cap < b->len + add + 1)
            cap *= 2;
        if (!(grown = realloc(b->data, cap)))
            return 0;
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->len, p, add);
    b->len += add;
    b->data[b->len] = '\0';
    return add;
}

void gf_kube_status_message(const char *body, char *buf, size_t len)
{
    json_t *root = body ? json_loads(body, 0, NULL) : NULL;
    const char *msg = root ? json_string_value(json_object_get(root, "message")) : NULL;

    if (msg)
        snprintf(buf, len, "%s", msg);
    else
        snprintf(buf, len, "%.200s", body ? body : "");
    json_decref(root);
}

static struct curl_slist *headers(const gf_kube_xfer *x, const char *token)
{
    struct curl_slist *h = NULL, *t;
    char line[GF_KUBE_TOKEN_MAX + 32];

    if (!(h = curl_slist_append(h, "Accept: application/json")))
        return NULL;
    if (x->content_type) {
        snprintf(line, sizeof(line), "Content-Type: %s", x->content_type);
        if (!(t = curl_slist_append(h, line)))
            goto fail;
        h = t;
    }
    if (token) {
        snprintf(line, sizeof(line), "Authorization: Bearer %s", token);
        if (!(t = curl_slist_append(h, line)))
            goto fail;
        h = t;
    }
    return h;
fail:
    curl_slist_free_all(h);
    return NULL;
}

/* An idle handle (its connection kept alive), or a new one. */
static CURL *handle_get(gf_kube *k)
{
    CURL *c = NULL;

    pthread_mutex_lock(&k->idle_lock);
    if (k->n_idle)
        c = k->idle[--k->n_idle];
    pthread_mutex_unlock(&k->idle_lock);
    if (c) {
        curl_easy_reset(c); /* options only: the live connection stays */
        return c;
    }
    return curl_easy_init();
}

/* Back to the idle set unless the transfer failed (its connection is
 * suspect) or the set is full. */
static void handle_put(gf_kube *k, CURL *c, bool reusable)
{
    if (!c)
        return;
    pthread_mutex_lock(&k->idle_lock);
    if (reusable && k->n_idle < GF_KUBE_IDLE_MAX) {
        k->idle_since[k->n_idle] = gf_kube_now();
        k->idle[k->n_idle++] = c;
        c = NULL;
    }
    pthread_mutex_unlock(&k->idle_lock);
    curl_easy_cleanup(c);
}

/* A watch (the only transfer with a progress callback) streams for minutes:
 * it keeps its own connection and thread. */
static bool muxed(const gf_kube *k, const gf_kube_xfer *x)
{
    return k->mux && !x->progress;
}

static void setup(gf_kube *k, CURL *c, const gf_kube_xfer *x, const char *url, struct curl_slist *h)
{
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_SHARE, k->share);
    if (muxed(k, x)) {
        curl_easy_setopt(c, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
        /* wait for the one connection to say it multiplexes, not open another */
        curl_easy_setopt(c, CURLOPT_PIPEWAIT, 1L);
    } else {
        /* one connection per handle, kept alive with it */
        curl_easy_setopt(c, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    }
    curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
    /* a burst of binds has hundreds of transfers in flight, each with these
     * buffers: curl's 64 KiB default for uploads (the least it takes is
     * 16 KiB) for bodies of a few hundred bytes */
    curl_easy_setopt(c, CURLOPT_UPLOAD_BUFFERSIZE, 16384L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, x->method);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, x->timeout_s);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, x->write_fn);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, x->write_cls);
    if (x->body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, x->body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(x->body));
    } else if (strcmp(x->method, "GET") == 0) {
        curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
    }
    if (x->progress) {
        curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, x->progress);
        curl_easy_setopt(c, CURLOPT_XFERINFODATA, x->progress_cls);
    }
    if (k->ca_file[0])
        curl_easy_setopt(c, CURLOPT_CAINFO, k->ca_file);
    if (k->insecure) {
        curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
    }
}

/* What one transfer holds until it is concluded. */
typedef struct prepared {
    char *url;
    struct curl_slist *h;
    CURL *c;
} prepared;

static void prepared_free(gf_kube *k, prepared *p, bool reusable)
{
    handle_put(k, p->c, reusable);
    curl_slist_free_all(p->h);
    free(p->url);
    *p = (prepared){0};
}

static int prepare(gf_kube *k, gf_kube_xfer *x, bool fresh_token, prepared *p, gf_error *err)
{
    char *token = NULL;
    int rc = -1;

    *p = (prepared){0};
    if (gf_kube_token(k, fresh_token, &token, err) < 0)
        return -1;
    if (asprintf(&p->url, "%s%s", k->base, x->path) < 0) {
        p->url = NULL;
        gf_error_set(err, GF_ENOSPACE, "out of memory");
        goto out;
    }
    if (!(p->h = headers(x, token)) || !(p->c = handle_get(k))) {
        gf_error_set(err, GF_ENOSPACE, "out of memory preparing a request");
        goto out;
    }
    setup(k, p->c, x, p->url, p->h);
    x->status = 0;
    x->curl = p->c;
    rc = 0;
out:
    if (token) {
        memset(token, 0, strlen(token));
        free(token);
    }
    if (rc < 0)
        prepared_free(k, p, false);
    return rc;
}

/* After the transfer: its status and connections, its handle back. */
static int conclude(gf_kube *k, gf_kube_xfer *x, prepared *p, gf_error *err)
{
    long connects = 0;
    int rc = 0;

    curl_easy_getinfo(p->c, CURLINFO_RESPONSE_CODE, &x->status);
    if (curl_easy_getinfo(p->c, CURLINFO_NUM_CONNECTS, &connects) == CURLE_OK && connects > 0)
        atomic_fetch_add_explicit(&k->connects, (uint64_t)connects, memory_order_relaxed);
    if (x->code != CURLE_OK && x->code != CURLE_ABORTED_BY_CALLBACK && x->code != CURLE_WRITE_ERROR)
        rc = gf_error_set(err, GF_ESYS, "%s %s%s: %s", x->method, k->base, x->path,
                          curl_easy_strerror(x->code));
    x->curl = NULL;
    prepared_free(k, p, rc == 0 && x->code == CURLE_OK);
    return rc;
}

int gf_kube_perform(gf_kube *k, gf_kube_xfer *x, bool fresh_token, gf_error *err)
{
    prepared p;

    if (prepare(k, x, fresh_token, &p, err) < 0)
        return -1;
    x->code = muxed(k, x) ? gf_kube_mux_perform(k->mux, p.c) : curl_easy_perform(p.c);
    return conclude(k, x, &p, err);
}

/* A request/response transfer whose answer goes to b. */
static gf_kube_xfer request_xfer(const char *method, const char *path, const char *body,
                                 const char *content_type, gf_kube_buf *b)
{
    return (gf_kube_xfer){.method = method,
                          .path = path,
                          .body = body,
                          .content_type = content_type,
                          .write_fn = gf_kube_buf_write,
                          .write_cls = b,
                          .timeout_s = 60};
}

static int answer_too_large(const char *method, const char *path, gf_error *err)
{
    return gf_error_set(err, GF_ERANGE, "%s %s: answer larger than %u bytes", method, path,
                        GF_KUBE_BODY_MAX);
}

int gf_kube_request(gf_kube *k, const char *method, const char *path, const char *body,
                    const char *content_type, long *status, char **resp, gf_error *err)
{
    gf_kube_buf b = {.max = GF_KUBE_BODY_MAX};
    gf_kube_xfer x = request_xfer(method, path, body, content_type, &b);
    int attempt;

    *resp = NULL;
    for (attempt = 0; attempt < 2; attempt++) {
        b.len = 0;
        if (gf_kube_perform(k, &x, attempt > 0, err) < 0)
            goto fail;
        if (x.code == CURLE_WRITE_ERROR) {
            answer_too_large(method, path, err);
            goto fail;
        }
        if (x.status != 401)
            break;
    }
    *status = x.status;
    *resp = b.data ? b.data : strdup("");
    return *resp ? 0 : gf_error_set(err, GF_ENOSPACE, "out of memory");
fail:
    free(b.data);
    return -1;
}

/* An asynchronous request: owns copies of what its transfers read. */
typedef struct async_req {
    gf_kube *k;
    char *method, *path, *body, *content_type;
    gf_kube_buf b;
    gf_kube_xfer x;
    prepared p;
    int attempt;
    gf_kube_answer_fn done;
    void *cls;
} async_req;

static void async_free(async_req *a)
{
    free(a->b.data);
    free(a->method);
    free(a->path);
    free(a->body);
    free(a->content_type);
    free(a);
}

static void async_deliver(async_req *a, int rc, gf_error *err)
{
    char *resp = NULL;

    if (rc == 0 && !(resp = a->b.data ? a->b.data : strdup("")))
        rc = gf_error_set(err, GF_ENOSPACE, "out of memory");
    if (resp == a->b.data)
        a->b.data = NULL;
    a->done(a->cls, rc, a->x.status, resp, err);
    async_free(a);
}

static void async_done(void *cls, CURLcode code);

static int async_start(async_req *a, gf_error *err)
{
    CURLcode code;

    a->b.len = 0;
    if (prepare(a->k, &a->x, a->attempt > 0, &a->p, err) < 0)
        return -1;
    if ((code = gf_kube_mux_submit(a->k->mux, a->p.c, async_done, a)) != CURLE_OK) {
        a->x.code = code;
        conclude(a->k, &a->x, &a->p, err);
        return -1;
    }
    return 0;
}

/* On the mux thread: the answer, or one retry with the token re-read. */
static void async_done(void *cls, CURLcode code)
{
    async_req *a = cls;
    gf_error err = {0};

    a->x.code = code;
    if (conclude(a->k, &a->x, &a->p, &err) == 0 && a->x.code == CURLE_WRITE_ERROR)
        answer_too_large(a->method, a->path, &err);
    else if (!err.msg[0] && a->x.status == 401 && a->attempt++ == 0 && async_start(a, &err) == 0)
        return;
    async_deliver(a, err.msg[0] ? -1 : 0, &err);
}

static char *dup_or_null(const char *s, bool *failed)
{
    char *d = s ? strdup(s) : NULL;

    *failed = *failed || (s && !d);
    return d;
}

int gf_kube_request_async(gf_kube *k, const char *method, const char *path, const char *body,
                          const char *content_type, gf_kube_answer_fn done, void *cls,
                          gf_error *err)
{
    async_req *a;
    bool oom = false;
    char *resp = NULL;
    long status = 0;
    int rc;

    if (!k->mux) {
        rc = gf_kube_request(k, method, path, body, content_type, &status, &resp, err);
        done(cls, rc, status, resp, err);
        return 0;
    }
    if (!(a = calloc(1, sizeof(*a))))
        return gf_error_set(err, GF_ENOSPACE, "out of memory");
    a->k = k;
    a->done = done;
    a->cls = cls;
    a->method = dup_or_null(method, &oom);
    a->path = dup_or_null(path, &oom);
    a->body = dup_or_null(body, &oom);
    a->content_type = dup_or_null(content_type, &oom);
    a->b.max = GF_KUBE_BODY_MAX;
    a->x = request_xfer(a->method, a->path, a->body, a->content_type, &a->b);
    if (oom || async_start(a, err) < 0) {
        if (oom)
            gf_error_set(err, GF_ENOSPACE, "out of memory");
        async_free(a);
        return -1;
    }
    return 0;
}
