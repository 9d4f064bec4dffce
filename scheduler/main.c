/* SPDX-License-Identifier: Apache-2.0 */
/* gpufrac-scheduler: the kube-scheduler extender. */
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "annotations.h"
#include "cleanup.h"
#include "extender.h"
#include "informer.h"
#include "kube_ext.h"
#include "reserve.h"
#include "server.h"
#include "slog.h"
#include "version.h"

/* The node image (make image), with /bin/sh and sleep: the agent DaemonSet
 * already put it on every GPU node. */
#define RESERVE_IMAGE "localhost/gpufrac-node:" GPUFRAC_VERSION

typedef struct opts {
    const char *listen, *prefix, *url_prefix;
    gf_kube_opts kube;
    gf_policy policy;
    bool cdi, filter_fitting;
    gf_log_level level;
    gf_reserve_opts reserve;
} opts;

static const char usage[] =
    "usage: gpufrac-scheduler [options]\n"
    "kube-scheduler extender placing gpufrac fractional pods on GPUs.\n"
    "\n"
    "  --listen HOST:PORT        serve the extender here (default 127.0.0.1:8888)\n"
    "  --url-prefix PATH         verbs under PATH: PATH/filter, PATH/prioritize, PATH/bind\n"
    "                            (default /); /metrics and /healthz stay at the root\n"
    "  --api-server URL          Kubernetes API server (default: in-cluster,\n"
    "                            https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT)\n"
    "  --token-file FILE         bearer token, re-read every minute and on 401\n"
    "                            (default in-cluster: " GF_KUBE_SA_DIR "/token)\n"
    "  --ca-file FILE            CA bundle of the API server (default in-cluster ca.crt)\n"
    "  --insecure-skip-tls-verify  do not verify the API server's certificate\n"
    "  --policy binpack|spread   GPU choice (default binpack: fullest GPU that fits)\n"
    "  --filter-answer best|fitting\n"
    "                            best (default): filter passes only the node gpufrac\n"
    "                            would choose, so kube-scheduler neither scores nor\n"
    "                            calls prioritize; fitting: every node that fits, to\n"
    "                            be weighed with kube-scheduler's own scores\n"
    "  --cdi                     write gpus.devices as CDI names\n"
    "                            (" GF_CDI_GPU_PREFIX "<UUID>)\n"
    "  --annotation-prefix P     NvFractions prefix (default " GF_NVFRACTIONS_PREFIX ")\n"
    "  --reservation-namespace NS  where reservation pods hold device-plugin GPUs for\n"
    "                            fractions (default " GF_RESERVE_NS_DEFAULT ")\n"
    "  --reservation-image IMAGE image of the reservation pods, with /bin/sh and sleep\n"
    "                            (default " RESERVE_IMAGE ")\n"
    "  --reservation-idle-s N    give a reservation back after N s unused (default 30)\n"
    "  --log-level LEVEL         off|error|warn|info|debug (default info)\n"
    "  --version                 print the version and exit\n"
    "  --help                    this text\n";

enum {
    O_LISTEN = 256,
    O_PREFIX_URL,
    O_API,
    O_TOKEN,
    O_CA,
    O_INSECURE,
    O_POLICY,
    O_FILTER,
    O_CDI,
    O_ANN,
    O_LOG,
    O_RES_NS,
    O_RES_IMAGE,
    O_RES_IDLE,
    O_VERSION,
    O_HELP
};

static const struct option longopts[] = {
    {"listen", required_argument, NULL, O_LISTEN},
    {"url-prefix", required_argument, NULL, O_PREFIX_URL},
    {"api-server", required_argument, NULL, O_API},
    {"token-file", required_argument, NULL, O_TOKEN},
    {"ca-file", required_argument, NULL, O_CA},
    {"insecure-skip-tls-verify", no_argument, NULL, O_INSECURE},
    {"policy", required_argument, NULL, O_POLICY},
    {"filter-answer", required_argument, NULL, O_FILTER},
    {"cdi", no_argument, NULL, O_CDI},
    {"annotation-prefix", required_argument, NULL, O_ANN},
    {"log-level", required_argument, NULL, O_LOG},
    {"reservation-namespace", required_argument, NULL, O_RES_NS},
    {"reservation-image", required_argument, NULL, O_RES_IMAGE},
    {"reservation-idle-s", required_argument, NULL, O_RES_IDLE},
    {"version", no_argument, NULL, O_VERSION},
    {"help", no_argument, NULL, O_HELP},
    {NULL, 0, NULL, 0},
};

/* A DNS label (the namespace), an image reference without spaces or
 * control characters, a whole number of seconds 1..86400. */
static int reserve_flag(int c, const char *v, gf_reserve_opts *o, gf_error *err)
{
    size_t n = strlen(v);
    char *end;
    unsigned long s;

    if (c == O_RES_IDLE) {
        s = strtoul(v, &end, 10);
        if (v[0] < '0' || v[0] > '9' || *end || s < 1 || s > 86400)
            return gf_error_set(err, GF_EINVAL,
                                "--reservation-idle-s \"%.40s\": expected whole seconds 1..86400",
                                v);
        o->idle_s = (unsigned)s;
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)v[i];
        bool ok = c == O_RES_NS
                      ? ((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-')
                      : (ch > ' ' && ch < 0x7f && ch != '"' && ch != '\\');
        if (!ok)
            n = 0;
    }
    if (n == 0 || n > (c == O_RES_NS ? 63u : 500u))
        return gf_error_set(err, GF_EINVAL,
                            c == O_RES_NS
                                ? "--reservation-namespace \"%.80s\": expected a namespace name "
                                  "(a-z, 0-9, '-', at most 63)"
                                : "--reservation-image \"%.80s\": expected an image reference "
                                  "(printable, no spaces, at most 500 bytes)",
                            v);
    if (c == O_RES_NS)
        o->ns = v;
    else
        o->image = v;
    return 0;
}

/* Returns 0 to run, 1 after --help or --version, -1 on a bad flag. */
static int parse(int argc, char **argv, opts *o, gf_error *err)
{
    int c;

    *o = (opts){.listen = "127.0.0.1:8888",
                .url_prefix = "/",
                .level = GF_LOG_INFO,
                .reserve = {.ns = GF_RESERVE_NS_DEFAULT,
                            .image = RESERVE_IMAGE,
                            .idle_s = GF_RESERVE_IDLE_S_DEFAULT}};
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case O_LISTEN: o->listen = optarg; break;
        case O_PREFIX_URL: o->url_prefix = optarg; break;
        case O_API: o->kube.api_server = optarg; break;
        case O_TOKEN: o->kube.token_file = optarg; break;
        case O_CA: o->kube.ca_file = optarg; break;
        case O_INSECURE: o->kube.insecure = true; break;
        case O_POLICY:
            if (gf_policy_parse(optarg, &o->policy, err) < 0)
                return -1;
            break;
        case O_FILTER:
            if (strcmp(optarg, "best") != 0 && strcmp(optarg, "fitting") != 0)
                return gf_error_set(err, GF_EINVAL,
                                    "--filter-answer \"%s\": expected best or fitting", optarg);
            o->filter_fitting = strcmp(optarg, "fitting") == 0;
            break;
        case O_CDI: o->cdi = true; break;
        case O_ANN: o->prefix = optarg; break;
        case O_LOG:
            if (gf_log_level_parse(optarg, &o->level) < 0)
                return gf_error_set(err, GF_EINVAL,
                                    "--log-level \"%s\": expected off|error|warn|info|debug",
                                    optarg);
            break;
        case O_RES_NS:
        case O_RES_IMAGE:
        case O_RES_IDLE:
            if (reserve_flag(c, optarg, &o->reserve, err) < 0)
                return -1;
            break;
        case O_VERSION: printf("gpufrac-scheduler %s\n", GPUFRAC_VERSION); return 1;
        case 'h':
        case O_HELP: fputs(usage, stdout); return 1;
        default: return gf_error_set(err, GF_EINVAL, "unknown option (see --help)");
        }
    }
    if (optind < argc)
        return gf_error_set(err, GF_EINVAL, "unexpected argument \"%s\" (see --help)",
                            argv[optind]);
    return 0;
}

typedef struct app {
    gf_kube *kube;
    gf_model *model;
    gf_extender ext;
    bool ext_ready;
    gf_informer informer;
    bool informing;
    gf_server *server;
    gf_reserver *reserver;
} app;

static int app_start(app *a, const opts *o, gf_error *err)
{
    gf_ext_kube ek;
    gf_kube_opts ko = o->kube;

    ko.multiplex = true; /* binds in flight share one HTTP/2 connection */
    if (gf_kube_open(&a->kube, &ko, err) < 0 || gf_model_new(o->prefix, &a->model, err) < 0)
        return -1;
    ek = gf_kube_ext(a->kube);
    if (gf_extender_init(&a->ext, a->model, o->policy, o->cdi, o->prefix, &ek, err) < 0)
        return -1;
    a->ext_ready = true;
    a->ext.filter_best = !o->filter_fitting;
    a->ext.node_names = gf_informer_node_names;
    a->ext.node_names_cls = &a->informer;
    if (gf_reserver_start(&a->reserver, a->kube, a->model, &o->reserve, err) < 0)
        return -1;
    a->ext.reserver = a->reserver;
    if (gf_informer_start(&a->informer, a->kube, a->model, &a->ext, err) < 0)
        return -1;
    a->informing = true;
    if (gf_server_start(&a->server, &a->ext, o->listen, o->url_prefix, err) < 0)
        return -1;
    gf_slog(GF_LOG_INFO,
            "gpufrac-scheduler " GPUFRAC_VERSION
            " serving on %s (API server %s, policy %s, filter answers %s%s)",
            gf_server_address(a->server), gf_kube_base(a->kube), gf_policy_name(o->policy),
            o->filter_fitting ? "every fitting node" : "the best node",
            o->cdi ? ", CDI names" : "");
    return 0;
}

static void app_stop(app *a)
{
    gf_server_stop(a->server);
    if (a->informing)
        gf_informer_stop(&a->informer);
    gf_reserver_stop(a->reserver);
    a->ext.reserver = NULL;
    if (a->ext_ready)
        gf_extender_fini(&a->ext);
    gf_model_free(a->model);
    gf_kube_close(a->kube);
}

/* The HTTP server's two workers live as long as the process, and glibc
 * keeps each thread's freed small chunks in a cache of its own that no trim
 * reaches: they pin pages spread over the heap (measured after a 2,000-pod
 * burst on 500 nodes: heap 2.3-2.8 MiB kept, RSS +7.4 to +9.2 %; without
 * the caches 1.4 MiB and -0.5 %, at the same CPU per pod). Tunables are read
 * only at start, so the process starts itself again with them off, unless
 * GLIBC_TUNABLES already says how many to keep (the operator decides). */
static void restart_without_thread_caches(char **argv)
{
    static const char off[] = "glibc.malloc.tcache_count=0";
    const char *was = getenv("GLIBC_TUNABLES");
    gf_cleanup_free char *kept = was ? strdup(was) : NULL;
    gf_cleanup_free char *now = NULL;

    if (was && strstr(was, "glibc.malloc.tcache_count"))
        return;
    if (asprintf(&now, "%s%s%s", was ? was : "", was && *was ? ":" : "", off) < 0 ||
        setenv("GLIBC_TUNABLES", now, 1) < 0)
        return;
    execv("/proc/self/exe", argv);
    fprintf(stderr,
            "gpufrac-scheduler: could not start again without glibc's thread caches (%s): "
            "running on with them (the heap keeps more after a burst)\n",
            strerror(errno));
    if (kept)
        setenv("GLIBC_TUNABLES", kept, 1);
    else
        unsetenv("GLIBC_TUNABLES");
}

int main(int argc, char **argv)
{
    gf_error err = {0};
    sigset_t set;
    app a = {0};
    opts o;
    int rc, sig = 0;

    restart_without_thread_caches(argv);
    if ((rc = parse(argc, argv, &o, &err)) != 0) {
        if (rc < 0)
            fprintf(stderr, "gpufrac-scheduler: %s\n", err.msg);
        return rc < 0 ? 2 : 0;
    }
    gf_slog_set_level(o.level);
    /* the HTTP server's workers, the API multiplexer and the watches all
     * allocate: glibc would give threads arenas of their own (up to 8 per
     * core), and malloc_trim gives back far less of a second arena than of
     * the main heap (measured with a thread per HTTP connection: 5.5 MiB
     * kept against 0.8 MiB after a 2,000-pod burst on 500 nodes, at the same
     * CPU) */
    mallopt(M_ARENA_MAX, 1);
    /* every thread inherits the blocked set: only sigwait below sees them */
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    if (app_start(&a, &o, &err) < 0) {
        fprintf(stderr, "gpufrac-scheduler: %s\n", err.msg);
        app_stop(&a);
        return 1;
    }
    sigwait(&set, &sig);
    gf_slog(GF_LOG_INFO, "signal %d: stopping", sig);
    app_stop(&a);
    return 0;
}
