"""Evolution methods as ``method`` extensions (:mod:`ecdysis.extensions`): each is a config section
(``training.method: {type: ..., <its options>}``) that says how a round's failures become modification requests
and builds the diagnoser that serves them from its own options. A new method is one :class:`MethodSection` subclass
and one ``register("method", ...)`` call.

| type             | requests per non-empty round        | diagnoser                                          |
|------------------|-------------------------------------|----------------------------------------------------|
| ``se``           | one per failure record, in sequence | :class:`~ecdysis.evolution.diagnosis.SequentialDiagnoser` |
| ``ecdysis``      | one over the whole batch            | :class:`~ecdysis.evolution.diagnosis.BatchDiagnoser` |
| ``ecdysis-fdcr`` | one over the whole batch            | :class:`~ecdysis.evolution.fdcr.FDCRDiagnoser`       |

>>> method("ecdysis").requests(["f1", "f2"])
[['f1', 'f2']]
>>> method("se").requests(["f1", "f2"])
[['f1'], ['f2']]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from ecdysis.evolution.diagnosis import BatchDiagnoser, SequentialDiagnoser
from ecdysis.evolution.fdcr import FDCRDiagnoser
from ecdysis.evolution.prompt_budget import budget_chars
from ecdysis.extensions import register, section, validate_section
from ecdysis.llm.tokens import DEFAULT_REPLY_TOKENS
from ecdysis.protocols import Diagnoser, LLMClient, Store

T = TypeVar("T")

DEFAULT = "ecdysis"


@dataclass(frozen=True)
class DiagnoserParts:
    """What any method's diagnoser may be built from (its own options are on its section)."""

    llm: LLMClient
    model: str
    """The diagnosis model (``models.diagnoser``)."""
    prompt_budget_chars: int = 70_000
    """Characters of failure evidence plus harness source of one prompt (4/7 evidence, 3/7 source)."""
    prompt_budget_tokens: int | None = None
    """The same budget in tokens (None: no such limit)."""
    context_tokens: int | None = None
    """The diagnosis model's context window (None: unknown); the prompt is sized to fit it."""
    reply_tokens: int = DEFAULT_REPLY_TOKENS
    """Tokens of the window kept for the diagnosis model's reply."""
    store: Store | None = None
    task_models: tuple[str, ...] = ()
    """The run's task models (FDCR attributes failures across them)."""
    aggregator_model: str | None = None
    """The model behind failure-group summaries (``models.aggregator``; None: the diagnosis model)."""

    @property
    def prompt_chars(self) -> int:
        """Characters of evidence plus source under every limit given (:mod:`~ecdysis.evolution.prompt_budget`)."""
        return budget_chars(chars=self.prompt_budget_chars, tokens=self.prompt_budget_tokens,
                            context_tokens=self.context_tokens, reply_tokens=self.reply_tokens)

    def budgets(self) -> dict[str, Any]:
        """The prompt budget split into evidence and source, as the diagnosers take it."""
        chars = self.prompt_chars
        return {"max_failure_chars": chars * 4 // 7, "max_source_chars": chars * 3 // 7}


class MethodSection(BaseModel):
    """Base of an evolution method's ``training.method`` section; each subclass narrows ``type`` to its registry
    name, adds its options and builds its diagnoser."""

    model_config = ConfigDict(extra="forbid", strict=True, use_attribute_docstrings=True)

    type: str
    """Which evolution method."""
    batch: ClassVar[bool] = True
    """True: every failure of the round in one request; False: one request per failure, applied in sequence."""

    def requests(self, failures: Sequence[T]) -> list[list[T]]:
        """The round's modification requests: the groups of failure records diagnosed together."""
        if not failures:
            return []
        return [list(failures)] if self.batch else [[failure] for failure in failures]

    def diagnoser(self, parts: DiagnoserParts) -> Diagnoser:
        """The diagnoser of this method, built from the run's parts and this section's options."""
        raise NotImplementedError


class SequentialMethod(MethodSection):
    """``se``: one diagnosis and coding session per failure record, in sequence."""

    type: Literal["se"] = "se"
    """Selects sequential evolution."""
    batch: ClassVar[bool] = False

    def diagnoser(self, parts: DiagnoserParts) -> Diagnoser:
        return SequentialDiagnoser(parts.llm, parts.model, **parts.budgets())


class BatchMethod(MethodSection):
    """``ecdysis``: one diagnosis over all of a round's failures (aggregated hierarchically over the budget)."""

    type: Literal["ecdysis"] = "ecdysis"
    """Selects batch aggregation."""

    def diagnoser(self, parts: DiagnoserParts) -> Diagnoser:
        return BatchDiagnoser(parts.llm, parts.model, aggregator_model=parts.aggregator_model, **parts.budgets())


class FDCRMethod(MethodSection):
    """``ecdysis-fdcr``: batch aggregation refined by Analyst, Critic and Engineer passes, then a Moderator."""

    type: Literal["ecdysis-fdcr"] = "ecdysis-fdcr"
    """Selects batch aggregation with FDCR refinement."""
    passes: int = Field(default=2, ge=1)
    """Analyst → Critic → Engineer passes before the Moderator."""

    def diagnoser(self, parts: DiagnoserParts) -> Diagnoser:
        budget = parts.prompt_chars
        return FDCRDiagnoser(parts.llm, parts.model, passes=self.passes, store=parts.store,
                             task_models=list(parts.task_models), harness_budget_chars=budget * 3 // 7,
                             evidence_budget_chars=budget * 4 // 7,
                             aggregator_model=parts.aggregator_model or parts.model)


if TYPE_CHECKING:
    MethodConfig = MethodSection
else:
    MethodConfig = section("method", MethodSection, default=DEFAULT)
    """The ``training.method`` section (a bare name stands for ``{type: name}``)."""


def method(name: str, configured: MethodSection | None = None) -> MethodSection:
    """The section of method ``name``: ``configured`` when it is that method, else the method's defaults; an
    unknown name is a ValueError that lists the known ones."""
    if configured is not None and configured.type == name:
        return configured
    return validate_section("method", MethodSection, name)


def register_extensions() -> None:
    """Register ``se``, ``ecdysis`` and ``ecdysis-fdcr``."""
    register("method", "se", "sequential evolution: one diagnosis and coding session per failure, in sequence",
             config=SequentialMethod)
    register("method", "ecdysis", "one diagnosis and coding session over all of a round's failures",
             config=BatchMethod)
    register("method", "ecdysis-fdcr", "batch aggregation refined by Analyst, Critic and Engineer, then a Moderator",
             config=FDCRMethod)
