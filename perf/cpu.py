"""CPU seconds spent by a process tree, Docker containers and the Docker daemons between two snapshots."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import psutil

DOCKER_CGROUP = Path("/sys/fs/cgroup/cpuacct/docker/cpuacct.usage")
DAEMONS = ("dockerd", "containerd", "containerd-shim")
"""Docker's processes outside the containers. A container's shim (``containerd-shim-runc-v2``, 15-character comm
``containerd-shim``) lives as long as its container and reaps the ``runc`` of every exec in it, so a reused
container's engine work shows only here while the container runs; once a shim exits, containerd reaps it."""


def _cpu(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return float(t.user + t.system + t.children_user + t.children_system)


def _tree(root: int, exclude: set[int]) -> dict[int, float]:
    out: dict[int, float] = {}
    try:
        top = psutil.Process(root)
        procs = [top, *top.children(recursive=True)]
    except psutil.NoSuchProcess:
        return out
    for proc in procs:
        if proc.pid in exclude:
            continue
        try:
            out[proc.pid] = _cpu(proc)
        except psutil.Error:
            continue
    return out


def _daemons() -> dict[int, float]:
    out: dict[int, float] = {}
    for proc in psutil.process_iter(["name"]):
        if proc.info["name"] in DAEMONS:
            try:
                out[proc.pid] = _cpu(proc)
            except psutil.Error:
                continue
    return out


def _docker_cgroup_s() -> float:
    try:
        return int(DOCKER_CGROUP.read_text()) / 1e9
    except (OSError, ValueError):
        return 0.0


def _system_busy_s() -> float:
    t = psutil.cpu_times()
    return float(t.user + t.nice + t.system + getattr(t, "irq", 0) + getattr(t, "softirq", 0))


@dataclass
class CpuMeter:
    """Snapshot at construction; :meth:`read` gives the CPU seconds since, by part.

    ``ours`` is this process and its descendants (Ray, workers, process sandboxes) except ``exclude`` (the latency
    server); ``containers`` the Docker cgroup (every container on the host); ``daemons`` dockerd and containerd;
    ``system`` the whole machine (other users included: an upper bound).
    """

    exclude: set[int] = field(default_factory=set)
    root: int = field(default_factory=os.getpid)

    def __post_init__(self) -> None:
        self._tree = _tree(self.root, self.exclude)
        self._daemons = _daemons()
        self._cgroup = _docker_cgroup_s()
        self._system = _system_busy_s()

    def read(self) -> dict[str, float]:
        tree, daemons = _tree(self.root, self.exclude), _daemons()
        ours = sum(max(0.0, v - self._tree.get(pid, 0.0)) for pid, v in tree.items())
        daemon = sum(max(0.0, v - self._daemons.get(pid, 0.0)) for pid, v in daemons.items())
        return {"ours": ours, "containers": _docker_cgroup_s() - self._cgroup, "daemons": daemon,
                "system": _system_busy_s() - self._system}


class RssSampler:
    """Samples, every ``interval_s``, the resident memory of this process and its descendants (Ray, workers,
    sandboxes; ``exclude`` left out) and keeps the peak. :meth:`stop` returns it in bytes.

    Walking the process tree is not free (a few /proc reads per process; at 0.5 s intervals it was 76 of the 83
    py-spy samples of the benchmark's driver process during a batch), and it runs in this process, which a
    :class:`CpuMeter` counts as ours: the sampler's own CPU (``cpu_s``, its thread's CPU time) is therefore reported
    so callers can take it back out."""

    def __init__(self, *, exclude: set[int] | None = None, interval_s: float = 1.0) -> None:
        import threading

        self.exclude = exclude or set()
        self.peak = 0
        self.peak_pss = 0
        """Peak of the summed proportional set sizes: shared pages (the interpreter, libraries) counted once."""
        self.cpu_s = 0.0
        """CPU seconds the sampling thread itself used."""
        self._done = threading.Event()
        self._interval_s = interval_s
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _totals(self, with_pss: bool) -> tuple[int, int]:
        rss = pss = 0
        try:
            top = psutil.Process(os.getpid())
            procs = [top, *top.children(recursive=True)]
        except psutil.NoSuchProcess:
            return 0, 0
        for proc in procs:
            if proc.pid in self.exclude:
                continue
            try:
                info = proc.memory_full_info() if with_pss else proc.memory_info()
            except psutil.Error:
                continue
            rss += info.rss
            pss += getattr(info, "pss", info.rss)
        return rss, pss

    def _sample(self) -> None:
        import time

        samples = 0
        while True:  # a first sample at once, so a batch shorter than the interval still has one
            # PSS reads each process's smaps: ~10× the cost of RSS, so it is taken every fifth sample only.
            with_pss = samples % 5 == 0
            rss, pss = self._totals(with_pss)
            self.peak = max(self.peak, rss)
            if with_pss:
                self.peak_pss = max(self.peak_pss, pss)
            samples += 1
            self.cpu_s = time.thread_time()
            if self._done.wait(self._interval_s):
                return

    def stop(self) -> int:
        self._done.set()
        self._thread.join()
        return self.peak
