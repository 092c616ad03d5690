"""Mirror an Ecdysis run of a store into MLflow: one MLflow run per Ecdysis run, a nested run per round.

Everything is read from our store (manifest, rounds, events, harness versions, specs, held-out trajectories), so
the driver's live mirror (after each round) and ``ecdysis runs export-mlflow`` replaying a run are the same code.
The MLflow run id is kept in our store (``objects/tracking/<run>/mlflow.json``): a resumed run, or an export after
a live mirror, continues the same MLflow run and never logs a round twice.

Tracking never fails or slows a run: requests have a short timeout and no retries, and the first failure issues
one warning and turns the mirror off for the rest of the process.
"""

from __future__ import annotations

import json
import os
import tempfile
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ecdysis.events.episodes import STEP_KINDS
from ecdysis.metrics import summarize
from ecdysis.protocols import Store
from ecdysis.records import EventKind, HarnessVersion, ModificationSpec, RoundResult, RunEvent, Trajectory
from ecdysis.tracking.config import MlflowConfig, TrackingConfig

NAMESPACE = "tracking"
_MAX_PARAM_CHARS = 6000


class TrackingUnavailable(RuntimeError):
    """The ``mlflow`` package is not installed (``pip install ecdysis[mlflow]``)."""


def _mlflow_client(uri: str, timeout_s: float) -> Any:
    os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] = str(max(1, round(timeout_s)))
    os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] = "0"
    try:
        from mlflow.tracking import MlflowClient
    except ImportError as err:
        raise TrackingUnavailable("MLflow tracking needs the mlflow package: pip install 'ecdysis[mlflow]'") from err
    return MlflowClient(tracking_uri=uri)


class MlflowMirror:
    """Logs one run of ``store`` to the MLflow server of ``config``; each public method is safe to call from a
    training run (see the module docstring).

    Example::

        mirror = MlflowMirror(ArtifactStore("./runs"), "run-1", MlflowConfig(uri="http://127.0.0.1:5000"))
        mirror.export()           # every round, held-out metrics, the HTML report
    """

    def __init__(self, store: Any, run_id: str, config: MlflowConfig, *,
                 warn: Callable[[str], None] | None = None) -> None:
        self.store = store
        self.run_id = run_id
        self.config = config
        self.enabled = True
        self._warn = warn or (lambda message: warnings.warn(message, RuntimeWarning, stacklevel=3))
        self._client: Any = None
        self._state: dict[str, Any] | None = None

    # -- safe entry points ----------------------------------------------------------------------------------------

    def start(self) -> str | None:
        """Create (or find again) the MLflow run and log the config as params; returns its id (None: off)."""
        return self._safely(self._start)

    def log_round(self, result: RoundResult) -> None:
        """Log one decided round (skipped when already logged)."""
        self._safely(lambda: self._log_round(result))

    def finish(self, *, report: bool = True) -> None:
        """Log held-out metrics per model and the HTML report, and end the MLflow run with the run's status."""
        self._safely(lambda: self._finish(report))

    def export(self, *, report: bool = True) -> str:
        """Replay the whole stored run and return the MLflow run id; errors raise here (for the CLI)."""
        self._start()
        rounds = sorted((r for r in self.store.read("rounds", run_id=self.run_id) if isinstance(r, RoundResult)),
                        key=lambda r: r.round)
        for result in rounds:
            self._log_round(result)
        self._finish(report)
        return self._start()

    def _safely(self, action: Callable[[], Any]) -> Any:
        if not self.enabled:
            return None
        try:
            return action()
        except Exception as exc:
            self.enabled = False
            self._warn(f"MLflow tracking to {self.config.uri} is off for the rest of run {self.run_id}: "
                       f"{type(exc).__name__}: {str(exc)[:300]}. The run goes on; its events stay in the store, "
                       f"replay them later with `ecdysis runs export-mlflow {self.run_id}`")
            return None

    # -- the work -------------------------------------------------------------------------------------------------

    def _start(self) -> str:
        if self._state is not None:
            return str(self._state["run"])
        client = self._client = _mlflow_client(self.config.uri, self.config.timeout_s)
        stored = self.store.get_object(NAMESPACE, f"{self.run_id}/mlflow.json")
        state: dict[str, Any] = json.loads(stored) if stored else {}
        if state.get("uri") != self.config.uri:  # another server: a fresh MLflow run there
            state = {}
        if not state:
            experiment = client.get_experiment_by_name(self.config.experiment)
            experiment_id = experiment.experiment_id if experiment is not None else \
                client.create_experiment(self.config.experiment)
            run = client.create_run(experiment_id, run_name=self.run_id, tags={"ecdysis.run_id": self.run_id})
            state = {"uri": self.config.uri, "experiment_id": experiment_id, "run": run.info.run_id, "rounds": {}}
            self._save(state)
            self._log_params(state["run"])
        else:
            client.update_run(state["run"], status="RUNNING")
        self._state = state
        return str(state["run"])

    def _log_params(self, mlflow_run: str) -> None:
        from mlflow.entities import Param

        manifest = self.store.read_manifest(self.run_id)
        if manifest is None:
            return
        flat = dict(_flatten(manifest.config))
        flat.update({"ecdysis.method": manifest.method or "", "ecdysis.kind": manifest.kind,
                     "ecdysis.config_hash": manifest.config_hash})
        params = [Param(k[:250], v[:_MAX_PARAM_CHARS]) for k, v in sorted(flat.items())]
        for i in range(0, len(params), 100):
            self._client.log_batch(mlflow_run, params=params[i:i + 100])

    def _log_round(self, result: RoundResult) -> None:
        from mlflow.entities import Metric

        self._start()
        state = self._state
        assert state is not None
        key = str(result.round)
        if key in state["rounds"]:
            return
        client = self._client
        events = self.store.read("events", run_id=self.run_id, round=result.round)
        values = round_metrics(result, events)
        stamp = int(result.created_at.timestamp() * 1000)
        parent_metrics = [Metric(name, value, stamp, result.round) for name, value in values.items()]
        client.log_batch(state["run"], metrics=parent_metrics)
        child = client.create_run(state["experiment_id"], run_name=f"round {result.round}",
                                  tags={"mlflow.parentRunId": state["run"], "ecdysis.run_id": self.run_id,
                                        "ecdysis.round": key, "ecdysis.accepted": str(result.accepted).lower()})
        child_id = child.info.run_id
        client.log_batch(child_id, metrics=[Metric(name, value, stamp, 0) for name, value in values.items()])
        client.log_text(child_id, result.note or "", "note.txt")
        for version in self.store.read("harness_versions", run_id=self.run_id, round=result.round):
            if isinstance(version, HarnessVersion) and version.accepted and version.diff:
                client.log_text(child_id, version.diff, f"accepted_diff_round_{result.round}.diff")
        specs = [s for s in self.store.read("specs", run_id=self.run_id, round=result.round)
                 if isinstance(s, ModificationSpec)]
        for spec in specs:
            client.log_text(child_id, spec.model_dump_json(indent=2), f"specs/{spec.spec_id or 'spec'}.json")
        client.set_terminated(child_id, status="FINISHED")
        state["rounds"][key] = child_id
        self._save(state)

    def _finish(self, report: bool) -> None:
        from mlflow.entities import Metric

        self._start()
        state = self._state
        assert state is not None
        manifest = self.store.read_manifest(self.run_id)
        metrics = [Metric(name, value, 0, 0) for name, value in self._heldout_metrics(manifest).items()]
        if metrics:
            self._client.log_batch(state["run"], metrics=metrics)
        if report:
            from ecdysis.report import write_report

            with tempfile.TemporaryDirectory(prefix="ecdysis-mlflow-") as tmp:
                path = write_report(self.store, [self.run_id], Path(tmp) / "report.html")
                self._client.log_artifact(state["run"], str(path))
        status = manifest.status if manifest is not None else "finished"
        self._client.set_terminated(state["run"], status={"finished": "FINISHED", "running": "RUNNING",
                                                          "stopped": "KILLED"}.get(status, "FAILED"))

    def _heldout_metrics(self, manifest: Any) -> dict[str, float]:
        if manifest is None or manifest.status != "finished":
            return {}
        rounds = self.store.count("rounds", run_id=self.run_id)
        rows = [t for t in self.store.read("trajectories", run_id=self.run_id, round=rounds, phase="eval")
                if isinstance(t, Trajectory)]
        k = int(manifest.config.get("benchmark", {}).get("trials", 1) or 1)
        by_model: dict[str, list[Trajectory]] = defaultdict(list)
        for t in rows:
            by_model[t.model].append(t)
        out: dict[str, float] = {}
        for model, trajectories in sorted(by_model.items()):
            summary = summarize(trajectories, harness=manifest.final_harness_hash or "", model=model, k=k)
            name = _metric_name(model)
            out[f"heldout.{name}.accuracy"] = summary.accuracy
            if summary.pass_at_k is not None:
                out[f"heldout.{name}.pass_at_{k}"] = summary.pass_at_k
            if summary.pass_hat_k is not None:
                out[f"heldout.{name}.pass_hat_{k}"] = summary.pass_hat_k
            out[f"heldout.{name}.tokens"] = float(summary.prompt_tokens + summary.completion_tokens)
            out[f"heldout.{name}.cost_usd"] = float(summary.cost_usd or 0.0)
        return out

    def _save(self, state: dict[str, Any]) -> None:
        self.store.put_object(NAMESPACE, f"{self.run_id}/mlflow.json", json.dumps(state, sort_keys=True).encode())


def round_metrics(result: RoundResult, events: Iterable[RunEvent]) -> dict[str, float]:
    """The metrics of one round: scores, decision (and the paired improvement with its bounds), failures,
    modification calls, phase times, tokens and cost by role (task model and user simulator together as
    ``rollouts``, from episode events; driver roles from their LLM turns), and the episodes' steps by kind per phase
    (``steps.<phase>.tool_calls`` / ``blocked`` / ``user_actions``, from episode events)."""
    values: dict[str, float] = {"base_score": result.base_score, "accepted": float(result.accepted),
                                "failures": float(result.n_failures),
                                "modification_calls": float(result.modification_calls)}
    if result.candidate_score is not None:
        values["candidate_score"] = result.candidate_score
    if result.improvement is not None:  # the paired acceptance policy's estimate
        estimate = result.improvement
        values.update({"improvement.mean": estimate.mean_difference, "improvement.lower": estimate.lower,
                       "improvement.upper": estimate.upper})
        if estimate.p_value is not None:
            values["improvement.p_value"] = estimate.p_value
    for phase, stats in result.phases.items():
        values[f"phase.{phase}.wall_s"] = stats.wall_time_s
    tokens: dict[str, float] = defaultdict(float)
    cost: dict[str, float] = defaultdict(float)
    steps: dict[str, float] = defaultdict(float)
    for event in events:
        if event.kind == EventKind.EPISODE:
            role = "rollouts"
            phase = event.phase.value if event.phase is not None else "rollouts"
            for kind in STEP_KINDS:  # absent in events written before episodes carried them
                value = event.payload.get(kind)
                steps[f"steps.{phase}.{kind}"] += value if isinstance(value, int) else 0
        elif event.kind == EventKind.LLM_TURN and event.role is not None:
            role = event.role.value
        else:
            continue
        tokens[role] += event.tokens
        cost[role] += event.cost_usd
    for role in tokens:
        values[f"tokens.{role}"] = tokens[role]
        values[f"cost_usd.{role}"] = cost[role]
    values["tokens"] = sum(tokens.values())
    values["cost_usd"] = sum(cost.values())
    return values | steps


def _flatten(value: Any, prefix: str = "") -> Iterable[tuple[str, str]]:
    if isinstance(value, dict) and value:
        for key, inner in value.items():
            yield from _flatten(inner, f"{prefix}{key}.")
    else:
        yield prefix.rstrip("."), value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _metric_name(model: str) -> str:
    return "".join(c if c.isalnum() or c in "_-./ " else "_" for c in model)


def mlflow_mirror(tracking: TrackingConfig, store: Store, run_id: str, *,
                  warn: Callable[[str], None] | None = None) -> MlflowMirror | None:
    """The run's MLflow mirror when ``tracking.mlflow`` is configured, else None; its one warning (server down,
    mlflow not installed) goes to ``warn`` (the driver publishes it as a ``warning`` event)."""
    if tracking.mlflow is None:
        return None
    return MlflowMirror(store, run_id, tracking.mlflow, warn=warn)
