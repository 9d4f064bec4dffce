#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Installs what gpufrac needs on Debian 12, when missing.
#   scripts/deps.sh build   what building the programs and `make demo` need
#   scripts/deps.sh [all]   that and what the test suite, the packages, the
#                           images and the CI builds need (`make check`)
# Every package of the build group is also in all: a build-only machine
# never needs a test package.
set -eu
GROUP=${1:-all}
case "$GROUP" in
build | all) ;;
*) echo "usage: scripts/deps.sh [build|all] (not \"$GROUP\")" >&2; exit 2 ;;
esac
# the programs, the shim and gpusim (CMake's pkg-config checks name these)
PKGS="cmake make gcc pkg-config libjansson-dev libmicrohttpd-dev libcurl4-openssl-dev binutils procps"
if [ "$GROUP" = all ]; then
    # the unit tests, the fuzzers (clang) and the Python suites
    PKGS="$PKGS clang-14 libclang-rt-14-dev libcmocka-dev python3 python3-prometheus-client python3-yaml runc busybox-static"
    # real kubectl keeps the test API server honest; any kubectl on PATH will do
    command -v kubectl >/dev/null 2>&1 || PKGS="$PKGS kubernetes-client"
    # openssl makes the test API server's certificate
    PKGS="$PKGS openssl"
    # tests/cri: real containerd (started by the test on its own socket), a CRI
    # client (grpcio + grpc-tools compile the CRI subset), local images (umoci)
    PKGS="$PKGS containerd python3-grpcio python3-grpc-tools umoci"
    # tests/engines: the real Docker 20.10 and Podman 4.3 (a private dockerd, rootful
    # podman, both started by the tests), crun (Podman's default real runtime), skopeo
    # (the umoci layout as a docker-archive for docker load)
    PKGS="$PKGS docker.io podman crun skopeo"
    # tests/kube/test_node.py: the kubelet's CNI (a loopback-only conflist)
    PKGS="$PKGS containernetworking-plugins util-linux"
    # tests/kube/test_chart.py: the operator's cluster's node network and kube-proxy's
    # Service rules, in the test's own network namespace
    PKGS="$PKGS iptables iproute2"
    # man pages (scdoc) and their check; the Debian packages and lintian; make image
    PKGS="$PKGS scdoc man-db debhelper dpkg-dev fakeroot lintian mmdebstrap"
    # the C style check (tests/style: scripts/check-format.sh, .clang-format)
    PKGS="$PKGS clang-format-14"
    # tests/integration, tests/agent: status --json against docs/status.schema.json, gpufrac top in tmux
    PKGS="$PKGS python3-jsonschema tmux"
    # a real Prometheus server and promtool check the metrics, the alert rules and the dashboard
    PKGS="$PKGS prometheus"
    # gpufrac-bench counts instructions per alloc/free pair under callgrind
    # (noise-free on a shared machine; bench.quick reports it skipped without)
    PKGS="$PKGS valgrind"
    # tests/integration/test_numba.py and the README's numba example: a real CUDA client
    # (numba's ctypes driver binding, unmodified) inside fractions over gpusim
    PKGS="$PKGS python3-numba"
fi
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "gpufrac: installing$missing" >&2
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing
