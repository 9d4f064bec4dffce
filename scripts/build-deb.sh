#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Builds the Debian packages (dpkg-buildpackage -b -us -uc) from a copy of
# this tree, so that nothing is written next to the checkout, and checks them
# with lintian (errors fail).
#   scripts/build-deb.sh [OUTDIR]     (default build-deb; the .debs land in OUTDIR)
# Environment: JOBS (default 2), LINTIAN=0 skips lintian.
set -eu
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-build-deb}")
jobs=${JOBS:-2}
rm -rf "$out"
mkdir -p "$out/src"
# tracked and untracked-but-not-ignored files: what `git status` calls the tree
git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
    [ -e "$f" ] && printf '%s\0' "$f"
done | tar --null -T - -cf - | tar -C "$out/src" -xf -
(cd "$out/src" && DEB_BUILD_OPTIONS="parallel=$jobs" \
     dpkg-buildpackage -b -us -uc >"$out/build.log" 2>&1) || {
    tail -40 "$out/build.log" >&2
    echo "build-deb: dpkg-buildpackage failed (whole log: $out/build.log)" >&2
    exit 1
}
ls "$out"/*.deb
if [ "${LINTIAN:-1}" != 0 ]; then
    # exit status 0 unless there are errors; warnings are shown
    lintian --fail-on error --suppress-tags-from-file /dev/null "$out"/*.changes
fi
