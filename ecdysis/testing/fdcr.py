"""Scripted FDCR roles: deterministic models (``scripted/ecdysis.testing.fdcr:<name>``) that read the FDCR prompt
and answer with JSON derived from it. They drive the real pipeline and gateway in tests and dry runs.

| name                         | behaviour                                                                    |
|------------------------------|------------------------------------------------------------------------------|
| ``analyst``                  | one cause per attribution pattern; in later passes drops rejected patterns  |
| ``critic``                   | rejects causes of model-specific patterns; finds every flagged literal bad   |
| ``critic_keep_all``          | keeps every cause; accepts every flagged literal                             |
| ``critic_unfounded``         | removes every cause naming no concern, its reason a copy of the cause        |
| ``critic_reject_all``        | removes every cause as thin evidence; accepts every flagged literal          |
| ``engineer``                 | one general change per surviving cause                                       |
| ``engineer_hardcodes``       | like ``engineer``, but its first change names an id from the task's calls    |
| ``engineer_fails_on_pass_2`` | like ``engineer`` in pass 1; never valid JSON from pass 2 on                 |
| ``moderator``                | every candidate change verbatim (justifies a literal the Critic accepted)    |
| ``moderator_justifies``      | every candidate change, each flagged literal given a justification           |
| ``moderator_resurrects``     | like ``moderator``, plus a change built on each cause the Critic removed     |
| ``moderator_adds_literal``   | like ``moderator``, but writes an id of its first change's failure, justified |
| ``moderator_invalid_2``      | invalid replies on its first two attempts, then like ``moderator``           |
| ``moderator_invalid_always`` | never a valid reply                                                          |
"""

from __future__ import annotations

import json
import re
from typing import Any

from ecdysis.evolution.fdcr.prompts import read_json_block

_CELL_SPLIT = re.compile(r"(?<!\\)\|")
_EVIDENCE_HEAD = re.compile(r"^#### (P\d+) `", re.MULTILINE)
_FAILURE_LINE = re.compile(r"^- `([^`]+)` task=(\S+)", re.MULTILINE)
_ID_ARGUMENT = re.compile(r'"(\w*_id)":"([^"]+)"')
_PASS = re.compile(r"This is pass (\d+) of (\d+)")


def _prompt(messages: list[dict[str, Any]]) -> str:
    """The FDCR prompt: the first user message (the gateway appends its schema request and re-asks after it)."""
    return next(str(m.get("content") or "") for m in messages if m.get("role") == "user")


def _patterns(prompt: str) -> dict[str, dict[str, str]]:
    """Pattern id → signature, task scope and model scope, read from the attribution table."""
    found = {}
    for line in prompt.splitlines():
        cells = [c.strip() for c in _CELL_SPLIT.split(line)[1:-1]]
        if len(cells) == 8 and re.fullmatch(r"P\d+", cells[0]):
            found[cells[0]] = {"signature": cells[1].strip("`").replace("\\|", "|"), "task_scope": cells[5],
                               "model_scope": cells[6]}
    return found


def _evidence(prompt: str) -> dict[str, list[tuple[str, str]]]:
    """Pattern id → (failure id, task id) of each failure listed under it in the evidence section."""
    heads = list(_EVIDENCE_HEAD.finditer(prompt))
    found: dict[str, list[tuple[str, str]]] = {}
    for i, head in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(prompt)
        found[head.group(1)] = [(m.group(1), m.group(2)) for m in _FAILURE_LINE.finditer(prompt, head.end(), end)]
    return found


def _pass_index(prompt: str) -> int:
    match = _PASS.search(prompt)
    return int(match.group(1)) if match else 1


def _reply(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def analyst(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, context: dict[str, Any]) -> str:
    """One cause per pattern with evidence; from pass 2 on, patterns whose cause the Critic rejected are left out."""
    prompt = _prompt(messages)
    patterns, evidence = _patterns(prompt), _evidence(prompt)
    rejected: set[str] = set()
    try:
        previous = {c["cause_id"]: c for c in read_json_block(prompt, "Previous causes")}
        for verdict in read_json_block(prompt, "Previous verdicts"):
            if not verdict["keep"] and verdict["cause_id"] in previous:
                rejected.update(previous[verdict["cause_id"]]["patterns"])
    except KeyError:
        pass
    causes: list[dict[str, Any]] = []
    for pattern_id, info in patterns.items():
        if pattern_id in rejected or not evidence.get(pattern_id):
            continue
        causes.append({
            "cause_id": f"C{len(causes) + 1}",
            "description": f"The harness lets failures of kind {info['signature']} happen "
                           f"({info['task_scope']}, {info['model_scope']}).",
            "failure_ids": [fid for fid, _ in evidence[pattern_id]],
            "patterns": [pattern_id],
        })
    return _reply({"causes": causes})


def _literal_review(prompt: str, acceptable: bool) -> str:
    flagged = read_json_block(prompt, "Flagged changes")
    verdicts = [{
        "change_ref": item["ref"], "acceptable": acceptable,
        "reason": ("the literal states a general rule" if acceptable else
                   "writes " + ", ".join(h["literal"] for h in item["flagged_literals"]) + " from task "
                   + ", ".join(sorted({h["task_id"] for h in item["flagged_literals"]})) + " into the harness"),
    } for item in flagged]
    return _reply({"verdicts": verdicts})


def critic(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, context: dict[str, Any]) -> str:
    """Rejects causes that rest only on model-specific patterns; judges every flagged literal a hard-coded answer."""
    prompt = _prompt(messages)
    if "### Flagged changes" in prompt:
        return _literal_review(prompt, acceptable=False)
    patterns = _patterns(prompt)
    verdicts = []
    for cause in read_json_block(prompt, "Causes under review"):
        scopes = {patterns.get(p, {}).get("model_scope") for p in cause["patterns"]}
        if scopes == {"model_specific"}:
            verdicts.append({"cause_id": cause["cause_id"], "keep": False, "concerns": ["model_specific"],
                             "reason": "confined to one task model: a fix would accommodate that model"})
        else:
            verdicts.append({"cause_id": cause["cause_id"], "keep": True, "concerns": [],
                             "reason": "general harness deficiency supported by the cited failures"})
    return _reply({"verdicts": verdicts})


def critic_keep_all(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                    context: dict[str, Any]) -> str:
    """Keeps every cause and accepts every flagged literal."""
    prompt = _prompt(messages)
    if "### Flagged changes" in prompt:
        return _literal_review(prompt, acceptable=True)
    verdicts = [{"cause_id": c["cause_id"], "keep": True, "concerns": [], "reason": "supported"}
                for c in read_json_block(prompt, "Causes under review")]
    return _reply({"verdicts": verdicts})


def critic_unfounded(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                     context: dict[str, Any]) -> str:
    """Removes every cause without naming a concern, its reason the cause's own description (what
    Qwen2.5-Coder-1.5B answered in the DBBench study); accepts every flagged literal."""
    prompt = _prompt(messages)
    if "### Flagged changes" in prompt:
        return _literal_review(prompt, acceptable=True)
    verdicts = [{"cause_id": c["cause_id"], "keep": False, "concerns": [], "reason": c["description"]}
                for c in read_json_block(prompt, "Causes under review")]
    return _reply({"verdicts": verdicts})


def critic_reject_all(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                      context: dict[str, Any]) -> str:
    """Removes every cause, naming thin evidence (no change survives the review); accepts every flagged literal."""
    prompt = _prompt(messages)
    if "### Flagged changes" in prompt:
        return _literal_review(prompt, acceptable=True)
    verdicts = [{"cause_id": c["cause_id"], "keep": False, "concerns": ["thin_evidence"],
                 "reason": "the cited records do not show this cause"}
                for c in read_json_block(prompt, "Causes under review")]
    return _reply({"verdicts": verdicts})


def _changes(prompt: str, hardcode: bool) -> list[dict[str, Any]]:
    patterns = _patterns(prompt)
    changes: list[dict[str, Any]] = []
    for cause in read_json_block(prompt, "Surviving causes"):
        signatures = [patterns[p]["signature"] for p in cause["patterns"] if p in patterns]
        component = "loop_control" if any("max_steps" in s for s in signatures) else "validation_rules"
        description = (f"Add a general {component.replace('_', ' ')} check so that failures of kind "
                       f"{', '.join(signatures) or cause['cause_id']} are caught before the agent acts.")
        if hardcode and not changes:
            literal = _first_id_argument(prompt, cause["failure_ids"])
            if literal is not None:
                description = f"When the conversation concerns {literal[0]} {literal[1]}, act on it directly."
        changes.append({"cause_id": cause["cause_id"], "change": {
            "component": component, "description": description,
            "rationale": f"Addresses {cause['cause_id']} across the cited failures without constraining valid actions.",
            "evidence": list(cause["failure_ids"]), "addresses": signatures,
        }})
    return changes


def _first_id_argument(prompt: str, failure_ids: list[str]) -> tuple[str, str] | None:
    for line in prompt.splitlines():
        if line.startswith(f"- `{failure_ids[0]}`"):
            break
    else:
        return None
    start = prompt.index(line)
    block = prompt[start:prompt.find("\n- `", start + 1)]
    match = _ID_ARGUMENT.search(block)
    return (match.group(1).removesuffix("_id"), match.group(2)) if match else None


def engineer(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, context: dict[str, Any]) -> str:
    """One general change per surviving cause, citing the cause's failures."""
    return _reply({"changes": _changes(_prompt(messages), hardcode=False)})


def engineer_hardcodes(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                       context: dict[str, Any]) -> str:
    """Like :func:`engineer`, but the first change writes an id argument of its first cited failure."""
    return _reply({"changes": _changes(_prompt(messages), hardcode=True)})


def engineer_fails_on_pass_2(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                             context: dict[str, Any]) -> str:
    """Like :func:`engineer` in pass 1; from pass 2 on, prose that holds no JSON (a run that dies mid-FDCR)."""
    prompt = _prompt(messages)
    if _pass_index(prompt) >= 2:
        return "I cannot produce the changes right now."
    return _reply({"changes": _changes(prompt, hardcode=False)})


def _spec(prompt: str, justify_all: bool, resurrect: bool) -> dict[str, Any]:
    changes: list[dict[str, Any]] = []
    for item in read_json_block(prompt, "Candidate changes"):
        change = dict(item["change"])
        verdict = item.get("critic_on_literals")
        if item["flagged_literals"] and (justify_all or (verdict and verdict["acceptable"])):
            change["literal_justification"] = (verdict or {}).get("reason") or "the literal is a general rule"
        changes.append(change)
    if resurrect:
        for removed in read_json_block(prompt, "Causes the Critic removed"):
            cause = removed["cause"]
            changes.append({"component": "system_prompt", "description": f"Revive {cause['description']}",
                            "rationale": "the Moderator disagrees with the Critic",
                            "evidence": list(cause["failure_ids"]), "addresses": []})
    return {"proposed_changes": changes, "implementation_notes": f"Apply {len(changes)} change(s) in order.",
            "must_not_change": ["the agent's tool schemas"]}


def moderator(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, context: dict[str, Any]) -> str:
    """Every candidate change verbatim; a flagged literal is justified only when the Critic accepted it."""
    return _reply(_spec(_prompt(messages), justify_all=False, resurrect=False))


def moderator_justifies(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                        context: dict[str, Any]) -> str:
    """Every candidate change; each flagged literal kept with a justification."""
    return _reply(_spec(_prompt(messages), justify_all=True, resurrect=False))


def moderator_resurrects(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                         context: dict[str, Any]) -> str:
    """Every candidate change, plus one change per cause the Critic removed (which the checks must drop)."""
    return _reply(_spec(_prompt(messages), justify_all=False, resurrect=True))


def moderator_adds_literal(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                           context: dict[str, Any]) -> str:
    """Like :func:`moderator`, but appends an id argument of the first change's first failure to its description,
    with a ``literal_justification``."""
    prompt = _prompt(messages)
    spec = _spec(prompt, justify_all=False, resurrect=False)
    first = spec["proposed_changes"][0] if spec["proposed_changes"] else None
    literal = _first_id_argument(prompt, first["evidence"]) if first else None
    if first is not None and literal is not None:
        first["description"] += f" For example, {literal[0]} {literal[1]}."
        first["literal_justification"] = "an illustration of the rule, not an answer"
    return _reply(spec)


def _attempt(messages: list[dict[str, Any]]) -> int:
    """0 on the first ask; the gateway's re-asks append the previous reply, so replies so far = attempt number."""
    return sum(1 for m in messages if m.get("role") == "assistant")


_INVALID = ("Here is my specification, in prose: change the prompt.", '{"proposed_changes": "not a list"}')


def _flaky_moderator(failures: int) -> Any:
    def reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, context: dict[str, Any]) -> str:
        attempt = _attempt(messages)
        if attempt < failures:
            return _INVALID[attempt % len(_INVALID)]
        return moderator(messages, tools, context)

    reply.__doc__ = f"Invalid replies on the first {failures} attempts, then like :func:`moderator`."
    return reply


moderator_invalid_2 = _flaky_moderator(2)
moderator_invalid_always = _flaky_moderator(10**9)
