"""Prompt context within a character budget: the harness source and the failure evidence."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from ecdysis.evolution.fdcr.attribution import Attribution
from ecdysis.records import FailureRecord, ToolCall

SKIPPED_DIRS = frozenset({"__pycache__", ".git", ".mypy_cache", ".pytest_cache", ".ruff_cache", "node_modules"})
MAX_FILE_BYTES = 1_000_000
RESULT_CHARS = 160
MIN_FAILURE_CHARS = 160
OMITTED_IDS = 20


def harness_files(harness_dir: Path) -> dict[str, str]:
    """Text files of the harness, keyed by path relative to ``harness_dir`` (binary and cache files skipped)."""
    if not harness_dir.is_dir():
        raise FileNotFoundError(f"harness_dir {harness_dir} is not a directory")
    files: dict[str, str] = {}
    for path in sorted(harness_dir.rglob("*")):
        relative = path.relative_to(harness_dir)
        if not path.is_file() or any(part in SKIPPED_DIRS or part.startswith(".") for part in relative.parts):
            continue
        data = path.read_bytes()[:MAX_FILE_BYTES]
        if b"\x00" in data[:4096]:
            continue
        try:
            files[relative.as_posix()] = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
    return files


def render_harness(files: dict[str, str], budget_chars: int) -> str:
    """The harness files as fenced blocks. Small files are kept whole; large ones share what is left, cut at the
    end with a marker, so the result stays near ``budget_chars`` whatever the bundle's size."""
    if not files:
        return "(the harness directory holds no text files)"
    shares: dict[str, int] = {}
    remaining = budget_chars
    by_size = sorted(files, key=lambda name: (len(files[name]), name))
    for left, name in zip(range(len(by_size), 0, -1), by_size, strict=True):
        shares[name] = max(0, min(len(files[name]), remaining // left))
        remaining -= shares[name]
    blocks = []
    for name in sorted(files):
        text, share = files[name], shares[name]
        body = text if share >= len(text) else text[:share] + f"\n... [{len(text) - share} more characters cut]"
        fence = "`" * max(3, _longest_backtick_run(body) + 1)  # quoted source cannot close the fence early
        blocks.append(f"#### {name}\n{fence}\n{body}\n{fence}")
    return "\n\n".join(blocks)


def _longest_backtick_run(text: str) -> int:
    return max((len(run) for run in re.findall(r"`+", text)), default=0)


def render_evidence(attribution: Attribution, failures: Sequence[FailureRecord], budget_chars: int,
                    summaries: Mapping[str, str] | None = None) -> str:
    """Each failure record under its pattern: ids, task, model, ending, decision, tool calls and excerpt.

    Every failure shown gets an equal share of ``budget_chars`` (at least ``MIN_FAILURE_CHARS``). When even that
    does not fit, failures are taken round-robin across patterns (so no pattern is crowded out) and the rest are
    named by id only. ``summaries`` (signature → a line, :mod:`~ecdysis.evolution.fdcr.summaries`) go under their
    pattern's heading, and their length comes off the budget first.
    """
    by_id = {f.failure_id: f for f in failures}
    notes = dict(summaries or {})
    total = sum(len(p.failure_ids) for p in attribution.patterns)
    if total == 0:
        return "(no failure evidence)"
    budget_chars -= sum(len(line) + 1 for line in notes.values())
    capacity = max(1, budget_chars // MIN_FAILURE_CHARS)
    shown = _round_robin([p.failure_ids for p in attribution.patterns], capacity)
    share = max(MIN_FAILURE_CHARS, budget_chars // max(1, len(shown)))
    sections = []
    omitted_patterns = 0
    for pattern in attribution.patterns:
        listed = [fid for fid in pattern.failure_ids if fid in shown]
        if not listed and pattern.signature not in notes:
            omitted_patterns += 1
            continue
        lines = [f"#### {pattern.pattern_id} `{pattern.signature}` ({pattern.task_scope.value}, "
                 f"{pattern.model_scope.value})"]
        if pattern.signature in notes:
            lines.append(notes[pattern.signature])
        lines += [_clip(failure_line(by_id[fid]), share) for fid in listed]
        rest = [fid for fid in pattern.failure_ids if fid not in shown]
        if rest:
            more = f" (+{len(rest) - OMITTED_IDS} more)" if len(rest) > OMITTED_IDS else ""
            lines.append(f"- also, not shown: {', '.join(f'`{fid}`' for fid in rest[:OMITTED_IDS])}{more}")
        sections.append("\n".join(lines))
    if omitted_patterns:
        sections.append(f"({omitted_patterns} more pattern(s) not shown; see the attribution table)")
    return "\n\n".join(sections)


def _round_robin(groups: Sequence[Sequence[str]], limit: int) -> set[str]:
    chosen: set[str] = set()
    depth = 0
    while len(chosen) < limit and any(depth < len(group) for group in groups):
        for group in groups:
            if depth < len(group) and len(chosen) < limit:
                chosen.add(group[depth])
        depth += 1
    return chosen


def failure_line(failure: FailureRecord) -> str:
    """One failure as the FDCR prompts quote it: ids, task, model, ending, decision, tool calls, excerpt."""
    calls = "; ".join(_call_text(call) for call in failure.tool_call_history) or "none"
    excerpt = " ".join(failure.context_excerpt.split())
    lines = [f"- `{failure.failure_id}` task={failure.task_id} model={failure.model} reward={failure.reward:g} "
             f"end={failure.termination_reason.value} component={failure.failing_component}",
             f"  decision: {failure.failure_decision}"]
    if failure.reward_breakdown:
        lines.append("  grader: " + ", ".join(f"{k}={v:g}" for k, v in sorted(failure.reward_breakdown.items())))
    if failure.failing_call is not None:
        lines.append(f"  failing call: {_call_text(failure.failing_call)}")
    if failure.tool_error:
        lines.append(f"  environment error: {' '.join(failure.tool_error.split())}")
    if failure.last_reply:
        lines.append(f"  model's last reply: {' '.join(failure.last_reply.split())}")
    lines += [f"  tool calls: {calls}", f"  excerpt: {excerpt or '-'}"]
    return "\n".join(lines)


def _call_text(call: ToolCall) -> str:
    args = json.dumps(call.sent_arguments, sort_keys=True, separators=(",", ":"))
    status = "executed" if call.executed else f"blocked({call.blocked_reason or '?'})"
    if call.error:
        status += ",error"
    result = " ".join((call.result or "").split())
    if result:
        result = " -> " + (result if len(result) <= RESULT_CHARS else result[:RESULT_CHARS] + "...")
    return f"{call.name}({args}) {status}{result}"


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(0, limit - 14)] + " ... [cut]"
