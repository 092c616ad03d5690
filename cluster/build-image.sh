#!/usr/bin/env bash
# Build the Ecdysis node image (top-level Dockerfile) with no registry and no package index inside the build:
#   1. the sandbox rootfs image (Debian + python3, from sandbox/build-base-image.sh) is the default base;
#   2. every wheel the package needs is built on this host (pip reaches PyPI here; the build does not);
#   3. the image is stamped with the package version and the git commit (labels and ECDYSIS_* variables).
#
#   bash cluster/build-image.sh          # tags ecdysis:local and ecdysis:<version>-<commit>
#   ECDYSIS_IMAGE=ecdysis:dev BASE_IMAGE=python:3.11-slim bash cluster/build-image.sh
# Idempotent: when an image for this commit exists (and the tree is clean) it only re-tags it; FORCE=1 rebuilds.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
image=${ECDYSIS_IMAGE:-ecdysis:local}
base=${BASE_IMAGE:-ecdysis-sandbox-rootfs:local}
python=${PYTHON:-$( [[ -x .venv/bin/python ]] && echo .venv/bin/python || echo python3 )}
version=$("$python" -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')
commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
# Uncommitted changes to what goes into the image make the stamp say so.
if [[ $commit != unknown ]] && ! git diff --quiet HEAD -- pyproject.toml ecdysis 2>/dev/null; then
    commit="$commit-dirty"
fi
stamped="${image%%:*}:$version-$commit"

if [[ ${FORCE:-0} != 1 && $commit != *-dirty ]] && docker image inspect "$stamped" >/dev/null 2>&1; then
    docker tag "$stamped" "$image"
    echo "build-image: $stamped already built; tagged $image"
    exit 0
fi
if [[ $base == ecdysis-sandbox-rootfs:local ]]; then
    bash sandbox/ensure-docker.sh >/dev/null
    bash sandbox/build-base-image.sh
fi
docker image inspect "$base" >/dev/null 2>&1 || { echo "build-image: base image $base is missing" >&2; exit 1; }

wheels=build/image-wheels
rm -rf "$wheels"
mkdir -p "$wheels"
echo "build-image: building wheels for ecdysis $version and its dependencies into $wheels"
# async-timeout: redis needs it below Python 3.11.3, and Debian bookworm's python3 is 3.11.2 (the host's may be newer,
# so pip here would leave it out).
"$python" -m pip wheel --quiet --disable-pip-version-check --wheel-dir "$wheels" ".[tau2,agentbench]" pip async-timeout
echo "build-image: building $image ($stamped) on $base"
DOCKER_BUILDKIT=0 docker build -q --build-arg BASE_IMAGE="$base" --build-arg VERSION="$version" \
    --build-arg GIT_COMMIT="$commit" -t "$image" -t "$stamped" . >/dev/null
# The install stage stays behind as an untagged image holding every wheel, and earlier builds keep their stamped
# tags: remove both (only our images: the install stage's label, and this repository's other version-commit tags).
docker image prune -f --filter dangling=true --filter label=ecdysis.stage=install >/dev/null 2>&1 || true
for old in $(docker images "${image%%:*}" --filter label=ecdysis.role=node --format '{{.Repository}}:{{.Tag}}'); do
    [[ $old == "$stamped" || $old == "$image" ]] || docker rmi "$old" >/dev/null 2>&1 || true
done
size=$(docker image inspect -f '{{.Size}}' "$image")
echo "build-image: built $image = $stamped ($((size / 1000000)) MB)"
