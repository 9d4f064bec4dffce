/* SPDX-License-Identifier: Apache-2.0 */
/* The shim's handle table (shim/table.h): every charge put is taken back
 * exactly once, through growth, deleted slots and threads racing on the same
 * stripes; set replaces, put keeps an older entry of the same key. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdlib.h>

#include "table.h"

static gf_table t;

static gf_entry entry(uint64_t key, uint64_t bytes)
{
    return (gf_entry){.key = key, .bytes = bytes, .ordinal = 1, .kind = 2, .aux = key ^ bytes};
}

/* gf_table_reset drops the memory (a fork child's copy may be mid-update):
 * between tests it is freed. */
static int reset(void **state)
{
    (void)state;
    for (int i = 0; i < GF_TABLE_STRIPES; i++)
        free(t.stripes[i].slots);
    gf_table_reset(&t);
    return 0;
}

/* device-pointer-like keys: 256-byte aligned, a megabyte and a bit apart */
static uint64_t ptr(uint64_t i)
{
    return 0x7f0000000000ULL + i * ((1ULL << 20) + 256);
}

static void every_charge_comes_back_once(void **state)
{
    gf_entry out = {0};
    (void)state;
    for (uint64_t i = 0; i < 1000; i++) { /* live the whole time: the stripes grow */
        gf_entry e = entry(ptr(i), i + 1);
        assert_true(gf_table_put(&t, &e));
    }
    for (uint64_t i = 1000; i < 200000; i++) { /* allocate, free */
        gf_entry e = entry(ptr(i), i + 1);
        assert_true(gf_table_put(&t, &e));
        assert_true(gf_table_take(&t, ptr(i), &out));
        assert_int_equal(out.bytes, i + 1);
        assert_int_equal(out.aux, ptr(i) ^ (i + 1));
        assert_false(gf_table_take(&t, ptr(i), &out));
    }
    for (uint64_t i = 0; i < 1000; i++) {
        assert_true(gf_table_get(&t, ptr(i), &out));
        assert_true(gf_table_take(&t, ptr(i), &out));
        assert_int_equal(out.bytes, i + 1);
        assert_int_equal(out.ordinal, 1);
        assert_int_equal(out.kind, 2);
    }
    assert_false(gf_table_take(&t, ptr(5), &out));
}

static void set_replaces_put_keeps_both(void **state)
{
    gf_entry out = {0}, a = entry(ptr(1), 10), b = entry(ptr(1), 20);
    (void)state;
    assert_true(gf_table_set(&t, &a));
    assert_true(gf_table_set(&t, &b));
    assert_true(gf_table_get(&t, ptr(1), &out));
    assert_int_equal(out.bytes, 20);
    assert_true(gf_table_take(&t, ptr(1), &out));
    assert_false(gf_table_take(&t, ptr(1), &out));

    /* an address the driver handed out again after freeing it unseen: the
     * older charge is not lost, each take returns one of them */
    assert_true(gf_table_put(&t, &a));
    assert_true(gf_table_put(&t, &b));
    assert_true(gf_table_take(&t, ptr(1), &out));
    uint64_t first = out.bytes;
    assert_true(gf_table_take(&t, ptr(1), &out));
    assert_int_equal(first + out.bytes, 30);
    assert_false(gf_table_take(&t, ptr(1), &out));
}

static void reserved_keys_are_mapped_away(void **state)
{
    gf_entry out = {0}, zero = entry(0, 7), one = entry(1, 8);
    (void)state;
    assert_true(gf_table_put(&t, &zero));
    assert_true(gf_table_put(&t, &one));
    assert_true(gf_table_take(&t, 1, &out));
    assert_int_equal(out.bytes, 8);
    assert_true(gf_table_take(&t, 0, &out));
    assert_int_equal(out.bytes, 7);
}

#define THREADS 8
#define PER_THREAD 50000

static void *racer(void *arg)
{
    uint64_t base = (uintptr_t)arg * PER_THREAD, bad = 0;
    gf_entry out = {0};
    for (uint64_t i = base; i < base + PER_THREAD; i++) {
        gf_entry e = entry(ptr(i % 4096 + 4096 * (uintptr_t)arg), i);
        if (!gf_table_put(&t, &e) || !gf_table_take(&t, e.key, &out) || out.bytes != i)
            bad++;
    }
    return (void *)(uintptr_t)bad;
}

static void count_entry(gf_entry *e, void *arg)
{
    (void)e;
    (*(int *)arg)++;
}

static void threads_on_shared_stripes_lose_nothing(void **state)
{
    pthread_t th[THREADS];
    int live = 0;
    (void)state;
    for (uintptr_t i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, racer, (void *)i), 0);
    for (int i = 0; i < THREADS; i++) {
        void *bad;
        pthread_join(th[i], &bad);
        assert_int_equal((uintptr_t)bad, 0);
    }
    gf_table_each(&t, count_entry, &live);
    assert_int_equal(live, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(every_charge_comes_back_once, reset),
        cmocka_unit_test_teardown(set_replaces_put_keeps_both, reset),
        cmocka_unit_test_teardown(reserved_keys_are_mapped_away, reset),
        cmocka_unit_test_teardown(threads_on_shared_stripes_lose_nothing, reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
