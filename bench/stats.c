/* SPDX-License-Identifier: Apache-2.0 */
#include <stdlib.h>
#include <time.h>

#include "bench.h"

uint64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

uint64_t bench_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

void bench_sort_u64(uint64_t *v, size_t n)
{
    qsort(v, n, sizeof(*v), cmp_u64);
}

uint64_t bench_quantile(const uint64_t *sorted, size_t n, double q)
{
    if (n == 0)
        return 0;
    /* nearest rank: the smallest value with at least q of the samples at or below it */
    double rank = q * (double)n;
    size_t i = (size_t)rank;
    if ((double)i < rank)
        i++;
    if (i == 0)
        i = 1;
    return sorted[(i > n ? n : i) - 1];
}

size_t bench_parse_list(const char *s, uint64_t *v, size_t n, size_t cap)
{
    size_t added = 0;
    while (s && *s && *s != '\n' && n + added < cap) {
        char *end;
        unsigned long long x = strtoull(s, &end, 10);
        if (end == s)
            break;
        v[n + added++] = x;
        s = *end == ',' ? end + 1 : end;
    }
    return added;
}
