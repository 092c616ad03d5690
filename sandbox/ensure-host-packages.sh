#!/usr/bin/env bash
# Install the Debian packages that Ecdysis and its test suite use on this host, where that can be done: as root (or
# with password-less sudo) through apt. Each package is looked up first, so a ready machine costs one dpkg query.
# Where nothing can be installed, print the exact command to run and exit 0: the parts that need a missing package
# then say so themselves (a skipped test names the package).
#
#   bash sandbox/ensure-host-packages.sh            # what `make setup` runs
#   ECDYSIS_HOST_PACKAGES="bubblewrap" bash ...     # a smaller set
set -uo pipefail

# build tools for llama-cpp-python; debootstrap for the sandbox base image; bubblewrap for the process sandbox;
# chromium for the report's browser tests; mariadb-server for AgentBench's DBBench; docker-registry (the CNCF
# distribution registry) for harness images carried to cluster nodes.
default_packages="ca-certificates build-essential cmake git python3 python3-venv python3-dev debootstrap bubblewrap
chromium mariadb-server docker-registry"
read -r -a wanted <<<"$(echo ${ECDYSIS_HOST_PACKAGES:-$default_packages})"

missing=()
for package in "${wanted[@]}"; do
    status=$(dpkg-query -W -f='${Status}' "$package" 2>/dev/null || true)
    [[ $status == "install ok installed" ]] || missing+=("$package")
done
if [[ ${#missing[@]} -eq 0 ]]; then
    echo "ensure-host-packages: all ${#wanted[@]} host packages are installed"
    exit 0
fi

as_root() {
    if [[ $(id -u) == 0 ]]; then "$@"
    elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo -n "$@"
    else return 1
    fi
}

advise() {
    echo "ensure-host-packages: warning: $1. Install them with:" >&2
    echo "    sudo apt-get update && sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
    exit 0
}

command -v apt-get >/dev/null 2>&1 || advise "apt-get is unavailable, so ${missing[*]} cannot be installed here"
as_root true 2>/dev/null || advise "installing ${missing[*]} needs root (or password-less sudo)"
echo "ensure-host-packages: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
if ! as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null \
    || ! as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" \
        >/dev/null; then
    advise "apt-get could not install ${missing[*]}"
fi
# A package's own service (mariadb, the registry) must not keep running: Ecdysis starts its own servers on loopback.
for service in mariadb mysql docker-registry; do
    if command -v service >/dev/null 2>&1 && [[ -x /etc/init.d/$service ]]; then
        as_root service "$service" stop >/dev/null 2>&1 || true
    fi
done
echo "ensure-host-packages: installed ${missing[*]}"
