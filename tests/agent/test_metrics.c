/* SPDX-License-Identifier: Apache-2.0 */
/* gpufracd metrics: the page of a synthetic agent (real ledgers) parsed by
 * Prometheus' own parser (tests/agent/check_metrics.py) with the values
 * cross-checked, label escaping, the HTTP endpoint, user names (numeric until
 * the resolver has them, numeric for a uid without a passwd entry), the page
 * as of the last published snapshot, and the publish and render times of
 * 1000 fractions (printed, not asserted). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "events.h"
#include "fraction.h"
#include "journal.h"
#include "metrics.h"
#include "metrics_snapshot.h"
#include "proc.h"
#include "usernames.h"

#define MiB (1024ULL * 1024ULL)
#define GiB (1024ULL * MiB)
#define NASTY_POD "we\"ird\\pod\nname"

void gf_agent_event(gf_agent *a, const char *fmt, ...)
{
    (void)a;
    (void)fmt;
}

void gf_journal_exposed(gf_agent *a)
{
    (void)a;
}

typedef struct fixture {
    char dir[64];
    gf_agent a;
    FILE *expected;
    char expected_path[128];
} fixture;

static gf_agent_gpu *add_gpu(gf_agent *a, const char *uuid, uint64_t total)
{
    gf_agent_gpu *g = &a->gpus[a->n_gpus];
    *g = (gf_agent_gpu){.dev = {.index = a->n_gpus, .total = total}};
    snprintf(g->dev.uuid, sizeof(g->dev.uuid), "%s", uuid);
    snprintf(g->dev.name, sizeof(g->dev.name), "gpusim");
    a->n_gpus++;
    return g;
}

/* The fractions' ledgers as their processes map them; the agent reads them
 * only through its copy (refresh_views before rendering, as its tick does). */
static gf_ledger ledgers[GF_AGENT_FRACTIONS_MAX];
static gf_agent *fx_agent;

static void refresh_views(gf_agent *a)
{
    gf_error err;

    /* sized to the GPUs added so far, then read (the agent: once at open) */
    for (int i = 0; i < a->n_fractions; i++)
        assert_int_equal(gf_fraction_view_init(a, &a->fractions[i], &err), 0);
}

static gf_afraction *add_fraction(fixture *fx, const char *name, const char *uuid, uint64_t request,
                                  uint64_t limit)
{
    gf_agent *a = &fx->a;
    gf_afraction *f = &a->fractions[a->n_fractions++];
    gf_fraction_config cfg = {.n_devices = 1};
    char ledger[GF_PATH_MAX];
    gf_error err;

    memset(f, 0, sizeof(*f));
    snprintf(cfg.name, sizeof(cfg.name), "%s", name);
    snprintf(ledger, sizeof(ledger), "%s/%s.ledger", fx->dir, name);
    snprintf(cfg.devices[0].uuid, sizeof(cfg.devices[0].uuid), "%s", uuid);
    cfg.devices[0].request = request;
    cfg.devices[0].limit = limit;
    assert_int_equal(gf_aconfig_set(&f->cfg, &cfg, ledger, &err), 0);
    assert_int_equal(gf_ledger_create(f->cfg.ledger, name, 0600, &err), 0);
    assert_int_equal(gf_ledger_open(f->cfg.ledger, &ledgers[f - a->fractions], &err), 0);
    f->ledger_fd = ledgers[f - a->fractions].fd;
    return f;
}

static gf_ledger_device *ledger_dev(gf_afraction *f, const char *uuid)
{
    gf_error err;
    gf_ledger *lg = &ledgers[f - fx_agent->fractions];
    int d = gf_ledger_device_index(lg, uuid, f->cfg.devices[0].request, f->cfg.devices[0].limit,
                                   &err);
    assert_true(d >= 0);
    return &lg->hdr->devices[d];
}

static int setup(void **state)
{
    fixture *fx = calloc(1, sizeof(*fx));
    fx_agent = &fx->a;
    snprintf(fx->dir, sizeof(fx->dir), "/tmp/gf-metrics-XXXXXX");
    assert_non_null(mkdtemp(fx->dir));
    fx->a.fractions = calloc(GF_AGENT_FRACTIONS_MAX, sizeof(gf_afraction));
    pthread_mutex_init(&fx->a.lock, NULL);
    snprintf(fx->expected_path, sizeof(fx->expected_path), "%s/expected", fx->dir);
    fx->expected = fopen(fx->expected_path, "w");
    assert_non_null(fx->expected);
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    fixture *fx = *state;
    char cmd[128];
    for (int i = 0; i < fx->a.n_fractions; i++) {
        gf_ledger_close(&ledgers[i]);
        gf_fraction_free(&fx->a.fractions[i]);
    }
    if (fx->expected)
        fclose(fx->expected);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", fx->dir);
    assert_int_equal(system(cmd), 0);
    gf_metrics_unpublish(&fx->a);
    free(fx->a.fractions);
    pthread_mutex_destroy(&fx->a.lock);
    free(fx);
    return 0;
}

/* One expected sample; labels as alternating name, value, NULL-terminated. */
static void expect(fixture *fx, const char *name, uint64_t value, ...)
{
    va_list ap;
    const char *k;
    bool first = true;

    fprintf(fx->expected, "%s %llu ", name, (unsigned long long)value);
    va_start(ap, value);
    while ((k = va_arg(ap, const char *))) {
        const char *v = va_arg(ap, const char *);
        fprintf(fx->expected, "%s%s=", first ? "" : "&", k);
        for (; *v; v++)
            fprintf(fx->expected, "%%%02X", (unsigned char)*v);
        first = false;
    }
    va_end(ap);
    fputc('\n', fx->expected);
}

/* dcgm-exporter's GPU labels on every per-GPU series */
#define GLABELS(g, u) \
    "Hostname", "node-a", "gpu", g, "UUID", u, "device", "nvidia" g, "modelName", "gpusim"
#define FLABELS(g, u, ns, pod, ctr, fr) \
    GLABELS(g, u), "namespace", ns, "pod", pod, "container", ctr, "fraction", fr
/* a fraction outside Kubernetes: its owner instead of empty pod labels */
#define ULABELS(g, u, fr) GLABELS(g, u), "user", me(), "fraction", fr

static const char *me(void)
{
    static char name[64];
    struct passwd *pw = getpwuid(getuid());
    if (pw)
        snprintf(name, sizeof(name), "%s", pw->pw_name);
    else
        snprintf(name, sizeof(name), "%u", (unsigned)getuid());
    return name;
}

/* The interpreter that has prometheus_client: $GF_PYTHON, Debian's, PATH's. */
static const char *python(void)
{
    static const char *cands[] = {NULL, "/usr/bin/python3", "python3"};
    char cmd[256];

    cands[0] = getenv("GF_PYTHON");
    for (size_t i = 0; i < sizeof(cands) / sizeof(cands[0]); i++) {
        if (!cands[i])
            continue;
        snprintf(cmd, sizeof(cmd), "%s -c 'import prometheus_client' 2>/dev/null", cands[i]);
        if (system(cmd) == 0)
            return cands[i];
    }
    return NULL;
}

/* What the agent's loop does at each tick, then a render of the page. */
static char *publish_render(fixture *fx, size_t *len)
{
    gf_error err;
    char *page;

    assert_int_equal(gf_metrics_publish(&fx->a, &err), 0);
    assert_int_equal(gf_metrics_render(&fx->a, &page, len, &err), 0);
    assert_int_equal(strlen(page), *len);
    return page;
}

static void check_page(fixture *fx, const char *page, size_t len)
{
    char path[128], cmd[1024];
    const char *src = getenv("GPUFRAC_SOURCE");
    const char *py = python();
    FILE *fp;

    if (!py) {
        print_message("python3 with prometheus_client not found (apt-get install "
                      "python3-prometheus-client)\n");
        skip();
    }
    snprintf(path, sizeof(path), "%s/page", fx->dir);
    assert_non_null(fp = fopen(path, "w"));
    assert_int_equal(fwrite(page, 1, len, fp), len);
    fclose(fp);
    fflush(fx->expected);
    snprintf(cmd, sizeof(cmd), "%s %s/tests/agent/check_metrics.py %s %s", py, src ? src : ".",
             path, fx->expected_path);
    assert_int_equal(system(cmd), 0);
}

static void populate(fixture *fx)
{
    gf_agent *a = &fx->a;
    gf_agent_gpu *g0 = add_gpu(a, "GPU-aaaa", 16 * GiB), *g1 = add_gpu(a, "GPU-bbbb", 80 * GiB);
    gf_afraction *f;
    gf_ledger_device *ld;

    snprintf(a->node_name, sizeof(a->node_name), "node-a");
    g0->dev.used = 3 * GiB;
    g0->guaranteed = 1 * GiB + 2 * GiB;
    g0->lent = 256 * MiB;
    g1->dev.used = 5 * GiB;
    g1->mps_running = true;
    g1->mps_restarts = 4;

    f = add_fraction(fx, "alpha", "GPU-aaaa", 1 * GiB, 2 * GiB);
    snprintf(f->ns, sizeof(f->ns), "team-a");
    snprintf(f->pod, sizeof(f->pod), NASTY_POD);
    snprintf(f->container, sizeof(f->container), "main");
    ld = ledger_dev(f, "GPU-aaaa");
    atomic_store(&ld->used, 512 * MiB);
    atomic_store(&ld->lent, 256 * MiB);
    atomic_store(&ld->denied, 3);
    atomic_store(&ld->evictions, 99); /* the tenant's copy: not what is exported */
    f->evictions[0] = 1;              /* the agent's own (journaled) count */
    f->driver_used[0] = 700 * MiB;
    f->watchdog_kills = 2;

    f = add_fraction(fx, "beta", "*", 2 * GiB, 4 * GiB); /* both GPUs; only GPU 1 used */
    ld = ledger_dev(f, "GPU-bbbb");
    atomic_store(&ld->used, 1 * GiB);
    f->driver_used[0] = 1 * GiB + 64 * MiB;

    add_fraction(fx, "gamma", "GPU-zzzz", 1 * GiB, 1 * GiB); /* its GPU is not on this node */
    a->requests_total = 42;
    a->requests_bad = 5;
}

static void expect_all(fixture *fx)
{
#define A FLABELS("0", "GPU-aaaa", "team-a", NASTY_POD, "main", "alpha")
#define B0 ULABELS("0", "GPU-aaaa", "beta")
#define B1 ULABELS("1", "GPU-bbbb", "beta")
    expect(fx, "gpufrac_fraction_memory_request_bytes", 1 * GiB, A, NULL);
    expect(fx, "gpufrac_fraction_memory_limit_bytes", 2 * GiB, A, NULL);
    expect(fx, "gpufrac_fraction_memory_used_bytes", 512 * MiB, A, "source", "accounted", NULL);
    expect(fx, "gpufrac_fraction_memory_used_bytes", 700 * MiB, A, "source", "driver", NULL);
    expect(fx, "gpufrac_fraction_memory_burst_bytes", 256 * MiB, A, NULL);
    expect(fx, "gpufrac_fraction_alloc_denied_total", 3, A, NULL);
    expect(fx, "gpufrac_fraction_evictions_total", 1, A, NULL);
    expect(fx, "gpufrac_fraction_watchdog_kills_total", 2, A, NULL);
    expect(fx, "gpufrac_fraction_memory_limit_bytes", 4 * GiB, B0, NULL);
    expect(fx, "gpufrac_fraction_memory_limit_bytes", 4 * GiB, B1, NULL);
    expect(fx, "gpufrac_fraction_memory_used_bytes", 0, B0, "source", "accounted", NULL);
    expect(fx, "gpufrac_fraction_memory_used_bytes", 1 * GiB, B1, "source", "accounted", NULL);
    expect(fx, "gpufrac_fraction_memory_used_bytes", 1 * GiB + 64 * MiB, B1, "source", "driver",
           NULL);
    expect(fx, "gpufrac_fraction_watchdog_kills_total", 0, B1, NULL);
    expect(fx, "gpufrac_gpu_memory_total_bytes", 16 * GiB, GLABELS("0", "GPU-aaaa"), NULL);
    expect(fx, "gpufrac_gpu_memory_total_bytes", 80 * GiB, GLABELS("1", "GPU-bbbb"), NULL);
    expect(fx, "gpufrac_gpu_memory_guaranteed_bytes", 3 * GiB, GLABELS("0", "GPU-aaaa"), NULL);
    expect(fx, "gpufrac_gpu_memory_used_bytes", 5 * GiB, GLABELS("1", "GPU-bbbb"), NULL);
    expect(fx, "gpufrac_gpu_memory_lent_bytes", 256 * MiB, GLABELS("0", "GPU-aaaa"), NULL);
    expect(fx, "gpufrac_gpu_mps_server_up", 1, GLABELS("1", "GPU-bbbb"), NULL);
    expect(fx, "gpufrac_gpu_mps_server_up", 0, GLABELS("0", "GPU-aaaa"), NULL);
    expect(fx, "gpufrac_gpu_mps_faults_total", 4, GLABELS("1", "GPU-bbbb"), NULL);
    expect(fx, "gpufrac_agent_fractions", 3, "Hostname", "node-a", NULL);
    expect(fx, "gpufrac_agent_requests_total", 42, "Hostname", "node-a", NULL);
    expect(fx, "gpufrac_agent_bad_requests_total", 5, "Hostname", "node-a", NULL);
#undef A
#undef B0
#undef B1
}

static int tenant_entry(gf_afraction *f, const char *uuid, uint64_t used)
{
    gf_error err;
    int d = gf_ledger_device_index(&ledgers[f - fx_agent->fractions], uuid, 1 * GiB, 2 * GiB, &err);
    assert_true(d >= 0);
    atomic_store(&ledgers[f - fx_agent->fractions].hdr->devices[d].used, used);
    return d;
}

/* The agent keeps a copy of the ledger entries of the GPUs a fraction's
 * config covers, not the whole table: whatever the tenant made ready costs
 * nothing more, and each kept copy is the entry the shim charges. */
static void test_view_keeps_the_fractions_gpus_only(void **state)
{
    fixture *fx = *state;
    gf_agent *a = &fx->a;
    gf_afraction *alpha, *beta, *gamma;
    const gf_ledger_device *ld;
    char uuid[32];
    int d, da, index;

    add_gpu(a, "GPU-aaaa", 16 * GiB);
    add_gpu(a, "GPU-bbbb", 16 * GiB);
    alpha = add_fraction(fx, "alpha", "GPU-aaaa", 1 * GiB, 2 * GiB);
    beta = add_fraction(fx, "beta", "*", 1 * GiB, 2 * GiB);
    gamma = add_fraction(fx, "gamma", "*", 1 * GiB, 2 * GiB);
    /* alpha's tenant fills all 16 entries; its own GPU's is one of them */
    tenant_entry(alpha, "GPU-bbbb", 9 * MiB);
    for (d = 0; d < 13; d++) {
        snprintf(uuid, sizeof(uuid), "GPU-x%d", d);
        tenant_entry(alpha, uuid, 1 * MiB);
    }
    da = tenant_entry(alpha, "GPU-aaaa", 7 * MiB);
    tenant_entry(alpha, "GPU-y", 1 * MiB);
    tenant_entry(beta, "GPU-bbbb", 5 * MiB);
    tenant_entry(gamma, "*", 3 * MiB); /* the shim's entry for a "*" config */
    refresh_views(a);

    assert_true(alpha->view.ok);
    assert_int_equal(alpha->view.n_entries, 1);
    assert_non_null(ld = gf_fraction_ledger_device(alpha, 0, true, &index));
    assert_int_equal(index, da);
    assert_string_equal(ld->uuid, "GPU-aaaa");
    assert_int_equal(atomic_load(&ld->used), 7 * MiB);
    assert_null(gf_fraction_ledger_device(alpha, 1, false, &index)); /* not its GPU */
    assert_int_equal(index, -1);

    assert_int_equal(beta->view.n_entries, 2);
    assert_null(gf_fraction_ledger_device(beta, 0, false, NULL)); /* never used there */
    assert_non_null(ld = gf_fraction_ledger_device(beta, 1, true, NULL));
    assert_int_equal(atomic_load(&ld->used), 5 * MiB);

    /* no entry named by the GPU: the config's "*" entry, for what the agent
     * writes back; not one metrics reports as the GPU's */
    assert_null(gf_fraction_ledger_device(gamma, 1, true, NULL));
    assert_non_null(ld = gf_fraction_ledger_device(gamma, 1, false, &index));
    assert_string_equal(ld->uuid, "*");
    assert_int_equal(atomic_load(&ld->used), 3 * MiB);

    /* the tenant breaks its ledger: nothing is kept from it */
    ledgers[alpha - a->fractions].hdr->magic = 0;
    gf_fraction_view_read(a, alpha);
    assert_false(alpha->view.ok);
    assert_non_null(alpha->view.why);
    assert_null(gf_fraction_ledger_device(alpha, 0, false, &index));
    assert_int_equal(index, -1);
}

static void test_page_parses_with_values(void **state)
{
    fixture *fx = *state;
    gf_error err;
    char *page;
    size_t len;

    populate(fx);
    expect_all(fx);
    refresh_views(&fx->a);
    assert_int_equal(gf_usernames_start(&err), 0);
    free(publish_render(fx, &len)); /* has beta's owner looked up */
    assert_true(gf_usernames_settle(30000));
    page = publish_render(fx, &len);
    /* the escaped form, byte for byte */
    assert_non_null(strstr(page, "pod=\"we\\\"ird\\\\pod\\nname\""));
    assert_null(strstr(page, "GPU-zzzz"));
    /* no empty label anywhere: Prometheus would fill an empty pod from its own discovery */
    assert_null(strstr(page, "=\"\""));
    check_page(fx, page, len);
    free(page);
}

static void test_empty_agent(void **state)
{
    fixture *fx = *state;
    gf_error err;
    char *page;
    size_t len;

    char host[256] = "";

    refresh_views(&fx->a);

    /* without a node name, Hostname is the host's name */
    gethostname(host, sizeof(host) - 1);
    expect(fx, "gpufrac_agent_fractions", 0, "Hostname", host, NULL);
    assert_int_equal(gf_metrics_render(&fx->a, &page, &len, &err), -1); /* none published */
    assert_int_equal(err.code, GF_ESTATE);
    page = publish_render(fx, &len);
    check_page(fx, page, len);
    free(page);
}

/* One HTTP/1.0 exchange; returns the status and copies the response. */
static int http(int port, const char *request, char *resp, size_t cap)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    size_t got = 0;
    ssize_t n;
    int fd = socket(AF_INET, SOCK_STREAM, 0), status = -1;

    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(write(fd, request, strlen(request)), (ssize_t)strlen(request));
    while (got < cap - 1 && (n = read(fd, resp + got, cap - 1 - got)) > 0)
        got += (size_t)n;
    resp[got] = '\0';
    close(fd);
    sscanf(resp, "HTTP/1.%*d %d", &status);
    return status;
}

static void test_http_endpoint(void **state)
{
    fixture *fx = *state;
    static char resp[1 << 20];
    gf_error err;
    const char *port;

    populate(fx);
    snprintf(fx->a.metrics_listen, sizeof(fx->a.metrics_listen), "127.0.0.1:0");
    refresh_views(&fx->a);
    assert_int_equal(gf_metrics_publish(&fx->a, &err), 0);
    assert_int_equal(gf_metrics_start(&fx->a, &err), 0);
    port = strrchr(fx->a.metrics_listen, ':') + 1;
    assert_true(atoi(port) > 0);
    assert_int_equal(http(atoi(port), "GET /metrics HTTP/1.0\r\n\r\n", resp, sizeof(resp)), 200);
    assert_non_null(strstr(resp, "Content-Type: text/plain; version=0.0.4; charset=utf-8"));
    assert_non_null(strstr(resp, "\r\n\r\n# HELP gpufrac_fraction_memory_request_bytes "));
    assert_non_null(strstr(resp, "gpufrac_agent_requests_total{Hostname=\""));
    assert_non_null(strstr(resp, "} 42\n"));
    fx->a.watchdog_period_ms = 500;
    atomic_store(&fx->a.loop_beat, gf_now_ms());
    atomic_store(&fx->a.watchdog_beat, gf_now_ms());
    assert_int_equal(http(atoi(port), "GET /healthz HTTP/1.0\r\n\r\n", resp, sizeof(resp)), 200);
    assert_non_null(strstr(resp, "\r\n\r\nok"));
    /* a loop or watchdog that stopped ticking makes the agent unhealthy */
    atomic_store(&fx->a.watchdog_beat, gf_now_ms() - 10000);
    assert_int_equal(http(atoi(port), "GET /healthz HTTP/1.0\r\n\r\n", resp, sizeof(resp)), 503);
    assert_non_null(strstr(resp, "watchdog"));
    atomic_store(&fx->a.watchdog_beat, gf_now_ms());
    atomic_store(&fx->a.loop_beat, gf_now_ms() - 10000);
    assert_int_equal(http(atoi(port), "GET /healthz HTTP/1.0\r\n\r\n", resp, sizeof(resp)), 503);
    assert_non_null(strstr(resp, "main loop"));
    assert_int_equal(http(atoi(port), "GET /nope HTTP/1.0\r\n\r\n", resp, sizeof(resp)), 404);
    assert_int_equal(http(atoi(port), "POST /metrics HTTP/1.0\r\nContent-Length: 3\r\n\r\nabc",
                          resp, sizeof(resp)),
                     405);
    gf_metrics_stop(&fx->a);
    /* a bad address is refused with the address in the message */
    snprintf(fx->a.metrics_listen, sizeof(fx->a.metrics_listen), "localhost");
    assert_int_equal(gf_metrics_start(&fx->a, &err), -1);
    assert_non_null(strstr(err.msg, "HOST:PORT"));
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void test_render_1000_fractions(void **state)
{
    fixture *fx = *state;
    double best = 1e9, total = 0, pub_best = 1e9;
    char name[32], uuid[32];
    size_t len = 0;
    gf_error err;
    const int runs = 20;

    for (int g = 0; g < 8; g++) {
        snprintf(uuid, sizeof(uuid), "GPU-%04d", g);
        add_gpu(&fx->a, uuid, 80 * GiB);
    }
    for (int i = 0; i < 1000; i++) {
        snprintf(name, sizeof(name), "frac-%04d", i);
        snprintf(uuid, sizeof(uuid), "GPU-%04d", i % 8);
        gf_afraction *f = add_fraction(fx, name, uuid, 1 * GiB, 2 * GiB);
        snprintf(f->ns, sizeof(f->ns), "namespace-%d", i % 10);
        snprintf(f->pod, sizeof(f->pod), "pod-%04d-7d9f8b6c5-xk2lp", i);
        snprintf(f->container, sizeof(f->container), "worker");
        atomic_store(&ledger_dev(f, uuid)->used, (uint64_t)i * MiB);
    }
    refresh_views(&fx->a);
    for (int r = 0; r < runs; r++) {
        char *page;
        double t0 = now_ms(), t1;
        assert_int_equal(gf_metrics_publish(&fx->a, &err), 0);
        t1 = now_ms();
        assert_int_equal(gf_metrics_render(&fx->a, &page, &len, &err), 0);
        double dt = now_ms() - t1;
        pub_best = t1 - t0 < pub_best ? t1 - t0 : pub_best;
        best = dt < best ? dt : best;
        total += dt;
        if (r == runs - 1)
            check_page(fx, page, len);
        free(page);
    }
    printf("# 1000 fractions on 8 GPUs: publish (the loop, under a->lock) best %.3f ms; render "
           "(an HTTP worker, no lock) best %.2f ms, mean %.2f ms, %zu bytes\n",
           pub_best, best, total / runs, len);
}

/* A uid with a passwd entry other than ours, else (uid_t)-1. */
static uid_t other_user(char *name, size_t len)
{
    struct passwd *pw;
    uid_t uid = (uid_t)-1;

    setpwent();
    while ((pw = getpwent()))
        if (pw->pw_uid != getuid() && pw->pw_uid != 0) {
            uid = pw->pw_uid;
            snprintf(name, len, "%s", pw->pw_name);
            break;
        }
    endpwent();
    return uid;
}

static uid_t no_passwd_uid(void)
{
    uid_t uid = 3999800;

    while (getpwuid(uid))
        uid++;
    return uid;
}

/* The page shows the numeric uid until the resolver thread has the name,
 * the name after; a uid without a passwd entry stays numeric (its negative
 * entry is cached like a name). */
static void test_user_names(void **state)
{
    fixture *fx = *state;
    char name[64], want[128], num[64], nopw[64];
    uid_t other = other_user(name, sizeof(name)), missing = no_passwd_uid();
    gf_error err;
    char *page;
    size_t len;

    if (other == (uid_t)-1)
        skip();
    add_gpu(&fx->a, "GPU-aaaa", 16 * GiB);
    add_fraction(fx, "named", "GPU-aaaa", 1 * GiB, 2 * GiB)->owner = other;
    add_fraction(fx, "unnamed", "GPU-aaaa", 1 * GiB, 2 * GiB)->owner = missing;
    refresh_views(&fx->a);
    snprintf(num, sizeof(num), "user=\"%u\",fraction=\"named\"", (unsigned)other);
    snprintf(nopw, sizeof(nopw), "user=\"%u\",fraction=\"unnamed\"", (unsigned)missing);
    snprintf(want, sizeof(want), "user=\"%s\",fraction=\"named\"", name);
    assert_int_equal(gf_usernames_start(&err), 0);
    page = publish_render(fx, &len);
    /* the publish asked for the name: resolved by now, or the uid until it is */
    assert_true(strstr(page, num) || strstr(page, want));
    assert_non_null(strstr(page, nopw));
    free(page);
    assert_true(gf_usernames_settle(30000));
    assert_int_equal(gf_metrics_render(&fx->a, &page, &len, &err), 0);
    assert_non_null(strstr(page, want));
    assert_non_null(strstr(page, nopw));
    assert_null(strstr(page, num));
    free(page);
}

/* The page is the last published snapshot's: what changed since shows at
 * the next publish (the loop's next tick), not before. */
static void test_page_is_the_published_snapshot(void **state)
{
    fixture *fx = *state;
    gf_error err;
    char *page;
    size_t len;

    populate(fx);
    refresh_views(&fx->a);
    free(publish_render(fx, &len));
    fx->a.requests_total = 4242;
    fx->a.n_fractions--; /* gamma is gone */
    assert_int_equal(gf_metrics_render(&fx->a, &page, &len, &err), 0);
    assert_non_null(strstr(page, "gpufrac_agent_requests_total{Hostname=\"node-a\"} 42\n"));
    assert_non_null(strstr(page, "gpufrac_agent_fractions{Hostname=\"node-a\"} 3\n"));
    free(page);
    page = publish_render(fx, &len);
    assert_non_null(strstr(page, "gpufrac_agent_requests_total{Hostname=\"node-a\"} 4242\n"));
    assert_non_null(strstr(page, "gpufrac_agent_fractions{Hostname=\"node-a\"} 2\n"));
    free(page);
    fx->a.n_fractions++;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_page_parses_with_values, setup, teardown),
        cmocka_unit_test_setup_teardown(test_view_keeps_the_fractions_gpus_only, setup, teardown),
        cmocka_unit_test_setup_teardown(test_empty_agent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_http_endpoint, setup, teardown),
        cmocka_unit_test_setup_teardown(test_render_1000_fractions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_user_names, setup, teardown),
        cmocka_unit_test_setup_teardown(test_page_is_the_published_snapshot, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
