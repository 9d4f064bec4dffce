/* SPDX-License-Identifier: Apache-2.0 */
/* A container fraction's identity record, <fraction>/identity: written once
 * by gpufracd at admission (agent/admit.c, 0444, in root's new directory),
 * read by the agent's registry and by `gpufrac status`. Lines "key=value":
 *   namespace=, pod=, container=, admitted=<unix seconds>, termlog=<abs path>
 * Unknown lines are ignored, a later line wins. Only the first
 * GF_IDENTITY_TEXT_MAX bytes are read, and nothing past a NUL. Every field
 * comes back NUL-terminated within its buffer, whatever the input. */
#ifndef GPUFRAC_IDENTITY_H
#define GPUFRAC_IDENTITY_H

#include <stddef.h>
#include <time.h>

#include "config.h"

#define GF_IDENTITY_TEXT_MAX 2047

typedef struct gf_identity {
    char ns[64], pod[128], container[64]; /* "" when absent */
    time_t admitted_at;                   /* 0 when absent */
    char termlog[GF_PATH_MAX];            /* an absolute path, or "" */
} gf_identity;

/* Parses len bytes of text (not necessarily NUL-terminated) into *out. */
void gf_identity_parse(const char *text, size_t len, gf_identity *out);

#endif
