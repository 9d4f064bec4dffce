/* SPDX-License-Identifier: Apache-2.0 */
/* Cleanup attributes (gcc and clang): a variable declared with one of them is
 * released when it goes out of scope, on every path, exactly once.
 *   gf_cleanup_close int fd = -1;         close() unless < 0 (fds, pidfds)
 *   gf_cleanup_free char *s = NULL;       free()
 *   gf_cleanup_closedir DIR *d = NULL;    closedir() unless NULL
 *   gf_cleanup_fclose FILE *fp = NULL;    fclose() unless NULL
 * Ownership is handed on with gf_steal_fd(&fd) / gf_steal_ptr(&p): they
 * return the value and leave -1 / NULL behind, so the cleanup does nothing.
 * Invariant: a cleanup never changes errno, so an error read after the scope
 * (gf_error_sys in the caller) is the one the failing call left. Initialise
 * every such variable: the cleanup runs on whatever it holds. */
#ifndef GPUFRAC_CLEANUP_H
#define GPUFRAC_CLEANUP_H

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static inline void gf_cleanup_close_fn(int *fd)
{
    if (*fd >= 0) {
        int e = errno;
        close(*fd);
        errno = e;
    }
}

static inline void gf_cleanup_free_fn(void *p)
{
    int e = errno;
    free(*(void **)p);
    errno = e;
}

static inline void gf_cleanup_closedir_fn(DIR **d)
{
    if (*d) {
        int e = errno;
        closedir(*d);
        errno = e;
    }
}

static inline void gf_cleanup_fclose_fn(FILE **fp)
{
    if (*fp) {
        int e = errno;
        fclose(*fp);
        errno = e;
    }
}

#define gf_cleanup_close __attribute__((cleanup(gf_cleanup_close_fn)))
#define gf_cleanup_free __attribute__((cleanup(gf_cleanup_free_fn)))
#define gf_cleanup_closedir __attribute__((cleanup(gf_cleanup_closedir_fn)))
#define gf_cleanup_fclose __attribute__((cleanup(gf_cleanup_fclose_fn)))

static inline int gf_steal_fd(int *fd)
{
    int v = *fd;
    *fd = -1;
    return v;
}

/* p: the address of a pointer variable (char **, DIR **, ...). */
static inline void *gf_steal_ptr(void *p)
{
    void *v = *(void **)p;
    *(void **)p = NULL;
    return v;
}

#endif
