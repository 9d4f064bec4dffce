#include <getopt.h>
#include <stdarg.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "amount.h"
#include "cli.h"
#include "demo.h"
#include "install_paths.h"
#include "fraction.h"
#include "gpus.h"
#include "quantity.h"

#define SIM_SIZE "16Gi"
#define CHUNK "256Mi"
#define CHUNK_HUMAN "256 MiB"

static const char demo_help[] =
    "Usage: gpufrac demo [--simulated]\n"
    "\n"
    "Runs a small CUDA program (gpufrac-probe) first on its own, then in two\n"
    "fractions (--memory 6Gi and --memory 0.25), and shows what it sees and how\n"
    "much it can allocate. Without an NVIDIA GPU it uses gpusim, a simulated 16 GiB\n"
    "GPU; on a real GPU the 6Gi is scaled to the GPU's size.\n"
    "\n"
    "Flags:\n"
    "  --simulated   use the simulated GPU even when a real one is present\n"
    "  -h, --help    show this help\n"
    "\n"
    "Exit status: 0 when both fractions behaved as expected, 1 otherwise.\n";

typedef struct demo {
    bool simulated;
    char why_sim[GF_ERROR_MSG_MAX];
    char exe_dir[PATH_MAX], self[PATH_MAX + 16], probe[PATH_MAX + 16];
    char tmp[64], state[96];
    char uuid[GF_UUID_MAX]; /* the real GPU used; "" on gpusim */
    uint64_t total;
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
        snprintf(d->why_sim, sizeof(d->why_sim), "no NVIDIA GPU was found on this machine");
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

static void print_view(const demo_output *o)
{
    uint64_t free_b = 0, total = 0, dev = 0, used = 0;
    char a[32], b[32];

    if (demo_get_u64(o, "cuda_total", &total) && demo_get_u64(o, "cuda_free", &free_b)) {
        gib(free_b, a, sizeof(a));
        gib(total, b, sizeof(b));
        printf("  cuMemGetInfo         %s free of %s\n", a, b);
    }
    if (demo_get_u64(o, "cuda_device_total", &dev)) {
        gib(dev, a, sizeof(a));
        printf("  cuDeviceTotalMem     %s\n", a);
    }
    if (demo_get_u64(o, "nvml_total", &total) && demo_get_u64(o, "nvml_used", &used)) {
        gib(total, a, sizeof(a));
        gib(used, b, sizeof(b));
        printf("  NVML memory info     %s total, %s used\n", a, b);
    } else if (demo_get(o, "nvml_error")) {
        printf("  NVML memory info     not available (%s)\n", demo_get(o, "nvml_error"));
    }
}

static int baseline(demo *d, gf_error *err)
{
    const char *argv[] = {d->probe, "info", NULL};
    demo_output o;
    char a[32];

    if (demo_spawn(argv, &o, err) < 0)
        return -1;
    if (o.exit_code != 0)
        return gf_error_set(err, GF_ESTATE, "gpufrac-probe could not use the GPU (exit %d)",
                            o.exit_code);
    if (!demo_get_u64(&o, "nvml_total", &d->total) &&
        !demo_get_u64(&o, "cuda_device_total", &d->total))
        return gf_error_set(err, GF_ESTATE, "gpufrac-probe reported no memory size");
    gib(d->total, a, sizeof(a));
    printf("Without gpufrac, a CUDA program sees the whole GPU (%s):\n", a);
    print_view(&o);
    printf("\n");
    return 0;
}

static void __attribute__((format(printf, 2, 3))) problem(workload *w, const char *fmt, ...)
{
    size_t off = strlen(w->problem);
    va_list ap;

    if (off)
        return; /* the first one tells the story */
    va_start(ap, fmt);
    vsnprintf(w->problem, sizeof(w->problem), fmt, ap);
    va_end(ap);
}

/* It must see its limit as the device size, get all it was told is free
 * (to within one block), and be refused with OUT_OF_MEMORY past that. */
static void judge(workload *w)
{
    const demo_output *o = &w->out;
    const char *fill_error = demo_get(o, "fill_error");
    uint64_t v = 0, free_b = 0, filled = 0, chunk = 0;
    char want[32], got[32];

    gib(w->limit, want, sizeof(want));
    if (!demo_get(o, "cuda_total") && o->exit_code != 0)
        problem(w, "gpufrac run failed (exit %d) before the probe reported anything",
                o->exit_code);
    if (!demo_get_u64(o, "cuda_total", &v) || v != w->limit)
        problem(w, "cuMemGetInfo reports a total of %s, expected %s", (gib(v, got, 32), got), want);
    if (!demo_get_u64(o, "cuda_device_total", &v) || v != w->limit)
        problem(w, "cuDeviceTotalMem reports %s, expected %s", (gib(v, got, 32), got), want);
    if (demo_get_u64(o, "nvml_total", &v) && v != w->limit)
        problem(w, "NVML reports a total of %s, expected %s", (gib(v, got, 32), got), want);
    demo_get_u64(o, "cuda_free", &free_b);
    demo_get_u64(o, "fill_chunk", &chunk);
    if (!demo_get_u64(o, "fill_total", &filled))
        problem(w, "the probe did not report its allocations");
    else if (filled > w->limit)
        problem(w, "it allocated %s, more than its share of %s", (gib(filled, got, 32), got), want);
    else if (filled + chunk <= free_b)
        problem(w, "it could allocate only %s of its %s", (gib(filled, got, 32), got), want);
    if (!fill_error || strcmp(fill_error, "CUDA_ERROR_OUT_OF_MEMORY") != 0)
        problem(w, "the last allocation ended with %s, expected CUDA_ERROR_OUT_OF_MEMORY",
                fill_error ? fill_error : "nothing");
    if (w->out.exit_code != 0)
        problem(w, "gpufrac run exited with %d", w->out.exit_code);
}

static void print_fill(const workload *w)
{
    uint64_t blocks = 0, filled = 0;
    const char *e = demo_get(&w->out, "fill_error");
    char a[32];

    if (!demo_get_u64(&w->out, "fill_blocks", &blocks) ||
        !demo_get_u64(&w->out, "fill_total", &filled))
        return;
    gib(filled, a, sizeof(a));
    printf("  allocating " CHUNK_HUMAN " blocks: %llu succeeded (%s), the next one failed with %s\n",
           (unsigned long long)blocks, a, e ? e : "?");
}

static int run_workload(demo *d, workload *w, gf_error *err)
{
    char name[32], lim[32];
    const char *argv[20];
    int n = 0;

    snprintf(name, sizeof(name), "demo-%s", w->label);
    argv[n++] = d->self;
    argv[n++] = "run";
    argv[n++] = "--memory";
    argv[n++] = w->memory;
    argv[n++] = "--name";
    argv[n++] = name;
    argv[n++] = "--state-dir";
    argv[n++] = d->state;
    if (d->uuid[0]) {
        argv[n++] = "--devices";
        argv[n++] = d->uuid;
    }
    argv[n++] = "--";
    argv[n++] = d->probe;
    argv[n++] = "info";
    argv[n++] = "fill";
    argv[n++] = CHUNK;
    argv[n] = NULL;
    gib(w->limit, lim, sizeof(lim));
    printf("Workload %s: gpufrac run --memory %s -- gpufrac-probe info fill " CHUNK "\n",
           w->label, w->memory);
    printf("  its share            %s\n", lim);
    if (demo_spawn(argv, &w->out, err) < 0)
        return -1;
    print_view(&w->out);
    print_fill(w);
    judge(w);
    printf("  => %s\n\n", w->problem[0] ? w->problem : "as expected");
    return 0;
}

static int expected_limit(const demo *d, workload *w, gf_error *err)
{
    gf_amount a;
    return gf_amount_parse(w->memory, "--memory", &a, err) < 0 ||
                   gf_amount_resolve(&a, d->total, "--memory", &w->limit, err) < 0
               ? -1
               : 0;
}

static void summary(const workload *w, size_t n)
{
    char lim[32];

    printf("Summary\n");
    for (size_t i = 0; i < n; i++) {
        gib(w[i].limit, lim, sizeof(lim));
        printf("  %s  workload %s (--memory %s = %s): %s\n", w[i].problem[0] ? "FAIL" : "PASS",
               w[i].label, w[i].memory, lim,
               w[i].problem[0] ? w[i].problem
                               : "saw only its share, could allocate it, and not a byte more");
    }
}

static void headline(const demo *d)
{
    char a[32];

    if (d->simulated)
        printf("gpufrac demo on gpusim, a simulated GPU with 16 GiB (%s).\n", d->why_sim);
    else
        printf("gpufrac demo on GPU %s (%s).\n", d->uuid, (gib(d->total, a, sizeof(a)), a));
    printf("Each step runs gpufrac-probe, a small CUDA program that prints what CUDA and\n"
           "NVML tell it, then allocates " CHUNK_HUMAN " blocks until the driver refuses one.\n\n");
}

static int demo_run(demo *d, gf_error *err)
{
    workload w[2] = {{.label = "A", .memory = "6Gi"}, {.label = "B", .memory = "0.25"}};
    bool ok = true;

    headline(d);
    if (baseline(d, err) < 0)
        return -1;
    if (!d->simulated) /* 6 GiB of 16, scaled to this GPU */
        gf_quantity_format(d->total / 16 * 6 / GF_MIB * GF_MIB, w[0].memory,
                           sizeof(w[0].memory));
    for (size_t i = 0; i < 2; i++) {
        if (expected_limit(d, &w[i], err) < 0 || run_workload(d, &w[i], err) < 0)
            return -1;
        ok = ok && !w[i].problem[0];
    }
    summary(w, 2);
    return ok ? 0 : 1;
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
        (rc = demo_run(&d, &err)) < 0)
        rc = gf_cli_fail("demo", GF_EXIT_FAIL, &err);
    gf_rm_tree(d.tmp);
    return rc;
}
