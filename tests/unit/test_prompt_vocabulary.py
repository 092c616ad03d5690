"""The generic prompts (diagnosis, FDCR roles, coding agent) name no benchmark: every word of a registered benchmark's
own vocabulary is kept out of them, so what they teach a diagnoser or a coder holds on any benchmark.

A benchmark's vocabulary is derived from its own tools (the parts of each tool's name, and the acronyms in the
descriptions of the tools and their parameters, such as SQL), plus its registry name and domain words, less the few
generic words that tools of any kind use (get, list, answer...). A benchmark registered without an entry here fails
the test, so a new benchmark brings its vocabulary.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from importlib import resources
from typing import Any

import pytest

from ecdysis.extensions import names

PROMPT_PACKAGES = ("ecdysis.evolution.prompts", "ecdysis.evolution.fdcr.prompts", "ecdysis.coders.prompts")
GENERIC = frozenset({
    "get", "set", "list", "all", "find", "search", "update", "send", "return", "call", "calculate", "transfer",
    "execute", "commit", "finish", "answer", "answers", "final", "action", "user", "human", "agent", "agents",
    "name", "details", "id", "ids", "item", "items", "task", "type", "to", "by", "of", "and", "or", "the", "a",
    "order", "address",  # a tool's noun, but a prompt needs the everyday verb: "the order of work", "address a cause"
})
"""Words any tool set may use; they say nothing about which benchmark a prompt was written for."""
EXTRA = {
    "tau2": {"airline", "retail", "tau", "mysql"},
    "agentbench-db": {"sql", "mysql", "mariadb", "dbbench", "query", "table", "tables", "database"},
    "agentbench-os": {"bash", "linux", "shell", "container"},
    "refund-desk": {"refund", "shipping"},
}
"""Domain words a benchmark's tool schemas may not spell out, as the issue that asked for this test names them."""


def tau2_tools() -> list[dict[str, Any]]:
    from ecdysis.benchmarks.tau2.domain import TauDomain

    return [schema for domain in ("airline", "retail") for schema in TauDomain.load(domain).tool_schemas]


def dbbench_tools() -> list[dict[str, Any]]:
    from ecdysis.benchmarks.agentbench.dbbench.environment import TOOLS

    return TOOLS


def os_tools() -> list[dict[str, Any]]:
    from ecdysis.benchmarks.agentbench.os_interaction.tools import tool_schemas

    return tool_schemas()


def refund_desk_tools() -> list[dict[str, Any]]:
    from ecdysis.benchmarks.refund_desk.environment import TOOLS

    return TOOLS


TOOLS: dict[str, Callable[[], list[dict[str, Any]]]] = {
    "tau2": tau2_tools, "agentbench-db": dbbench_tools, "agentbench-os": os_tools, "refund-desk": refund_desk_tools,
}


def vocabulary(benchmark: str) -> set[str]:
    """The benchmark's own words, lower case (see the module docstring)."""
    words = {part for part in re.split(r"[-_]", benchmark) if len(part) > 2} | EXTRA[benchmark]
    for tool in TOOLS[benchmark]():
        function = tool["function"]
        words |= set(function["name"].split("_"))
        for schema in (function.get("parameters", {}).get("properties") or {}).values():
            words |= {w.lower() for w in re.findall(r"\b[A-Z]{2,}\b", str(schema.get("description", "")))}
        words |= {w.lower() for w in re.findall(r"\b[A-Z]{2,}\b", str(function.get("description", "")))}
    return {word.lower() for word in words if len(word) > 1} - GENERIC


def prompts() -> dict[str, str]:
    """Every generic prompt template, by ``package/file``."""
    return {f"{package}/{entry.name}": entry.read_text(encoding="utf-8") for package in PROMPT_PACKAGES
            for entry in resources.files(package).iterdir() if entry.name.endswith(".md")}


def test_every_registered_benchmark_has_a_vocabulary() -> None:
    missing = sorted(set(names("benchmark")) - set(TOOLS))
    assert missing == [], f"add the tools and domain words of {missing} to this test"
    assert all(vocabulary(name) for name in TOOLS)
    assert {"reservation", "flight", "airline"} <= vocabulary("tau2")
    assert {"sql", "query"} <= vocabulary("agentbench-db") and "bash" in vocabulary("agentbench-os")


@pytest.mark.parametrize("benchmark", sorted(TOOLS))
def test_generic_prompts_hold_no_benchmark_word(benchmark: str) -> None:
    words = vocabulary(benchmark)
    found = {}
    for name, text in prompts().items():
        hits = sorted({w.lower() for w in re.findall(r"[A-Za-z][A-Za-z0-9]*", text)} & words)
        if hits:
            found[name] = hits
    assert len(prompts()) >= 9
    assert found == {}, f"prompts name {benchmark}'s vocabulary: {found}"
