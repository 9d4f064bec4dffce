/* SPDX-License-Identifier: Apache-2.0 */
/* gpufrac-probe: what a CUDA program sees, one key=value per line.
 *
 *   gpufrac-probe [--device N] [--hold SECONDS] STEP...
 *     info          cuMemGetInfo, cuDeviceTotalMem and NVML memory figures
 *     alloc SIZE... cuMemAlloc_v2 each size, keeping them ("alloc 1Gi ok")
 *     fill CHUNK    allocate CHUNK blocks until one fails
 *     hold SECONDS  sleep here, holding what was allocated
 *
 * Exit: 0, 3 when an alloc step failed, 1 when CUDA could not be used,
 * 2 for a bad command line. Everything allocated is freed at the end. */
#include <getopt.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "probe.h"
#include "quantity.h"

enum { EXIT_ALLOC_FAILED = 3, FILL_MAX_BLOCKS = 1 << 20 };

typedef struct probe {
    probe_cuda cu;
    CUdevice dev;
    int device;
    CUdeviceptr *ptrs;
    size_t n_ptrs, cap;
    bool alloc_failed;
} probe;

static int __attribute__((format(printf, 1, 2))) usage(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "gpufrac-probe: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nusage: gpufrac-probe [--device N] [--hold SECONDS] "
                    "{info | alloc SIZE... | fill CHUNK | hold SECONDS}...\n");
    return 2;
}

static int keep(probe *p, CUdeviceptr ptr)
{
    if (p->n_ptrs == p->cap) {
        size_t ncap = p->cap ? p->cap * 2 : 64;
        CUdeviceptr *n = realloc(p->ptrs, ncap * sizeof(*n));
        if (!n) {
            p->cu.free(ptr);
            return -1;
        }
        p->ptrs = n;
        p->cap = ncap;
    }
    p->ptrs[p->n_ptrs++] = ptr;
    return 0;
}

static void print_nvml(const probe *p)
{
    char uuid[64];
    probe_nvml nv;
    nvmlDevice_t h;
    nvmlMemory_t m;
    const char *why;
    nvmlReturn_t r;

    if (probe_nvml_open(&nv, &why) < 0) {
        printf("nvml_error=%s\n", why);
        return;
    }
    /* NVML ignores CUDA_VISIBLE_DEVICES: find our device by UUID */
    probe_cuda_uuid(&p->cu, p->dev, uuid, sizeof(uuid));
    r = uuid[0] && nv.by_uuid ? nv.by_uuid(uuid, &h) : NVML_ERROR_NOT_FOUND;
    if (r != NVML_SUCCESS)
        r = nv.by_index((unsigned)p->device, &h);
    if (r == NVML_SUCCESS)
        r = nv.mem(h, &m);
    if (r != NVML_SUCCESS) {
        printf("nvml_error=%s\n", nv.error_string ? nv.error_string(r) : "NVML error");
        return;
    }
    printf("nvml_total=%llu\nnvml_used=%llu\nnvml_free=%llu\n", m.total, m.used, m.free);
}

static int step_info(probe *p)
{
    size_t free_b = 0, total_b = 0, dev_total = 0;
    char uuid[64];
    CUresult r;

    probe_cuda_uuid(&p->cu, p->dev, uuid, sizeof(uuid));
    printf("device=%d\n", p->device);
    if (uuid[0])
        printf("uuid=%s\n", uuid);
    if ((r = p->cu.mem_info(&free_b, &total_b)) == CUDA_SUCCESS)
        printf("cuda_free=%zu\ncuda_total=%zu\n", free_b, total_b);
    else
        printf("cuda_mem_info_error=%s\n", probe_cuda_error(&p->cu, r));
    if ((r = p->cu.total_mem(&dev_total, p->dev)) == CUDA_SUCCESS)
        printf("cuda_device_total=%zu\n", dev_total);
    else
        printf("cuda_device_total_error=%s\n", probe_cuda_error(&p->cu, r));
    print_nvml(p);
    return 0;
}

static int parse_size(const char *s, uint64_t *out)
{
    gf_error err;

    *out = 0;
    if (gf_quantity_parse(s, "size", out, &err) < 0) {
        fprintf(stderr, "gpufrac-probe: %s\n", err.msg);
        return -1;
    }
    if (*out == 0 || *out > SIZE_MAX) {
        fprintf(stderr, "gpufrac-probe: size \"%s\" must be more than 0 bytes\n", s);
        return -1;
    }
    return 0;
}

static int step_alloc(probe *p, const char *arg)
{
    CUdeviceptr ptr = 0;
    uint64_t size = 0;
    CUresult r;

    if (parse_size(arg, &size) < 0)
        return 2;
    r = p->cu.alloc(&ptr, (size_t)size);
    if (r == CUDA_SUCCESS && keep(p, ptr) < 0)
        return 1;
    printf("alloc %s %s\n", arg, r == CUDA_SUCCESS ? "ok" : probe_cuda_error(&p->cu, r));
    if (r != CUDA_SUCCESS)
        p->alloc_failed = true;
    return 0;
}

static int step_fill(probe *p, const char *arg)
{
    uint64_t chunk = 0, total = 0;
    CUresult r = CUDA_SUCCESS;
    size_t blocks = 0;
    CUdeviceptr ptr;

    if (parse_size(arg, &chunk) < 0)
        return 2;
    while (blocks < FILL_MAX_BLOCKS) {
        r = p->cu.alloc(&ptr, (size_t)chunk);
        if (r != CUDA_SUCCESS)
            break;
        if (keep(p, ptr) < 0)
            return 1;
        blocks++;
        total += chunk;
    }
    printf("fill_chunk=%llu\nfill_blocks=%zu\nfill_total=%llu\nfill_error=%s\n",
           (unsigned long long)chunk, blocks, (unsigned long long)total,
           r == CUDA_SUCCESS ? "none" : probe_cuda_error(&p->cu, r));
    return r == CUDA_ERROR_OUT_OF_MEMORY ? 0 : 1;
}

static int parse_seconds(const char *s, double *out)
{
    char *end;
    *out = strtod(s, &end);
    if (end == s || *end || !(*out >= 0 && *out < 1e6))
        return usage("\"%s\" is not a number of seconds", s);
    return 0;
}

static void hold(double seconds)
{
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    fflush(stdout);
    while (nanosleep(&ts, &ts) < 0)
        ;
}

/* Checks the steps before CUDA is touched: nothing runs on a bad line. */
static int check_steps(int argc, char **argv)
{
    bool in_alloc = false;
    double secs;
    uint64_t size;

    if (argc == 0)
        return usage("%s", "no step given");
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        bool takes_value = !strcmp(a, "fill") || !strcmp(a, "hold");

        if (takes_value && i + 1 >= argc)
            return usage("%s needs a value", a);
        if (!strcmp(a, "hold") && parse_seconds(argv[++i], &secs) != 0)
            return 2;
        if (!strcmp(a, "fill") && parse_size(argv[++i], &size) < 0)
            return 2;
        if (takes_value || !strcmp(a, "info") || !strcmp(a, "alloc")) {
            in_alloc = !strcmp(a, "alloc");
            continue;
        }
        if (!in_alloc)
            return usage("unknown step \"%s\"", a);
        if (parse_size(a, &size) < 0)
            return 2;
    }
    return 0;
}

static int run_steps(probe *p, int argc, char **argv)
{
    bool in_alloc = false;
    double secs;
    int rc = 0;

    for (int i = 0; i < argc && rc == 0; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "alloc")) {
            in_alloc = true;
            continue;
        }
        if (in_alloc && strcmp(a, "info") && strcmp(a, "fill") && strcmp(a, "hold")) {
            rc = step_alloc(p, a);
            continue;
        }
        in_alloc = false;
        if (!strcmp(a, "info"))
            rc = step_info(p);
        else if (!strcmp(a, "fill"))
            rc = step_fill(p, argv[++i]);
        else if (!strcmp(a, "hold") && parse_seconds(argv[++i], &secs) == 0)
            hold(secs);
    }
    return rc;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"device", required_argument, NULL, 'd'},
        {"hold", required_argument, NULL, 'H'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    probe p = {0};
    double hold_s = 0;
    int c, rc;

    setvbuf(stdout, NULL, _IOLBF, 0);
    opterr = 0;
    while ((c = getopt_long(argc, argv, "+h", longopts, NULL)) != -1) {
        if (c == 'd')
            p.device = atoi(optarg);
        else if (c == 'H' && parse_seconds(optarg, &hold_s) != 0)
            return 2;
        else if (c == 'h')
            return usage("%s", "probe what a CUDA program sees"), 0;
        else if (c == '?')
            return usage("unknown flag \"%s\"", argv[optind - 1]);
    }
    if ((rc = check_steps(argc - optind, argv + optind)) != 0)
        return rc;
    if (probe_cuda_open(&p.cu, p.device, &p.dev) < 0)
        return 1;
    rc = run_steps(&p, argc - optind, argv + optind);
    if (hold_s > 0)
        hold(hold_s);
    for (size_t i = 0; i < p.n_ptrs; i++)
        p.cu.free(p.ptrs[i]);
    free(p.ptrs);
    return rc ? rc : p.alloc_failed ? EXIT_ALLOC_FAILED : 0;
}
