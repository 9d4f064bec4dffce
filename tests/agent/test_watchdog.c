/* SPDX-License-Identifier: Apache-2.0 */
/* gpufracd watchdog over gpusim: a process that allocates without the shim
 * (shimprobe, no LD_PRELOAD) under a fraction's supervisor is killed once
 * the driver's figure passes the limit; one within its limit, and one that
 * belongs to no fraction, are left alone; many small processes get no
 * per-process allowance; a ledger slot naming another process changes
 * nothing. Needs GPUFRAC_BUILD (the build tree: tests/shimprobe, lib/gpusim). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "agent_events.h"
#include "attrib.h"
#include "fraction.h"
#include "nvml.h"
#include "proc.h"
#include "watchdog.h"

#define MiB (1024ULL * 1024ULL)
#define GPUSIM_CTX (64 * MiB) /* gpusim's default context overhead */

static char build[1024], probe[1100], dir[64];

static gf_agent agent;

typedef struct sup {
    pid_t sup;   /* the fake supervisor */
    pid_t child; /* its shimprobe */
} sup;

/* A shimprobe that allocates and holds; keep_fd >= 0 survives the exec. */
static pid_t spawn_probe(const char *size, int keep_fd)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (keep_fd >= 0)
            fcntl(keep_fd, F_SETFD, 0);
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        execl(probe, "shimprobe", "alloc", size, "hold", "60", (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* A supervisor process whose child is the probe; the supervisor waits. */
static sup spawn_supervised(const char *size)
{
    int p[2];
    sup s;

    assert_int_equal(pipe(p), 0);
    s.sup = fork();
    assert_true(s.sup >= 0);
    if (s.sup == 0) {
        pid_t c = spawn_probe(size, -1);
        if (write(p[1], &c, sizeof(c)) != sizeof(c))
            _exit(1);
        waitpid(c, NULL, 0);
        pause(); /* stays, as `gpufrac run` does */
        _exit(0);
    }
    assert_int_equal(read(p[0], &s.child, sizeof(s.child)), (ssize_t)sizeof(s.child));
    close(p[0]);
    close(p[1]);
    return s;
}

static bool probe_holds(pid_t pid, uint64_t at_least)
{
    gf_proc_mem procs[256];
    gf_error err;
    int n = gf_agent_nvml_procs(&agent, 0, procs, 256, &err);
    assert_true(n >= 0);
    for (int i = 0; i < n; i++)
        if (procs[i].pid == pid && procs[i].used >= at_least)
            return true;
    return false;
}

static void wait_holding(pid_t pid, uint64_t at_least)
{
    for (int i = 0; i < 500 && !probe_holds(pid, at_least); i++)
        usleep(10000);
    assert_true(probe_holds(pid, at_least));
}

static bool alive(pid_t pid)
{
    return waitpid(pid, NULL, WNOHANG) == 0;
}

/* The child of another process: reaped by that one; alive until it is a zombie. */
static bool running(pid_t pid)
{
    char path[64], text[256], *p;
    FILE *fp;
    bool run = false;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    if (!(fp = fopen(path, "r")))
        return false;
    if (fgets(text, sizeof(text), fp) && (p = strrchr(text, ')')))
        run = p[2] != 'Z' && p[2] != 'X';
    fclose(fp);
    return run;
}

static void stop(pid_t pid)
{
    if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
}

static void stop_sup(sup s)
{
    kill(s.child, SIGKILL);
    stop(s.sup);
}

static gf_afraction *add_fraction(const char *name, uint64_t limit, pid_t supervisor)
{
    gf_afraction *f = &agent.fractions[agent.n_fractions++];
    gf_fraction_config cfg = {.n_devices = 1};
    char path[GF_PATH_MAX];
    gf_error err;

    memset(f, 0, sizeof(*f));
    snprintf(cfg.name, sizeof(cfg.name), "%s", name);
    snprintf(path, sizeof(path), "%s/%s.ledger", dir, name);
    snprintf(cfg.devices[0].uuid, sizeof(cfg.devices[0].uuid), "%s", agent.gpus[0].dev.uuid);
    cfg.devices[0].request = cfg.devices[0].limit = limit;
    assert_int_equal(gf_aconfig_set(&f->cfg, &cfg, path, &err), 0);
    f->supervisor = supervisor;
    f->sup_pidfd = supervisor > 0 ? gf_pidfd_open(supervisor) : -1;
    f->ledger_fd = -1;
    /* its directory, where the agent records why it terminated a process */
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    assert_non_null(f->dir = strdup(path));
    assert_int_equal(mkdir(f->dir, 0755), 0);
    assert_int_equal(gf_ledger_create(f->cfg.ledger, name, 0600, &err), 0);
    gf_attrib_dirty();
    return f;
}

static int setup(void **state)
{
    gf_error err;

    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/gf-watchdog-XXXXXX");
    assert_non_null(mkdtemp(dir));
    memset(&agent, 0, sizeof(agent));
    pthread_mutex_init(&agent.lock, NULL);
    assert_int_equal(gf_agent_nvml_init(&agent, &err), 0);
    assert_int_equal(agent.n_gpus, 1);
    agent.fractions = calloc(GF_AGENT_FRACTIONS_MAX, sizeof(gf_afraction));
    agent.loans = calloc(GF_AGENT_LOANS_MAX, sizeof(gf_loan));
    agent.journal_fd = agent.priv_dfd = -1;
    agent.frac_dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(agent.frac_dfd >= 0);
    events_capture(&agent);
    return 0;
}

static int teardown(void **state)
{
    char cmd[128];

    (void)state;
    for (int i = 0; i < agent.n_fractions; i++) {
        if (agent.fractions[i].sup_pidfd >= 0)
            close(agent.fractions[i].sup_pidfd);
        gf_fraction_free(&agent.fractions[i]);
    }
    close(agent.frac_dfd);
    free(agent.fractions);
    free(agent.loans);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
    return 0;
}

static void test_bypass_over_limit_is_killed(void **state)
{
    sup rogue = spawn_supervised("600Mi"), good = spawn_supervised("600Mi");
    pid_t stranger = spawn_probe("600Mi", -1);
    gf_afraction *fr, *fg;
    gf_error err;
    char want[256];

    (void)state;
    fr = add_fraction("rogue", 256 * MiB, rogue.sup);
    fg = add_fraction("good", 1024 * MiB, good.sup);
    agent.watchdog_tolerance = GPUSIM_CTX;
    wait_holding(rogue.child, 600 * MiB);
    wait_holding(good.child, 600 * MiB);
    wait_holding(stranger, 600 * MiB);

    assert_int_equal(gf_watchdog_tick(&agent, &err), 0);
    assert_int_equal(fr->watchdog_kills, 1);
    assert_int_equal(fg->watchdog_kills, 0);
    assert_int_equal(fg->driver_used[0], 600 * MiB + GPUSIM_CTX);
    assert_int_equal(fr->driver_used[0], 600 * MiB + GPUSIM_CTX);
    snprintf(want, sizeof(want),
             "watchdog: killed pid %d of fraction rogue: driver reports %llu bytes on %s, "
             "bound %llu (limit %llu)",
             (int)rogue.child, 600 * MiB + GPUSIM_CTX, agent.gpus[0].dev.uuid, 256 * MiB,
             256 * MiB);
    assert_string_equal(events_last(), want);
    /* the reason its owner sees: which bound was passed, by how much */
    {
        char path[GF_PATH_MAX + 32], text[1024] = "";
        FILE *fp;
        snprintf(path, sizeof(path), "%s/rogue/terminated", dir);
        assert_non_null(fp = fopen(path, "r"));
        assert_non_null(fgets(text, sizeof(text), fp));
        fclose(fp);
        snprintf(want, sizeof(want), "pid=%d by=watchdog gpu=0 ", (int)rogue.child);
        assert_true(strncmp(text, want, strlen(want)) == 0);
        assert_non_null(strstr(text, "over its limit of 256.00 MiB"));
    }
    for (int i = 0; i < 500 && running(rogue.child); i++)
        usleep(10000);
    assert_false(running(rogue.child));
    assert_true(running(good.child));
    assert_true(alive(stranger));
    assert_true(alive(rogue.sup)); /* the supervisor itself is never the one */

    /* the next tick finds nothing over: the killed process's memory is gone */
    assert_int_equal(gf_watchdog_tick(&agent, &err), 0);
    assert_int_equal(fr->watchdog_kills, 1);
    assert_int_equal(fr->driver_used[0], 0);
    assert_int_equal(events_count(), 1);

    stop_sup(rogue);
    stop_sup(good);
    stop(stranger);
}

/* Amplification: processes of one fraction get no allowance each. Four
 * processes of 200Mi (+64Mi context each, the driver's figure) in a 768Mi
 * fraction are 1056Mi, past 768Mi + the one per-GPU tolerance. */
static void test_no_allowance_per_process(void **state)
{
    pid_t procs[4];
    gf_afraction *f;
    gf_error err;
    int alive_n = 0;

    (void)state;
    /* the test is the supervisor: its four probes are the fraction's */
    f = add_fraction("many", 768 * MiB, getpid());
    assert_int_equal(gf_watchdog_tolerance(&agent, 0), GF_WATCHDOG_TOLERANCE_MIN);
    for (int i = 0; i < 4; i++) {
        procs[i] = spawn_probe("200Mi", -1);
        wait_holding(procs[i], 200 * MiB);
    }
    assert_int_equal(gf_watchdog_tick(&agent, &err), 0);
    assert_int_equal(f->driver_used[0], 4 * (200 * MiB + GPUSIM_CTX));
    assert_int_equal(f->watchdog_kills, 1);
    for (int i = 0; i < 4; i++) {
        for (int t = 0; t < 50 && running(procs[i]); t++)
            usleep(10000);
        alive_n += running(procs[i]);
    }
    assert_int_equal(alive_n, 3);
    /* 3 x 264Mi = 792Mi is within 768Mi + 64Mi: nobody else goes */
    assert_int_equal(gf_watchdog_tick(&agent, &err), 0);
    assert_int_equal(f->watchdog_kills, 1);
    for (int i = 0; i < 4; i++)
        stop(procs[i]);
}

/* A tenant writes another process's pid into a live slot of its ledger: the
 * watchdog does not read ledgers, so nothing is charged and nobody killed. */
static void test_forged_slot_changes_nothing(void **state)
{
    pid_t victim = spawn_probe("600Mi", -1);
    gf_afraction *f;
    gf_ledger lg;
    gf_error err;

    (void)state;
    f = add_fraction("forger", 256 * MiB, 0);
    assert_int_equal(gf_ledger_open(f->cfg.ledger, &lg, &err), 0);
    assert_int_equal(gf_ledger_claim_slot(&lg, &err), 0);
    atomic_store(&lg.hdr->slots[lg.slot].pid, (int32_t)victim);
    wait_holding(victim, 600 * MiB);
    assert_int_equal(gf_watchdog_tick(&agent, &err), 0);
    assert_int_equal(f->watchdog_kills, 0);
    assert_int_equal(f->driver_used[0], 0);
    assert_true(alive(victim));
    gf_ledger_close(&lg);
    stop(victim);
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* The cost of a tick with nothing to do but attribute (printed, not asserted). */
static void test_tick_cost(void **state)
{
    char name[32];
    gf_error err;
    pid_t stranger = spawn_probe("64Mi", -1);
    double t0, best = 1e9;

    (void)state;
    for (int i = 0; i < 200; i++) {
        snprintf(name, sizeof(name), "idle-%03d", i);
        add_fraction(name, 1024 * MiB, 0);
    }
    wait_holding(stranger, 64 * MiB);
    for (int r = 0; r < 10; r++) {
        t0 = now_ms();
        assert_int_equal(gf_watchdog_tick(&agent, &err), 0);
        best = now_ms() - t0 < best ? now_ms() - t0 : best;
    }
    printf("# watchdog tick, 200 fractions, 1 process: %.3f ms\n", best);
    stop(stranger);
}

/* NVML is found through the library path, which only counts at exec. */
static void ensure_library_path(char **argv)
{
    const char *lp = getenv("LD_LIBRARY_PATH");
    char want[1200], both[4096];

    snprintf(want, sizeof(want), "%s/lib/gpusim", build);
    if (lp && strstr(lp, want))
        return;
    snprintf(both, sizeof(both), "%s%s%s", want, lp ? ":" : "", lp ? lp : "");
    setenv("LD_LIBRARY_PATH", both, 1);
    execv("/proc/self/exe", argv);
}

int main(int argc, char **argv)
{
    const char *b = getenv("GPUFRAC_BUILD");
    char gpusim[64];
    gf_error err;
    int rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_bypass_over_limit_is_killed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_allowance_per_process, setup, teardown),
        cmocka_unit_test_setup_teardown(test_forged_slot_changes_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tick_cost, setup, teardown),
    };

    (void)argc;
    if (!b) {
        fprintf(stderr, "test_watchdog: set GPUFRAC_BUILD to the build tree\n");
        return 77;
    }
    snprintf(build, sizeof(build), "%s", b);
    snprintf(probe, sizeof(probe), "%s/tests/shimprobe", build);
    ensure_library_path(argv);
    /* one simulated GPU for the whole run: this process's NVML maps it once */
    snprintf(gpusim, sizeof(gpusim), "/tmp/gf-watchdog-gpusim-%d", (int)getpid());
    setenv("GPUSIM_STATE", gpusim, 1);
    setenv("GPUSIM_DEVICES", "16Gi", 1);
    unsetenv("LD_PRELOAD");
    if (gf_agent_nvml_init(&agent, &err) < 0) {
        fprintf(stderr, "test_watchdog: gpusim is not built in %s: %s\n", build, err.msg);
        return 1;
    }
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    unlink(gpusim);
    return rc;
}
