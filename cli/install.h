/* SPDX-License-Identifier: Apache-2.0 */
/* gpufrac install: gpufrac-runtime as a runtime of Docker and Podman. The
 * engines' configuration files are edited in place (one entry added or set,
 * every other byte kept) or refused whole when they cannot be read. */
#ifndef GPUFRAC_CLI_INSTALL_H
#define GPUFRAC_CLI_INSTALL_H

#include <stdbool.h>
#include <stddef.h>

#include "error.h"

/* One statement of a TOML file: a [table] header or a key = value. */
typedef struct toml_stmt {
    int line;
    size_t start, end, value_at; /* byte offsets: the statement, its value */
    bool is_header;
    char table[128]; /* the header's name, or the table a key is in ("" at the top) */
    char key[128];   /* "" for a header */
} toml_stmt;

int toml_scan(const char *text, size_t len, toml_stmt *out, size_t max, size_t *n, gf_error *err);

#endif
