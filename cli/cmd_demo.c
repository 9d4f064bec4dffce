/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "admit.h"
#include "amount.h"
#include "cli.h"
#include "demo.h"
#include "fraction.h"
#include "gpus.h"
#include "install_paths.h"
#include "quantity.h"
#include "statedir.h"
#include "status.h"

extern char **environ;

#define SIM_SIZE "16Gi"
#define CHUNK "256Mi"
#define CHUNK_HUMAN "256 MiB"

static const char demo_help[] =
    "Usage: gpufrac demo [--simulated]\n"
    "\n"
    "Four workloads (gpufrac-probe, a small CUDA program) share one GPU at once: a\n"
    "steady one; a greedy one, refused at its share while the steady one is\n"
    "untouched; a bursting one that borrows idle memory; and a guaranteed owner that\n"
    "needs that memory back, so the bursting one is evicted and told why. Then the\n"
    "status an operator sees. It starts its own gpufracd on a scratch state\n"
    "directory (or uses the host's, on a real GPU where one runs) and cleans up.\n"
    "Without an NVIDIA GPU it uses gpusim, a simulated 16 GiB GPU; on a real GPU\n"
    "the sizes are scaled to the GPU's.\n"
    "\n"
    "Flags:\n"
    "  --simulated   use the simulated GPU even when a real one is present\n"
    "  -h, --help    show this help\n"
    "\n"
    "Exit status: 0 when every workload behaved as expected, 1 otherwise.\n";

typedef struct demo {
    bool simulated;
    char why_sim[GF_ERROR_MSG_MAX];
    char exe_dir[PATH_MAX], self[PATH_MAX + 16], probe[PATH_MAX + 16];
    char tmp[64], state[96];
    char uuid[GF_UUID_MAX]; /* the real GPU used; "" on gpusim */
    uint64_t total;
    pid_t agent; /* the gpufracd we started; 0 when none */
} demo;

typedef struct workload {
    const char *label;
    char memory[32];
    uint64_t limit;
    demo_output out;
    char problem[256]; /* "" when it behaved */
} workload;

static void gib(uint64_t bytes, char *buf, size_t len)
{
    snprintf(buf, len, "%.2f GiB", (double)bytes / (double)GF_GIB);
}

static int find_binaries(demo *d, gf_error *err)
{
    if (gf_exe_dir(d->exe_dir, sizeof(d->exe_dir), err) < 0)
        return -1;
    snprintf(d->self, sizeof(d->self), "%s/gpufrac", d->exe_dir);
    if (gf_find_probe(d->probe, sizeof(d->probe), err) < 0)
        return -1;
    if (access(d->self, X_OK) < 0)
        return gf_error_sys(err, "%s", d->self);
    return 0;
}

static int use_gpusim(demo *d, gf_error *err)
{
    char dir[PATH_MAX + 32], lib[PATH_MAX + 64], path[PATH_MAX * 2];
    const char *old = getenv("LD_LIBRARY_PATH");

    if (gf_find_gpusim_dir(dir, sizeof(dir), err) < 0)
        return -1;
    snprintf(path, sizeof(path), "%s%s%s", dir, old && *old ? ":" : "", old ? old : "");
    snprintf(lib, sizeof(lib), "%s/gpusim-state", d->tmp);
    if (setenv("GPUSIM_DEVICES", SIM_SIZE, 1) < 0 || setenv("GPUSIM_STATE", lib, 1) < 0 ||
        setenv("LD_LIBRARY_PATH", path, 1) < 0)
        return gf_error_sys(err, "setenv");
    unsetenv("CUDA_VISIBLE_DEVICES");
    unsetenv("NVIDIA_VISIBLE_DEVICES");
    d->simulated = true;
    d->total = 16 * GF_GIB; /* SIM_SIZE */
    return 0;
}

static int choose_gpu(demo *d, bool force_sim, gf_error *err)
{
    gf_gpu_list all, sel;
    gf_error why = {0};

    if (force_sim) {
        snprintf(d->why_sim, sizeof(d->why_sim), "--simulated was given");
        return use_gpusim(d, err);
    }
    if (gf_gpus_probe(&all, &why) < 0) {
        snprintf(d->why_sim, sizeof(d->why_sim), "no NVIDIA GPU found");
        return use_gpusim(d, err);
    }
    if (gf_gpus_select_default(&all, &sel, &why) < 0) {
        snprintf(d->why_sim, sizeof(d->why_sim), "%s", why.msg);
        return use_gpusim(d, err);
    }
    snprintf(d->uuid, sizeof(d->uuid), "%s", sel.gpus[0].uuid);
    d->total = sel.gpus[0].total;
    return setenv("CUDA_VISIBLE_DEVICES", d->uuid, 1) < 0 ? gf_error_sys(err, "setenv") : 0;
}

/* One workload: a gpufrac run of gpufrac-probe, in the background, its
 * stdout and stderr in <tmp>/<name>.out. */
typedef struct job {
    const char *name;
    pid_t pid;
    int status;
    bool done;
    char out[128];
} job;

static int start_job(demo *d, job *j, const char *const *args, gf_error *err)
{
    const char *argv[32];
    posix_spawn_file_actions_t fa;
    int n = 0, rc;

    snprintf(j->out, sizeof(j->out), "%s/%s.out", d->tmp, j->name);
    argv[n++] = d->self;
    argv[n++] = "run";
    argv[n++] = "--name";
    argv[n++] = j->name;
    argv[n++] = "--state-dir";
    argv[n++] = d->state;
    if (d->uuid[0]) {
        argv[n++] = "--devices";
        argv[n++] = d->uuid;
    }
    while (*args && n < 29)
        argv[n++] = *args++;
    argv[n] = NULL;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, j->out, O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
    posix_spawn_file_actions_adddup2(&fa, STDOUT_FILENO, STDERR_FILENO);
    rc = posix_spawn(&j->pid, d->self, &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
        errno = rc;
        return gf_error_sys(err, "starting %s", j->name);
    }
    return 0;
}

static void wait_job(job *j)
{
    if (j->done || j->pid <= 0)
        return;
    while (waitpid(j->pid, &j->status, 0) < 0 && errno == EINTR)
        ;
    j->done = true;
}

static int job_exit(const job *j)
{
    return WIFEXITED(j->status) ? WEXITSTATUS(j->status) : 128 + WTERMSIG(j->status);
}

static void stop_job(job *j)
{
    if (!j->done && j->pid > 0) {
        kill(j->pid, SIGTERM); /* gpufrac run passes it on to the fraction */
        wait_job(j);
    }
}

/* The first line of a job's output that holds text, into buf. */
static bool job_line(const job *j, const char *text, char *buf, size_t len)
{
    char line[1024];
    bool found = false;
    FILE *fp = fopen(j->out, "re");

    while (fp && !found && fgets(line, sizeof(line), fp))
        if (strstr(line, text)) {
            line[strcspn(line, "\n")] = '\0';
            snprintf(buf, len, "%s", line);
            found = true;
        }
    if (fp)
        fclose(fp);
    return found;
}

static uint64_t job_value(const job *j, const char *key)
{
    char line[1024], pre[64];
    uint64_t v = 0;
    FILE *fp = fopen(j->out, "re");

    snprintf(pre, sizeof(pre), "%s=", key);
    while (fp && fgets(line, sizeof(line), fp))
        if (strncmp(line, pre, strlen(pre)) == 0)
            v = strtoull(line + strlen(pre), NULL, 10);
    if (fp)
        fclose(fp);
    return v;
}

/* The fraction's figures on its (one) GPU, as status reads them. */
static bool fraction_now(const demo *d, const char *name, status_device *out)
{
    static status_view v;
    gf_error err;
    bool found = false;

    if (status_collect(d->state, false, &v, &err) < 0)
        return false;
    for (size_t i = 0; i < v.n && !found; i++)
        if (strcmp(v.f[i].name, name) == 0 && v.f[i].readable && v.f[i].n_devices) {
            *out = v.f[i].devices[0];
            found = true;
        }
    status_view_free(&v);
    return found;
}

/* Waits (at most 30 s) until the fraction uses at least bytes. */
static bool wait_used(const demo *d, job *j, uint64_t bytes)
{
    struct timespec tick = {0, 50 * 1000 * 1000};
    status_device dev;

    for (int i = 0; i < 600; i++) {
        if (fraction_now(d, j->name, &dev) && dev.used >= bytes)
            return true;
        if (waitpid(j->pid, &j->status, WNOHANG) == j->pid) {
            j->done = true;
            return false;
        }
        nanosleep(&tick, NULL);
    }
    return false;
}

static int start_agent(demo *d, gf_error *err)
{
    char agent[PATH_MAX + 16], log[128], sock[160];
    struct timespec tick = {0, 50 * 1000 * 1000};
    const char *argv[] = {agent, "--state-dir",          d->state, "--metrics-listen",
                          "off", "--watchdog-period-ms", "200",    NULL};
    posix_spawn_file_actions_t fa;
    struct stat st;
    int rc;

    if (gf_find_agent(agent, sizeof(agent), err) < 0)
        return -1;
    snprintf(log, sizeof(log), "%s/gpufracd.log", d->tmp);
    snprintf(sock, sizeof(sock), "%s/" GF_STATE_AGENT_SOCK, d->state);
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, STDOUT_FILENO, STDERR_FILENO);
    rc = posix_spawn(&d->agent, agent, &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
        errno = rc;
        return gf_error_sys(err, "starting %s", agent);
    }
    for (int i = 0; i < 200; i++) {
        if (stat(sock, &st) == 0 && S_ISSOCK(st.st_mode))
            return 0;
        if (waitpid(d->agent, &rc, WNOHANG) == d->agent) {
            d->agent = 0;
            return gf_error_set(err, GF_ESTATE, "gpufracd stopped at once (see %s)", log);
        }
        nanosleep(&tick, NULL);
    }
    return gf_error_set(err, GF_ESTATE, "gpufracd did not open %s within 10 s", sock);
}

static void stop_agent(demo *d)
{
    int st;
    if (d->agent > 0) {
        kill(d->agent, SIGTERM);
        while (waitpid(d->agent, &st, 0) < 0 && errno == EINTR)
            ;
        d->agent = 0;
    }
}

/* `gpufrac status` as its own process: it loads NVML (here: gpusim) by the
 * library path we set, which this process's loader no longer reads. */
static void show_status(const demo *d)
{
    const char *argv[] = {d->self, "status", "--brief", "--state-dir", d->state, NULL};
    pid_t pid;
    int st;

    fflush(stdout);
    setenv("COLUMNS", "80", 1);
    if (posix_spawn(&pid, d->self, NULL, NULL, (char *const *)argv, environ) != 0)
        return;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
}

static int verdict(bool ok, int *fails)
{
    if (!ok)
        (*fails)++;
    return ok ? 'P' : 'F';
}

static void say(int v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(int v, const char *fmt, ...)
{
    va_list ap;
    printf("  %s  ", v == 'P' ? "PASS" : "FAIL");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
}

/* Sizes in units of a 16th of the GPU: 1 unit = 1 GiB on the simulated one. */
static void units(const demo *d, unsigned k, char *buf, size_t len)
{
    gf_quantity_format(d->total / 16 / GF_MIB * GF_MIB * k, buf, len);
}

static int demo_run(demo *d, gf_error *err)
{
    char u2[32], u3[32], u4[32], u5[32], u6[32], u9[32], u10[32], chunk[32], line[1024];
    char a[32], b[32];
    job steady = {.name = "steady"}, greedy = {.name = "greedy"}, burst = {.name = "burst"},
        owner = {.name = "owner"};
    uint64_t unit = d->total / 16 / GF_MIB * GF_MIB;
    status_device sd, bd;
    int fails = 0, v;

    units(d, 2, u2, sizeof(u2));
    units(d, 3, u3, sizeof(u3));
    units(d, 4, u4, sizeof(u4));
    units(d, 5, u5, sizeof(u5));
    units(d, 6, u6, sizeof(u6));
    units(d, 9, u9, sizeof(u9));
    units(d, 10, u10, sizeof(u10));
    gf_quantity_format(unit / 2, chunk, sizeof(chunk));
    gib(d->total, a, sizeof(a));
    /* all of it fits one 80x24 screen (tests/integration/test_cli.py) */
    if (d->simulated)
        snprintf(line, sizeof(line), "gpufrac demo on gpusim, a simulated %s GPU (%s)", a,
                 d->why_sim);
    else
        snprintf(line, sizeof(line), "gpufrac demo on GPU %s (%s)", d->uuid, a);
    status_wrap(line, 80, "", "  ");

    const char *s_args[] = {"--memory", u4, "--", d->probe, "alloc", u3, "hold", "120", NULL};
    printf("steady  --memory %-5s            holds %s, all along\n", u4, u3);
    if (start_job(d, &steady, s_args, err) < 0)
        return -1;
    if (!wait_used(d, &steady, 3 * unit) || !fraction_now(d, "steady", &sd))
        return gf_error_set(err, GF_ESTATE, "the steady workload did not start (see %s)",
                            steady.out);
    /* what the fraction is charged beyond its allocations: its context (the
     * limit bounds the whole footprint, docs/footprint.md); the greedy one,
     * the same program, has one of the same size */
    uint64_t steady_used = sd.used, ctx = sd.used - 3 * unit;

    const char *g_args[] = {"--memory", u4, "--", d->probe, "fill", chunk, NULL};
    printf("greedy  --memory %-5s            takes %s blocks until refused\n", u4, chunk);
    if (start_job(d, &greedy, g_args, err) < 0)
        return -1;
    wait_job(&greedy);
    uint64_t got = job_value(&greedy, "fill_total");
    bool steady_ok = fraction_now(d, "steady", &sd) && sd.used == steady_used;
    v = verdict(job_exit(&greedy) == 0 && got + ctx <= 4 * unit &&
                    got + ctx + unit / 2 > 4 * unit &&
                    job_line(&greedy, "fill_error=CUDA_ERROR_OUT_OF_MEMORY", line, sizeof(line)),
                &fails);
    gib(got, b, sizeof(b));
    gf_bytes_human(ctx, a, sizeof(a));
    if (ctx)
        say(v, "greedy got %s + %s context, then CUDA_ERROR_OUT_OF_MEMORY", b, a);
    else
        say(v, "greedy got %s, its share, then CUDA_ERROR_OUT_OF_MEMORY", b);
    say(verdict(steady_ok, &fails), "steady still holds its %s, untouched", u3);

    const char *b_args[] = {"--memory", u2, "--limit", u10,   "--", d->probe,
                            "alloc",    u9, "hold",    "120", NULL};
    printf("burst   --memory %-5s --limit %-5s takes %s: more than its own\n", u2, u10, u9);
    if (start_job(d, &burst, b_args, err) < 0)
        return -1;
    bool burst_ok = wait_used(d, &burst, 9 * unit) && fraction_now(d, "burst", &bd) && bd.lent > 0;
    gib(burst_ok ? bd.lent : 0, b, sizeof(b));
    say(verdict(burst_ok, &fails), "burst borrowed %s of idle memory from gpufracd", b);

    const char *o_args[] = {"--memory", u6, "--", d->probe, "alloc", u5, NULL};
    printf("owner   --memory %-5s            takes %s: needs what burst borrowed\n", u6, u5);
    if (start_job(d, &owner, o_args, err) < 0)
        return -1;
    wait_job(&owner);
    wait_job(&burst);
    bool owner_ok = job_exit(&owner) == 0 && job_line(&owner, " ok", line, sizeof(line));
    bool evicted = job_exit(&burst) == GF_EXIT_EVICTED &&
                   job_line(&burst, "evicted by gpufracd", line, sizeof(line));
    say(verdict(owner_ok, &fails), "owner got its %s", u5);
    say(verdict(evicted, &fails), "burst was evicted (exit %d), and told why:", job_exit(&burst));
    if (evicted)
        status_wrap(strstr(line, "gpufrac run:"), 80, "        ", "          ");
    show_status(d);
    stop_job(&steady);
    stop_job(&burst);
    printf("%s\n", fails ? "Some steps did not behave as they should (FAIL above)."
                         : "Every workload got what it was promised, and not a byte more.");
    return fails ? 1 : 0;
}

/* The host's agent for a real GPU when one runs; else our own, on a
 * scratch state directory. */
static int demo_state(demo *d, gf_error *err)
{
    if (!d->simulated && gf_agent_present(GF_STATE_DIR_DEFAULT) && geteuid() == 0) {
        snprintf(d->state, sizeof(d->state), GF_STATE_DIR_DEFAULT);
        return 0;
    }
    char scratch[sizeof(d->state)];
    snprintf(scratch, sizeof(scratch), "%s", d->state);
    if (gf_state_dir(scratch, true, d->state, sizeof(d->state), err) < 0)
        return -1;
    return start_agent(d, err);
}

int gf_cmd_demo(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"simulated", no_argument, NULL, 's'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    bool force_sim = false;
    gf_error err = {0};
    demo d = {0};
    int c, rc;

    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        if (c == 's')
            force_sim = true;
        else if (c == 'h')
            return fputs(demo_help, stdout), GF_EXIT_OK;
        else
            return gf_cli_usage_error("demo", "unknown flag \"%s\"", argv[optind - 1]);
    }
    if (optind < argc)
        return gf_cli_usage_error("demo", "unexpected argument \"%s\"", argv[optind]);
    snprintf(d.tmp, sizeof(d.tmp), "/tmp/gpufrac-demo-XXXXXX");
    if (!mkdtemp(d.tmp)) {
        gf_error_sys(&err, "creating a temporary directory");
        return gf_cli_fail("demo", GF_EXIT_FAIL, &err);
    }
    snprintf(d.state, sizeof(d.state), "%s/state", d.tmp);
    unsetenv("GPUFRAC_CONFIG"); /* the probe's first look is without a fraction */
    unsetenv("GPUFRAC_MEMORY_LIMIT");
    if (find_binaries(&d, &err) < 0 || choose_gpu(&d, force_sim, &err) < 0 ||
        demo_state(&d, &err) < 0 || (rc = demo_run(&d, &err)) < 0)
        rc = gf_cli_fail("demo", GF_EXIT_FAIL, &err);
    stop_agent(&d);
    gf_rm_tree(d.tmp);
    return rc;
}
