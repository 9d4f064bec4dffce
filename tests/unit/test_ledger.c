/* SPDX-License-Identifier: Apache-2.0 */
/* The shared ledger: admission never passes the limit, releases return,
 * dead processes' slots are reclaimed, fork gets its own slot. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ledger.h"

#define MiB (1024ULL * 1024ULL)

/* What the agent writes into a ledger for a loan of bytes to the process in
 * slot (numbered seq), and for its return (at most what the slot holds). */
static void lend(gf_ledger *lg, int slot, int dev, uint64_t bytes, uint64_t seq)
{
    gf_ledger_slot *s = &lg->hdr->slots[slot];
    atomic_fetch_add(&s->borrowed[dev], bytes);
    atomic_store(&s->loan_seq, seq);
    atomic_fetch_add_explicit(&lg->hdr->devices[dev].lent, bytes, memory_order_release);
}

static void unlend(gf_ledger *lg, int slot, int dev, uint64_t bytes)
{
    gf_ledger_slot *s = &lg->hdr->slots[slot];
    uint64_t had = atomic_load(&s->borrowed[dev]);
    if (bytes > had)
        bytes = had;
    atomic_fetch_sub(&s->borrowed[dev], bytes);
    atomic_fetch_sub_explicit(&lg->hdr->devices[dev].lent, bytes, memory_order_release);
}

typedef struct fixture {
    char dir[64];
    char path[128];
    gf_ledger lg;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    gf_error err;
    snprintf(f->dir, sizeof(f->dir), "/tmp/gf-ledger-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->path, sizeof(f->path), "%s/ledger", f->dir);
    assert_int_equal(gf_ledger_create(f->path, "unit", 0600, &err), 0);
    assert_int_equal(gf_ledger_open(f->path, &f->lg, &err), 0);
    assert_int_equal(gf_ledger_claim_slot(&f->lg, &err), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    gf_ledger_close(&f->lg);
    unlink(f->path);
    rmdir(f->dir);
    free(f);
    return 0;
}

static int device(fixture *f, uint64_t limit)
{
    gf_error err;
    int d = gf_ledger_device_index(&f->lg, "GPU-unit", limit, limit, &err);
    assert_true(d >= 0);
    return d;
}

static void test_reserve_until_limit(void **state)
{
    fixture *f = *state;
    int d = device(f, 100 * MiB);

    assert_true(gf_ledger_reserve(&f->lg, d, 60 * MiB, UINT64_MAX));
    assert_true(gf_ledger_reserve(&f->lg, d, 40 * MiB, UINT64_MAX));
    assert_false(gf_ledger_reserve(&f->lg, d, 1, UINT64_MAX));
    assert_int_equal(f->lg.hdr->devices[d].used, 100 * MiB);
    gf_ledger_release(&f->lg, d, 40 * MiB);
    assert_true(gf_ledger_reserve(&f->lg, d, 40 * MiB, UINT64_MAX));
    assert_int_equal(f->lg.hdr->devices[d].peak, 100 * MiB);
    gf_ledger_release(&f->lg, d, 100 * MiB);
    assert_int_equal(f->lg.hdr->devices[d].used, 0);
    assert_int_equal(f->lg.hdr->slots[f->lg.slot].used[d], 0);
}

static void test_lower_limit_and_overflow(void **state)
{
    fixture *f = *state;
    int d = device(f, 100 * MiB);

    assert_false(gf_ledger_reserve(&f->lg, d, 60 * MiB, 50 * MiB)); /* caller's lower limit */
    assert_true(gf_ledger_reserve(&f->lg, d, 50 * MiB, 50 * MiB));
    assert_false(gf_ledger_reserve(&f->lg, d, UINT64_MAX, UINT64_MAX)); /* no wrap-around */
    assert_false(gf_ledger_reserve(&f->lg, d, UINT64_MAX - 10 * MiB, UINT64_MAX));
    assert_int_equal(f->lg.hdr->devices[d].used, 50 * MiB);
}

static void test_same_uuid_same_device(void **state)
{
    fixture *f = *state;
    gf_error err;
    int a = gf_ledger_device_index(&f->lg, "GPU-a", 1, 1, &err);
    int b = gf_ledger_device_index(&f->lg, "GPU-b", 1, 1, &err);
    assert_int_not_equal(a, b);
    assert_int_equal(gf_ledger_device_index(&f->lg, "GPU-a", 5, 5, &err), a);
    assert_int_equal(f->lg.hdr->devices[a].limit, 1); /* first writer's limits stay */
}

static void test_device_table_full(void **state)
{
    fixture *f = *state;
    gf_error err;
    char uuid[32];
    for (int i = 0; i < GF_LEDGER_DEVICES; i++) {
        snprintf(uuid, sizeof(uuid), "GPU-%d", i);
        assert_true(gf_ledger_device_index(&f->lg, uuid, 1, 1, &err) >= 0);
    }
    assert_int_equal(gf_ledger_device_index(&f->lg, "GPU-extra", 1, 1, &err), -1);
    assert_non_null(strstr(err.msg, "GPU-extra"));
}

/* Forks a child that runs body on device d (nonzero: it exits 1), reports
 * in and waits to be killed; returns its pid once it has reported. */
static pid_t child_holding(fixture *f, int d, int (*body)(fixture *f, int d))
{
    int pipefd[2];
    char c;
    assert_int_equal(pipe(pipefd), 0);
    pid_t pid = fork();
    if (pid == 0) {
        if (body(f, d) != 0 || write(pipefd[1], "x", 1) != 1)
            _exit(1);
        pause();
        _exit(0);
    }
    assert_int_equal(read(pipefd[0], &c, 1), 1);
    close(pipefd[0]);
    close(pipefd[1]);
    return pid;
}

static void kill_child(pid_t pid)
{
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

/* child body: its own slot, 70 MiB reserved */
static int reserve_70(fixture *f, int d)
{
    gf_ledger child;
    gf_error err;
    return gf_ledger_open(f->path, &child, &err) || gf_ledger_claim_slot(&child, &err) ||
           !gf_ledger_reserve(&child, d, 70 * MiB, UINT64_MAX);
}

/* A child claims a slot, reserves, and dies without releasing. */
static void test_dead_process_reclaimed(void **state)
{
    fixture *f = *state;
    int d = device(f, 100 * MiB);
    pid_t pid = child_holding(f, d, reserve_70);
    assert_int_equal(f->lg.hdr->devices[d].used, 70 * MiB);
    assert_false(gf_ledger_reserve(&f->lg, d, 40 * MiB, UINT64_MAX));
    assert_int_equal(gf_ledger_reclaim_dead(&f->lg), 0); /* still alive: untouched */
    kill_child(pid);
    assert_int_equal(gf_ledger_reclaim_dead(&f->lg), 1);
    assert_int_equal(f->lg.hdr->devices[d].used, 0);
    assert_int_equal(f->lg.hdr->devices[d].reclaimed, 70 * MiB);
    assert_true(gf_ledger_reserve(&f->lg, d, 100 * MiB, UINT64_MAX));
}

static void test_slot_liveness_seen_from_outside(void **state)
{
    fixture *f = *state;
    gf_ledger observer;
    gf_error err;
    assert_int_equal(gf_ledger_open(f->path, &observer, &err), 0);
    assert_true(gf_ledger_slot_live(&observer, f->lg.slot));
    assert_false(gf_ledger_slot_live(&observer, (f->lg.slot + 1) % GF_LEDGER_SLOTS));
    gf_ledger_close(&observer);
}

static void test_fork_gets_its_own_slot(void **state)
{
    fixture *f = *state;
    int d = device(f, 100 * MiB);
    int parent_slot = f->lg.slot;
    assert_true(gf_ledger_reserve(&f->lg, d, 10 * MiB, UINT64_MAX));
    pid_t pid = fork();
    if (pid == 0) {
        gf_error err;
        if (gf_ledger_after_fork(&f->lg, f->path, &err) < 0 || f->lg.slot == parent_slot ||
            !gf_ledger_reserve(&f->lg, d, 5 * MiB, UINT64_MAX))
            _exit(1);
        _exit(0); /* dies holding 5 MiB */
    }
    int st;
    waitpid(pid, &st, 0);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_true(gf_ledger_slot_live(&f->lg, parent_slot)); /* parent's lock survived */
    assert_int_equal(gf_ledger_reclaim_dead(&f->lg), 1);
    assert_int_equal(f->lg.hdr->devices[d].used, 10 * MiB);
}

static void test_rejects_foreign_file(void **state)
{
    fixture *f = *state;
    char other[160];
    gf_ledger lg;
    gf_error err;
    snprintf(other, sizeof(other), "%s/junk", f->dir);
    int fd = open(other, O_CREAT | O_WRONLY, 0600);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, sizeof(gf_ledger_header)), 0);
    close(fd);
    assert_int_equal(gf_ledger_open(other, &lg, &err), -1);
    assert_non_null(strstr(err.msg, "not a gpufrac ledger"));
    assert_int_equal(truncate(other, 100), 0);
    assert_int_equal(gf_ledger_open(other, &lg, &err), -1);
    assert_non_null(strstr(err.msg, "truncated"));
    unlink(other);
}

typedef struct race_arg {
    gf_ledger *lg;
    int dev;
    uint64_t over;
} race_arg;

static void *racer(void *p)
{
    race_arg *a = p;
    for (int i = 0; i < 20000; i++) {
        if (gf_ledger_reserve(a->lg, a->dev, 7 * MiB, UINT64_MAX)) {
            uint64_t now = atomic_load(&a->lg->hdr->devices[a->dev].used);
            if (now > 100 * MiB)
                a->over++;
            gf_ledger_release(a->lg, a->dev, 7 * MiB);
        }
    }
    return NULL;
}

static void test_threads_never_pass_limit(void **state)
{
    fixture *f = *state;
    int d = device(f, 100 * MiB);
    pthread_t t[8];
    race_arg a[8];
    for (int i = 0; i < 8; i++) {
        a[i] = (race_arg){&f->lg, d, 0};
        pthread_create(&t[i], NULL, racer, &a[i]);
    }
    for (int i = 0; i < 8; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(a[i].over, 0);
    }
    assert_true(f->lg.hdr->devices[d].peak <= 100 * MiB);
    assert_int_equal(f->lg.hdr->devices[d].used, 0);
}

static void test_burst_cap_and_loans(void **state)
{
    fixture *f = *state;
    gf_error err;
    int d = gf_ledger_device_index(&f->lg, "GPU-burst", 40 * MiB, 100 * MiB, &err);
    assert_true(d >= 0);
    assert_int_equal(gf_ledger_burst_cap(&f->lg, d, 100 * MiB), 40 * MiB);
    lend(&f->lg, f->lg.slot, d, 30 * MiB, 7);
    assert_int_equal(gf_ledger_burst_cap(&f->lg, d, 100 * MiB), 70 * MiB);
    lend(&f->lg, f->lg.slot, d, 90 * MiB, 8);
    assert_int_equal(gf_ledger_burst_cap(&f->lg, d, 100 * MiB), 100 * MiB); /* never above */
    assert_int_equal(f->lg.hdr->slots[f->lg.slot].loan_seq, 8);
    unlend(&f->lg, f->lg.slot, d, 500 * MiB); /* at most what it holds */
    assert_int_equal(f->lg.hdr->devices[d].lent, 0);
    assert_int_equal(f->lg.hdr->slots[f->lg.slot].borrowed[d], 0);
}

/* child body: its own slot, lent 50 MiB, 80 MiB reserved under the burst cap */
static int borrow_80(fixture *f, int d)
{
    gf_ledger child;
    gf_error err;
    if (gf_ledger_open(f->path, &child, &err) || gf_ledger_claim_slot(&child, &err))
        return 1;
    lend(&child, child.slot, d, 50 * MiB, 1);
    return !gf_ledger_reserve(&child, d, 80 * MiB, gf_ledger_burst_cap(&child, d, 100 * MiB));
}

/* A borrower that dies gives its loan back with its memory. */
static void test_dead_borrower_returns_loan(void **state)
{
    fixture *f = *state;
    gf_error err;
    int d = gf_ledger_device_index(&f->lg, "GPU-burst", 40 * MiB, 100 * MiB, &err);
    pid_t pid = child_holding(f, d, borrow_80);
    assert_int_equal(f->lg.hdr->devices[d].lent, 50 * MiB);
    kill_child(pid);
    assert_int_equal(gf_ledger_reclaim_dead(&f->lg), 1);
    assert_int_equal(f->lg.hdr->devices[d].lent, 0);
    assert_int_equal(f->lg.hdr->devices[d].used, 0);
    assert_true(gf_ledger_slot_high(&f->lg) >= 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_reserve_until_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lower_limit_and_overflow, setup, teardown),
        cmocka_unit_test_setup_teardown(test_same_uuid_same_device, setup, teardown),
        cmocka_unit_test_setup_teardown(test_device_table_full, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dead_process_reclaimed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_slot_liveness_seen_from_outside, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fork_gets_its_own_slot, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rejects_foreign_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_threads_never_pass_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_burst_cap_and_loans, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dead_borrower_returns_loan, setup, teardown),
    };
    return cmocka_run_group_tests_name("ledger", tests, NULL, NULL);
}
