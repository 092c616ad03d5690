#!/usr/bin/env bash
# Make sure a Docker daemon answers: install docker.io with apt when the CLI is missing, start dockerd in the
# background when no daemon answers, and wait until it does. Exits 0 with a warning when Docker cannot be had:
# Ecdysis then falls back to the (weaker) process sandbox.
set -uo pipefail

timeout_s=${ECDYSIS_DOCKER_WAIT_S:-60}
log=${ECDYSIS_DOCKERD_LOG:-/tmp/dockerd.log}

warn() { echo "ensure-docker: warning: $*; the process sandbox backend remains available" >&2; exit 0; }
answers() { docker info >/dev/null 2>&1; }

as_root() {
    if [[ $(id -u) == 0 ]]; then "$@"
    elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then sudo -n "$@"
    else return 1
    fi
}

if ! command -v docker >/dev/null 2>&1; then
    command -v apt-get >/dev/null 2>&1 || warn "docker is not installed and apt-get is unavailable"
    echo "ensure-docker: installing docker.io"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null \
        && as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io >/dev/null \
        || warn "could not install docker.io (no root or no package mirror)"
fi

if answers; then
    echo "ensure-docker: the Docker daemon answers"
    exit 0
fi

command -v dockerd >/dev/null 2>&1 || warn "dockerd is not installed"
if ! pgrep -x dockerd >/dev/null 2>&1; then
    echo "ensure-docker: starting dockerd (log: $log)"
    as_root setsid dockerd >"$log" 2>&1 < /dev/null &
    disown 2>/dev/null || true
fi

for ((i = 0; i < timeout_s * 2; i++)); do
    if answers; then
        echo "ensure-docker: the Docker daemon answers"
        exit 0
    fi
    sleep 0.5
done
warn "no Docker daemon answered within ${timeout_s}s (see $log)"
