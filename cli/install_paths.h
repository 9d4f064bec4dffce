/* SPDX-License-Identifier: Apache-2.0 */
/* Where gpufrac finds its companions (the shim, the probe, the simulated
 * driver): next to the running executable as the build tree lays them out,
 * else where `make install` put them (GNUInstallDirs, relative to the
 * executable, so an installed tree can be moved), else at the absolute
 * installed paths. */
#ifndef GPUFRAC_CLI_INSTALL_PATHS_H
#define GPUFRAC_CLI_INSTALL_PATHS_H

#include <stddef.h>

#include "error.h"

/* libgpufrac.so (GPUFRAC_SHIM, when set, wins). */
int gf_find_shim(char *out, size_t len, gf_error *err);
/* The gpufrac-probe program the demo runs. */
int gf_find_probe(char *out, size_t len, gf_error *err);
/* The directory holding gpusim's libcuda.so.1 and libnvidia-ml.so.1. */
/* gpufracd: next to gpufrac in the build tree, else the installed sbin one. */
int gf_find_agent(char *out, size_t len, gf_error *err);
int gf_find_gpusim_dir(char *out, size_t len, gf_error *err);

#endif
