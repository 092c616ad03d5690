"""Upstream's grading rule for one answer, independent of how scripts are run.

``match`` tasks compare the answer alone. ``check`` tasks run a list of scripts, each receiving the answer and the
outputs of the scripts before it (``argv[1:]`` for python, ``$1...`` for bash): a ``None`` item runs the task's
example, a comparator item is one of our pure comparators (host-side), anything else is the record's own code run
in the container. The first script that fails (non-zero exit) fails the answer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ecdysis.benchmarks.agentbench.os_interaction.comparators import COMPARATORS, match
from ecdysis.benchmarks.agentbench.os_interaction.tasks import OSGold, Script

ScriptRunner = Callable[[Script, list[str]], "tuple[int | None, str]"]
"""Runs a script in the task container with these arguments: (exit status or None on time-out, stdout)."""


@dataclass(frozen=True)
class Grade:
    """A reward (1.0 or 0.0) and how it was reached."""

    reward: float
    breakdown: dict[str, float] = field(default_factory=dict)
    note: str = ""


def evaluate(gold: OSGold, answer: str | None, run: ScriptRunner) -> tuple[bool, str]:
    """Whether ``answer`` passes the task's evaluation, and why (one line)."""
    if gold.match is not None:
        rule = gold.match
        ok = match(answer, expected=rule.answer, regex=rule.regex, strip=rule.strip)
        return ok, "the answer matches" if ok else "the answer does not match"
    assert gold.check is not None
    params = [str(answer)]  # upstream passes str(answer): "None" when the agent gave none
    for position, item in enumerate(gold.check, start=1):
        script = gold.example if item is None else item
        what = "the example" if item is None else f"check {position}"
        if script is None:
            return False, f"{what} is missing"
        if script.comparator is not None:
            if len(params) < 2 or not COMPARATORS[script.comparator](params[0], params[1]):
                return False, f"the answer does not pass the {script.comparator} comparison"
            params.append("")
            continue
        status, output = run(script, list(params))
        if status is None:
            return False, f"{what} ran past its time limit"
        if status != 0:
            return False, f"{what} failed (exit status {status})"
        params.append(output)
    return True, "every check passed"
