"""Field-by-field comparison of a run with its replay: what must be identical, and the first place it is not.

Compared: every trajectory (messages, tool calls, termination, grade), failure record, modification specification,
harness version (hash, lineage, diff, scores, decision), round result (hashes, scores, decision, failure and
modification counts, LLM calls per phase), the number of LLM calls per round, role and model, the held-out metrics
per (phase, harness, model) and the final harness hash.

Not compared, because a replay cannot reproduce them: wall-clock times, timestamps, and what the provider charged
(tokens, cost, provider cache hits): a replay answers every call from the response cache, so it spends nothing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from pydantic import BaseModel

from ecdysis.metrics import summarize
from ecdysis.records import LLMCallRecord, Trajectory
from ecdysis.store import ArtifactStore

VOLATILE = frozenset({"created_at", "wall_time_s", "latency_s", "tokens", "cost_usd", "cache_hits", "cache_hit",
                      "call_id", "sandbox"})
"""Fields no replay can reproduce (times, what the provider charged, which sandbox backend ran it)."""


def first_difference(original: Any, replayed: Any, path: str = "") -> str | None:
    """Where two JSON-like values first differ (``path: original != replayed``), or None when they are equal."""
    if isinstance(original, dict) and isinstance(replayed, dict):
        for key in sorted(set(original) | set(replayed), key=str):
            if key in VOLATILE:
                continue
            where = f"{path}.{key}" if path else str(key)
            if key not in replayed:
                return f"{where}: only in the original"
            if key not in original:
                return f"{where}: only in the replay"
            found = first_difference(original[key], replayed[key], where)
            if found:
                return found
        return None
    if isinstance(original, list) and isinstance(replayed, list):
        for i, (a, b) in enumerate(zip(original, replayed, strict=False)):
            found = first_difference(a, b, f"{path}[{i}]")
            if found:
                return found
        if len(original) != len(replayed):
            return f"{path}: {len(original)} items in the original, {len(replayed)} in the replay"
        return None
    if original != replayed:
        return f"{path}: {_short(original)} != {_short(replayed)}"
    return None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 160 else text[:157] + "..."


def _keyed(rows: Iterable[BaseModel], key: Callable[[Any], tuple[Any, ...]]) -> dict[tuple[Any, ...], Any]:
    return {key(row): row.model_dump(mode="json") for row in rows}


def _trajectory_key(t: Trajectory) -> tuple[Any, ...]:
    return (t.round, t.phase, t.harness_hash[:12], t.model, t.task.benchmark, t.task.domain, t.task.task_id, t.trial)


KEYS: dict[str, Callable[[Any], tuple[Any, ...]]] = {
    "trajectories": _trajectory_key,
    "failures": lambda f: (f.round, f.failure_id),
    "specs": lambda s: (s.round, s.spec_id),
    "harness_versions": lambda h: (h.round, h.harness_hash[:12]),
    "rounds": lambda r: (r.round,),
}
"""The datasets compared record by record, and the key that pairs a record with its replay."""


def compare_dataset(name: str, original: list[Any], replayed: list[Any]) -> str | None:
    """The first difference between a dataset's records in the original run and in the replay."""
    key = KEYS[name]
    a, b = _keyed(original, key), _keyed(replayed, key)
    for k in sorted(set(a) | set(b), key=repr):
        label = f"{name}[{', '.join(map(str, k))}]"
        if k not in b:
            return f"{label}: in the original, missing from the replay"
        if k not in a:
            return f"{label}: in the replay, not in the original"
        found = first_difference(a[k], b[k])
        if found:
            return f"{label}.{found}"
    return None


def call_counts(calls: list[Any]) -> dict[str, int]:
    """LLM calls per round, role and model (errors counted apart)."""
    counts: Counter[str] = Counter()
    for c in calls:
        if isinstance(c, LLMCallRecord):
            counts[f"round {c.round} {c.role.value} {c.model}{' (error)' if c.error else ''}"] += 1
    return dict(sorted(counts.items()))


def metrics(trajectories: list[Trajectory]) -> dict[str, dict[str, Any]]:
    """Accuracy, Pass@k, Pass^k and counts per (round, phase, harness, model): what a report's tables show."""
    cells: dict[tuple[Any, ...], list[Trajectory]] = {}
    for t in trajectories:
        cells.setdefault((t.round, t.phase, t.harness_hash[:12], t.model), []).append(t)
    out = {}
    for (round_, phase, harness, model), rows in sorted(cells.items()):
        k = max(1, min(Counter(t.task.task_id for t in rows).values()))
        summary = summarize(rows, harness=harness, model=model, k=k)
        out[f"round {round_} {phase} {harness} {model}"] = summary.model_dump(
            include={"n_tasks", "n_trajectories", "n_excluded", "accuracy", "k", "pass_at_k", "pass_hat_k"})
    return out


def compare_runs(original: ArtifactStore, replayed: ArtifactStore, run_id: str) -> list[str]:
    """Every check of a replay against its original, in order; each entry is a failed check's first difference.
    An empty list: the replay is identical in everything a replay can reproduce."""
    differences: list[str] = []
    for name in KEYS:
        found = compare_dataset(name, original.read(name, run_id=run_id), replayed.read(name, run_id=run_id))
        if found:
            differences.append(found)
    found = first_difference(metrics(original.read("trajectories", run_id=run_id)),
                             metrics(replayed.read("trajectories", run_id=run_id)))
    if found:
        differences.append(f"metrics.{found}")
    found = first_difference(call_counts(original.read("llm_calls", run_id=run_id)),
                             call_counts(replayed.read("llm_calls", run_id=run_id)))
    if found:
        differences.append(f"llm calls per round, role and model: {found}")
    a_manifest, b_manifest = original.read_manifest(run_id), replayed.read_manifest(run_id)
    a_final = a_manifest.final_harness_hash if a_manifest else None
    b_final = b_manifest.final_harness_hash if b_manifest else None
    if a_final != b_final:
        differences.append(f"final harness hash: {a_final} != {b_final}")
    return differences
