#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Builds the real Kubernetes components the tests/kube suite and bench/kube run against:
# kube-apiserver, kube-scheduler, kubelet, kube-controller-manager and kube-proxy from
# Debian 12's `kubernetes` source package (it ships upstream's vendored tree), with Debian's
# Go, and installs etcd-server. Each component is built once on its own: a cache that lacks
# one (an older default list) gets only that one built.
#
# The result is cached outside the clone, keyed by the package version:
#   ${GPUFRAC_KUBE_CACHE:-/var/cache/gpufrac}/kubernetes-<version>/bin/{kube-apiserver,kube-scheduler,kubelet,kube-controller-manager,kube-proxy}
# A rerun on the same machine finds the binaries and does nothing.  The path of the bin
# directory is printed on stdout (the last line) so callers can use it.
#
#   GPUFRAC_KUBE_CACHE  cache root (default /var/cache/gpufrac)
#   GPUFRAC_KUBE_WHAT   components to build (default "kube-apiserver kube-scheduler kubelet
#                       kube-controller-manager kube-proxy"; the last two run the operator's
#                       cluster of tests/kube/test_chart.py: DaemonSets, Deployments, tokens, Services)
#   GPUFRAC_APT_DIR     apt's configuration directory (default /etc/apt; tests point it elsewhere)
set -eu

CACHE=${GPUFRAC_KUBE_CACHE:-/var/cache/gpufrac}
WHAT=${GPUFRAC_KUBE_WHAT:-"kube-apiserver kube-scheduler kubelet kube-controller-manager kube-proxy"}
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
log() { echo "kube-build: $*" >&2; }

apt_install() {
    missing=""
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
    done
    [ -z "$missing" ] && return 0
    log "installing$missing"
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=900 install -y -qq $missing ||
        { $SUDO apt-get -o DPkg::Lock::Timeout=900 update -qq &&
          DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=900 install -y -qq $missing; }
}

# etcd is a runtime need of the suite; openssl makes its certificates
# rsync: `make gen_openapi`; reflect2 1.0.2: the vendored 1.0.1 does not work with Go >= 1.18
apt_install etcd-server openssl golang-go dpkg-dev rsync golang-github-modern-go-reflect2-dev

# A cached build of any version is used as is when apt knows no source
# package (the deb-src lines this script adds are gone after its run).
cached_bin() {
    for d in $(ls -d "$CACHE"/kubernetes-*/bin 2>/dev/null | sort -V -r); do
        ok=1
        for w in $WHAT; do [ -x "$d/$w" ] || ok=0; done
        [ -f "$d/.gpufrac-patch-extender-preemption" ] || ok=0
        [ "$ok" = 1 ] && { echo "$d"; return 0; }
    done
    return 1
}

# `apt-get source` needs deb-src lines; when there are none, Debian's archive
# is added for this run only (/etc/apt/sources.list.d/gpufrac-deb-src.sources)
# and removed again on exit, with apt's lists brought back to what they were.
APT_DIR=${GPUFRAC_APT_DIR:-/etc/apt}
ADDED_SRC=$APT_DIR/sources.list.d/gpufrac-deb-src.sources
have_src() {
    grep -Eqs '^[[:space:]]*deb-src[[:space:]]' "$APT_DIR"/sources.list "$APT_DIR"/sources.list.d/*.list ||
    grep -Eqs '^Types:.*deb-src' "$APT_DIR"/sources.list.d/*.sources
}
remove_src() {
    log "removing $ADDED_SRC (added for apt-get source)"
    $SUDO rm -f "$ADDED_SRC"
    $SUDO apt-get -o DPkg::Lock::Timeout=900 update -qq >&2 || true
}
if ! apt-cache showsrc kubernetes 2>/dev/null | grep -q '^Version:'; then
    if bin=$(cached_bin); then
        log "cached: $bin ($WHAT)"
        echo "$bin"
        exit 0
    fi
    if ! have_src; then
        log "adding deb-src for bookworm ($ADDED_SRC, removed when this build ends)"
        printf 'Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: bookworm bookworm-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' |
            $SUDO tee "$ADDED_SRC" >/dev/null
        trap remove_src EXIT
    fi
    $SUDO apt-get -o DPkg::Lock::Timeout=900 update -qq
fi
VERSION=$(apt-cache showsrc kubernetes | sed -n 's/^Version: //p' | sort -V | tail -n1)
[ -n "$VERSION" ] || { log "no source package 'kubernetes' in the apt sources"; exit 1; }
# "1.20.5+really1.20.2-1.1" -> upstream version "1.20.2"
UPSTREAM=$(echo "$VERSION" | sed -e 's/-[^-]*$//' -e 's/.*really//' -e 's/+.*//')
DIR="$CACHE/kubernetes-$VERSION"
BIN="$DIR/bin"

built=1
for w in $WHAT; do [ -x "$BIN/$w" ] || built=0; done
[ -f "$BIN/.gpufrac-patch-extender-preemption" ] || built=0
if [ "$built" = 1 ]; then
    log "cached: $BIN ($WHAT)"
    echo "$BIN"
    exit 0
fi

$SUDO mkdir -p "$DIR"
[ -n "$SUDO" ] && $SUDO chown "$(id -u):$(id -g)" "$DIR"
# GOPATH mode (the 1.20 tree builds offline that way with Go 1.19): the tree lives at
# $GOPATH/src/k8s.io/kubernetes
export GOPATH="$DIR/gopath"
SRC="$GOPATH/src/k8s.io/kubernetes"
cd "$DIR"
if [ ! -f "$SRC/.gpufrac-extracted" ]; then
    log "fetching the source package kubernetes $VERSION"
    rm -rf "$SRC" fetch && mkdir -p fetch "$GOPATH/src/k8s.io"
    (cd fetch && apt-get source -qq "kubernetes=$VERSION" >&2)
    srcdir=$(find fetch -mindepth 1 -maxdepth 1 -type d | head -n1)
    [ -d "$srcdir/vendor" ] || { log "$srcdir has no vendor/ tree"; exit 1; }
    mv "$srcdir" "$SRC" && rm -rf fetch
    touch "$SRC/.gpufrac-extracted"
fi
cd "$SRC"
if [ ! -f .gpufrac-reflect2 ]; then
    rm -rf vendor/github.com/modern-go/reflect2
    cp -r /usr/share/gocode/src/github.com/modern-go/reflect2 vendor/github.com/modern-go/reflect2
    touch .gpufrac-reflect2
fi
# Backport: kube-scheduler 1.20.0-1.20.9 (and 1.21.0-1.21.3) never hand the
# extenders to the framework, so DefaultPreemption never calls an extender's
# preemptVerb (upstream passes frameworkruntime.WithExtenders in
# pkg/scheduler/factory.go from 1.22.0, 1.21.4 and 1.20.10). One line; the
# stamp in bin/ makes a kube-scheduler built before it be rebuilt.
PATCH_STAMP="$BIN/.gpufrac-patch-extender-preemption"
if ! grep -q 'frameworkruntime.WithExtenders(extenders)' pkg/scheduler/factory.go; then
    log "patching pkg/scheduler/factory.go: pass the extenders to the framework (preemptVerb)"
    sed -i 's|^\(\t*\)frameworkruntime.WithPodNominator(nominator),$|&\n\1frameworkruntime.WithExtenders(extenders),|' \
        pkg/scheduler/factory.go
    grep -q 'frameworkruntime.WithExtenders(extenders)' pkg/scheduler/factory.go ||
        { log "the factory.go patch did not apply"; exit 1; }
fi
mkdir -p "$BIN" "$DIR/gocache"
[ -f "$PATCH_STAMP" ] || rm -f "$BIN/kube-scheduler"
export CGO_ENABLED=0 GO111MODULE=off GOPROXY=off GOTOOLCHAIN=local GOCACHE="$DIR/gocache"
unset GOFLAGS
if [ ! -f .gpufrac-openapi ]; then
    log "make gen_openapi (the first build: about 8 minutes in all on 2 cores, then cached in $CACHE)"
    start=$(date +%s)
    nice -n 10 make gen_openapi >&2
    touch .gpufrac-openapi
    log "gen_openapi took $(( $(date +%s) - start )) s"
fi
MAJOR=${UPSTREAM%%.*}
MINOR=$(echo "$UPSTREAM" | cut -d. -f2)
LDFLAGS="-s -w"
for pkg in k8s.io/kubernetes/vendor/k8s.io/component-base/version k8s.io/kubernetes/vendor/k8s.io/client-go/pkg/version; do
    LDFLAGS="$LDFLAGS -X $pkg.gitVersion=v$UPSTREAM -X $pkg.gitMajor=$MAJOR -X $pkg.gitMinor=$MINOR"
    LDFLAGS="$LDFLAGS -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done
for w in $WHAT; do
    [ -x "$BIN/$w" ] && continue
    log "building $w (v$UPSTREAM, $(go version | cut -d' ' -f3)): a few minutes on 2 cores, once"
    start=$(date +%s)
    nice -n 10 go build -ldflags "$LDFLAGS" -o "$BIN/$w.tmp" "k8s.io/kubernetes/cmd/$w"
    mv "$BIN/$w.tmp" "$BIN/$w"
    log "built $w in $(( $(date +%s) - start )) s"
done
touch "$PATCH_STAMP"
echo "$BIN"
