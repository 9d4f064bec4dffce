#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Builds the node image and the scheduler's image offline from Debian packages
# only: a Debian 12 root filesystem from Debian's archive (mmdebstrap, through
# this machine's apt access to the archive; no container registry) plus the
# gpufrac .debs (scripts/build-deb.sh), each packed as an OCI image layout with
# umoci. Reproducible: every timestamp is SOURCE_DATE_EPOCH (default: the date
# of debian/changelog's top entry), so the same packages give the same digests.
#   scripts/build-image.sh [OUTDIR]      (default build-image)
# Output:
#   OUTDIR/oci/gpufrac-node        OCI layout, tag <version>: gpufracd, gpufrac-runtime, gpufrac, the shim
#   OUTDIR/oci/gpufrac-scheduler   OCI layout, tag <version>: gpufrac-scheduler
#   OUTDIR/<name>.rootfs.tar       each image's root filesystem (its one layer)
#   OUTDIR/images                  "<name:tag> <oci dir> <digest>" per image
# Environment: DEBS (a directory with the .debs; default: build them into OUTDIR/debs),
#   MIRRORS (apt lines; default Debian 12 main, updates and security), SOURCE_DATE_EPOCH.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-build-image}")
version=$(dpkg-parsechangelog -S Version)
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(dpkg-parsechangelog -S Timestamp)}
created=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
arch=$(dpkg --print-architecture)
registry=localhost
mirrors=${MIRRORS:-"deb http://deb.debian.org/debian bookworm main
deb http://deb.debian.org/debian bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main"}

for tool in mmdebstrap umoci; do
    command -v $tool >/dev/null || { echo "build-image: $tool is missing (apt-get install $tool)" >&2; exit 1; }
done
mkdir -p "$out"
debs=${DEBS:-}
if [ -z "$debs" ]; then
    debs="$out/debs"
    LINTIAN=0 ./scripts/build-deb.sh "$debs" >/dev/null
fi
debs=$(realpath "$debs")
: >"$out/images.new"

# build NAME ENTRYPOINT DEB...
build() {
    local name=$1 entry=$2
    shift 2
    local inc=() d
    for d in "$@"; do
        d=$(ls "$debs"/${d}_"$version"_"$arch".deb)
        inc+=("--include=$d")
    done
    echo "build-image: $name: root filesystem" >&2
    # essential packages plus ours and their dependencies; no documentation,
    # no apt lists or caches, no logs (mmdebstrap drops those that vary)
    mmdebstrap --variant=essential --architectures="$arch" "${inc[@]}" \
        --hook-dir=/usr/share/mmdebstrap/hooks/file-mirror-automount \
        --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
        --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
        --dpkgopt='path-exclude=/usr/share/locale/*' \
        --customize-hook='rm -rf "$1"/var/cache/apt/* "$1"/var/lib/apt/lists/* "$1"/var/cache/ldconfig/aux-cache' \
        --quiet bookworm "$out/$name.rootfs.tar" "$mirrors"
    echo "build-image: $name: OCI image" >&2
    local oci="$out/oci/$name"
    rm -rf "$oci"
    mkdir -p "$out/oci"
    umoci init --layout "$oci"
    umoci new --image "$oci:$version"
    umoci raw add-layer --image "$oci:$version" --history.created="$created" \
        --history.created_by="mmdebstrap bookworm + $*" "$out/$name.rootfs.tar"
    umoci config --image "$oci:$version" --no-history --created="$created" \
        --author="gpufrac" --os=linux --architecture="$arch" \
        --config.entrypoint="$entry" --config.env="PATH=/usr/sbin:/usr/bin:/sbin:/bin" \
        --config.label="org.opencontainers.image.version=$version" \
        --config.label="org.opencontainers.image.title=$name"
    umoci gc --layout "$oci"
    if [ "$(id -u)" = 0 ]; then
        # the entrypoint starts in the image (its libraries are all there)
        local root
        root=$(mktemp -d)
        tar -C "$root" -xf "$out/$name.rootfs.tar"
        chroot "$root" "$entry" --help >/dev/null || {
            rm -rf "$root"
            echo "build-image: $name: $entry --help fails inside the image" >&2
            exit 1
        }
        rm -rf "$root"
    fi
    local digest
    digest=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["manifests"][0]["digest"])' \
        "$oci/index.json")
    echo "$registry/$name:$version $oci $digest" >>"$out/images.new"
}

build gpufrac-node /usr/sbin/gpufracd gpufrac
build gpufrac-scheduler /usr/sbin/gpufrac-scheduler gpufrac-scheduler
mv "$out/images.new" "$out/images"
while read -r ref dir digest; do
    echo "image $ref  (OCI layout $dir, tag $version, manifest $digest)"
done <"$out/images"
