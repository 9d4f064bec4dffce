/* SPDX-License-Identifier: Apache-2.0 */
#include "unit.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "config.h"

static const char sample[] = "# gpufrac fraction config\n"
                             "version=1\n"
                             "name=demo-a\n"
                             "ledger=/run/gpufrac/fractions/demo-a/ledger\n"
                             "mode=sm-sharing\n"
                             "compute_percent=25\n"
                             "device=GPU-6b7f,6442450944,8589934592\n"
                             "device=*,1048576,1048576\n";

static gf_fraction_config parse_ok(const char *text)
{
    gf_fraction_config cfg;
    gf_error err;

    if (gf_config_parse(text, strlen(text), &cfg, &err) < 0)
        fail_msg("refused: %s\n%s", err.msg, text);
    return cfg;
}

static const char *parse_bad(const char *text, gf_error *err)
{
    gf_fraction_config cfg;

    if (gf_config_parse(text, strlen(text), &cfg, err) == 0)
        fail_msg("accepted:\n%s", text);
    return err->msg;
}

static void test_parse(void **state)
{
    gf_fraction_config cfg = parse_ok(sample);

    (void)state;
    assert_int_equal(cfg.version, 1);
    assert_string_equal(cfg.name, "demo-a");
    assert_string_equal(cfg.ledger, "/run/gpufrac/fractions/demo-a/ledger");
    assert_int_equal(cfg.mode, GF_MODE_SM_SHARING);
    assert_int_equal(cfg.compute_percent, 25);
    assert_int_equal(cfg.n_devices, 2);
    assert_string_equal(cfg.devices[0].uuid, "GPU-6b7f");
    assert_int_equal(cfg.devices[0].request, 6442450944ULL);
    assert_int_equal(cfg.devices[0].limit, 8589934592ULL);
    assert_string_equal(cfg.devices[1].uuid, "*");
}

static void test_defaults_and_blank_lines(void **state)
{
    gf_fraction_config cfg = parse_ok("\n# c\nversion=1\n\nname=x\nledger=/l\n"
                                      "device=*,1,1");

    (void)state;
    assert_int_equal(cfg.mode, GF_MODE_TIME_SLICING);
    assert_int_equal(cfg.compute_percent, 100);
    assert_int_equal(cfg.n_devices, 1);
}

static void test_round_trip(void **state)
{
    gf_fraction_config a = parse_ok(sample), b;
    char buf[GF_CONFIG_TEXT_MAX], buf2[GF_CONFIG_TEXT_MAX];
    gf_error err;
    int n;
    size_t i;

    (void)state;
    n = gf_config_format(&a, buf, sizeof(buf));
    assert_true(n > 0);
    assert_int_equal((size_t)n, strlen(buf));
    assert_int_equal(gf_config_parse(buf, (size_t)n, &b, &err), 0);
    assert_int_equal(gf_config_format(&b, buf2, sizeof(buf2)), n);
    assert_string_equal(buf, buf2);
    assert_string_equal(buf, sample);
    assert_int_equal(gf_config_format(&a, buf, (size_t)n), -1);
    assert_int_equal(gf_config_format(&a, buf, 10), -1);

    /* the most a config can hold */
    memset(&a, 0, sizeof(a));
    a.version = 1;
    memset(a.name, 'n', GF_NAME_MAX - 1);
    a.ledger[0] = '/';
    memset(a.ledger + 1, 'p', GF_PATH_MAX - 2);
    a.compute_percent = 1;
    a.n_devices = GF_CONFIG_DEVICES_MAX;
    for (i = 0; i < GF_CONFIG_DEVICES_MAX; i++) {
        memset(a.devices[i].uuid, 'u', GF_UUID_MAX - 1);
        a.devices[i].uuid[0] = (char)('a' + i);
        a.devices[i].request = INT64_MAX;
        a.devices[i].limit = INT64_MAX;
    }
    n = gf_config_format(&a, buf, sizeof(buf));
    assert_true(n > 0);
    assert_int_equal(gf_config_parse(buf, (size_t)n, &b, &err), 0);
    assert_memory_equal(&a, &b, sizeof(a));
}

static void test_not_nul_terminated(void **state)
{
    char text[] = "version=1\nname=x\nledger=/l\ndevice=*,1,2XXXX";
    gf_fraction_config cfg;
    gf_error err;
    char *heap;
    size_t len = strlen(text) - 4;

    (void)state;
    /* exactly len bytes on the heap: ASan catches any read past them */
    heap = malloc(len);
    assert_non_null(heap);
    memcpy(heap, text, len);
    assert_int_equal(gf_config_parse(heap, len, &cfg, &err), 0);
    assert_int_equal(cfg.devices[0].limit, 2);
    assert_int_equal(gf_config_parse(heap, len - 1, &cfg, &err), -1);
    free(heap);
}

static void test_errors(void **state)
{
    static const struct {
        const char *text;
        const char *frags[3];
    } cases[] = {
        {"version=1\nname=x\nledger=/l\ndevice=*,1,1\ncolour=red\n",
         {"line 5", "colour", "expected"}},
        {"version=1\nname=x\nname=y\nledger=/l\ndevice=*,1,1\n", {"line 3", "duplicate", "name"}},
        {"name=x\nledger=/l\ndevice=*,1,1\n", {"missing", "version", ""}},
        {"version=1\nledger=/l\ndevice=*,1,1\n", {"missing", "name", ""}},
        {"version=1\nname=x\ndevice=*,1,1\n", {"missing", "ledger", ""}},
        {"version=1\nname=x\nledger=/l\n", {"missing", "device", ""}},
        {"version=2\nname=x\nledger=/l\ndevice=*,1,1\n", {"line 1", "version", "\"2\""}},
        {"version=one\nname=x\nledger=/l\ndevice=*,1,1\n", {"line 1", "version", "one"}},
        {"version=1\nname=x\nledger=rel/l\ndevice=*,1,1\n", {"line 3", "ledger", "absolute"}},
        {"version=1\nname=a/b\nledger=/l\ndevice=*,1,1\n", {"line 2", "name", "a/b"}},
        {"version=1\nname=..\nledger=/l\ndevice=*,1,1\n", {"line 2", "name", "\"..\""}},
        {"version=1\nname=x\nledger=/l\nmode=mps\ndevice=*,1,1\n", {"line 4", "mode", "mps"}},
        {"version=1\nname=x\nledger=/l\ncompute_percent=0\ndevice=*,1,1\n",
         {"line 4", "compute_percent", "1 to 100"}},
        {"version=1\nname=x\nledger=/l\ncompute_percent=101\ndevice=*,1,1\n",
         {"line 4", "compute_percent", "101"}},
        {"version=1\nname=x\nledger=/l\ndevice=*,2,1\n", {"line 4", "device", "limit is smaller"}},
        {"version=1\nname=x\nledger=/l\ndevice=*,0,1\n", {"line 4", "device", "request is 0"}},
        {"version=1\nname=x\nledger=/l\ndevice=*,1\n", {"line 4", "device", "<uuid"}},
        {"version=1\nname=x\nledger=/l\ndevice=*,1,x\n", {"line 4", "device", "*,1,x"}},
        {"version=1\nname=x\nledger=/l\ndevice=*,-1,1\n", {"line 4", "device", "-1"}},
        {"version=1\nname=x\nledger=/l\ndevice=*,1,9223372036854775808\n",
         {"line 4", "device", ""}},
        {"version=1\nname=x\nledger=/l\ndevice=,1,1\n", {"line 4", "device", ""}},
        {"version=1\nname=x\nledger=/l\ndevice=G 1,1,1\n", {"line 4", "device", ""}},
        {"version=1\nname=x\nledger=/l\ndevice=G,1,1\ndevice=G,1,1\n",
         {"line 5", "duplicate", "G"}},
        {"version=1\nname=x\nledger=/l\ndevice=*,1,1\nnot a pair\n", {"line 5", "key=value", ""}},
        {"version=1\r\nname=x\nledger=/l\ndevice=*,1,1\n", {"line 1", "control", ""}},
        {"version= 1\nname=x\nledger=/l\ndevice=*,1,1\n", {"line 1", "version", ""}},
        {" version=1\nname=x\nledger=/l\ndevice=*,1,1\n", {"line 1", "unknown key", ""}},
    };
    gf_error err;
    size_t i, j;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        parse_bad(cases[i].text, &err);
        for (j = 0; j < 3; j++)
            assert_msg_has(err.msg, cases[i].frags[j]);
    }
}

static void test_too_many_devices(void **state)
{
    char text[4096];
    size_t used;
    gf_error err;
    int i;

    (void)state;
    used = (size_t)snprintf(text, sizeof(text), "version=1\nname=x\nledger=/l\n");
    for (i = 0; i <= GF_CONFIG_DEVICES_MAX; i++)
        used += (size_t)snprintf(text + used, sizeof(text) - used, "device=GPU-%d,1,1\n", i);
    assert_msg_has(parse_bad(text, &err), "line 20", "device", "more than 16");
}

static void test_nul_byte(void **state)
{
    static const char text[] = "version=1\nname=x\0y\nledger=/l\ndevice=*,1,1\n";
    gf_fraction_config cfg;
    gf_error err;

    (void)state;
    assert_int_equal(gf_config_parse(text, sizeof(text) - 1, &cfg, &err), -1);
    assert_msg_has(err.msg, "line 2");
}

static void test_find_device(void **state)
{
    gf_fraction_config cfg = parse_ok(sample);

    (void)state;
    assert_ptr_equal(gf_config_find_device(&cfg, "GPU-6b7f"), &cfg.devices[0]);
    assert_ptr_equal(gf_config_find_device(&cfg, "GPU-other"), &cfg.devices[1]);
    assert_ptr_equal(gf_config_find_device(&cfg, NULL), &cfg.devices[1]);
    cfg.n_devices = 1;
    assert_null(gf_config_find_device(&cfg, "GPU-other"));
}

static void test_name_valid(void **state)
{
    char longname[80];

    (void)state;
    assert_true(gf_name_valid("demo-a"));
    assert_true(gf_name_valid("A_b.9"));
    assert_false(gf_name_valid(""));
    assert_false(gf_name_valid(NULL));
    assert_false(gf_name_valid("."));
    assert_false(gf_name_valid(".."));
    assert_false(gf_name_valid("a/b"));
    assert_false(gf_name_valid("a b"));
    memset(longname, 'a', 63);
    longname[63] = '\0';
    assert_true(gf_name_valid(longname));
    longname[63] = 'a';
    longname[64] = '\0';
    assert_false(gf_name_valid(longname));
}

static void test_load(void **state)
{
    char path[] = "/tmp/gf-test-config-XXXXXX";
    gf_fraction_config cfg;
    gf_error err;
    char big[GF_CONFIG_TEXT_MAX + 10];
    int fd;

    (void)state;
    fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, sample, strlen(sample)), (ssize_t)strlen(sample));
    assert_int_equal(gf_config_load(path, &cfg, &err), 0);
    assert_string_equal(cfg.name, "demo-a");

    memset(big, '#', sizeof(big));
    assert_int_equal(ftruncate(fd, 0), 0);
    assert_int_equal(pwrite(fd, big, sizeof(big), 0), (ssize_t)sizeof(big));
    assert_int_equal(gf_config_load(path, &cfg, &err), -1);
    assert_msg_has(err.msg, path, "larger than");

    assert_int_equal(ftruncate(fd, 0), 0);
    assert_int_equal(pwrite(fd, "version=3\n", 10, 0), 10);
    assert_int_equal(gf_config_load(path, &cfg, &err), -1);
    assert_msg_has(err.msg, path, "line 1", "version");
    close(fd);
    unlink(path);

    assert_int_equal(gf_config_load(path, &cfg, &err), -1);
    assert_int_equal(err.code, GF_ESYS);
    assert_msg_has(err.msg, path, "No such file");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),      cmocka_unit_test(test_defaults_and_blank_lines),
        cmocka_unit_test(test_round_trip), cmocka_unit_test(test_not_nul_terminated),
        cmocka_unit_test(test_errors),     cmocka_unit_test(test_too_many_devices),
        cmocka_unit_test(test_nul_byte),   cmocka_unit_test(test_find_device),
        cmocka_unit_test(test_name_valid), cmocka_unit_test(test_load),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
