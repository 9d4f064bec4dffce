/* SPDX-License-Identifier: Apache-2.0 */
/* The version every program prints and the commit gpufrac_build_info shows,
 * as CMake passes them (GF_VERSION_DEF, GF_BUILD_INFO_DEFS in
 * CMakeLists.txt): a program built without its version does not build. */
#ifndef GPUFRAC_VERSION_H
#define GPUFRAC_VERSION_H

#ifndef GPUFRAC_VERSION
#error "GPUFRAC_VERSION is not defined: give the target ${GF_VERSION_DEF} (CMakeLists.txt)"
#endif
#ifndef GPUFRAC_COMMIT
#define GPUFRAC_COMMIT "unknown" /* only the metrics pages show it */
#endif

#endif
