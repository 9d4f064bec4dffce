/* SPDX-License-Identifier: Apache-2.0 */
/* The multiplexer: request/response transfers of one gf_kube, from any
 * thread, run on one curl multi handle driven by one thread, so concurrent
 * requests share one HTTP/2 connection (HTTP/1.1 servers get the multi's
 * kept-alive connections instead). A caller either blocks until its own
 * transfer is done (perform) or is called back on the mux thread, outside
 * the lock, exactly once (submit); curl's callbacks run on the mux thread,
 * one transfer's never concurrently with themselves. Only the mux thread
 * touches the multi handle; callers only queue and wake it, under the
 * lock. */
#include <stdlib.h>

#include "kube_impl.h"

typedef struct mux_job {
    CURL *curl;
    CURLcode code;
    bool done;
    pthread_cond_t cond; /* perform's; unused with fn */
    gf_kube_mux_fn fn;   /* submit's: called once, then the job is freed */
    void *cls;
    struct mux_job *next, *prev; /* the queue's, then the in-flight list's, then finished's */
} mux_job;

struct gf_kube_mux {
    pthread_mutex_t lock; /* everything below */
    pthread_t thread;
    bool on;       /* a thread runs, and multi is its own */
    bool joinable; /* a thread was started and not joined */
    mux_job *queue, *queue_tail;
    mux_job *inflight; /* in the multi */
    mux_job *finished; /* submitted jobs done, their fn not yet called */
    size_t running;
    bool stop;
    bool close_asked, close_answered;
    unsigned close_idle_s;
    pthread_cond_t close_cond;
    time_t idle_since; /* when running last fell to 0 */
    CURLM *multi;      /* touched by the thread alone, but for wakeups */
};

static CURLM *multi_new(void)
{
    CURLM *m = curl_multi_init();

    if (m) {
        curl_multi_setopt(m, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
        /* curl's default is 100 and a burst of binds has more in flight:
         * over it, curl opens a second connection. The server's own
         * SETTINGS still bound it (the API server's: 250). */
        curl_multi_setopt(m, CURLMOPT_MAX_CONCURRENT_STREAMS, 1000L);
    }
    return m;
}

/* Under the lock: a perform's caller wakes; a submitted job waits on
 * finished for call_finished. */
static void finish(gf_kube_mux *m, mux_job *j, CURLcode code)
{
    j->code = code;
    j->done = true;
    if (j->fn) {
        j->next = m->finished;
        m->finished = j;
        return;
    }
    pthread_cond_signal(&j->cond);
}

/* Not under the lock: the submitted jobs' callbacks (which may submit
 * again) in the order they finished. */
static void call_finished(gf_kube_mux *m)
{
    mux_job *list, *rev = NULL, *j;

    pthread_mutex_lock(&m->lock);
    list = m->finished;
    m->finished = NULL;
    pthread_mutex_unlock(&m->lock);
    while ((j = list)) {
        list = j->next;
        j->next = rev;
        rev = j;
    }
    while ((j = rev)) {
        rev = j->next;
        j->fn(j->cls, j->code);
        free(j);
    }
}

/* Under the lock: j leaves the in-flight list and the multi. */
static void retire(gf_kube_mux *m, mux_job *j, CURLcode code)
{
    curl_multi_remove_handle(m->multi, j->curl);
    if (j->prev)
        j->prev->next = j->next;
    else
        m->inflight = j->next;
    if (j->next)
        j->next->prev = j->prev;
    finish(m, j, code);
    if (--m->running == 0)
        m->idle_since = gf_kube_now();
}

/* Under the lock: the queued jobs join the multi. */
static void admit_queued(gf_kube_mux *m)
{
    mux_job *j;

    while ((j = m->queue)) {
        m->queue = j->next;
        curl_easy_setopt(j->curl, CURLOPT_PRIVATE, j);
        if (curl_multi_add_handle(m->multi, j->curl) != CURLM_OK) {
            finish(m, j, CURLE_OUT_OF_MEMORY);
            continue;
        }
        j->prev = NULL;
        j->next = m->inflight;
        if (m->inflight)
            m->inflight->prev = j;
        m->inflight = j;
        m->running++;
    }
    m->queue_tail = NULL;
}

/* Under the lock: with nothing in flight for close_idle_s, the multi
 * handle's cleanup closes its connections and the thread ends (which hands
 * its cache of freed memory back to the heap, for the janitor's trim); the
 * next request starts another. True when it ends. */
static bool close_idle(gf_kube_mux *m)
{
    bool idle;

    if (!m->close_asked)
        return false;
    idle = m->running == 0 && !m->finished &&
           gf_kube_now() - m->idle_since >= (time_t)m->close_idle_s;
    if (idle) {
        curl_multi_cleanup(m->multi);
        m->multi = NULL;
        m->on = false;
    }
    m->close_asked = false;
    m->close_answered = true;
    pthread_cond_broadcast(&m->close_cond);
    return idle;
}

static void reap(gf_kube_mux *m)
{
    CURLMsg *msg;
    mux_job *j;
    int left;

    while ((msg = curl_multi_info_read(m->multi, &left))) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        j = NULL;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&j);
        pthread_mutex_lock(&m->lock);
        retire(m, j, msg->data.result);
        pthread_mutex_unlock(&m->lock);
    }
}

/* On stop: whatever is still in flight ends now, as a send error. */
static void abandon_all(gf_kube_mux *m)
{
    pthread_mutex_lock(&m->lock);
    admit_queued(m);
    while (m->inflight)
        retire(m, m->inflight, CURLE_SEND_ERROR);
    curl_multi_cleanup(m->multi);
    m->multi = NULL;
    m->on = false;
    pthread_mutex_unlock(&m->lock);
    call_finished(m); /* a resubmission now sees stop and is refused */
}

static void *loop(void *cls)
{
    gf_kube_mux *m = cls;
    int active;

    pthread_setname_np(pthread_self(), "gf-kube-mux");
    for (;;) {
        pthread_mutex_lock(&m->lock);
        if (m->stop)
            break;
        admit_queued(m);
        if (close_idle(m)) {
            pthread_mutex_unlock(&m->lock);
            return NULL;
        }
        pthread_mutex_unlock(&m->lock);
        call_finished(m); /* a job refused by the multi */
        curl_multi_perform(m->multi, &active);
        reap(m);
        call_finished(m);
        curl_multi_poll(m->multi, NULL, 0, 1000, NULL);
    }
    pthread_mutex_unlock(&m->lock);
    abandon_all(m);
    return NULL;
}

/* Under the lock: a thread and its multi handle, the last one's joined
 * (it has let go of the lock for good: only its return is left). */
static int start_thread(gf_kube_mux *m)
{
    if (m->joinable)
        pthread_join(m->thread, NULL);
    m->joinable = false;
    if (!(m->multi = multi_new()))
        return -1;
    if (pthread_create(&m->thread, NULL, loop, m) != 0) {
        curl_multi_cleanup(m->multi);
        m->multi = NULL;
        return -1;
    }
    m->on = m->joinable = true;
    m->idle_since = gf_kube_now();
    return 0;
}

int gf_kube_mux_start(gf_kube_mux **out, gf_error *err)
{
    gf_kube_mux *m = calloc(1, sizeof(*m));

    if (!m)
        return gf_error_set(err, GF_ENOSPACE, "out of memory starting the API multiplexer");
    pthread_mutex_init(&m->lock, NULL);
    pthread_cond_init(&m->close_cond, NULL);
    *out = m;
    return 0;
}

/* Under the lock: j joins the queue and the thread wakes; CURLE_OK, or
 * why j was refused (stopping, no thread). */
static CURLcode enqueue(gf_kube_mux *m, mux_job *j)
{
    if (m->stop)
        return CURLE_SEND_ERROR;
    if (!m->on && start_thread(m) < 0)
        return CURLE_OUT_OF_MEMORY;
    j->next = NULL;
    if (m->queue_tail)
        m->queue_tail->next = j;
    else
        m->queue = j;
    m->queue_tail = j;
    curl_multi_wakeup(m->multi);
    return CURLE_OK;
}

CURLcode gf_kube_mux_perform(gf_kube_mux *m, CURL *c)
{
    mux_job j = {.curl = c};
    CURLcode code;

    pthread_cond_init(&j.cond, NULL);
    pthread_mutex_lock(&m->lock);
    if ((code = enqueue(m, &j)) == CURLE_OK) {
        while (!j.done)
            pthread_cond_wait(&j.cond, &m->lock);
        code = j.code;
    }
    pthread_mutex_unlock(&m->lock);
    pthread_cond_destroy(&j.cond);
    return code;
}

CURLcode gf_kube_mux_submit(gf_kube_mux *m, CURL *c, gf_kube_mux_fn fn, void *cls)
{
    mux_job *j = calloc(1, sizeof(*j));
    CURLcode code;

    if (!j)
        return CURLE_OUT_OF_MEMORY;
    j->curl = c;
    j->fn = fn;
    j->cls = cls;
    pthread_mutex_lock(&m->lock);
    code = enqueue(m, j);
    pthread_mutex_unlock(&m->lock);
    if (code != CURLE_OK)
        free(j);
    return code;
}

size_t gf_kube_mux_idle_close(gf_kube_mux *m, unsigned idle_s)
{
    pthread_t ended;
    bool join;

    pthread_mutex_lock(&m->lock);
    if (m->on) {
        m->close_idle_s = idle_s;
        m->close_asked = true;
        m->close_answered = false;
        curl_multi_wakeup(m->multi);
        while (!m->close_answered && !m->stop)
            pthread_cond_wait(&m->close_cond, &m->lock);
    }
    /* joined here, so its freed memory is back before the caller trims */
    join = !m->on && m->joinable;
    ended = m->thread;
    m->joinable = m->joinable && !join;
    pthread_mutex_unlock(&m->lock);
    if (join)
        pthread_join(ended, NULL);
    return join ? 1 : 0;
}

void gf_kube_mux_stop(gf_kube_mux *m)
{
    pthread_t t;
    bool join;

    if (!m)
        return;
    pthread_mutex_lock(&m->lock);
    m->stop = true;
    pthread_cond_broadcast(&m->close_cond);
    if (m->on)
        curl_multi_wakeup(m->multi);
    join = m->joinable;
    t = m->thread;
    m->joinable = false;
    pthread_mutex_unlock(&m->lock);
    if (join)
        pthread_join(t, NULL);
    pthread_cond_destroy(&m->close_cond);
    pthread_mutex_destroy(&m->lock);
    free(m);
}
