"""AgentBench's data files, found in a data folder and checked against the sha256s pinned here.

The data is not part of Ecdysis. A data folder is either this project's shared layout (``dbbench/``,
``os_interaction/``, with its own ``MANIFEST.json``) or a checkout of THUDM/AgentBench at the pinned commit (files
under ``data/``). A config names it (``benchmark.data_dir``), else ``$ECDYSIS_AGENTBENCH_DATA``, else the user's
cache holds it (``~/.cache/ecdysis/agentbench``, a copy or a link: :func:`find_data_dir`). ``pinned_files.json``
beside this module lists every file's sha256 and both of its paths; a file that is missing or differs is refused
with an error naming it.

>>> data = AgentBenchData("../shared/agentbench")       # doctest: +SKIP
>>> data.path("dbbench/dev.jsonl")                      # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

from ecdysis.benchmarks.agentbench.pins import COMMIT, PINNED, AgentBenchDataError
from ecdysis.benchmarks.agentbench.subset import SUBSET_FILE, Subset
from ecdysis.usercache import cache_dir

DATA_ENV = "ECDYSIS_AGENTBENCH_DATA"
"""Environment variable naming the data folder when a config does not."""


def find_data_dir() -> Path | None:
    """The data folder to use when a config names none: ``$ECDYSIS_AGENTBENCH_DATA``, else ``agentbench/`` in the
    user's cache (:func:`ecdysis.usercache.cache_dir`) when it holds a ``MANIFEST.json``; None when there is neither.
    Nothing beside the installation or the working directory is looked at. (The files are checked when
    :class:`AgentBenchData` reads them, not here.)"""
    if os.environ.get(DATA_ENV):
        return Path(os.environ[DATA_ENV])
    cached = cache_dir() / "agentbench"
    return cached if (cached / "MANIFEST.json").is_file() else None


_verified: set[tuple[str, str]] = set()
_lock = threading.Lock()


class AgentBenchData:
    """A verified AgentBench data folder."""

    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        chosen = root if root is not None else find_data_dir()
        if not chosen:
            raise AgentBenchDataError(
                f"no AgentBench data folder: set benchmark.data_dir or ${DATA_ENV} to a checkout of THUDM/AgentBench "
                f"at commit {COMMIT} (or put one, or a link to one, at {cache_dir() / 'agentbench'})")
        self.root = Path(chosen).expanduser().resolve()
        if not self.root.is_dir():
            raise AgentBenchDataError(f"AgentBench data folder {self.root} does not exist")
        self.subset: Subset | None = None
        """Set when the folder holds only some records (a replay pack's, :mod:`.subset`): each is checked alone."""
        if (self.root / SUBSET_FILE).is_file():
            self.subset = Subset(self.root)

    def path(self, name: str) -> Path:
        """The verified file ``name`` (a key of the pinned list, e.g. ``dbbench/dev.jsonl``)."""
        entry = PINNED["files"].get(name)
        if entry is None:
            raise AgentBenchDataError(f"{name!r} is not an AgentBench file this version knows")
        if self.subset is not None:
            self.subset.verify(name, self.root / name)
            return self.root / name
        for candidate in (self.root / name, self.root / entry["upstream_path"]):
            if candidate.is_file():
                self._verify(candidate, name, entry["sha256"])
                return candidate
        raise AgentBenchDataError(f"AgentBench file {name} is missing from {self.root} (looked for {name} and "
                                  f"{entry['upstream_path']})")

    def names(self, prefix: str = "") -> list[str]:
        """The pinned file names under ``prefix``."""
        return sorted(name for name in PINNED["files"] if name.startswith(prefix))

    @staticmethod
    def _verify(path: Path, name: str, expected: str) -> None:
        stat = path.stat()
        key = (str(path), f"{stat.st_mtime_ns}:{stat.st_size}")
        with _lock:
            if key in _verified:
                return
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if digest != expected:
            raise AgentBenchDataError(
                f"AgentBench file {path} has sha256 {digest}, not the pinned {expected} of {name} at commit {COMMIT}: "
                "use the data of that commit")
        with _lock:
            _verified.add(key)
