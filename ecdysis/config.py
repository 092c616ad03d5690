"""Run configuration: one YAML file, validated by pydantic, every bad field reported with its dotted path.

Each section is its own small model (``extra="forbid"``, strict types, a docstring under every field), so a
component owns its section (``sandbox`` is the sandbox component's config union, ``llm`` the gateway's). Example::

    cfg = load_config("ecdysis/configs/demo.yaml")
    cfg.training.max_rounds
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import PydanticCustomError

from ecdysis.benchmarks import BenchmarkConfig
from ecdysis.benchmarks import build as build_benchmark
from ecdysis.coders import BuiltinCoderConfig, CoderConfig
from ecdysis.evolution.acceptance import AcceptanceConfig, StrictAcceptance
from ecdysis.evolution.methods import BatchMethod, MethodConfig
from ecdysis.llm.config import GatewayConfig
from ecdysis.llm.local_servers import local_task_slots
from ecdysis.records import Task, stable_hash
from ecdysis.rollouts.settings import RolloutOptions, RolloutSettings
from ecdysis.sandbox.config import AutoSandboxConfig, SandboxConfig
from ecdysis.tracking.config import TrackingConfig

BUILTIN_CONFIGS = Path(__file__).resolve().parent / "configs"
"""The run configs shipped in the package (``demo``, ``scripted``, ``airline``...)."""

_RUN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class ConfigError(ValueError):
    """An unreadable or invalid config. ``errors`` holds ``(dotted.path, message)`` pairs."""

    def __init__(self, source: str, errors: list[tuple[str, str]]) -> None:
        self.source = source
        self.errors = errors
        lines = "\n".join(f"  {path}: {message}" if path else f"  {message}" for path, message in errors)
        super().__init__(f"invalid config {source}:\n{lines}")


class Section(BaseModel):
    """Base of every config section: unknown keys are errors, values are not silently coerced."""

    model_config = ConfigDict(extra="forbid", strict=True, use_attribute_docstrings=True)


class StorageConfig(Section):
    """Where runs are stored."""

    uri: str = "./runs"
    """Store URI: a local path (default ``./runs``), ``file:///abs/path`` or ``s3://bucket/prefix``. The S3
    endpoint comes from ``ECDYSIS_S3_ENDPOINT_URL`` (or ``AWS_ENDPOINT_URL``), credentials from the AWS chain."""

    @field_validator("uri")
    @classmethod
    def _known_scheme(cls, value: str) -> str:
        from ecdysis.store.uri import parse_store_uri

        parse_store_uri(value)  # raises UnsupportedURIError (a ValueError), reported on storage.uri
        return value


class RayConfig(Section):
    """How to reach Ray."""

    address: str | None = None
    """Address of an existing Ray cluster (``ray://host:10001`` or ``auto``); None starts a local Ray."""
    num_cpus: int | None = Field(default=None, ge=1)
    """CPUs for a local Ray (None: all of this machine's). Ignored when ``address`` is set."""


class ModelsConfig(Section):
    """litellm model strings per role (``scripted/<module>:<fn>`` for in-package deterministic models)."""

    task: list[str] = Field(min_length=1)
    """Task (agent) models; the final harness is evaluated on each. A single string is accepted."""
    user: str | None = None
    """User-simulator model, for benchmarks with a simulated user (τ²: required)."""
    diagnoser: str
    """Model behind diagnosis (and the FDCR roles)."""
    aggregator: str | None = None
    """Model that summarises failure groups when a round's evidence exceeds the prompt budget (None: the
    diagnoser's model)."""
    coder: str
    """Model behind the coding agent (whichever ``training.coder`` is)."""

    @field_validator("task", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value


class TrainingConfig(Section):
    """How the harness is trained."""

    method: MethodConfig = Field(default_factory=BatchMethod)
    """The evolution method and its options (``ecdysis list method``): ``se`` (one modification per failure, in
    sequence), ``ecdysis`` (batch aggregation) or ``{type: ecdysis-fdcr, passes: 2}`` (batch aggregation +
    Analyst/Critic/Engineer refinement); a bare name (``method: ecdysis``) is accepted."""
    acceptance: AcceptanceConfig = Field(default_factory=StrictAcceptance)
    """When a candidate replaces the current harness (``ecdysis list acceptance``): ``strict`` (default, the paper's
    rule: its training score is strictly higher) or ``{type: paired, test: sign, confidence: 0.95}`` (its per-task
    improvement over ``rollouts.train_trials`` trials clears a one-sided test)."""
    max_rounds: int = Field(default=3, ge=0)
    """Maximum training rounds."""
    failure_threshold: float = Field(default=1.0, ge=0.0, le=1.0)
    """A trajectory whose reward is below this becomes a failure record."""
    prompt_budget_chars: int = Field(default=70_000, ge=4_000)
    """Characters of failure evidence plus harness source in one diagnosis prompt. The prompt gets the smallest of
    this, ``prompt_budget_tokens`` and what the diagnosis model's context window leaves (``llm.models.<model>.
    context_tokens``, else litellm's model map; see ``ecdysis.evolution.prompt_budget``)."""
    prompt_budget_tokens: int | None = Field(default=None, ge=1_000)
    """The same budget in tokens (3 characters a token); None: no limit in tokens beyond the model's context."""
    coder: CoderConfig = Field(default_factory=BuiltinCoderConfig)
    """The coding agent (``ecdysis list coder``): ``{type: builtin}`` (default), ``{type: opencode}`` or
    ``{type: aider}`` plus that agent's options; a bare name (``coder: opencode``) is accepted. All are driven by
    ``models.coder`` through the gateway; the external ones run sandboxed with no network."""

    @model_validator(mode="before")
    @classmethod
    def _fdcr_passes_moved(cls, data: Any) -> Any:
        """``training.fdcr_passes`` (configs before methods had sections) is ``training.method.passes`` now."""
        if not isinstance(data, dict) or "fdcr_passes" not in data:
            return data
        data = dict(data)
        passes = data.pop("fdcr_passes")
        chosen = data.get("method")
        if chosen == "ecdysis-fdcr":
            data["method"] = {"type": chosen, "passes": passes}
        elif isinstance(chosen, dict) and chosen.get("type") == "ecdysis-fdcr":
            if "passes" in chosen and chosen["passes"] != passes:
                raise ValueError("fdcr_passes is training.method.passes now; give it there only")
            data["method"] = {**chosen, "passes": passes}
        return data  # other methods never read it


class RolloutsConfig(Section, RolloutOptions):
    """How episodes are run in parallel (the fields and defaults of `RolloutOptions`, plus the training trials)."""

    train_trials: int = Field(default=1, ge=1)
    """Trials per training task in each training evaluation: the base's and the candidate's alike, with the same seeds
    (trial ``t`` has seed ``seed + t``), so ``training.acceptance: paired`` compares them task by task."""


class RunConfig(Section):
    """A whole run, as written in YAML."""

    run_name: str = Field(min_length=1, max_length=100)
    """Name of the run (letters, digits, ``_ . -``); run ids are derived from it."""
    seed: int = 0
    """Master seed of the run."""
    storage: StorageConfig = StorageConfig()
    """Where artifacts go."""
    ray: RayConfig = RayConfig()
    """Ray cluster settings."""
    benchmark: BenchmarkConfig
    """The benchmark (``type``: tau2 when not given) and the tasks to train and evaluate on."""
    models: ModelsConfig
    """Models per role."""
    training: TrainingConfig = TrainingConfig()
    """Training method and budget."""
    sandbox: SandboxConfig = Field(default_factory=AutoSandboxConfig)
    """Sandbox backend (``ecdysis list sandbox``): ``{type: auto}`` (the default: Docker when a daemon answers, else
    process), ``docker`` or ``process``."""
    llm: GatewayConfig = Field(default_factory=GatewayConfig)
    """LLM gateway: response cache, retries, timeouts, per-model settings, budgets (max_usd, max_tokens)."""
    rollouts: RolloutsConfig = Field(default_factory=lambda: RolloutsConfig())
    """Parallel rollouts on Ray."""
    tracking: TrackingConfig = Field(default_factory=TrackingConfig)
    """Experiment trackers mirroring the run, e.g. ``{mlflow: {uri: http://127.0.0.1:5000}}``."""

    @field_validator("run_name")
    @classmethod
    def _safe_name(cls, value: str) -> str:
        if not _RUN_NAME.match(value):
            raise ValueError("use letters, digits, '_', '.', '-' (starting with a letter or digit)")
        return value

    @model_validator(mode="after")
    def _user_model_when_needed(self) -> RunConfig:
        if self.benchmark.needs_user_model and not self.models.user:
            raise PydanticCustomError("missing_user_model", "models.user: benchmark '{name}' simulates a user, so it "
                                      "needs a user model", {"name": self.benchmark.name})
        return self

    def models_by_role(self) -> list[tuple[str, str | None]]:
        """``(role, model)`` for every role a training run calls (None where a role has no model of its own; the
        user's only when the benchmark simulates one)."""
        m = self.models
        user = m.user if self.benchmark.needs_user_model else None
        return [*(("task", model) for model in m.task), ("user", user), ("diagnoser", m.diagnoser),
                ("aggregator", m.aggregator), ("coder", m.coder)]

    def config_hash(self) -> str:
        """sha256 of the canonical JSON of this config (for :class:`~ecdysis.records.RunManifest`)."""
        return stable_hash(self.model_dump(mode="json", exclude={"tracking"}))


def parse_config(data: Any, source: str = "<config>") -> RunConfig:
    """A :class:`RunConfig` from already-parsed YAML/JSON data; raises :class:`ConfigError`."""
    if not isinstance(data, dict):
        raise ConfigError(source, [("", f"top level must be a mapping, got {type(data).__name__}")])
    try:
        return RunConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(source, field_errors(err)) from None


def find_config(name: str, *, folder: str | os.PathLike[str] | None = None) -> Path:
    """The config file that ``name`` names: a path (a relative one looked up under ``folder`` first, when given),
    else the config of that name shipped in the package (``demo``, ``airline``...). FileNotFoundError, naming the
    built-in configs, when it is neither."""
    path = Path(name)
    if not path.is_absolute() and folder is not None and (Path(folder) / path).is_file():
        return Path(folder) / path
    if path.is_file():
        return path
    builtin = BUILTIN_CONFIGS / f"{name.removesuffix('.yaml')}.yaml"
    if builtin.is_file():
        return builtin
    known = ", ".join(sorted(p.stem for p in BUILTIN_CONFIGS.glob("*.yaml")))
    raise FileNotFoundError(f"no config file {name!r} (built-in configs: {known})")


def load_config(path: str | os.PathLike[str]) -> RunConfig:
    """The :class:`RunConfig` in the YAML file at ``path``; raises :class:`ConfigError` naming each bad field."""
    source = os.fspath(path)
    try:
        text = Path(source).read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(source, [("", f"cannot read file: {err.strerror or err}")]) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ConfigError(source, [("", f"not valid YAML: {err}")]) from None
    return parse_config({} if data is None else data, source)


def field_errors(err: ValidationError) -> list[tuple[str, str]]:
    """``(dotted.path, message)`` for each error of a pydantic validation, the bad value shown where it helps."""
    out = []
    for item in err.errors(include_url=False):
        path = ".".join(str(part) for part in item["loc"])
        message = item["msg"].removeprefix("Value error, ")
        if item["type"] not in ("missing", "extra_forbidden") and "input" in item:
            shown = repr(item["input"])
            message += f" (got {shown[:77] + '...' if len(shown) > 80 else shown})"
        out.append((path, message))
    return out


def rollout_settings(config: RunConfig) -> RolloutSettings:
    """The worker-side settings of a run config: its typed sections, as they are, except that a run whose task
    models are all on llama-servers runs as many episodes at once as the fewest of them has slots."""
    settings = RolloutSettings.of(config.rollouts, store_uri=config.storage.uri, gateway=config.llm,
                                  sandbox=config.sandbox, benchmarks=[config.benchmark])
    slots = local_task_slots(list(config.models.task), config.llm)
    if slots is None:
        return settings
    workers = min(settings.workers or 1, slots)
    return settings.model_copy(update={"workers": workers, "episodes_per_worker": -(-slots // workers)})


def training_tasks(config: RunConfig) -> tuple[list[Task], list[Task]]:
    """The run's training and held-out tasks (explicit ids train and test on the same list)."""
    b = config.benchmark
    benchmark = build_benchmark(b)
    if b.task_ids:
        tasks = benchmark.tasks(None, ids=b.task_ids)
        return tasks, tasks
    train = benchmark.tasks("train", b.train_tasks, seed=b.selection_seed)
    test = benchmark.tasks("test", b.test_tasks, seed=b.selection_seed) if b.test_tasks else []
    return train, test
