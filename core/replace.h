/* SPDX-License-Identifier: Apache-2.0 */
/* Replacing a file whole: the text goes to a new file beside it, is synced,
 * and is renamed over it, so a reader sees the old contents or the new and
 * never a part, and a crash or a full disk leaves the old file as it was.
 * With it, the directories such a file goes into. The one copy of these for
 * the runtime and the CLI. */
#ifndef GPUFRAC_REPLACE_H
#define GPUFRAC_REPLACE_H

#include <stddef.h>
#include <sys/types.h>

#include "error.h"

/* Makes path and every directory above it that is missing, with mode; path
 * is restored before return. */
int gf_mkdir_p(char *path, mode_t mode, gf_error *err);

/* mode for gf_file_replace: the replaced file's mode, 0644 when new */
#define GF_REPLACE_KEEP_MODE ((mode_t)-1)

/* Writes len bytes of text to path by a rename over it, the new file's mode
 * set before the rename; on failure path is untouched and nothing is left
 * beside it. */
int gf_file_replace(const char *path, const char *text, size_t len, mode_t mode, gf_error *err);

#endif
