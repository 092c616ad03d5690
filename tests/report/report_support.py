"""A realistic store for report tests: an FDCR training run (3 rounds, held-out eval) and a human-harness eval run,
written through ArtifactStore exactly as the training loop and the FDCR journal write them."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from ecdysis.evolution.fdcr.attribution import attribute
from ecdysis.evolution.fdcr.journal import TurnJournal
from ecdysis.evolution.fdcr.report import FDCRReport, Turn
from ecdysis.records import (
    FailureRecord,
    HarnessVersion,
    LLMCallRecord,
    ModificationSpec,
    PhaseStats,
    ProposedChange,
    Role,
    RoundResult,
    RunManifest,
    Split,
    Task,
    TerminationReason,
    TokenUsage,
    ToolCall,
    Trajectory,
    stable_hash,
)
from ecdysis.store import ArtifactStore

MODELS = ("openai/gpt-4.1-mini", "deepseek/deepseek-chat")
TRAIN_TASKS = tuple(f"airline_{i}" for i in range(6))
HELDOUT_TASKS = tuple(f"airline_{i}" for i in range(20, 24))
TRIALS = 3
HOSTILE = "<img src=x onerror=\"document.documentElement.setAttribute('data-pwned','1')\"><script>window.x=1</script>"
HARNESS = {name: stable_hash(name) for name in ("human", "r0", "r1", "r2")}
T0 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


@dataclass
class Expected:
    """What the tests can check the report against (computed here, independently of the report code)."""

    fdcr_run: str
    human_run: str
    heldout_successes: dict[tuple[str, str], int] = field(default_factory=dict)  # (run, model) -> successes
    heldout_counted: dict[tuple[str, str], int] = field(default_factory=dict)  # (run, model) -> non-excluded
    trajectories: dict[str, int] = field(default_factory=dict)  # run -> all trajectories
    failures_in_viewer: int = 0
    blocked_calls: int = 0
    round_scores: dict[int, tuple[float, float, bool]] = field(default_factory=dict)


def _messages(task_id: str, success: bool, hostile: bool) -> list[dict[str, object]]:
    user = HOSTILE if hostile else f"Hi, I need to change my flight for reservation {task_id.upper()}."
    return [
        {"role": "assistant", "content": "Hello! How can I help you with your booking today?"},
        {"role": "user", "content": user, "stop": False},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "c1", "name": "get_reservation_details", "arguments": {"reservation_id": "ZFA04Y"}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "get_reservation_details",
         "content": '{"reservation_id": "ZFA04Y", "cabin": "basic_economy", "insurance": "no"}', "error": False},
        {"role": "assistant", "content": "Your reservation is basic economy, so it cannot be modified."
         if success else "I have cancelled the reservation for you."},
        {"role": "user", "content": "Thanks, that is all. ###STOP###", "stop": True},
    ]


def _tool_calls(success: bool) -> list[ToolCall]:
    calls = [ToolCall(call_id="c1", name="get_reservation_details", arguments={"reservation_id": "ZFA04Y"},
                      executed=True, result='{"cabin": "basic_economy"}', step=1,
                      annotation="Basic economy reservations cannot be changed; check insurance before cancelling.")]
    if not success:
        calls.append(ToolCall(call_id="c2", name="cancel_reservation", arguments={"reservation_id": "ZFA04Y"},
                              executed=False, step=2,
                              blocked_reason="cancel_reservation requires the user's explicit confirmation"))
    return calls


def _trajectory(run_id: str, rnd: int, phase: str, task_id: str, model: str, trial: int, harness: str,
                success: bool, rng: random.Random, *, hostile: bool = False,
                reason: TerminationReason = TerminationReason.USER_STOP) -> Trajectory:
    prompt = rng.randint(3000, 9000)
    return Trajectory(
        trajectory_id=stable_hash([run_id, rnd, phase, task_id, model, trial])[:16], run_id=run_id, round=rnd,
        phase=phase, task=Task(domain="airline", task_id=task_id, split=Split.TEST if phase == "eval" else Split.TRAIN),
        model=model, trial=trial, seed=trial, harness_hash=harness,
        messages=_messages(task_id, success, hostile), tool_calls=_tool_calls(success), termination_reason=reason,
        error="sandbox container exited with 137" if reason.is_infrastructure else None,
        reward=1.0 if success else 0.0,
        reward_breakdown={"db": 1.0 if success else 0.0, "communicate": 1.0},
        tokens=TokenUsage(prompt_tokens=prompt, completion_tokens=rng.randint(200, 900),
                          cached_prompt_tokens=prompt // 2),
        llm_calls=4, cost_usd=round(prompt * 1e-6, 6), wall_time_s=round(rng.uniform(20, 60), 1),
        created_at=T0 + timedelta(minutes=rnd),
    )


def _calls(run_id: str, round: int, role: Role, n: int, model: str, rng: random.Random) -> list[LLMCallRecord]:
    return [LLMCallRecord(call_id=f"{run_id}-{round}-{role.value}-{i}", run_id=run_id, round=round, role=role,
                          model=model, tokens=TokenUsage(prompt_tokens=rng.randint(1000, 4000),
                                                         completion_tokens=rng.randint(100, 800),
                                                         cached_prompt_tokens=rng.randint(0, 500)),
                          cost_usd=0.002, latency_s=1.5, cache_hit=i % 4 == 0) for i in range(n)]


def _diff(round: int) -> str:
    return (f"diff --git a/rules.py b/rules.py\n--- a/rules.py\n+++ b/rules.py\n@@ -10,6 +10,9 @@ RULES = [\n"
            f"     require_user_id,\n-    allow_cancel,\n+    confirm_before_write,  # round {round}\n"
            "+    check_basic_economy_before_change,\n     limit_retries,\n")


def build_store(store: ArtifactStore, suffix: str) -> Expected:
    """Write both runs into ``store``; returns the figures the report must show."""
    rng = random.Random(7)
    fdcr, human = f"fdcr-{suffix}", f"human-{suffix}"
    expected = Expected(fdcr_run=fdcr, human_run=human)
    scores = {0: (0.50, 0.667, True), 1: (0.667, 0.583, False), 2: (0.667, 0.833, True)}
    bases = {0: "human", 1: "r0", 2: "r0"}
    for number, (base, candidate, accepted) in scores.items():
        _train_round(store, fdcr, number, base, candidate, accepted, HARNESS[bases[number]], rng)
    expected.round_scores = scores
    store.write_manifest(RunManifest(
        run_id=fdcr, kind="train", method="ecdysis-fdcr", models=list(MODELS), status="finished",
        tasks=[Task(domain="airline", task_id=t, split=Split.TRAIN) for t in TRAIN_TASKS], seed=7,
        created_at=T0, finished_at=T0 + timedelta(hours=2), final_harness_hash=HARNESS["r2"]))
    store.write_manifest(RunManifest(
        run_id=human, kind="eval", method="human", models=list(MODELS), status="finished",
        tasks=[Task(domain="airline", task_id=t, split=Split.TEST) for t in HELDOUT_TASKS], seed=7,
        created_at=T0 + timedelta(hours=3), final_harness_hash=HARNESS["human"]))
    _heldout(store, fdcr, HARNESS["r2"], 0.75, rng, expected, round=3, hostile=True)
    _heldout(store, human, HARNESS["human"], 0.5, rng, expected, round=0, hostile=False)
    for run in (fdcr, human):
        expected.trajectories[run] = len(store.read("trajectories", run_id=run))
    every = store.read("trajectories", run_id=fdcr) + store.read("trajectories", run_id=human)
    expected.failures_in_viewer = sum(t.reward == 0.0 and not t.termination_reason.is_infrastructure for t in every)
    expected.blocked_calls = sum(not c.executed for t in every for c in t.tool_calls)
    return expected


def _train_round(store: ArtifactStore, run: str, number: int, base: float, candidate: float, accepted: bool,
                 base_hash: str, rng: random.Random) -> None:
    cand_hash = HARNESS[f"r{number}"]
    trajectories, failures = [], []
    for phase, harness, score in (("train", base_hash, base), ("candidate", cand_hash, candidate)):
        wins = round(score * len(TRAIN_TASKS) * len(MODELS))
        cells = [(t, m) for m in MODELS for t in TRAIN_TASKS]
        for i, (task_id, model) in enumerate(cells):
            traj = _trajectory(run, number, phase, task_id, model, 0, harness, i < wins, rng)
            trajectories.append(traj)
            if phase == "train" and traj.reward < 1.0:
                failures.append(FailureRecord(
                    failure_id=f"f-{traj.trajectory_id}", run_id=run, round=number,
                    trajectory_id=traj.trajectory_id, task_id=task_id, domain="airline", model=model, reward=0.0,
                    failure_decision="cancelled a basic-economy reservation without confirmation",
                    termination_reason=traj.termination_reason, tool_call_history=traj.tool_calls,
                    context_excerpt="assistant: I have cancelled the reservation for you.",
                    signature="user_stop:validation_rules", failing_component="validation_rules"))
    store.append("trajectories", trajectories, run_id=run, round=number)
    store.append("failures", failures, run_id=run, round=number)
    calls = [c for role, n in ((Role.TASK, 24), (Role.USER, 24), (Role.ANALYST, 2), (Role.CRITIC, 2),
                               (Role.ENGINEER, 2), (Role.MODERATOR, 1), (Role.CODER, 6))
             for c in _calls(run, number, role, n, MODELS[0], rng)]
    store.append("llm_calls", calls, run_id=run, round=number)
    attribution = attribute(failures, MODELS)
    spec = ModificationSpec(
        spec_id=f"spec-{number}", run_id=run, round=number, failure_patterns=attribution.failure_patterns(),
        proposed_changes=[ProposedChange(
            component="validation_rules", description="Block write tools until the user confirms explicitly.",
            rationale="Every failure cancelled or changed a reservation without a confirmation turn.",
            evidence=[f.failure_id for f in failures[:3]], addresses=["user_stop:validation_rules"])],
        implementation_notes="Add a rule in rules.py; keep the existing retry limit.",
        must_not_change=["the system prompt's policy section"])
    store.append("specs", [spec], run_id=run, round=number)
    store.append("harness_versions", [HarnessVersion(
        harness_hash=cand_hash, parent_hash=base_hash, run_id=run, round=number, spec_id=spec.spec_id,
        diff=_diff(number), train_score=candidate, accepted=accepted,
        rejection_reason=None if accepted else f"training score {candidate:.3f} did not beat {base:.3f}")],
        run_id=run, round=number)
    phases = {"evaluation": PhaseStats(wall_time_s=300 + 10 * number, llm_calls=48),
              "diagnosis": PhaseStats(wall_time_s=90, llm_calls=7), "coding": PhaseStats(wall_time_s=150, llm_calls=6),
              "validation": PhaseStats(wall_time_s=12), "candidate_evaluation": PhaseStats(wall_time_s=310)}
    store.append("rounds", [RoundResult(
        run_id=run, round=number, method="ecdysis-fdcr", base_hash=base_hash, candidate_hash=cand_hash,
        base_score=base, candidate_score=candidate, accepted=accepted, n_failures=len(failures),
        modification_calls=13, phases=phases, created_at=T0 + timedelta(minutes=30 * number))],
        run_id=run, round=number)
    if number < 2:
        report = FDCRReport(run_id=run, round=number, passes=2, models={"analyst": MODELS[0], "critic": MODELS[1]},
                            attribution=attribution, attribution_table=attribution.to_markdown(),
                            spec_id=spec.spec_id)
        report.add_turn(Turn(key="p1-analyst", role=Role.ANALYST, pass_index=1, model=MODELS[0],
                             input_digest="0" * 64, output={"causes": []},
                             tokens=TokenUsage(prompt_tokens=2100, completion_tokens=400), calls=1))
        TurnJournal(store, run, number).save_report(report)


def _heldout(store: ArtifactStore, run: str, harness: str, rate: float, rng: random.Random, expected: Expected, *,
             round: int, hostile: bool) -> None:
    rows = []
    for model in MODELS:
        successes = counted = 0
        for t_index, task_id in enumerate(HELDOUT_TASKS):
            for trial in range(TRIALS):
                infra = model == MODELS[1] and t_index == 0 and trial == 2
                success = not infra and (t_index * TRIALS + trial) < rate * len(HELDOUT_TASKS) * TRIALS
                reason = TerminationReason.SANDBOX_ERROR if infra else TerminationReason.USER_STOP
                rows.append(_trajectory(run, round, "eval", task_id, model, trial, harness, success, rng,
                                        hostile=hostile and not success and trial == 0, reason=reason))
                counted += not infra
                successes += success
        expected.heldout_successes[(run, model)] = successes
        expected.heldout_counted[(run, model)] = counted
    store.append("trajectories", rows, run_id=run, round=round)


ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "report"


@dataclass
class Built:
    """A store on disk and the figures written into it."""

    uri: str
    store: ArtifactStore
    expected: Expected
