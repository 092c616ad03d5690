#!/usr/bin/env bash
# Build the local sandbox base image `ecdysis-sandbox-base:local` without any container registry:
#   1. debootstrap a minimal Debian bookworm rootfs with python3 from deb.debian.org (cached as a tarball),
#   2. `docker import` it as `ecdysis-sandbox-rootfs:local`,
#   3. build sandbox/Dockerfile on top of it (BASE_IMAGE=that).
# Idempotent: does nothing when the image exists and was built from this Dockerfile (its `ecdysis.dockerfile` label),
# unless FORCE=1; a changed Dockerfile rebuilds step 3 only. Needs root (debootstrap) and a Docker daemon;
# without a daemon it warns once and exits 0 (the process sandbox needs no image).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
image=${ECDYSIS_BASE_IMAGE:-ecdysis-sandbox-base:local}
rootfs_image=ecdysis-sandbox-rootfs:local
suite=${DEBIAN_SUITE:-bookworm}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
cache=${ECDYSIS_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ecdysis}
tarball=$cache/rootfs-$suite-python3.tar.gz
# python3-minimal lacks json/traceback/selectors; libpython3.11-stdlib brings the rest of the stdlib.
packages=python3-minimal,libpython3.11-stdlib
force=${FORCE:-0}
tmpdirs=()
cleanup() { [[ ${#tmpdirs[@]} -eq 0 ]] || rm -rf "${tmpdirs[@]}"; }
trap cleanup EXIT

if ! { command -v docker >/dev/null 2>&1 && timeout 10 docker info >/dev/null 2>&1; }; then
    echo "build-base-image: warning: no Docker daemon answers, so $image is not built (the process sandbox needs" \
        "no image)" >&2
    exit 0
fi

recipe=$(sha256sum "$here/Dockerfile" | cut -c1-16)
built_from=$(docker image inspect -f '{{index .Config.Labels "ecdysis.dockerfile"}}' "$image" 2>/dev/null || true)
if [[ $force != 1 && $built_from == "$recipe" ]]; then
    echo "build-base-image: $image already exists (FORCE=1 rebuilds)"
    exit 0
fi

mkdir -p "$cache"
if [[ $force == 1 || ! -s $tarball ]]; then
    [[ $(id -u) == 0 ]] || { echo "build-base-image: debootstrap needs root" >&2; exit 1; }
    command -v debootstrap >/dev/null || { apt-get update -qq && apt-get install -y -qq debootstrap; }
    work=$(mktemp -d)
    tmpdirs+=("$work")
    echo "build-base-image: debootstrap $suite from $mirror (a few minutes)"
    debootstrap --variant=minbase --include="$packages" "$suite" "$work/rootfs" "$mirror"
    # Drop what a sandbox never needs: package caches, docs, man pages, locales.
    rm -rf "$work"/rootfs/var/cache/apt/archives/*.deb "$work"/rootfs/var/lib/apt/lists/* \
        "$work"/rootfs/usr/share/{doc,man,info,locale} "$work"/rootfs/var/log/*
    tar -C "$work/rootfs" --numeric-owner -czf "$tarball.tmp" .
    mv "$tarball.tmp" "$tarball"
fi

if [[ $force == 1 ]] || ! docker image inspect "$rootfs_image" >/dev/null 2>&1; then
    echo "build-base-image: importing $tarball as $rootfs_image"
    old=$(docker image inspect -f '{{.Id}}' "$rootfs_image" 2>/dev/null || true)
    docker import --change 'LABEL ecdysis=1' --change 'CMD ["/bin/sh"]' "$tarball" "$rootfs_image" >/dev/null
    # A re-import leaves the previous rootfs untagged; remove it unless something still builds on it.
    [[ -z $old ]] || docker rmi "$old" >/dev/null 2>&1 || true
fi

context=$(mktemp -d)
tmpdirs+=("$context")
cp "$here/Dockerfile" "$context/Dockerfile"
cp "$repo/ecdysis/sandbox/runtime/ecdysis_runtime.py" "$context/ecdysis_runtime.py"
# The legacy builder needs no buildx plugin and never pulls a local base.
old=$(docker image inspect -f '{{.Id}}' "$image" 2>/dev/null || true)
DOCKER_BUILDKIT=0 docker build -q --build-arg BASE_IMAGE="$rootfs_image" --label ecdysis=1 \
    --label ecdysis.dockerfile="$recipe" -t "$image" "$context"
[[ -z $old ]] || [[ $old == $(docker image inspect -f '{{.Id}}' "$image") ]] || docker rmi "$old" >/dev/null 2>&1 || true
echo "build-base-image: built $image"
