"""Evolution methods as a registry: each says how a round's failures become modification requests and which
diagnoser serves them. Config validation, the CLI's ``--method`` and the training loop all read :data:`METHODS`;
a new method is one entry here (plus a subpackage if it needs one).

| name           | requests per non-empty round            | diagnoser                                   |
|----------------|-----------------------------------------|---------------------------------------------|
| ``se``         | one per failure record, in sequence     | :class:`~ecdysis.evolution.diagnosis.SequentialDiagnoser` |
| ``ecdysis``    | one over the whole batch                | :class:`~ecdysis.evolution.diagnosis.BatchDiagnoser` |
| ``ecdysis-fdcr`` | one over the whole batch              | :class:`~ecdysis.evolution.fdcr.FDCRDiagnoser` |

>>> method("ecdysis").requests(["f1", "f2"])
[['f1', 'f2']]
>>> method("se").requests(["f1", "f2"])
[['f1'], ['f2']]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from ecdysis.protocols import Diagnoser, LLMClient, Store

T = TypeVar("T")


@dataclass(frozen=True)
class DiagnoserParts:
    """What any method's diagnoser may be built from."""

    llm: LLMClient
    model: str
    """The diagnosis model (``models.diagnoser``)."""
    prompt_budget_chars: int = 70_000
    """Failure evidence plus harness source of one prompt (4/7 evidence, 3/7 source)."""
    store: Store | None = None
    task_models: tuple[str, ...] = ()
    """The run's task models (FDCR attributes failures across them)."""
    aggregator_model: str | None = None
    """The model behind failure-group summaries (``models.aggregator``; None: the diagnosis model)."""
    options: dict[str, Any] | None = None
    """Method-specific settings from the config (``training.fdcr_passes``...)."""


@dataclass(frozen=True)
class EvolutionMethod:
    """How one evolution method organises a round's evidence into modification requests."""

    name: str
    summary: str
    batch: bool
    """True: every failure of the round in one request; False: one request per failure, applied in sequence."""
    diagnoser: Callable[[DiagnoserParts], Diagnoser]

    def requests(self, failures: Sequence[T]) -> list[list[T]]:
        """The round's modification requests: the groups of failure records diagnosed together."""
        if not failures:
            return []
        return [list(failures)] if self.batch else [[failure] for failure in failures]


def _budgets(parts: DiagnoserParts) -> dict[str, Any]:
    return {"max_failure_chars": parts.prompt_budget_chars * 4 // 7,
            "max_source_chars": parts.prompt_budget_chars * 3 // 7}


def _sequential(parts: DiagnoserParts) -> Diagnoser:
    from ecdysis.evolution.diagnosis import SequentialDiagnoser

    return SequentialDiagnoser(parts.llm, parts.model, **_budgets(parts))


def _batch(parts: DiagnoserParts) -> Diagnoser:
    from ecdysis.evolution.diagnosis import BatchDiagnoser

    return BatchDiagnoser(parts.llm, parts.model, aggregator_model=parts.aggregator_model, **_budgets(parts))


def _fdcr(parts: DiagnoserParts) -> Diagnoser:
    from ecdysis.evolution.fdcr import FDCRDiagnoser

    budget = parts.prompt_budget_chars
    passes = int((parts.options or {}).get("fdcr_passes", 2))
    return FDCRDiagnoser(parts.llm, parts.model, passes=passes, store=parts.store,
                         task_models=list(parts.task_models), harness_budget_chars=budget * 3 // 7,
                         evidence_budget_chars=budget * 4 // 7, aggregator_model=parts.aggregator_model or parts.model)


METHODS: dict[str, EvolutionMethod] = {m.name: m for m in (
    EvolutionMethod("se", "sequential evolution: one diagnosis and coding session per failure, in sequence", False,
                    _sequential),
    EvolutionMethod("ecdysis", "one diagnosis and coding session over all of a round's failures", True, _batch),
    EvolutionMethod("ecdysis-fdcr", "batch aggregation refined by Analyst, Critic and Engineer, then a Moderator",
                    True, _fdcr),
)}
"""Registry: method name → :class:`EvolutionMethod`."""


def method(name: str) -> EvolutionMethod:
    """The method called ``name``; a ValueError names the known ones."""
    try:
        return METHODS[name]
    except KeyError:
        raise ValueError(f"unknown evolution method {name!r}; known: {', '.join(METHODS)}") from None
