"""Runs a study: for each configuration a training run (evolution methods, trained from ``human``) and a held-out
evaluation with k trials per eval model; the seed harnesses are evaluated only. Every run goes to one store, so the
response cache is shared and ``ecdysis replay RUN`` / ``ecdysis verify RUN`` hold for each; the study's checkpoint
(:mod:`ecdysis.study.manifest`) is written after every run. Example::

    manifest = StudyRunner(load_study("study.yaml"), store_uri="./runs").run()
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ecdysis.benchmarks import build
from ecdysis.config import RunConfig, rollout_settings
from ecdysis.evaluation import EvalPlan, run_eval
from ecdysis.evolution.checkpoints import Checkpoints, RunStarted
from ecdysis.evolution.methods import method as method_section
from ecdysis.records import Task, utc_now
from ecdysis.store import ArtifactStore
from ecdysis.study.config import SEEDS, StudyConfig
from ecdysis.study.manifest import StudyEntry, StudyManifest, eval_key, load_manifest, save_manifest, train_key
from ecdysis.training import TrainingDriver

Trainer = Callable[[RunConfig, str, str, bool], str]
"""``trainer(config, method, run_id, resume)`` trains (or resumes) one run and returns its final harness hash."""


def train_in_process(config: RunConfig, method: str, run_id: str, resume: bool) -> str:
    """The default `Trainer`: the training driver in this process (its rollouts on Ray), no held-out evaluation
    (the study evaluates every configuration itself, on the same tasks)."""
    return TrainingDriver(config, method=method, run_id=run_id).run(resume=resume, evaluate_heldout=False).final_hash


def resumable(store: Any, run_id: str) -> bool:
    """Whether the training run ``run_id`` has a checkpoint to continue from."""
    return Checkpoints(store, run_id).get("run", RunStarted) is not None


def choose_configurations(study: StudyConfig, only: list[str] | None) -> list[str]:
    """``only`` in the study's order (each must be one of its configurations; ``ValueError`` names the others), or
    every configuration where ``only`` is None."""
    if only is None:
        return list(study.configurations)
    unknown = [name for name in only if name not in study.configurations]
    if unknown:
        raise ValueError(f"--only: {', '.join(unknown)} not among the study's configurations "
                         f"({', '.join(study.configurations)})")
    return [name for name in study.configurations if name in only]


@dataclass
class StudyRunner:
    """Runs (or continues) ``study`` in the store at ``store_uri``.

    ``on_run(entry)`` is told when a run starts (status running) and when it ends (finished); ``on_checkpoint``
    is called after each finished run is recorded (tests stop the study there to stand for a kill).
    """

    study: StudyConfig
    store_uri: str
    trainer: Trainer = train_in_process
    on_run: Callable[[StudyEntry], None] | None = None
    on_checkpoint: Callable[[StudyEntry], None] | None = None
    only: list[str] | None = None
    """Run only these configurations (None: all); the others' finished runs stay in the checkpoint and the table.
    Two processes of one study must not run the same configuration at once."""
    study_id: str | None = None
    """The checkpoint's key; None: ``study.study_id()``. A study whose models are served for the run passes the id
    of the study as written, so where a model was served (a server's slots or context) never changes it."""
    store: Any = field(init=False)
    manifest: StudyManifest = field(init=False)

    def __post_init__(self) -> None:
        self.store = ArtifactStore(self.store_uri)
        study_id = self.study_id or self.study.study_id()
        self.manifest = load_manifest(self.store, study_id) or StudyManifest(study_id=study_id,
                                                                             protocol=self.study.protocol())

    def run(self) -> StudyManifest:
        """Every configuration on the training model, then on each transfer model; returns the checkpoint."""
        heldout = self.heldout_tasks()
        chosen = self.chosen_configurations()
        harnesses: dict[str, str] = {}
        for configuration in chosen:
            harnesses[configuration] = self._harness(configuration)
            self._evaluate(configuration, harnesses[configuration], self.study.train_model, heldout)
        for model in self.study.eval_models[1:]:
            for configuration in chosen:
                self._evaluate(configuration, harnesses[configuration], model, heldout)
        return self.manifest

    def chosen_configurations(self) -> list[str]:
        """The configurations this runner runs (:func:`choose_configurations` of ``only``)."""
        return choose_configurations(self.study, self.only)

    def heldout_tasks(self) -> list[Task]:
        """The held-out tasks: the explicit list, or a seeded draw from the split."""
        h = self.study.heldout
        seed = self.study.seed if h.seed is None else h.seed
        return build(self.study.base.benchmark).tasks(h.split, None if h.task_ids else h.sample, seed=seed,
                                                      ids=h.task_ids)

    def run_config(self, configuration: str | None, model: str) -> RunConfig:
        """The base config under the study's protocol: its seed, budget, rounds, store; ``model`` as the task
        model; ``configuration``'s method when it is one."""
        base, study = self.study.base, self.study
        training: dict[str, Any] = {"max_rounds": study.max_rounds}
        if configuration is not None and configuration not in SEEDS:
            training["method"] = method_section(configuration, base.training.method)
        llm = base.llm if study.budget_usd is None else base.llm.model_copy(update={"max_usd": study.budget_usd})
        return base.model_copy(update={
            "run_name": study.name, "seed": study.seed, "llm": llm,
            "storage": base.storage.model_copy(update={"uri": self.store.uri}),
            "models": base.models.model_copy(update={"task": [model]}),
            "training": base.training.model_copy(update=training)})

    def _harness(self, configuration: str) -> str:
        """A seed's name, or the final harness hash of the configuration's (finished) training run."""
        if configuration in SEEDS:
            return configuration
        key = train_key(configuration)
        done = self.manifest.finished(key)
        if done is not None:
            assert done.harness is not None
            return done.harness
        earlier = self.manifest.entries.get(key)
        resume = earlier is not None and resumable(self.store, earlier.run_id)
        run_id = earlier.run_id if earlier is not None and resume else self._run_id(configuration, "train")
        entry = self._started(StudyEntry(key=key, run_id=run_id, kind="train", configuration=configuration,
                                         model=self.study.train_model))
        cfg = self.run_config(configuration, self.study.train_model)
        final = self.trainer(cfg, configuration, run_id, resume)
        self._finished(entry, harness=final)
        return final

    def _evaluate(self, configuration: str, harness: str, model: str, tasks: list[Task]) -> None:
        """The held-out evaluation of ``harness`` on ``model`` (k trials per task), unless it is done."""
        key = eval_key(configuration, model)
        if self.manifest.finished(key) is not None:
            return
        run_id = self._run_id(configuration, "eval", model)
        entry = self._started(StudyEntry(key=key, run_id=run_id, kind="eval", configuration=configuration,
                                         model=model, harness=harness))
        cfg = self.run_config(None, model)
        plan = EvalPlan(harnesses=[harness], models=[model], user_model=cfg.models.user, benchmark=cfg.benchmark,
                        split=self.study.heldout.split, n_tasks=None, task_ids=[t.task_id for t in tasks],
                        trials=self.study.k, seed=self.study.seed)
        run_eval(plan, store=self.store, settings=rollout_settings(cfg), run_id=run_id,
                 threshold=cfg.training.failure_threshold)
        self._finished(entry, harness=harness)

    def _run_id(self, configuration: str, kind: str, model: str | None = None) -> str:
        slug = "" if model is None else "-" + re.sub(r"[^A-Za-z0-9]+", "-", model.rsplit("/", 1)[-1])[-24:].strip("-")
        return f"{self.manifest.study_id}-{configuration}-{kind}{slug}-{uuid.uuid4().hex[:6]}"

    def _started(self, entry: StudyEntry) -> StudyEntry:
        self.manifest.entries[entry.key] = entry
        save_manifest(self.store, self.manifest)
        if self.on_run is not None:
            self.on_run(entry)
        return entry

    def _finished(self, entry: StudyEntry, *, harness: str) -> None:
        done = entry.model_copy(update={"status": "finished", "harness": harness, "finished_at": utc_now()})
        self.manifest.entries[entry.key] = done
        save_manifest(self.store, self.manifest)
        if self.on_run is not None:
            self.on_run(done)
        if self.on_checkpoint is not None:
            self.on_checkpoint(done)
