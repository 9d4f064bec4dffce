#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Builds every CMake build type with gcc and with clang-14, warnings as errors
# (the project's flags), one build at a time, and says which failed. The None
# type gets Debian's dpkg-buildflags, as dh_auto_configure passes them.
#   scripts/build-matrix.sh [OUTDIR]      (default build-matrix; logs in OUTDIR/*.log)
# Environment: COMPILERS="gcc clang-14", TYPES="Debug Release RelWithDebInfo MinSizeRel None",
#   JOBS (default 2), TESTS=ON|OFF (build the test programs too; default ON).
set -u
cd "$(dirname "$0")/.."
out=${1:-build-matrix}
COMPILERS=${COMPILERS:-gcc clang-14}
TYPES=${TYPES:-Debug Release RelWithDebInfo MinSizeRel None}
JOBS=${JOBS:-2}
TESTS=${TESTS:-ON}
mkdir -p "$out"
failed=""
for cc in $COMPILERS; do
    for type in $TYPES; do
        dir="$out/$cc-$type"
        log="$out/$cc-$type.log"
        if [ "$type" = None ]; then
            # debhelper adds CPPFLAGS to CFLAGS for CMake
            cflags="$(dpkg-buildflags --get CFLAGS) $(dpkg-buildflags --get CPPFLAGS)"
            ldflags="$(dpkg-buildflags --get LDFLAGS)"
        else
            cflags="" ldflags=""
        fi
        echo "== $cc $type" >&2
        if CC=$cc CFLAGS="$cflags" LDFLAGS="$ldflags" \
               cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE="$type" \
                     -DGPUFRAC_TESTS="$TESTS" -DGPUFRAC_FUZZ=OFF >"$log" 2>&1 &&
           cmake --build "$dir" -j"$JOBS" -- -k >>"$log" 2>&1 &&
           ! grep -q "warning:" "$log"; then
            echo "   ok" >&2
        else
            echo "   FAILED (see $log)" >&2
            failed="$failed $cc-$type"
        fi
    done
done
if [ -n "$failed" ]; then
    echo "build-matrix: failed:$failed" >&2
    exit 1
fi
echo "build-matrix: all builds warning-free" >&2
