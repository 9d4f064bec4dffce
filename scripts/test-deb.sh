#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The packaging check: builds the .debs (scripts/build-deb.sh, lintian
# included), installs them with apt, runs `gpufrac demo` from /usr/bin and the
# installed man pages through man --warnings, then purges the packages and
# checks that none of their files is left.
#   scripts/test-deb.sh [DEBDIR]     (default build-deb; built there first)
# Needs root (it installs into this system); exits 77 (skipped) otherwise, and
# refuses to touch a system where gpufrac packages are already installed.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build-deb}
pkgs="gpufrac gpufrac-scheduler gpufrac-gpusim"
if [ "$(id -u)" -ne 0 ]; then
    echo "SKIP: test-deb installs packages into this system and needs root" >&2
    exit 77
fi
for p in $pkgs; do
    if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "installed"; then
        echo "test-deb: $p is already installed here; purge it first (apt-get purge $pkgs)" >&2
        exit 1
    fi
done
./scripts/build-deb.sh "$dir"
version=$(dpkg-parsechangelog -S Version)
arch=$(dpkg --print-architecture)
debs=()
for p in $pkgs; do debs+=("$(realpath "$dir/${p}_${version}_${arch}.deb")"); done

purge() { DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 purge -y -qq $pkgs >/dev/null; }
trap purge EXIT
DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends "${debs[@]}" >/dev/null
files=$(dpkg -L $pkgs | sort -u)

tmp=$(mktemp -d)
echo "test-deb: /usr/bin/gpufrac demo" >&2
(cd "$tmp" && env -i PATH=/usr/bin:/bin HOME="$tmp" TMPDIR="$tmp" GPUFRAC_STATE_DIR="$tmp/state" \
     /usr/bin/gpufrac demo --simulated) >"$tmp/demo.out" 2>&1 || {
    cat "$tmp/demo.out" >&2
    echo "test-deb: FAIL: gpufrac demo from /usr/bin" >&2
    exit 1
}
grep -q PASS "$tmp/demo.out"
for page in gpufrac gpufracd gpufrac-runtime gpufrac-scheduler; do
    w=$(LC_ALL=C.UTF-8 MANROFFSEQ='' MANWIDTH=80 man --warnings -E UTF-8 -Tutf8 -Z "$page" 2>&1 >/dev/null)
    [ -z "$w" ] || { echo "test-deb: FAIL: man $page: $w" >&2; exit 1; }
done
# the bash completion completes a command; the example policy is documentation only
comp=/usr/share/bash-completion/completions/gpufrac
[ "$(bash --norc -c ". $comp; COMP_WORDS=(gpufrac st); COMP_CWORD=1; _gpufrac; echo \"\${COMPREPLY[*]}\"")" = "status stop" ] ||
    { echo "test-deb: FAIL: $comp does not complete gpufrac st" >&2; exit 1; }
[ -f /usr/share/doc/gpufrac/examples/policy.conf ] && ! dpkg -L gpufrac | grep -qx /etc/gpufrac/policy.conf ||
    { echo "test-deb: FAIL: the example policy is not (only) under /usr/share/doc/gpufrac/examples" >&2; exit 1; }
unit=/lib/systemd/system/gpufracd.service
[ "$(grep -c '^ExecStart=/usr/sbin/gpufracd ' "$unit")" = 1 ] || { echo "test-deb: FAIL: $unit: ExecStart" >&2; exit 1; }
for doc in $(sed -n 's/^Documentation=//p' "$unit"); do
    case $doc in
    file://*) [ -f "${doc#file://}" ] || { echo "test-deb: FAIL: $unit names $doc, not installed" >&2; exit 1; } ;;
    man:*) page=${doc#man:}; man -w "${page%(*}" >/dev/null || { echo "test-deb: FAIL: no $doc" >&2; exit 1; } ;;
    esac
done
rm -rf "$tmp"

trap - EXIT
purge
left=""
while IFS= read -r f; do
    [ -e "$f" ] && [ ! -d "$f" ] && left="$left $f"
done <<<"$files"
if [ -n "$left" ] || dpkg-query -W -f='${Status}\n' $pkgs 2>/dev/null | grep -qv "not-installed"; then
    echo "test-deb: FAIL: left after purge:$left" >&2
    exit 1
fi
echo "test-deb: PASS: packages built, lintian clean, demo ran from /usr/bin, purged cleanly" >&2
