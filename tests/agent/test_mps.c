/* SPDX-License-Identifier: Apache-2.0 */
/* agent/mps.c against the stand-in tests/fakes/nvidia-cuda-mps-control. */
#include "unit.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "agent_events.h"
#include "mps.h"

/* Where the stand-in is: -DGF_MPS_FAKE=... from CMake, else $GPUFRAC_SOURCE. */
#ifndef GF_MPS_FAKE
#define GF_MPS_FAKE ""
#endif
#define FAKE_REL "/tests/fakes/nvidia-cuda-mps-control"

/* ---- fixture ----------------------------------------------------------- */

typedef struct fixture {
    gf_agent a;
    char fake[GF_PATH_MAX];
    char pipe[2][GF_PATH_MAX];
} fixture;

static void fake_path(char *buf, size_t len)
{
    const char *src = getenv("GPUFRAC_SOURCE");

    if (GF_MPS_FAKE[0])
        snprintf(buf, len, "%s", GF_MPS_FAKE);
    else
        snprintf(buf, len, "%s%s", src ? src : ".", FAKE_REL);
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));

    if (!f)
        return -1;
    pthread_mutex_init(&f->a.lock, NULL);
    snprintf(f->a.state_dir, sizeof(f->a.state_dir), "/tmp/gfmps.XXXXXX");
    if (!mkdtemp(f->a.state_dir))
        return -1;
    fake_path(f->fake, sizeof(f->fake));
    if (access(f->fake, X_OK) != 0) {
        fprintf(stderr, "stand-in %s not executable\n", f->fake);
        return -1;
    }
    snprintf(f->a.mps_control, sizeof(f->a.mps_control), "%s", f->fake);
    f->a.n_gpus = 2;
    snprintf(f->a.gpus[0].dev.uuid, GF_UUID_MAX, "GPU-3F2a1b4c-1111-2222-3333-444455556666");
    snprintf(f->a.gpus[1].dev.uuid, GF_UUID_MAX, "GPU-9e8d7c6b-aaaa-bbbb-cccc-ddddeeeeffff");
    for (int i = 0; i < 2; i++) {
        f->a.gpus[i].dev.index = i;
        f->a.gpus[i].mode = GF_MODE_SM_SHARING;
        f->a.gpus[i].n_fractions = 1;
    }
    events_capture(&f->a);
    *state = f;
    return 0;
}

static void hook_path(const fixture *f, int gpu, const char *name, char *buf, size_t len)
{
    snprintf(buf, len, "%s/mps/%s/%s", f->a.state_dir, gpu ? "9e8d7c6b" : "3f2a1b4c", name);
}

static pid_t read_pidfile(const fixture *f, int gpu)
{
    char path[GF_PATH_MAX + 64];
    FILE *fp;
    int pid = 0;

    hook_path(f, gpu, "nvidia-cuda-mps-control.pid", path, sizeof(path));
    fp = fopen(path, "r");
    if (!fp)
        return 0;
    if (fscanf(fp, "%d", &pid) != 1)
        pid = 0;
    fclose(fp);
    return pid;
}

static int teardown(void **state)
{
    fixture *f = *state;
    char cmd[GF_PATH_MAX * 2];
    gf_error err;

    for (int i = 0; i < f->a.n_gpus; i++) {
        char hang[GF_PATH_MAX + 64], out[256];
        pid_t pid = read_pidfile(f, i);

        hook_path(f, i, "hang", hang, sizeof(hang));
        unlink(hang);
        if (gf_mps_command(&f->a, i, "quit", out, sizeof(out), &err) < 0 && pid > 0)
            kill(pid, SIGKILL);
    }
    usleep(200 * 1000);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->a.state_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", f->a.state_dir);
    pthread_mutex_destroy(&f->a.lock);
    free(f);
    return 0;
}

/* ---- helpers ----------------------------------------------------------- */

/* The stand-in's commands.log of GPU gpu, NUL-terminated in buf. */
static const char *commands(const fixture *f, int gpu, char *buf, size_t len)
{
    char path[GF_PATH_MAX + 64];
    ssize_t n = 0;
    int fd;

    hook_path(f, gpu, "commands.log", path, sizeof(path));
    fd = open(path, O_RDONLY);
    if (fd >= 0) {
        n = read(fd, buf, len - 1);
        close(fd);
    }
    buf[n > 0 ? n : 0] = '\0';
    return buf;
}

static int count_lines(const char *log, const char *prefix)
{
    int n = 0;
    size_t pl = strlen(prefix);

    for (const char *p = log; *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : p + strlen(p))
        if (strncmp(p, prefix, pl) == 0)
            n++;
    return n;
}

static void write_hook(const fixture *f, int gpu, const char *name, const char *text)
{
    char path[GF_PATH_MAX + 64];
    FILE *fp;

    hook_path(f, gpu, name, path, sizeof(path));
    fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
}

/* A child that waits to be signalled, standing in for a CUDA client. */
static pid_t spawn_client(void)
{
    pid_t pid = fork();

    if (pid == 0) {
        for (;;)
            pause();
    }
    assert_true(pid > 0);
    return pid;
}

/* Running and not a zombie waiting for its reaper. */
static int alive(pid_t pid)
{
    char path[64], buf[512];
    const char *st;
    FILE *fp;
    size_t n;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    fp = fopen(path, "r");
    if (!fp)
        return 0;
    n = fread(buf, 1, sizeof(buf) - 1, fp);
    fclose(fp);
    buf[n] = '\0';
    st = strrchr(buf, ')');
    return st && st[1] == ' ' && st[2] != 'Z' && st[2] != 'X';
}

static double seconds_since(const struct timespec *t0)
{
    struct timespec t1;

    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

/* ---- tests ------------------------------------------------------------- */

static void test_ensure_one_daemon_per_gpu(void **state)
{
    fixture *f = *state;
    char pipe[GF_PATH_MAX], want[GF_PATH_MAX + 32], log[8192], path[GF_PATH_MAX + 64];
    struct stat st;
    gf_error err;
    pid_t p0, p1;

    for (int i = 0; i < 2; i++) {
        assert_int_equal(gf_mps_ensure(&f->a, i, f->pipe[i], sizeof(f->pipe[i]), &err), 0);
        assert_true(f->a.gpus[i].mps_running);
        assert_true(strlen(f->pipe[i]) <= GF_MPS_PIPE_DIR_MAX);
        hook_path(f, i, "control", path, sizeof(path));
        assert_int_equal(stat(path, &st), 0);
        assert_true(S_ISSOCK(st.st_mode));
        hook_path(f, i, "log", path, sizeof(path));
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_mode & 0777, 0755);
    }
    snprintf(want, sizeof(want), "%s/mps/3f2a1b4c", f->a.state_dir);
    assert_string_equal(f->pipe[0], want);
    snprintf(want, sizeof(want), "%s/mps/9e8d7c6b", f->a.state_dir);
    assert_string_equal(f->pipe[1], want);
    p0 = read_pidfile(f, 0);
    p1 = read_pidfile(f, 1);
    assert_true(p0 > 0 && p1 > 0 && p0 != p1);

    /* idempotent: the second call finds the running daemon */
    assert_int_equal(gf_mps_ensure(&f->a, 0, pipe, sizeof(pipe), &err), 0);
    assert_string_equal(pipe, f->pipe[0]);
    assert_int_equal(read_pidfile(f, 0), p0);
    commands(f, 0, log, sizeof(log));
    assert_int_equal(count_lines(log, "start "), 1);
    assert_msg_has(log, "CUDA_VISIBLE_DEVICES=GPU-3F2a1b4c-1111-2222-3333-444455556666");
    commands(f, 1, log, sizeof(log));
    assert_int_equal(count_lines(log, "start "), 1);
}

static void test_ensure_found_without_flag_or_pidfile(void **state)
{
    fixture *f = *state;
    char pipe[GF_PATH_MAX], log[8192], path[GF_PATH_MAX + 64];
    gf_error err;

    assert_int_equal(gf_mps_ensure(&f->a, 0, pipe, sizeof(pipe), &err), 0);
    /* a restarted agent: no flag; pid file lost, socket answers get_server_list */
    f->a.gpus[0].mps_running = false;
    hook_path(f, 0, "nvidia-cuda-mps-control.pid", path, sizeof(path));
    assert_int_equal(unlink(path), 0);
    assert_int_equal(gf_mps_ensure(&f->a, 0, pipe, sizeof(pipe), &err), 0);
    assert_true(f->a.gpus[0].mps_running);
    commands(f, 0, log, sizeof(log));
    assert_int_equal(count_lines(log, "start "), 1);
    assert_int_equal(count_lines(log, "get_server_list"), 1);
}

static void test_ensure_via_path(void **state)
{
    fixture *f = *state;
    char pipe[GF_PATH_MAX], dir[GF_PATH_MAX], path_env[8192];
    const char *old = getenv("PATH");
    char *saved = old ? strdup(old) : NULL;
    gf_error err;

    snprintf(dir, sizeof(dir), "%s", f->fake);
    *strrchr(dir, '/') = '\0';
    snprintf(path_env, sizeof(path_env), "%s:%s", dir, old ? old : "/usr/bin:/bin");
    setenv("PATH", path_env, 1);
    f->a.mps_control[0] = '\0';
    assert_int_equal(gf_mps_ensure(&f->a, 1, pipe, sizeof(pipe), &err), 0);
    assert_true(read_pidfile(f, 1) > 0);
    if (saved) {
        setenv("PATH", saved, 1);
        free(saved);
    }
}

static void test_bad_uuid_and_long_state(void **state)
{
    fixture *f = *state;
    char pipe[GF_PATH_MAX];
    gf_error err;

    snprintf(f->a.gpus[1].dev.uuid, GF_UUID_MAX, "GPU-xyz");
    assert_int_equal(gf_mps_ensure(&f->a, 1, pipe, sizeof(pipe), &err), -1);
    assert_msg_has(err.msg, "GPU 1", "GPU-xyz", "8 hex");
    assert_int_equal(gf_mps_ensure(&f->a, 5, pipe, sizeof(pipe), &err), -1);
    assert_msg_has(err.msg, "no GPU 5");
    memset(f->a.state_dir + strlen(f->a.state_dir), 'x', 80);
    assert_int_equal(gf_mps_ensure(&f->a, 0, pipe, sizeof(pipe), &err), -1);
    assert_msg_has(err.msg, "GPU 0", "longer than 83");
    f->a.state_dir[strlen(f->a.state_dir) - 80] = '\0';
}

static void test_command_without_daemon(void **state)
{
    fixture *f = *state;
    char out[256];
    gf_error err;

    assert_int_equal(gf_mps_command(&f->a, 0, "get_server_list", out, sizeof(out), &err), -1);
    assert_msg_has(err.msg, "GPU 0", "get_server_list", "Cannot find MPS control daemon");
    snprintf(f->a.mps_control, sizeof(f->a.mps_control), "/nonexistent/mps-control");
    assert_int_equal(gf_mps_command(&f->a, 0, "get_server_list", out, sizeof(out), &err), -1);
    assert_msg_has(err.msg, "GPU 0", "get_server_list", "/nonexistent/mps-control");
}

static void test_terminate_exactly_given_clients(void **state)
{
    fixture *f = *state;
    char log[8192], text[128], want[96];
    pid_t c[3], srv;
    gf_error err;
    int status;

    assert_int_equal(gf_mps_ensure(&f->a, 0, f->pipe[0], sizeof(f->pipe[0]), &err), 0);
    for (int i = 0; i < 3; i++)
        c[i] = spawn_client();
    snprintf(text, sizeof(text), "%d %d %d\n", (int)c[0], (int)c[1], (int)c[2]);
    write_hook(f, 0, "clients", text);

    pid_t gone[2] = {c[0], c[2]};
    assert_int_equal(gf_mps_terminate_clients(&f->a, 0, gone, 2, &err), 0);
    assert_int_equal(waitpid(c[0], &status, 0), c[0]);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
    assert_int_equal(waitpid(c[2], &status, 0), c[2]);
    assert_true(alive(c[1]));

    commands(f, 0, log, sizeof(log));
    assert_int_equal(count_lines(log, "terminate_client "), 2);
    srv = 0;
    sscanf(strstr(log, "get_client_list ") + strlen("get_client_list "), "%d", &srv);
    assert_true(srv > 0);
    snprintf(want, sizeof(want), "terminate_client %d %d\n", (int)srv, (int)c[0]);
    assert_msg_has(log, want);
    snprintf(want, sizeof(want), "terminate_client %d %d\n", (int)srv, (int)c[2]);
    assert_msg_has(log, want);
    kill(c[1], SIGKILL);
    waitpid(c[1], &status, 0);

    /* a PID that is no MPS client: nothing sent */
    pid_t none[1] = {1};
    assert_int_equal(gf_mps_terminate_clients(&f->a, 0, none, 1, &err), 0);
    commands(f, 0, log, sizeof(log));
    assert_int_equal(count_lines(log, "terminate_client "), 2);
}

static void test_check_fault_restarts(void **state)
{
    fixture *f = *state;
    char log[8192], text[64], path[GF_PATH_MAX + 64];
    gf_error err;
    pid_t c, old;
    int status;

    assert_int_equal(gf_mps_ensure(&f->a, 0, f->pipe[0], sizeof(f->pipe[0]), &err), 0);
    old = read_pidfile(f, 0);
    assert_int_equal(gf_mps_check(&f->a, 0, &err), 0); /* healthy: nothing happens */
    assert_int_equal(f->a.gpus[0].mps_restarts, 0);
    c = spawn_client();
    snprintf(text, sizeof(text), "%d\n", (int)c);
    write_hook(f, 0, "clients", text);
    write_hook(f, 0, "fault", "");

    assert_int_equal(gf_mps_check(&f->a, 0, &err), 0);
    assert_int_equal(f->a.gpus[0].mps_restarts, 1);
    assert_true(f->a.gpus[0].mps_fault);
    assert_true(f->a.gpus[0].mps_running);
    assert_msg_has(events_last(), "GPU 0", "FAULT");
    assert_int_equal(waitpid(c, &status, 0), c); /* its client was terminated */
    assert_true(read_pidfile(f, 0) > 0 && read_pidfile(f, 0) != old);
    assert_false(alive(old));
    commands(f, 0, log, sizeof(log));
    assert_int_equal(count_lines(log, "start "), 2);
    assert_int_equal(count_lines(log, "quit"), 1);
    assert_true(strstr(log, "quit\n") < strstr(strstr(log, "start ") + 1, "start "));
    assert_int_equal(count_lines(log, "terminate_client "), 1);
    hook_path(f, 0, "fault", path, sizeof(path));
    assert_int_equal(access(path, F_OK), -1);

    /* next check: healthy again, the fault flag clears, no new restart */
    assert_int_equal(gf_mps_check(&f->a, 0, &err), 0);
    assert_false(f->a.gpus[0].mps_fault);
    assert_int_equal(f->a.gpus[0].mps_restarts, 1);
}

static void test_check_restarts_vanished_daemon(void **state)
{
    fixture *f = *state;
    char log[8192];
    gf_error err;
    pid_t old;

    assert_int_equal(gf_mps_ensure(&f->a, 1, f->pipe[1], sizeof(f->pipe[1]), &err), 0);
    old = read_pidfile(f, 1);
    assert_int_equal(kill(old, SIGKILL), 0);
    usleep(100 * 1000);
    assert_int_equal(gf_mps_check(&f->a, 1, &err), 0);
    assert_int_equal(f->a.gpus[1].mps_restarts, 1);
    assert_true(f->a.gpus[1].mps_running);
    assert_msg_has(events_last(), "GPU 1", "gone");
    assert_true(read_pidfile(f, 1) > 0 && read_pidfile(f, 1) != old);
    commands(f, 1, log, sizeof(log));
    assert_int_equal(count_lines(log, "start "), 2);
    /* a GPU never started is not checked */
    f->a.gpus[0].mps_running = false;
    assert_int_equal(gf_mps_check(&f->a, 0, &err), 0);
    assert_int_equal(read_pidfile(f, 0), 0);
}

static void test_stop_idle(void **state)
{
    fixture *f = *state;
    char log[8192], path[GF_PATH_MAX + 64];
    gf_error err;
    pid_t p0, p1;

    for (int i = 0; i < 2; i++)
        assert_int_equal(gf_mps_ensure(&f->a, i, f->pipe[i], sizeof(f->pipe[i]), &err), 0);
    p0 = read_pidfile(f, 0);
    p1 = read_pidfile(f, 1);
    f->a.gpus[0].n_fractions = 0;
    assert_int_equal(gf_mps_stop_idle(&f->a, &err), 0);
    assert_false(f->a.gpus[0].mps_running);
    assert_false(alive(p0));
    hook_path(f, 0, "control", path, sizeof(path));
    assert_int_equal(access(path, F_OK), -1);
    commands(f, 0, log, sizeof(log));
    assert_int_equal(count_lines(log, "quit"), 1);
    assert_true(f->a.gpus[1].mps_running);
    assert_true(alive(p1));
    commands(f, 1, log, sizeof(log));
    assert_int_equal(count_lines(log, "quit"), 0);

    /* a GPU whose fractions are time-slicing has no daemon either */
    f->a.gpus[1].mode = GF_MODE_TIME_SLICING;
    assert_int_equal(gf_mps_stop_idle(&f->a, &err), 0);
    assert_false(f->a.gpus[1].mps_running);
    assert_false(alive(p1));
    assert_int_equal(gf_mps_stop_idle(&f->a, &err), 0); /* nothing left: no-op */
}

static void test_wedged_daemon_times_out(void **state)
{
    fixture *f = *state;
    struct timespec t0;
    char out[256];
    gf_error err;
    double took;

    assert_int_equal(gf_mps_ensure(&f->a, 0, f->pipe[0], sizeof(f->pipe[0]), &err), 0);
    write_hook(f, 0, "hang", "");
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(gf_mps_command(&f->a, 0, "get_server_list", out, sizeof(out), &err), -1);
    took = seconds_since(&t0);
    assert_true(took >= GF_MPS_TIMEOUT_MS / 1000.0 - 0.1);
    assert_true(took < GF_MPS_TIMEOUT_MS / 1000.0 + 2.0);
    assert_msg_has(err.msg, "GPU 0", "get_server_list", "timed out", "not answering");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_ensure_one_daemon_per_gpu, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ensure_found_without_flag_or_pidfile, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ensure_via_path, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_uuid_and_long_state, setup, teardown),
        cmocka_unit_test_setup_teardown(test_command_without_daemon, setup, teardown),
        cmocka_unit_test_setup_teardown(test_terminate_exactly_given_clients, setup, teardown),
        cmocka_unit_test_setup_teardown(test_check_fault_restarts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_check_restarts_vanished_daemon, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stop_idle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wedged_daemon_times_out, setup, teardown),
    };
    return cmocka_run_group_tests_name("mps", tests, NULL, NULL);
}
