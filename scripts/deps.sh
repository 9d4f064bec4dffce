#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Installs what building and testing gpufrac needs on Debian 12, when missing.
set -eu
PKGS="cmake make gcc clang-14 libclang-rt-14-dev pkg-config libcmocka-dev libjansson-dev libmicrohttpd-dev python3 python3-prometheus-client python3-yaml runc busybox-static libcurl4-openssl-dev binutils procps"
# real kubectl keeps the test API server honest; any kubectl on PATH will do
command -v kubectl >/dev/null 2>&1 || PKGS="$PKGS kubernetes-client"
# openssl makes the test API server's certificate
PKGS="$PKGS openssl"
# tests/cri: real containerd (started by the test on its own socket), a CRI
# client (grpcio + grpc-tools compile the CRI subset), local images (umoci)
PKGS="$PKGS containerd python3-grpcio python3-grpc-tools umoci"
# tests/kube/test_node.py: the kubelet's CNI (a loopback-only conflist)
PKGS="$PKGS containernetworking-plugins util-linux"
# man pages (scdoc) and their check; the Debian packages and lintian; make image
PKGS="$PKGS scdoc man-db debhelper dpkg-dev fakeroot lintian mmdebstrap"
# the C style check (tests/style: scripts/check-format.sh, .clang-format)
PKGS="$PKGS clang-format-14"
# tests/integration, tests/agent: status --json against docs/status.schema.json, gpufrac top in tmux
PKGS="$PKGS python3-jsonschema tmux"
# a real Prometheus server and promtool check the metrics, the alert rules and the dashboard
PKGS="$PKGS prometheus"
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
