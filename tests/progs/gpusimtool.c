/* SPDX-License-Identifier: Apache-2.0 */
/* gpusimtool: reads a gpusim state file (the simulated driver's own count of
 * device memory, what NVML reports) for tests.
 *   gpusimtool dump STATE        dev<i>_used=, dev<i>_peak= per device
 *   gpusimtool reset-peak STATE  peak := used, for every device
 * It reads the file as gpusim lays it out (gpusim/gs.h); a file of another
 * layout version is refused. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gs.h"

int main(int argc, char **argv)
{
    gs_shm *m;
    int fd;

    if (argc != 3 || (strcmp(argv[1], "dump") != 0 && strcmp(argv[1], "reset-peak") != 0)) {
        fprintf(stderr, "usage: gpusimtool dump|reset-peak STATE\n");
        return 2;
    }
    fd = open(argv[2], O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        perror(argv[2]);
        return 1;
    }
    m = mmap(NULL, sizeof *m, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED || atomic_load(&m->magic) != GS_SHM_MAGIC || m->version != GS_SHM_VERSION ||
        m->ndev > GS_MAX_DEV) {
        fprintf(stderr, "gpusimtool: %s is not a gpusim state file of version %d\n", argv[2],
                GS_SHM_VERSION);
        return 1;
    }
    for (uint32_t i = 0; i < m->ndev; i++) {
        if (argv[1][0] == 'r')
            atomic_store(&m->peak[i], atomic_load(&m->used[i]));
        else
            printf("dev%u_used=%llu\ndev%u_peak=%llu\n", i,
                   (unsigned long long)atomic_load(&m->used[i]), i,
                   (unsigned long long)atomic_load(&m->peak[i]));
    }
    return 0;
}
