/* SPDX-License-Identifier: Apache-2.0 */
/* ledgertool create LEDGER NAME | ledgertool dump LEDGER | ledgertool reclaim LEDGER
 * dump prints a ledger's counters as key=value lines for tests:
 *   dev<i>_uuid, dev<i>_used, dev<i>_peak, dev<i>_limit, dev<i>_denied,
 *   dev<i>_reclaimed, dev<i>_overhead, live_slots, slot_bytes (sum over all slots), dead_reclaims
 */
#include <stdio.h>
#include <string.h>

#include "ledger.h"

int main(int argc, char **argv)
{
    gf_ledger lg;
    gf_error err;
    uint64_t slot_bytes = 0;
    int live = 0;

    if (argc == 4 && strcmp(argv[1], "create") == 0) {
        if (gf_ledger_create(argv[2], argv[3], 0600, &err) == 0)
            return 0;
        fprintf(stderr, "ledgertool: %s\n", err.msg);
        return 1;
    }
    if (argc != 3 || (strcmp(argv[1], "dump") && strcmp(argv[1], "reclaim"))) {
        fprintf(stderr, "usage: ledgertool create LEDGER NAME | dump LEDGER | reclaim LEDGER\n");
        return 2;
    }
    if (gf_ledger_open(argv[2], &lg, &err) < 0) {
        fprintf(stderr, "ledgertool: %s\n", err.msg);
        return 1;
    }
    if (argv[1][0] == 'r')
        printf("reclaimed=%d\n", gf_ledger_reclaim_dead(&lg));
    for (int i = 0; i < GF_LEDGER_DEVICES; i++) {
        gf_ledger_device *d = &lg.hdr->devices[i];
        if (atomic_load(&d->state) != GF_DEV_READY)
            continue;
        printf("dev%d_uuid=%s\ndev%d_used=%llu\ndev%d_peak=%llu\ndev%d_limit=%llu\n"
               "dev%d_denied=%llu\ndev%d_reclaimed=%llu\n",
               i, d->uuid, i, (unsigned long long)atomic_load(&d->used), i,
               (unsigned long long)atomic_load(&d->peak), i, (unsigned long long)d->limit, i,
               (unsigned long long)atomic_load(&d->denied), i,
               (unsigned long long)atomic_load(&d->reclaimed));
        printf("dev%d_overhead=%llu\n", i, (unsigned long long)atomic_load(&d->overhead));
    }
    for (int s = 0; s < GF_LEDGER_SLOTS; s++) {
        for (int i = 0; i < GF_LEDGER_DEVICES; i++)
            slot_bytes += atomic_load(&lg.hdr->slots[s].used[i]);
        if (gf_ledger_slot_live(&lg, s))
            live++;
    }
    printf("live_slots=%d\nslot_bytes=%llu\ndead_reclaims=%llu\n", live,
           (unsigned long long)slot_bytes, (unsigned long long)atomic_load(&lg.hdr->dead_reclaims));
    gf_ledger_close(&lg);
    return 0;
}
