"""A subset of AgentBench's data: the few records one run used, each checked against its sha256 pinned here.

A replay pack carries the records its run used, so that it replays on a machine with no AgentBench checkout. The
subset keeps upstream's layout and every record's position (a record left out is a blank line of a ``.jsonl`` file
or a ``null`` of a ``.json`` array), so task ids are upstream's; ``SUBSET.json`` names the files and, per split, the
ids the run's seeded draw chose from (its pool), so the draw is the same as with the whole data. ``LICENSE`` and
``NOTICE`` carry AgentBench's licence (Apache-2.0). A pack is hostile input: a record whose sha256 is not the pinned
one of its file and position is refused (``pinned_records.json``, made from the data at the pinned commit by
:func:`pin_records`). Example::

    write_subset(AgentBenchData(root), {"dbbench/dev.jsonl": {17, 26}}, {"train": [...], "test": [...]}, folder)
    AgentBenchData(folder).path("dbbench/dev.jsonl")    # the sparse file, each record verified
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ecdysis.benchmarks.agentbench.pins import COMMIT, AgentBenchDataError

if TYPE_CHECKING:
    from ecdysis.benchmarks.agentbench.manifest import AgentBenchData

SUBSET_FILE = "SUBSET.json"
NOTICE_FILE = "NOTICE"
_PINS_PATH = Path(__file__).parent / "pinned_records.json"
_TASK_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,80}$")


def record_entries(name: str, text: str) -> list[str | None]:
    """The records of data file ``name`` in order, each as the text its digest is taken of (None: left out)."""
    if name.endswith(".jsonl"):
        return [line if line.strip() else None for line in text.splitlines()]
    records = json.loads(text)
    if isinstance(records, dict):
        records = [records]
    if not isinstance(records, list):
        raise ValueError(f"{name}: not a JSON array of records")
    return [None if r is None else json.dumps(r, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
            for r in records]


def digest(entry: str) -> str:
    """sha256 of one record's text."""
    return hashlib.sha256(entry.encode("utf-8")).hexdigest()


def record_files(names: list[str]) -> list[str]:
    """The data files among pinned ``names`` that hold task records (not the licence, not the readme)."""
    return [n for n in names if n.endswith((".jsonl", ".json")) and "/" in n]


def pin_records(data: AgentBenchData) -> dict[str, list[str | None]]:
    """Each record file's per-record digests (write them to ``pinned_records.json`` when the pinned commit moves)."""
    return {name: [None if e is None else digest(e) for e in record_entries(name, data.path(name).read_text("utf-8"))]
            for name in record_files(data.names())}


_pins: dict[str, list[str | None]] | None = None


def pinned_records() -> dict[str, list[str | None]]:
    """The pinned per-record digests."""
    global _pins
    if _pins is None:
        _pins = json.loads(_PINS_PATH.read_text(encoding="utf-8"))
    return _pins


def write_subset(data: AgentBenchData, keep: dict[str, set[int]], pools: dict[str, list[str]], folder: Path,
                 prefix: str) -> None:
    """Write into ``folder`` every record file under ``prefix`` holding only the records ``keep`` names (by file and
    position), the draw's ``pools``, and AgentBench's licence and notice."""
    folder.mkdir(parents=True, exist_ok=True)
    files = [n for n in record_files(data.names(prefix))]
    for name in files:
        wanted = keep.get(name, set())
        text = data.path(name).read_text(encoding="utf-8")
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if name.endswith(".jsonl"):
            lines = text.splitlines()
            target.write_text("".join((line if i in wanted else "") + "\n" for i, line in enumerate(lines)),
                              encoding="utf-8")
        else:
            records = json.loads(text)
            records = [records] if isinstance(records, dict) else records
            kept = [r if i in wanted else None for i, r in enumerate(records)]
            target.write_text(json.dumps(kept, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    shutil.copyfile(data.path("LICENSE"), folder / "LICENSE")
    (folder / NOTICE_FILE).write_text(
        "These records are a subset of the data of AgentBench (https://github.com/THUDM/AgentBench, commit "
        f"{COMMIT}), Copyright THUDM, licensed under the Apache License 2.0 (LICENSE beside this file). They are the "
        "records one Ecdysis run used, unmodified; every other record is left out (a blank line or null keeps each "
        "record's position).\n", encoding="utf-8")
    (folder / SUBSET_FILE).write_text(json.dumps({"commit": COMMIT, "files": files, "pools": pools}, indent=1) + "\n",
                                      encoding="utf-8")


class Subset:
    """A subset folder's ``SUBSET.json``, checked: known files, the pinned commit, well-formed pools."""

    def __init__(self, root: Path) -> None:
        try:
            meta: Any = json.loads((root / SUBSET_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise AgentBenchDataError(f"{root / SUBSET_FILE} is not readable: {err}") from None
        pins = pinned_records()
        ok = (isinstance(meta, dict) and set(meta) == {"commit", "files", "pools"} and meta["commit"] == COMMIT
              and isinstance(meta["files"], list) and all(f in pins for f in meta["files"])
              and isinstance(meta["pools"], dict)
              and all(isinstance(ids, list) and all(isinstance(i, str) and _TASK_ID.match(i) for i in ids)
                      for ids in meta["pools"].values()))
        if not ok:
            raise AgentBenchDataError(f"{root / SUBSET_FILE}: not a subset of AgentBench's data at commit {COMMIT} "
                                      "(unknown files, another commit, or malformed pools)")
        self.root = root
        self.files: list[str] = meta["files"]
        self.pools: dict[str, list[str]] = meta["pools"]

    def verify(self, name: str, path: Path) -> None:
        """Refuse ``path`` unless every record it holds is the pinned record of its file and position."""
        if name not in self.files:
            raise AgentBenchDataError(f"{name} is not among the AgentBench records in {self.root} (a replay pack "
                                      "carries only the files of its run's benchmark)")
        pins = pinned_records()[name]
        try:
            entries = record_entries(name, path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise AgentBenchDataError(f"{path}: not a readable AgentBench record file: {err}") from None
        if len(entries) > len(pins):
            raise AgentBenchDataError(f"{path}: {len(entries)} records, more than upstream's {len(pins)}")
        for index, entry in enumerate(entries):
            if entry is not None and digest(entry) != pins[index]:
                raise AgentBenchDataError(f"{path}: record {index} is not upstream's record at that position "
                                          "(its sha256 differs from the pinned one)")
