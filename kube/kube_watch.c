/* SPDX-License-Identifier: Apache-2.0 */
/* Lists page by page, watches as newline-delimited event streams, binds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube_impl.h"

#define LIST_PAGE 500
#define WATCH_TIMEOUT_S 300 /* the server ends the watch; we resume */

static void set_rv(char *rv, size_t rv_len, json_t *obj)
{
    const char *v =
        json_string_value(json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
    if (v && strlen(v) < rv_len)
        snprintf(rv, rv_len, "%s", v);
}

/* path + "?" or "&" + query; the query's values are escaped by the caller. */
static char *with_query(const char *path, const char *query)
{
    char *s;

    if (asprintf(&s, "%s%c%s", path, strchr(path, '?') ? '&' : '?', query) < 0)
        return NULL;
    return s;
}

static char *escape(const char *s)
{
    return curl_easy_escape(NULL, s, 0);
}

static int list_page(gf_kube *k, const char *path, const char *cont, gf_kube_item_fn fn, void *cls,
                     char *rv, size_t rv_len, char **next, long *status, gf_error *err)
{
    char *q = NULL, *url = NULL, *resp = NULL, *esc = cont ? escape(cont) : NULL, msg[256];
    json_t *root = NULL, *items, *item;
    json_error_t je;
    const char *c;
    size_t i;
    int rc = -1;

    *next = NULL;
    if (asprintf(&q, "limit=%d%s%s", LIST_PAGE, esc ? "&continue=" : "", esc ? esc : "") < 0)
        q = NULL;
    if (!q || !(url = with_query(path, q))) {
        gf_error_set(err, GF_ENOSPACE, "out of memory");
        goto out;
    }
    if (gf_kube_request(k, "GET", url, NULL, NULL, status, &resp, err) < 0)
        goto out;
    if (*status != 200) {
        gf_kube_status_message(resp, msg, sizeof(msg));
        gf_error_set(err, GF_ESTATE, "GET %s: HTTP %ld: %s", path, *status, msg);
        goto out;
    }
    if (!(root = gf_kube_json_load(resp, strlen(resp), &je)) ||
        !json_is_array(items = json_object_get(root, "items"))) {
        gf_error_set(err, GF_EINVAL, "GET %s: the answer is not a list", path);
        goto out;
    }
    json_array_foreach(items, i, item)
    {
        if (fn(cls, item, err) < 0)
            goto out;
    }
    set_rv(rv, rv_len, root);
    c = json_string_value(json_object_get(json_object_get(root, "metadata"), "continue"));
    if (c && *c && !(*next = strdup(c))) {
        gf_error_set(err, GF_ENOSPACE, "out of memory");
        goto out;
    }
    rc = 0;
out:
    json_decref(root);
    curl_free(esc);
    free(resp);
    free(url);
    free(q);
    return rc;
}

int gf_kube_list(gf_kube *k, const char *path, gf_kube_item_fn fn, void *cls, char *rv,
                 size_t rv_len, gf_error *err)
{
    char *cont = NULL, *next;
    long status = 0;

    rv[0] = '\0';
    for (;;) {
        if (list_page(k, path, cont, fn, cls, rv, rv_len, &next, &status, err) < 0) {
            free(cont);
            /* an expired continue token: the caller starts the list again */
            return status == 410 ? GF_KUBE_GONE : -1;
        }
        free(cont);
        if (!(cont = next))
            return 0;
    }
}

typedef struct watch_ctx {
    gf_kube_xfer *x;
    gf_linebuf lb;
    gf_kube_buf errbody;
    gf_kube_event_fn fn;
    void *cls;
    char *rv;
    size_t rv_len;
    const atomic_bool *stop;
    bool gone;
    long error_code;
    char error[256];
    gf_error *err;
    bool failed;
} watch_ctx;

static int on_line(void *cls, const char *line, size_t len, gf_error *err)
{
    watch_ctx *w = cls;
    json_t *root, *obj;
    const char *type;
    long code;
    int rc = 0;

    if (gf_kube_event_parse(line, len, &root, &type, &obj, &code, err) < 0)
        return -1;
    if (strcmp(type, "ERROR") == 0) {
        w->error_code = code;
        w->gone = code == 410;
        snprintf(w->error, sizeof(w->error), "%s",
                 json_string_value(json_object_get(obj, "message"))
                     ? json_string_value(json_object_get(obj, "message"))
                     : "(no message)");
        rc = w->gone ? 0 : gf_error_set(err, GF_ESTATE, "watch error %ld: %s", code, w->error);
    } else if (strcmp(type, "BOOKMARK") == 0) {
        set_rv(w->rv, w->rv_len, obj);
    } else if ((rc = w->fn(w->cls, type, obj, err)) == 0) {
        set_rv(w->rv, w->rv_len, obj);
    }
    json_decref(root);
    return rc;
}

static size_t on_data(char *p, size_t size, size_t n, void *cls)
{
    watch_ctx *w = cls;
    long status = 0;

    curl_easy_getinfo(w->x->curl, CURLINFO_RESPONSE_CODE, &status);
    if (status != 200)
        return gf_kube_buf_write(p, size, n, &w->errbody);
    if (w->gone)
        return 0;
    if (gf_linebuf_feed(&w->lb, p, size * n, on_line, w, w->err) < 0) {
        w->failed = true;
        return 0;
    }
    return w->gone ? 0 : size * n;
}

static int on_progress(void *cls, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
    const watch_ctx *w = cls;

    (void)a;
    (void)b;
    (void)c;
    (void)d;
    return w->stop && atomic_load(w->stop) ? 1 : 0;
}

static int watch_once(gf_kube *k, const char *url, watch_ctx *w, bool fresh, gf_error *err)
{
    gf_kube_xfer x = {.method = "GET",
                      .path = url,
                      .write_fn = on_data,
                      .write_cls = w,
                      .progress = on_progress,
                      .progress_cls = w,
                      .timeout_s = WATCH_TIMEOUT_S + 60};

    w->x = &x;
    w->errbody.len = 0;
    w->lb.len = 0;
    if (gf_kube_perform(k, &x, fresh, err) < 0)
        return -1;
    return (int)x.status;
}

static char *watch_url(const char *path, const char *rv)
{
    char *esc = escape(rv), *q = NULL, *url = NULL;

    if (esc && asprintf(&q, "watch=1&allowWatchBookmarks=true&timeoutSeconds=%d&resourceVersion=%s",
                        WATCH_TIMEOUT_S, esc) >= 0)
        url = with_query(path, q);
    free(q);
    curl_free(esc);
    return url;
}

static int watch_status(const char *path, long status, watch_ctx *w, gf_error *err)
{
    char msg[256];

    if (status == 410)
        return GF_KUBE_GONE;
    gf_kube_status_message(w->errbody.data, msg, sizeof(msg));
    return gf_error_set(err, GF_ESTATE, "watch %s: HTTP %ld: %s", path, status, msg);
}

int gf_kube_watch(gf_kube *k, const char *path, char *rv, size_t rv_len, gf_kube_event_fn fn,
                  void *cls, const atomic_bool *stop, gf_error *err)
{
    watch_ctx w = {.fn = fn,
                   .cls = cls,
                   .rv = rv,
                   .rv_len = rv_len,
                   .stop = stop,
                   .err = err,
                   .errbody = {.max = 1u << 20}};
    char *url = watch_url(path, rv);
    int status = -1, rc = -1;

    if (!url) {
        gf_error_set(err, GF_ENOSPACE, "out of memory");
        goto out;
    }
    for (int attempt = 0; attempt < 2; attempt++) {
        if ((status = watch_once(k, url, &w, attempt > 0, err)) != 401)
            break;
    }
    if (status < 0 || w.failed)
        goto out;
    if (status != 200) {
        rc = watch_status(path, status, &w, err);
        goto out;
    }
    rc = w.gone ? GF_KUBE_GONE : 0;
out:
    gf_linebuf_free(&w.lb);
    free(w.errbody.data);
    free(url);
    return rc;
}

json_t *gf_kube_binding_body(const char *ns, const char *name, const char *uid, const char *node,
                             json_t *annotations)
{
    json_t *meta = json_pack("{s:s,s:s}", "name", name, "namespace", ns);

    if (!meta)
        return NULL;
    if (uid && *uid)
        json_object_set_new(meta, "uid", json_string(uid));
    if (annotations && json_object_size(annotations) > 0)
        json_object_set(meta, "annotations", annotations);
    return json_pack("{s:s,s:s,s:o,s:{s:s,s:s,s:s}}", "apiVersion", "v1", "kind", "Binding",
                     "metadata", meta, "target", "apiVersion", "v1", "kind", "Node", "name", node);
}

/* The binding's path and body. */
static int bind_request(const char *ns, const char *name, const char *uid, const char *node,
                        json_t *annotations, char **path, char **body, gf_error *err)
{
    json_t *doc = gf_kube_binding_body(ns, name, uid, node, annotations);
    char *ens = escape(ns), *ename = escape(name);
    int rc = 0;

    *body = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
    *path = NULL;
    if (!*body || !ens || !ename ||
        asprintf(path, "/api/v1/namespaces/%s/pods/%s/binding", ens, ename) < 0) {
        free(*body);
        *body = *path = NULL;
        rc = gf_error_set(err, GF_ENOSPACE, "out of memory");
    }
    json_decref(doc);
    curl_free(ens);
    curl_free(ename);
    return rc;
}

/* The API server's answer to a binding, as 0 or an error. */
static int bind_verdict(long status, const char *resp, gf_error *err)
{
    char msg[256];

    if (status >= 200 && status <= 202)
        return 0;
    gf_kube_status_message(resp, msg, sizeof(msg));
    return gf_error_set(err, GF_ESTATE, "the API server refused the binding (HTTP %ld): %s", status,
                        msg);
}

int gf_kube_bind(gf_kube *k, const char *ns, const char *name, const char *uid, const char *node,
                 json_t *annotations, gf_error *err)
{
    char *body = NULL, *path = NULL, *resp = NULL;
    long status = 0;
    int rc = -1;

    if (bind_request(ns, name, uid, node, annotations, &path, &body, err) == 0 &&
        gf_kube_request(k, "POST", path, body, "application/json", &status, &resp, err) == 0)
        rc = bind_verdict(status, resp, err);
    free(body);
    free(path);
    free(resp);
    return rc;
}

typedef struct bind_call {
    gf_kube_bind_fn done;
    void *cls;
} bind_call;

static void bind_answered(void *cls, int rc, long status, char *resp, gf_error *err)
{
    bind_call *b = cls;

    if (rc == 0)
        rc = bind_verdict(status, resp, err);
    free(resp);
    b->done(b->cls, rc, err);
    free(b);
}

int gf_kube_bind_async(gf_kube *k, const char *ns, const char *name, const char *uid,
                       const char *node, json_t *annotations, gf_kube_bind_fn done, void *cls,
                       gf_error *err)
{
    char *body = NULL, *path = NULL;
    bind_call *b = malloc(sizeof(*b));
    int rc = -1;

    if (!b)
        return gf_error_set(err, GF_ENOSPACE, "out of memory");
    *b = (bind_call){done, cls};
    if (bind_request(ns, name, uid, node, annotations, &path, &body, err) == 0)
        rc = gf_kube_request_async(k, "POST", path, body, "application/json", bind_answered, b,
                                   err);
    if (rc < 0)
        free(b);
    free(body);
    free(path);
    return rc;
}
