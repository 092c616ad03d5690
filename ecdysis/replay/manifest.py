"""What a replay takes from a run's manifest: a narrow, strict schema of the run's own choices, never how to run.

A replay pack travels between people, so its manifest is hostile input like its harness. A replay takes from it only
what defines the run (its benchmark and task draw, models and their request parameters, the training method, budgets
and episode limits) and validates that against :class:`PackManifest` (``extra="forbid"`` at every level). Everything
about *how* to run — sandbox and Docker options, images, interpreters, coder binaries, the store, Ray, model server
addresses and keys, data folders — is the replaying machine's own (:class:`~ecdysis.replay.host.ReplayHost`).

``ecdysis pack`` writes manifests already narrowed (:func:`narrow_manifest`); a pack whose manifest holds anything
else is refused with the field named. A run replayed from one's own store is narrowed first, so its recorded
execution settings are dropped, not refused. Example::

    manifest = checked_manifest(json.loads(path.read_text()), source="run.pack.tar.gz")
"""

from __future__ import annotations

import copy
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ecdysis.records import Task

RUN_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,199}$"

HOST_FIELDS: dict[str, Any] = {
    "train": {"storage": True, "ray": True, "sandbox": True, "tracking": True,
              "benchmark": {"data_dir": True},
              "llm": {"cache_namespace": True, "local": True, "replay_from": True,
                      "models": {"*": {"api_base": True, "api_key_env": True}}},
              "rollouts": {"workers": True, "worker_resources": True, "keep_warm_s": True},
              "training": {"coder": {"binary": True, "venv": True, "extra_args": True}}},
    "eval_config": {"benchmark": {"data_dir": True}},
    "eval_settings": {"store_uri": True, "sandbox": True, "benchmarks": True, "episode_grace_s": True,
                      "workers": True, "worker_resources": True, "keep_warm_s": True,
                      "gateway": {"cache_namespace": True, "local": True, "replay_from": True,
                                  "models": {"*": {"api_base": True, "api_key_env": True}}}},
}
"""The execution settings a recorded manifest holds (``True``: the whole key), which a replay takes from the host."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class PackModel(_Strict):
    """``llm.models.<model>`` less its address and key: what shapes the requests and the reading of replies."""

    model: str | None = None
    max_concurrency: int | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    input_cost_per_token: float | None = None
    output_cost_per_token: float | None = None
    tool_call_parsing: str = "native"
    context_tokens: int | None = None
    streaming: str = "off"


class PackGateway(_Strict):
    """``llm`` less the cache namespace, local serving and replay source."""

    cache: bool = True
    cache_rule: str = "deterministic"
    max_retries: int = 5
    backoff_base_s: float = 1.0
    backoff_max_s: float = 30.0
    timeout_s: float = 120.0
    max_concurrency: int = 16
    max_usd: float | None = None
    max_tokens: int | None = None
    flush_every: int = 200
    models: dict[str, PackModel] = Field(default_factory=dict)
    role_params: dict[str, dict[str, Any]] = Field(default_factory=dict)
    seed: int | None = None


class _EpisodeLimits(_Strict):
    """The episode limits a run chose, in ``rollouts`` of a training config and in an eval run's settings alike."""

    episodes_per_worker: int = 8
    max_attempts: int = 3
    max_consecutive_model_errors: int = Field(default=10, ge=1)
    max_steps: int | None = None
    wall_clock_s: float | None = None
    max_wall_clock_s: float | None = None


class PackRollouts(_EpisodeLimits):
    """``rollouts`` less the worker count, worker resources and warm keeping (the host's)."""

    train_trials: int = 1


def _no_host_keys(value: dict[str, Any], keys: dict[str, Any], where: str) -> dict[str, Any]:
    found = sorted(set(value) & set(keys))
    if found:
        raise ValueError(f"{where}.{found[0]} is an execution setting of the replaying machine, not of a pack")
    return value


class PackTraining(_Strict):
    """``training``; its coder without binaries, venvs or extra arguments."""

    method: dict[str, Any] | str = "ecdysis"
    acceptance: dict[str, Any] | str = "strict"
    max_rounds: int = 3
    failure_threshold: float = 1.0
    prompt_budget_chars: int = 70_000
    prompt_budget_tokens: int | None = None
    coder: dict[str, Any] | str = "builtin"

    @field_validator("coder")
    @classmethod
    def _coder_runs_here(cls, value: dict[str, Any] | str) -> dict[str, Any] | str:
        return value if isinstance(value, str) else _no_host_keys(value, HOST_FIELDS["train"]["training"]["coder"],
                                                                  "coder")


def _benchmark_here(value: dict[str, Any]) -> dict[str, Any]:
    return _no_host_keys(value, HOST_FIELDS["train"]["benchmark"], "benchmark")


class PackTrainConfig(_Strict):
    """A training run's config as a pack may carry it: no ``storage``, ``ray``, ``sandbox`` or ``tracking``."""

    run_name: str = Field(pattern=RUN_ID_PATTERN)
    seed: int = 0
    benchmark: dict[str, Any]
    models: dict[str, Any]
    training: PackTraining = Field(default_factory=PackTraining)
    llm: PackGateway = Field(default_factory=PackGateway)
    rollouts: PackRollouts = Field(default_factory=PackRollouts)

    @field_validator("benchmark")
    @classmethod
    def _benchmark_runs_here(cls, value: dict[str, Any]) -> dict[str, Any]:
        return _benchmark_here(value)


class PackEvalPlan(_Strict):
    """An eval run's plan (:class:`~ecdysis.evaluation.EvalPlan`) as a pack may carry it."""

    harnesses: list[str]
    models: list[str]
    user_model: str | None = None
    benchmark: dict[str, Any]
    split: str = "test"
    n_tasks: int | None = 20
    task_ids: list[str] | None = None
    trials: int = 3
    seed: int = 0

    @field_validator("benchmark")
    @classmethod
    def _benchmark_runs_here(cls, value: dict[str, Any]) -> dict[str, Any]:
        return _benchmark_here(value)


class PackEvalSettings(_EpisodeLimits):
    """An eval run's rollout settings as a pack may carry them: limits and the gateway, no sandbox or store."""

    gateway: PackGateway = Field(default_factory=PackGateway)


class _NoSettings(_Strict):
    """A training run's settings are in its config: its ``settings`` are empty."""


class PackManifest(_Strict):
    """A replay pack's run manifest (the fields of :class:`~ecdysis.records.RunManifest`, each narrowed)."""

    run_id: str = Field(pattern=RUN_ID_PATTERN)
    kind: Literal["train", "eval"]
    method: str | None = None
    config: dict[str, Any]
    config_hash: str = ""
    settings: dict[str, Any] = Field(default_factory=dict)
    package_versions: dict[str, str] = Field(default_factory=dict)
    seed: int = 0
    models: list[str] = Field(default_factory=list)
    tasks: list[Task] = Field(default_factory=list)
    status: Literal["finished"]
    """Only a finished run is packed or replayed."""
    created_at: datetime
    finished_at: datetime | None = None
    final_harness_hash: str | None = None
    note: str = ""

    def sections(self) -> list[tuple[str, type[BaseModel], dict[str, Any]]]:
        """The kind's sections with the schema each must fit: ``(field, schema, value)``."""
        if self.kind == "train":
            return [("config", PackTrainConfig, self.config), ("settings", _NoSettings, self.settings)]
        return [("config", PackEvalPlan, self.config), ("settings", PackEvalSettings, self.settings)]

    def train_config(self) -> PackTrainConfig:
        """The training run's config, parsed."""
        return PackTrainConfig.model_validate(self.config)

    def eval_plan(self) -> tuple[PackEvalPlan, PackEvalSettings]:
        """The eval run's plan and settings, parsed."""
        return PackEvalPlan.model_validate(self.config), PackEvalSettings.model_validate(self.settings)


class UntrustedManifestError(ValueError):
    """A pack's manifest holds something a pack may not carry, or is malformed; the message names the field."""


def checked_manifest(data: Any, *, source: str) -> PackManifest:
    """``data`` (a parsed manifest) validated against :class:`PackManifest`; raises :class:`UntrustedManifestError`
    naming the first offending field."""
    try:
        manifest = PackManifest.model_validate(data)
    except ValidationError as err:
        raise _untrusted(err, source, "") from None
    for field, schema, value in manifest.sections():
        try:
            schema.model_validate(value)
        except ValidationError as err:
            raise _untrusted(err, source, f"{field}.") from None
    for where, model in _model_strings(manifest):
        if model.startswith(SCRIPTED) and not model.startswith(f"{SCRIPTED}ecdysis."):
            raise UntrustedManifestError(
                f"{source}: manifest field {where}: scripted model {model!r} is not one of Ecdysis's own (a pack may "
                f"name only {SCRIPTED}ecdysis.… models: any other would import a module of this machine's choosing)")
    return manifest


SCRIPTED = "scripted/"


def _model_strings(manifest: PackManifest) -> list[tuple[str, str]]:
    """Every model string a manifest names, with where: a ``scripted/<module>:<fn>`` one imports its module."""
    found = [(f"models.{i}", m) for i, m in enumerate(manifest.models)]
    config = manifest.config
    roles = config.get("models") if manifest.kind == "train" else {"task": config.get("models"),
                                                                   "user": config.get("user_model")}
    for role, value in (roles or {}).items():
        for i, model in enumerate(value if isinstance(value, list) else [value]):
            if isinstance(model, str):
                found.append((f"config.models.{role}" + (f".{i}" if isinstance(value, list) else ""), model))
    gateway = config.get("llm") if manifest.kind == "train" else manifest.settings.get("gateway")
    prefix = "config.llm" if manifest.kind == "train" else "settings.gateway"
    for name, entry in ((gateway or {}).get("models") or {}).items():
        found.append((f"{prefix}.models", name))
        if isinstance(entry, dict) and isinstance(entry.get("model"), str):
            found.append((f"{prefix}.models.{name}.model", entry["model"]))
    return found


def _untrusted(err: ValidationError, source: str, prefix: str) -> UntrustedManifestError:
    first = err.errors(include_url=False)[0]
    where = prefix + ".".join(str(part) for part in first["loc"])
    message = first["msg"].removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        message = "not allowed in a replay pack (a replay runs with this machine's own settings)"
    more = f" (and {err.error_count() - 1} more)" if err.error_count() > 1 else ""
    return UntrustedManifestError(f"{source}: manifest field {where.rstrip('.') or '(top)'}: {message}{more}")


def narrow_manifest(data: dict[str, Any]) -> dict[str, Any]:
    """A recorded manifest (``RunManifest`` as JSON) with every execution setting dropped: what a pack carries."""
    out = copy.deepcopy(data)
    if out.get("kind") == "eval":
        _drop(out.get("config"), HOST_FIELDS["eval_config"])
        _drop(out.get("settings"), HOST_FIELDS["eval_settings"])
    else:
        _drop(out.get("config"), HOST_FIELDS["train"])
    return out


def _drop(value: Any, spec: dict[str, Any]) -> None:
    if not isinstance(value, dict):
        return
    for key, sub in spec.items():
        targets = list(value) if key == "*" else [key]
        for target in targets:
            if target not in value:
                continue
            if sub is True:
                del value[target]
            else:
                _drop(value[target], sub)
