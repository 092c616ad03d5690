#!/usr/bin/env bash
# Build the AgentBench OS-interaction task image `ecdysis-agentbench-os:local` without any container registry:
#   1. debootstrap a minimal Debian bookworm rootfs with the tools upstream's task image has (python3, git, curl,
#      wget, zip, unzip, tree, vim) plus procps, cached as a tarball under $ECDYSIS_CACHE_DIR,
#   2. `docker import` it as the task image (root's home as working directory, `sleep infinity` as command).
# Idempotent: does nothing when the image exists, unless FORCE=1. Needs root (debootstrap) and a Docker daemon;
# without a daemon it warns once and exits 0.
set -euo pipefail

image=${ECDYSIS_AGENTBENCH_OS_IMAGE:-ecdysis-agentbench-os:local}
suite=${DEBIAN_SUITE:-bookworm}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
cache=${ECDYSIS_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ecdysis}
tarball=$cache/rootfs-$suite-agentbench-os.tar.gz
# passwd (useradd) and util-linux (su, runuser) come with minbase; the tasks create users and switch to them.
packages=python3,procps,git,curl,wget,zip,unzip,tree,vim-tiny
force=${FORCE:-0}
work=
cleanup() { [[ -z $work ]] || rm -rf "$work"; }
trap cleanup EXIT

if ! { command -v docker >/dev/null 2>&1 && timeout 10 docker info >/dev/null 2>&1; }; then
    echo "agentbench-os build-image: warning: no Docker daemon answers, so $image is not built (the OS-interaction" \
        "benchmark needs it)" >&2
    exit 0
fi

if [[ $force != 1 ]] && docker image inspect "$image" >/dev/null 2>&1; then
    echo "agentbench-os build-image: $image already exists (FORCE=1 rebuilds)"
    exit 0
fi

mkdir -p "$cache"
# Several processes may ask for the image at once (each rollout worker of a fresh machine's first OS episodes): one
# builds, the others wait for it and then find the image. Two writers of one tarball left it corrupt.
exec 9>"$cache/.agentbench-os-build.lock"
flock 9
if [[ $force != 1 ]] && docker image inspect "$image" >/dev/null 2>&1; then
    echo "agentbench-os build-image: $image was built meanwhile"
    exit 0
fi
if [[ -s $tarball ]] && ! gzip -t "$tarball" 2>/dev/null; then
    echo "agentbench-os build-image: $tarball is damaged; building it again" >&2
    rm -f "$tarball"
fi
if [[ $force == 1 || ! -s $tarball ]]; then
    [[ $(id -u) == 0 ]] || { echo "agentbench-os build-image: debootstrap needs root" >&2; exit 1; }
    command -v debootstrap >/dev/null || { apt-get update -qq && apt-get install -y -qq debootstrap; }
    work=$(mktemp -d)
    echo "agentbench-os build-image: debootstrap $suite from $mirror (a few minutes)"
    debootstrap --variant=minbase --include="$packages" "$suite" "$work/rootfs" "$mirror"
    # Package caches, docs and man pages are never needed by a task; the tasks' answers are computed in the same
    # image at grading time, so what is removed here cannot make an answer wrong.
    rm -rf "$work"/rootfs/var/cache/apt/archives/*.deb "$work"/rootfs/var/lib/apt/lists/* \
        "$work"/rootfs/usr/share/{doc,man,info} "$work"/rootfs/var/log/*.log
    tar -C "$work/rootfs" --numeric-owner -czf "$work/rootfs.tar.gz" .
    mv "$work/rootfs.tar.gz" "$tarball.tmp.$$"
    mv "$tarball.tmp.$$" "$tarball"
fi

echo "agentbench-os build-image: importing $tarball as $image"
old=$(docker image inspect -f '{{.Id}}' "$image" 2>/dev/null || true)
docker import \
    --change 'LABEL ecdysis=1' --change 'LABEL ecdysis.agentbench=os' \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'WORKDIR /root' --change 'CMD ["sleep", "infinity"]' \
    "$tarball" "$image" >/dev/null
# A re-import leaves the previous image untagged; remove it unless a container still uses it.
[[ -z $old ]] || [[ $old == $(docker image inspect -f '{{.Id}}' "$image") ]] || docker rmi "$old" >/dev/null 2>&1 || true
echo "agentbench-os build-image: built $image"
