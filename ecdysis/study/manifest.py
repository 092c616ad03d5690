"""The study's checkpoint: which run of the study is done, kept in the store beside the runs themselves.

One JSON object per study (``objects/studies/<study id>.json``), rewritten after every run starts and ends, so a
study killed at any point (even days before) picks up where it stopped: finished runs are skipped, a training run
that was under way resumes from its own checkpoints, an evaluation that was under way starts again (its calls come
from the response cache).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ecdysis.records import utc_now

NAMESPACE = "studies"


class StudyEntry(BaseModel):
    """One run of the study: a training run (``train/<configuration>``) or a held-out evaluation
    (``eval/<configuration>/<model>``)."""

    model_config = ConfigDict(extra="forbid")

    key: str
    run_id: str
    kind: Literal["train", "eval"]
    configuration: str
    model: str
    status: Literal["running", "finished"] = "running"
    harness: str | None = None
    """Train: the final harness hash. Eval: the harness evaluated (a seed name or a stored harness hash)."""
    started_at: datetime = Field(default_factory=utc_now)
    finished_at: datetime | None = None


class StudyManifest(BaseModel):
    """A study's runs, by key; ``protocol`` is what the study id was derived from."""

    model_config = ConfigDict(extra="forbid")

    study_id: str
    protocol: dict[str, Any]
    entries: dict[str, StudyEntry] = Field(default_factory=dict)
    created_at: datetime = Field(default_factory=utc_now)
    updated_at: datetime = Field(default_factory=utc_now)

    def finished(self, key: str) -> StudyEntry | None:
        """The finished run under ``key``, or None."""
        entry = self.entries.get(key)
        return entry if entry is not None and entry.status == "finished" else None


def load_manifest(store: Any, study_id: str) -> StudyManifest | None:
    """The study's stored checkpoint, or None."""
    data = store.get_object(NAMESPACE, f"{study_id}.json")
    return None if data is None else StudyManifest.model_validate_json(data)


def save_manifest(store: Any, manifest: StudyManifest) -> None:
    """Store the checkpoint (atomic: the whole object is replaced), merged first with the stored one, so that two
    processes running different configurations of one study (``ecdysis study --only``, on one machine or two) keep
    each other's runs: ``manifest`` takes the stored entries it lacks, and of two entries under one key the finished
    one, else the later started. The store has no compare-and-swap, so two saves in the same instant can still drop
    one entry (its run stays in the store, and a rerun resumes it); saves come minutes apart, when a run starts or
    ends."""
    stored = load_manifest(store, manifest.study_id)
    if stored is not None:
        for key, theirs in stored.entries.items():
            mine = manifest.entries.get(key)
            if mine is None or _rank(theirs) > _rank(mine):
                manifest.entries[key] = theirs
    manifest.updated_at = utc_now()
    store.put_object(NAMESPACE, f"{manifest.study_id}.json", manifest.model_dump_json(indent=2).encode())


def _rank(entry: StudyEntry) -> tuple[bool, datetime]:
    return entry.status == "finished", entry.started_at


def train_key(configuration: str) -> str:
    """The key of a configuration's training run."""
    return f"train/{configuration}"


def eval_key(configuration: str, model: str) -> str:
    """The key of a configuration's held-out evaluation on ``model``."""
    return f"eval/{configuration}/{model}"
