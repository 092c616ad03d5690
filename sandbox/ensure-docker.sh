#!/usr/bin/env bash
# Make sure a Docker *daemon* answers (a `docker` client on PATH proves nothing: a machine can have the client and no
# engine). When none answers and no `dockerd` exists, install docker.io through apt as root; then start dockerd in
# the background and wait until it answers. When Docker cannot be had (no root, no apt, a refused namespace) print
# one warning and exit 0: Ecdysis then uses the process sandbox.
#
# Exit status is always 0. The last line says which sandbox this host will use ("sandbox: docker" or "sandbox: process").
set -uo pipefail

timeout_s=${ECDYSIS_DOCKER_WAIT_S:-60}
log=${ECDYSIS_DOCKERD_LOG:-/tmp/dockerd.log}

fallback() {
    echo "ensure-docker: warning: $*; Ecdysis will use the process sandbox" >&2
    echo "ensure-docker: sandbox: process"
    exit 0
}
answers() { command -v docker >/dev/null 2>&1 && timeout 10 docker info >/dev/null 2>&1; }
ready() { echo "ensure-docker: the Docker daemon answers"; echo "ensure-docker: sandbox: docker"; exit 0; }

as_root() {
    if [[ $(id -u) == 0 ]]; then "$@"
    elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo -n "$@"
    else return 1
    fi
}

answers && ready

if ! command -v dockerd >/dev/null 2>&1; then
    command -v apt-get >/dev/null 2>&1 || fallback "no Docker daemon answers, dockerd is missing and apt-get is unavailable"
    as_root true 2>/dev/null || fallback "no Docker daemon answers and installing docker.io needs root"
    echo "ensure-docker: no Docker daemon answers and dockerd is missing: installing docker.io"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null 2>&1 \
        && as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker.io \
            >/dev/null 2>&1 \
        || fallback "apt-get could not install docker.io"
    hash -r
    command -v dockerd >/dev/null 2>&1 || fallback "docker.io is installed but dockerd is not on PATH"
fi

# A daemon we start keeps its data on its own btrfs filesystem (a sparse file, loop-mounted), so the btrfs storage
# driver honours `--storage-opt size=` and one task container cannot fill the host's disk (this kernel's xfs has no
# project quotas, which overlay2 would need). A daemon that already runs is used as it is: its containers then have
# no disk quota, and the OS benchmark says so.
data_root=${ECDYSIS_DOCKER_DATA_ROOT:-/var/lib/ecdysis-docker}
disk_file=${ECDYSIS_DOCKER_DISK_FILE:-/var/lib/ecdysis-docker.btrfs}
disk_size=${ECDYSIS_DOCKER_DISK_SIZE:-48G}
daemon_args=()

# Switch the data root's quota accounting to simple quotas (a full-mode one is disabled first). btrfs-progs before
# 6.7 cannot ask for them, so the ioctl (BTRFS_IOC_QUOTA_CTL, BTRFS_QUOTA_CTL_ENABLE_SIMPLE_QUOTA) is sent directly.
simple_quota_root() {
    local uuid mode
    uuid=$(findmnt -n -o UUID --mountpoint "$data_root") || return 1
    mode=$(cat "/sys/fs/btrfs/$uuid/qgroups/mode" 2>/dev/null)
    [[ $mode == squota ]] && return 0
    if [[ -n $mode ]]; then as_root btrfs quota disable "$data_root" >/dev/null 2>&1 || return 1; fi
    as_root python3 -c '
import fcntl, os, struct, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
fcntl.ioctl(fd, 0xC0109428, bytearray(struct.pack("QQ", 4, 0)))' "$data_root" || return 1
    [[ $(cat "/sys/fs/btrfs/$uuid/qgroups/mode" 2>/dev/null) == squota ]]
}

quota_root() {
    if ! findmnt -n -o FSTYPE --mountpoint "$data_root" 2>/dev/null | grep -qx btrfs; then
        if ! command -v mkfs.btrfs >/dev/null 2>&1; then
            as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends btrfs-progs \
                >/dev/null 2>&1 || return 1
        fi
        if [[ ! -f $disk_file ]]; then
            as_root truncate -s "$disk_size" "$disk_file" && as_root mkfs.btrfs -q "$disk_file" >/dev/null \
                || { as_root rm -f "$disk_file"; return 1; }
        fi
        as_root mkdir -p "$data_root" && as_root mount -o loop "$disk_file" "$data_root" || return 1
    fi
    # The storage driver sets qgroup limits, but a filesystem whose quota accounting was never enabled (or is
    # inconsistent) does not enforce them. Simple quotas (kernel 6.7+) count what a subvolume allocates; full qgroup
    # accounting walks back-references on every removal, and after a few hundred task containers the kernel's
    # btrfs-cleaner held a core and `docker run --rm` took 2.7 s (0.45 s with simple quotas, same daemon and image).
    if [[ -e /sys/fs/btrfs/features/simple_quota ]]; then
        simple_quota_root || return 1
    else
        as_root btrfs quota enable "$data_root" >/dev/null 2>&1 \
            && as_root btrfs quota rescan -w "$data_root" >/dev/null 2>&1 || return 1
    fi
    daemon_args=(--data-root "$data_root" --storage-driver btrfs)
    echo "ensure-docker: data root $data_root on btrfs ($disk_file): task containers get a disk quota"
}

if ! pgrep -x dockerd >/dev/null 2>&1; then
    as_root true 2>/dev/null || fallback "no Docker daemon answers and starting dockerd needs root"
    quota_root || echo "ensure-docker: warning: no btrfs data root; task containers will have no disk quota" >&2
    echo "ensure-docker: starting dockerd (log: $log)"
    as_root setsid "$(command -v dockerd)" "${daemon_args[@]}" >"$log" 2>&1 </dev/null &
    disown 2>/dev/null || true
fi

for ((i = 0; i < timeout_s * 2; i++)); do
    answers && ready
    sleep 0.5
done
fallback "no Docker daemon answered within ${timeout_s}s (see $log: $(tail -n 1 "$log" 2>/dev/null))"
