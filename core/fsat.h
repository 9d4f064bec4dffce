/* SPDX-License-Identifier: Apache-2.0 */
/* Files in a directory someone else can write (a user's state directory, a
 * fraction's directory, a bundle): every path is one name relative to a
 * directory descriptor, opened without following a link, without blocking
 * on a FIFO or taking a terminal, and checked to be what it must be, so
 * nothing a tenant puts at that name redirects a read or a write of root's.
 * The one set of these for the agent, the CLI and the runtime. */
#ifndef GPUFRAC_FSAT_H
#define GPUFRAC_FSAT_H

#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "error.h"

/* Directory `name` of dfd (never a link to one); -1 with errno. */
int gf_at_dir(int dfd, const char *name);
/* Regular file `name` of dfd opened with flags (O_RDONLY, O_RDWR, ...; no
 * O_CREAT), its stat in *st; -1 with errno (EINVAL: not a regular file). */
int gf_at_file(int dfd, const char *name, int flags, struct stat *st);
/* Up to len bytes of regular file `name` of dfd; -1 with errno. */
ssize_t gf_at_read(int dfd, const char *name, char *buf, size_t len);
/* Regular file `name` of dfd opened for appending, made with mode when
 * missing; -1 with errno (EINVAL: not a regular file). */
int gf_at_append(int dfd, const char *name, mode_t mode);
/* Creates (or replaces the contents of) `name` in dfd with text, mode set
 * on the open file, never through a link. */
int gf_at_write(int dfd, const char *name, const char *text, mode_t mode, gf_error *err);
/* Empties and removes directory `name` of dfd: one level (what a fraction
 * holds); unlinkat never follows a link. */
void gf_at_rmdir(int dfd, const char *name);

#endif
