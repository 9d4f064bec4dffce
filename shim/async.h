/* SPDX-License-Identifier: Apache-2.0 */
/* async.c's side of a free: the one call between families. alloc.c's frees
 * (cuMemFree*, cuMemFreeAsync*) take every device pointer; one that came from
 * a pool is async.c's, and only async.c knows what its pool is charged. */
#ifndef GPUFRAC_SHIM_ASYNC_H
#define GPUFRAC_SHIM_ASYNC_H

#include <stdbool.h>

#include "shim.h"
#include "table.h"

/* Takes a stream-ordered allocation out of the tracking; false if dptr is
 * none. _slot looks only in its direct-mapped slot (asked first: one load
 * when it is not there), gf_async_take only in the table behind them. */
GF_HIDDEN bool gf_async_take_slot(CUdeviceptr dptr, gf_entry *out);
GF_HIDDEN bool gf_async_take(CUdeviceptr dptr, gf_entry *out);
/* The driver refused the free: the allocation is tracked again. */
GF_HIDDEN void gf_async_put_back(const gf_entry *e);
/* The driver took the free. */
GF_HIDDEN void gf_async_freed(const gf_entry *e);

#endif
