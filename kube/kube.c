/* SPDX-License-Identifier: Apache-2.0 */
/* Kubernetes REST client: endpoint, credentials, one request. */
#include <curl/curl.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kube.h"
#include "kube_impl.h"

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc;

static void global_init(void)
{
    global_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static void share_lock(CURL *h, curl_lock_data data, curl_lock_access access, void *cls)
{
    gf_kube *k = cls;

    (void)h;
    (void)access;
    pthread_mutex_lock(&k->share_locks[data % GF_KUBE_SHARE_LOCKS]);
}

static void share_unlock(CURL *h, curl_lock_data data, void *cls)
{
    gf_kube *k = cls;

    (void)h;
    pthread_mutex_unlock(&k->share_locks[data % GF_KUBE_SHARE_LOCKS]);
}

int gf_kube_incluster_url(char *buf, size_t len, gf_error *err)
{
    const char *host = getenv("KUBERNETES_SERVICE_HOST");
    const char *port = getenv("KUBERNETES_SERVICE_PORT");
    int n;

    if (!host || !*host || !port || !*port)
        return gf_error_set(err, GF_EINVAL,
                            "not running in a cluster (KUBERNETES_SERVICE_HOST/PORT unset); "
                            "give --api-server URL");
    n = snprintf(buf, len, strchr(host, ':') ? "https://[%s]:%s" : "https://%s:%s", host, port);
    if (n < 0 || (size_t)n >= len)
        return gf_error_set(err, GF_EINVAL, "KUBERNETES_SERVICE_HOST is too long");
    return 0;
}

/* Reads the token file, trimming whitespace. */
static int read_token(const char *path, char **out, gf_error *err)
{
    FILE *f = fopen(path, "re");
    char *buf = NULL;
    size_t n;
    int rc = -1;

    if (!f)
        return gf_error_sys(err, "reading the API token %s", path);
    buf = malloc(GF_KUBE_TOKEN_MAX + 1);
    if (!buf) {
        gf_error_set(err, GF_ENOSPACE, "out of memory reading %s", path);
        goto out;
    }
    n = fread(buf, 1, GF_KUBE_TOKEN_MAX + 1, f);
    if (n > GF_KUBE_TOKEN_MAX) {
        gf_error_set(err, GF_ERANGE, "the API token %s is larger than %d bytes", path,
                     GF_KUBE_TOKEN_MAX);
        goto out;
    }
    while (n > 0 && strchr(" \t\r\n", buf[n - 1]))
        n--;
    buf[n] = '\0';
    if (n == 0 || strpbrk(buf, "\r\n")) {
        gf_error_set(err, GF_EINVAL, "the API token %s is empty or spans lines", path);
        goto out;
    }
    *out = buf;
    buf = NULL;
    rc = 0;
out:
    free(buf);
    fclose(f);
    return rc;
}

time_t gf_kube_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec;
}

/* The current token (a copy), re-read from its file when it is older than
 * GF_KUBE_TOKEN_REFRESH_S or when force is set. A failed re-read keeps the
 * token we have. *out is NULL when no token is configured. */
int gf_kube_token(gf_kube *k, bool force, char **out, gf_error *err)
{
    char *fresh = NULL;
    int rc = 0;

    *out = NULL;
    if (!k->token_file[0])
        return 0;
    pthread_mutex_lock(&k->lock);
    if (force || !k->token || gf_kube_now() - k->token_read >= GF_KUBE_TOKEN_REFRESH_S) {
        if (read_token(k->token_file, &fresh, err) == 0) {
            free(k->token);
            k->token = fresh;
            k->token_read = gf_kube_now();
        } else if (!k->token) {
            rc = -1;
        }
    }
    if (rc == 0 && !(*out = strdup(k->token)))
        rc = gf_error_set(err, GF_ENOSPACE, "out of memory copying the API token");
    pthread_mutex_unlock(&k->lock);
    return rc;
}

static int copy_opt(char *dst, size_t len, const char *src, const char *what, gf_error *err)
{
    if (strlen(src) >= len)
        return gf_error_set(err, GF_EINVAL, "%s is too long", what);
    strcpy(dst, src);
    return 0;
}

static int configure(gf_kube *k, const gf_kube_opts *o, gf_error *err)
{
    const char *sa = o->sa_dir ? o->sa_dir : GF_KUBE_SA_DIR;
    char path[PATH_MAX];

    if (o->api_server && *o->api_server) {
        if (copy_opt(k->base, sizeof(k->base), o->api_server, "--api-server", err) < 0)
            return -1;
        while (k->base[0] && k->base[strlen(k->base) - 1] == '/')
            k->base[strlen(k->base) - 1] = '\0';
    } else if (gf_kube_incluster_url(k->base, sizeof(k->base), err) < 0) {
        return -1;
    }
    if (o->token_file) {
        if (copy_opt(k->token_file, sizeof(k->token_file), o->token_file, "--token-file", err))
            return -1;
    } else if (!o->api_server) {
        snprintf(path, sizeof(path), "%s/token", sa);
        if (copy_opt(k->token_file, sizeof(k->token_file), path, "the token path", err) < 0)
            return -1;
    }
    if (o->ca_file) {
        if (copy_opt(k->ca_file, sizeof(k->ca_file), o->ca_file, "--ca-file", err) < 0)
            return -1;
    } else if (!o->api_server) {
        snprintf(path, sizeof(path), "%s/ca.crt", sa);
        if (copy_opt(k->ca_file, sizeof(k->ca_file), path, "the CA path", err) < 0)
            return -1;
    }
    k->insecure = o->insecure;
    return 0;
}

static int share_init(gf_kube *k, gf_error *err)
{
    for (size_t i = 0; i < GF_KUBE_SHARE_LOCKS; i++)
        pthread_mutex_init(&k->share_locks[i], NULL);
    k->share = curl_share_init();
    if (!k->share)
        return gf_error_set(err, GF_ENOSPACE, "curl_share_init failed");
    curl_share_setopt(k->share, CURLSHOPT_LOCKFUNC, share_lock);
    curl_share_setopt(k->share, CURLSHOPT_UNLOCKFUNC, share_unlock);
    curl_share_setopt(k->share, CURLSHOPT_USERDATA, k);
    curl_share_setopt(k->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
    curl_share_setopt(k->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
    return 0;
}

int gf_kube_open(gf_kube **out, const gf_kube_opts *opts, gf_error *err)
{
    gf_kube *k;
    char *tok = NULL;

    pthread_once(&global_once, global_init);
    if (global_rc != CURLE_OK)
        return gf_error_set(err, GF_ESTATE, "curl_global_init: %s", curl_easy_strerror(global_rc));
    k = calloc(1, sizeof(*k));
    if (!k)
        return gf_error_set(err, GF_ENOSPACE, "out of memory");
    pthread_mutex_init(&k->lock, NULL);
    pthread_mutex_init(&k->idle_lock, NULL);
    if (share_init(k, err) < 0 || configure(k, opts, err) < 0)
        goto fail;
    if (opts->multiplex && gf_kube_mux_start(&k->mux, err) < 0)
        goto fail;
    if (gf_kube_token(k, true, &tok, err) < 0)
        goto fail;
    free(tok);
    *out = k;
    return 0;
fail:
    gf_kube_close(k);
    return -1;
}

void gf_kube_close(gf_kube *k)
{
    if (!k)
        return;
    gf_kube_mux_stop(k->mux);
    while (k->n_idle)
        curl_easy_cleanup(k->idle[--k->n_idle]);
    pthread_mutex_destroy(&k->idle_lock);
    if (k->share)
        curl_share_cleanup(k->share);
    for (size_t i = 0; i < GF_KUBE_SHARE_LOCKS; i++)
        pthread_mutex_destroy(&k->share_locks[i]);
    pthread_mutex_destroy(&k->lock);
    free(k->token);
    free(k);
}

size_t gf_kube_idle_close(gf_kube *k, unsigned idle_s)
{
    time_t now = gf_kube_now();
    size_t old = 0, n = 0, i;
    CURL *gone[GF_KUBE_IDLE_MAX];

    if (k->mux)
        old += gf_kube_mux_idle_close(k->mux, idle_s);
    pthread_mutex_lock(&k->idle_lock);
    while (n < k->n_idle && now - k->idle_since[n] >= (time_t)idle_s)
        n++;
    memcpy(gone, k->idle, n * sizeof(*gone));
    memmove(k->idle, k->idle + n, (k->n_idle - n) * sizeof(*k->idle));
    memmove(k->idle_since, k->idle_since + n, (k->n_idle - n) * sizeof(*k->idle_since));
    k->n_idle -= n;
    pthread_mutex_unlock(&k->idle_lock);
    for (i = 0; i < n; i++)
        curl_easy_cleanup(gone[i]);
    return old + n;
}

uint64_t gf_kube_connections(const gf_kube *k)
{
    return atomic_load_explicit(&k->connects, memory_order_relaxed);
}

const char *gf_kube_base(const gf_kube *k)
{
    return k->base;
}
