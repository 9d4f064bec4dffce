/* SPDX-License-Identifier: Apache-2.0 */
/* What a hostile tenant does to its own fraction's ledger, for the attacker
 * suite (run as the tenant's uid; the ledger is its file):
 *
 *   ledger_forge LEDGER slot PID SEQ BYTES SECONDS  claim a slot (its lock held),
 *                                  write PID, loan_seq SEQ, borrowed[0] BYTES, hold
 *   ledger_forge LEDGER state DEV VALUE          devices[DEV].state = VALUE
 *   ledger_forge LEDGER lent DEV BYTES           devices[DEV].lent = BYTES
 *   ledger_forge LEDGER truncate                 ftruncate(ledger, 0)
 *
 * Prints "forged" once the ledger says what was asked. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ledger.h"

static int usage(void)
{
    fputs("usage: ledger_forge LEDGER slot PID SEQ BYTES SECONDS | state DEV VALUE | "
          "lent DEV BYTES | truncate\n",
          stderr);
    return 2;
}

int main(int argc, char **argv)
{
    gf_ledger lg = {.fd = -1};
    gf_error err;

    if (argc < 3)
        return usage();
    if (strcmp(argv[2], "truncate") == 0) {
        int fd = open(argv[1], O_RDWR | O_CLOEXEC);
        if (fd < 0 || ftruncate(fd, 0) < 0) {
            perror(argv[1]);
            return 1;
        }
        puts("forged");
        return 0;
    }
    if (gf_ledger_open(argv[1], &lg, &err) < 0) {
        fprintf(stderr, "ledger_forge: %s\n", err.msg);
        return 1;
    }
    if (strcmp(argv[2], "slot") == 0 && argc == 7) {
        if (gf_ledger_claim_slot(&lg, &err) < 0) {
            fprintf(stderr, "ledger_forge: %s\n", err.msg);
            return 1;
        }
        gf_ledger_slot *s = &lg.hdr->slots[lg.slot];
        atomic_store(&s->pid, (int32_t)atoi(argv[3]));
        atomic_store(&s->loan_seq, strtoull(argv[4], NULL, 10));
        atomic_store(&s->borrowed[0], strtoull(argv[5], NULL, 10));
        puts("forged");
        fflush(stdout);
        sleep((unsigned)atoi(argv[6]));
        return 0;
    }
    if (strcmp(argv[2], "state") == 0 && argc == 5) {
        atomic_store(&lg.hdr->devices[atoi(argv[3])].state, (uint32_t)atoi(argv[4]));
    } else if (strcmp(argv[2], "lent") == 0 && argc == 5) {
        atomic_store(&lg.hdr->devices[atoi(argv[3])].lent, strtoull(argv[4], NULL, 10));
    } else {
        return usage();
    }
    puts("forged");
    return 0;
}
