"""The study config (``ecdysis study STUDY.yaml``): the paper's configurations on one split, under one protocol.

A study names a base run config (benchmark, split, sandbox, llm, rollouts...), the configurations to compare, the
held-out tasks and their trials, and the models. Every bad field is reported by its dotted path, the base config's
as ``base.<path>``. Example::

    study = load_study("ecdysis/configs/study-dbbench-qwen.yaml")
    study.study_id()   # the key of its checkpoint manifest in the store
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ecdysis.config import ConfigError, RunConfig, field_errors, find_config, load_config, parse_config
from ecdysis.extensions import names
from ecdysis.records import stable_hash

SEEDS = ("direct", "human")
"""Configurations that are seed harnesses of the benchmark, evaluated as they are (no training)."""
ALL_CONFIGURATIONS = ("direct", "human", "se", "ecdysis", "ecdysis-fdcr")
"""The paper's five configurations, in its table's order."""
TRANSPORT = ("api_base", "max_concurrency", "streaming")
"""Per-model gateway settings that say how a model is reached (a local server's port, its slots), not what it is."""


class StudySection(BaseModel):
    """Base of the study's sections: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", strict=True, use_attribute_docstrings=True)


class HeldoutConfig(StudySection):
    """The held-out tasks every configuration is evaluated on."""

    split: str = "test"
    """The benchmark split to draw them from."""
    sample: int | None = Field(default=None, ge=1)
    """How many tasks to draw from the split, seeded (None: all of them, unless ``task_ids``)."""
    task_ids: list[str] | None = None
    """An explicit task list (overrides ``sample``)."""
    seed: int | None = None
    """Seed of the ``sample`` draw (None: the study's ``seed``)."""


class StudyModels(StudySection):
    """The task model the harnesses are trained with, and the models they are also evaluated on."""

    train: str | None = None
    """Task model of training and of the main table (None: the base config's one task model)."""
    transfer: list[str] = Field(default_factory=list)
    """Further task models every configuration's harness is evaluated on (the transfer table)."""


class StudyConfig(StudySection):
    """A whole study, as written in YAML."""

    name: str = Field(min_length=1, max_length=60, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    """Name of the study (letters, digits, ``_ . -``); its id and its runs' ids are derived from it."""
    base: RunConfig
    """The run config every run starts from: a path (relative to the study file, or a built-in config name) or
    the config inline. Its ``training.method`` options are kept for the method they name."""
    configurations: list[str] = Field(default_factory=lambda: list(ALL_CONFIGURATIONS), min_length=1)
    """What to compare: seed harnesses (``direct``, ``human``) and evolution methods (``ecdysis list method``)."""
    train_from: str = "human"
    """The seed harness training starts from (the paper's protocol: ``human``)."""
    heldout: HeldoutConfig = Field(default_factory=HeldoutConfig)
    """The held-out tasks."""
    k: int = Field(default=3, ge=1)
    """Trials per held-out task (the k of Pass@k and Pass^k)."""
    max_rounds: int = Field(default=3, ge=1)
    """Training rounds of each evolution method (replaces the base's ``training.max_rounds``)."""
    models: StudyModels = Field(default_factory=StudyModels)
    """Training model and transfer models."""
    seed: int = 0
    """Seed of every run (replaces the base's ``seed``) and of the held-out draw."""
    budget_usd: float | None = Field(default=None, ge=0)
    """Spending limit of each run, in USD (replaces the base's ``llm.max_usd``; None: the base's)."""
    bootstrap: int = Field(default=2000, ge=100)
    """Resamples of the bootstrap over tasks behind every 95% interval."""

    @field_validator("base", mode="before")
    @classmethod
    def _base(cls, value: Any) -> Any:
        return value if isinstance(value, RunConfig) else RunConfig.model_validate(value)

    @field_validator("configurations")
    @classmethod
    def _known_configurations(cls, value: list[str]) -> list[str]:
        known = [*SEEDS, *names("method")]
        unknown = [name for name in value if name not in known]
        if unknown:
            raise ValueError(f"unknown configuration(s) {', '.join(unknown)}; known: {', '.join(known)}")
        if len(set(value)) != len(value):
            raise ValueError("a configuration is listed twice")
        return value

    @field_validator("train_from")
    @classmethod
    def _from_human(cls, value: str) -> str:
        if value != "human":
            raise ValueError("training starts from the benchmark's `human` seed harness (the paper's protocol)")
        return value

    @model_validator(mode="after")
    def _one_train_model(self) -> StudyConfig:
        if self.models.train is None and len(self.base.models.task) != 1:
            raise ValueError("models.train: the base config names several task models; name the training one")
        return self

    @property
    def train_model(self) -> str:
        """The task model of training and of the main table."""
        return self.models.train or self.base.models.task[0]

    @property
    def eval_models(self) -> list[str]:
        """The training model, then each transfer model (each once)."""
        return list(dict.fromkeys([self.train_model, *self.models.transfer]))

    @property
    def trained(self) -> list[str]:
        """The configurations that are evolution methods (trained from ``train_from``)."""
        return [name for name in self.configurations if name not in SEEDS]

    def protocol(self) -> dict[str, Any]:
        """What makes two runs comparable: everything but the list of configurations, the transfer models, the
        store and the trackers. Adding a configuration or a transfer model keeps the study (and its finished runs)."""
        base = self.base.model_dump(mode="json", exclude={"storage", "tracking", "ray", "run_name"})
        for route in base["llm"]["models"].values():  # where a model is served is not what it is
            for transport in TRANSPORT:
                route.pop(transport, None)
        return {"base": base, "train_from": self.train_from, "heldout": self.heldout.model_dump(mode="json"),
                "k": self.k, "max_rounds": self.max_rounds, "train_model": self.train_model, "seed": self.seed,
                "budget_usd": self.budget_usd}

    @property
    def table_order(self) -> list[str]:
        """The configurations as the paper's table lists them (``ALL_CONFIGURATIONS`` order, others after, as
        written); ``configurations`` itself is the order they run in."""
        rank = {name: index for index, name in enumerate(ALL_CONFIGURATIONS)}
        return sorted(self.configurations, key=lambda name: rank.get(name, len(rank)))

    def study_id(self) -> str:
        """``<name>-<hash of the protocol>``: the key of the study's checkpoint manifest."""
        return f"{self.name}-{stable_hash(self.protocol())[:10]}"


def _load_base(name: str, folder: str | None) -> RunConfig:
    try:
        return load_config(find_config(name, folder=folder))
    except FileNotFoundError as err:
        raise ValueError(str(err)) from None


def parse_study(data: Any, source: str = "<study>", *, folder: str | None = None) -> StudyConfig:
    """A :class:`StudyConfig` from parsed YAML; raises :class:`ConfigError` naming each bad field (the base's
    as ``base.<path>``). ``folder``: where a relative ``base`` path is looked up first."""
    if not isinstance(data, dict):
        raise ConfigError(source, [("", f"top level must be a mapping, got {type(data).__name__}")])
    errors: list[tuple[str, str]] = []
    data = dict(data)
    if isinstance(data.get("base"), str | dict):
        try:
            data["base"] = _load_base(data["base"], folder) if isinstance(data["base"], str) else parse_config(
                data["base"], "base")
        except ConfigError as err:
            errors = [(f"base.{path}" if path else "base", message) for path, message in err.errors]
            data.pop("base")
        except ValueError as err:
            errors = [("base", str(err))]
            data.pop("base")
    try:
        study = StudyConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(source, errors + [e for e in field_errors(err) if not (errors and e[0] == "base")]) from None
    if errors:
        raise ConfigError(source, errors)
    return study


def load_study(path: str | os.PathLike[str]) -> StudyConfig:
    """The :class:`StudyConfig` in the YAML file at ``path``; raises :class:`ConfigError`."""
    source = os.fspath(path)
    try:
        data = yaml.safe_load(Path(source).read_text(encoding="utf-8"))
    except OSError as err:
        raise ConfigError(source, [("", f"cannot read file: {err.strerror or err}")]) from None
    except yaml.YAMLError as err:
        raise ConfigError(source, [("", f"not valid YAML: {err}")]) from None
    return parse_study({} if data is None else data, source, folder=str(Path(source).parent))
