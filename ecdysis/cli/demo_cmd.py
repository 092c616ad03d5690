"""``ecdysis demo``: first a short deterministic training run on the scripted models that shows a harness getting
better (training score 0.25 → 1.0, the accepted rule's diff printed), then a real model's recorded training run
replayed from its response cache (:mod:`ecdysis.cli.demo_replay`), then, optionally, one live training round with a
real model (a provider model, the local SmolLM2-135M on a small airline slice, or, opted into, the local
Qwen2.5-Coder pair on AgentBench DBBench: see :mod:`ecdysis.cli.demo_local`), and an HTML report covering the runs."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.syntax import Syntax

from ecdysis.cli import demo_local
from ecdysis.cli.common import PreflightOption, console, resolve_config_path
from ecdysis.cli.demo_replay import replay_part
from ecdysis.cli.train_cmd import run_training
from ecdysis.config import load_config
from ecdysis.records import HarnessVersion
from ecdysis.store import ArtifactStore

if TYPE_CHECKING:
    from ecdysis.config import RunConfig
    from ecdysis.training import TrainingOutcome

# Provider models the demo uses when the environment names a provider (first match wins).
PROVIDER_DEFAULTS = (
    ("OPENAI_API_KEY", "openai/gpt-4.1-mini"),
    ("ANTHROPIC_API_KEY", "anthropic/claude-3-5-haiku-latest"),
    ("DEEPSEEK_API_KEY", "deepseek/deepseek-chat"),
)


def register(app: typer.Typer) -> None:
    """Add ``demo`` to ``app``."""
    app.command("demo")(demo_command)


def demo_model() -> str | None:
    """The model named by the environment (``ECDYSIS_DEMO_MODEL`` first: a litellm model string, or ``qwen``), else
    a provider's default when its key is set, else None for the local SmolLM2."""
    if os.environ.get("ECDYSIS_DEMO_MODEL"):
        return os.environ["ECDYSIS_DEMO_MODEL"]
    for key, model in PROVIDER_DEFAULTS:
        if os.environ.get(key):
            return model
    return None


def demo_command(
    store: Annotated[str | None, typer.Option("--store", help="Override storage.uri.")] = None,
    scripted_only: Annotated[bool, typer.Option("--scripted-only", help="Only the deterministic scripted run "
                                                "(about a minute, no model needed).")] = False,
    report: Annotated[Path, typer.Option("--report", help="Where to write the HTML report of the demo's runs.")]
    = Path("demo-report.html"),
    model: Annotated[str | None, typer.Option("--model", help="The live round's model: `qwen` for the opt-in "
                                              "local Qwen2.5-Coder 1.5B/0.5B (a 1.6 GB download the first time), or "
                                              "a litellm model string (default: $ECDYSIS_DEMO_MODEL, a provider "
                                              "whose key is set, else the local SmolLM2-135M).")] = None,
    live: Annotated[bool, typer.Option("--live", help="After the recorded run, one live training round on a real "
                                       "model (on by itself when --model, $ECDYSIS_DEMO_MODEL or a provider key "
                                       "names one, or when no recorded run is shipped).")] = False,
    preflight: PreflightOption = True,
) -> None:
    """A harness getting better on scripted models (~1 min), a real model's recorded training run replayed from its
    response cache (a few minutes, no model server), then optionally a live round on a real model; one HTML
    report."""
    outcome = scripted_part(store)
    run_ids = [outcome.run_id]
    uri = outcome_store(store)
    if not scripted_only:
        recorded = replay_part(uri)
        if recorded is not None:
            run_ids.append(recorded)
        if live or model is not None or demo_model() is not None or recorded is None:
            import ray

            ray.shutdown()  # the model part's Ray must start after the local model server exports its address
            real = model_part(store, model, preflight=preflight)
            run_ids.append(real.run_id)
            console.print(closing_note(real), highlight=False)
        else:
            console.print("a live round on a real model: `ecdysis demo --live` (local SmolLM2-135M) or "
                          "`ecdysis demo --model qwen` (local Qwen2.5-Coder-1.5B)", highlight=False)
    from ecdysis.report import write_report

    path = write_report(ArtifactStore(uri), run_ids, report)
    console.print(f"[bold]HTML report of the demo's {len(run_ids)} run(s):[/] {path.resolve()}", highlight=False)


def closing_note(outcome: TrainingOutcome) -> str:
    """What the real-model run showed, in one line: did the score rise above 0, was a round accepted."""
    first = outcome.rounds[0].base_score if outcome.rounds else 0.0
    accepted = [r.round for r in outcome.rounds if r.accepted]
    final = outcome.final_train_score
    if final > first:
        score = f"the training score rose from {first:.2f} to {final:.2f}"
    else:
        score = "the training score stayed at 0" if final == 0 else f"the training score stayed at {final:.2f}"
    rounds = f"round(s) {', '.join(map(str, accepted))} accepted" if accepted else "no round was accepted"
    return f"real-model run {outcome.run_id}: {score}; {rounds}."


def outcome_store(store: str | None) -> str:
    """The absolute store URI the demo writes to."""
    uri = store or load_config(resolve_config_path("scripted")).storage.uri
    return uri if uri.startswith(("/", "s3://")) else os.path.abspath(uri)


def scripted_part(store: str | None) -> TrainingOutcome:
    """The built-in ``scripted`` config through the normal train path: the seed harness lets the scripted task
    model repeat a write that already succeeded; the scripted diagnoser and coder add the rule that blocks it."""
    cfg = load_config(resolve_config_path("scripted"))
    cfg = cfg.model_copy(update={"storage": cfg.storage.model_copy(update={"uri": outcome_store(store)})})
    console.rule("[bold]1. a harness getting better: deterministic training on scripted models")
    outcome = run_training(cfg, heldout=False)
    accepted = sorted((v for v in ArtifactStore(cfg.storage.uri).read("harness_versions", run_id=outcome.run_id)
                       if isinstance(v, HarnessVersion) and v.accepted and v.diff), key=lambda v: v.round)
    first = outcome.rounds[0].base_score if outcome.rounds else 0.0
    console.print(f"training score {first:.2f} → {outcome.final_train_score:.2f}", highlight=False)
    for version in accepted:
        console.print(f"[bold]accepted in round {version.round}[/] ({version.harness_hash[:12]}):")
        if console.is_terminal:
            console.print(Syntax(version.diff, "diff", word_wrap=True))
        else:  # logs get the diff as it is, without the highlighter's padding
            console.print(escape(version.diff.rstrip("\n")), highlight=False, soft_wrap=True)
    if not accepted:
        console.print("no candidate was accepted", highlight=False)
    return outcome


def model_part(store: str | None, model: str | None = None, *, preflight: bool = True) -> TrainingOutcome:
    """One real training round: with ``model`` (else the environment's, see :func:`demo_model`) when it is a
    provider model, else on local llama.cpp servers (SmolLM2-135M by default, the Qwen pair for ``qwen``)."""
    choice = model or demo_model()
    if choice is not None and choice != demo_local.QWEN:
        console.rule("[bold]3. a real model, live: one training round on a small τ² airline slice")
        cfg = _in_store(load_config(resolve_config_path("demo")), store)
        models = cfg.models.model_copy(update={"task": [choice], "user": choice, "diagnoser": choice, "coder": choice})
        console.print(f"demo models: {choice} (from the {'command line' if model else 'environment'})",
                      highlight=False)
        return run_training(cfg.model_copy(update={"models": models}), preflight=preflight)
    plan = demo_local.qwen_plan() if choice == demo_local.QWEN else demo_local.smollm2_plan()
    cfg = _in_store(demo_local.plan_config(plan), store)
    console.rule(f"[bold]3. a real model, live: one training round on {cfg.benchmark.name} ({cfg.run_name})")
    console.print(plan.note, highlight=False)
    with_user = cfg.benchmark.needs_user_model
    demo_local.fetch_models(plan, with_user=with_user)
    with contextlib.ExitStack() as stack:
        with console.status("starting the local model server(s)"):
            servers = stack.enter_context(demo_local.local_servers(plan, with_user=with_user, serving=cfg.llm.local))
        # Each server's endpoint is in the config's llm.models, so every Ray worker reaches it too.
        return run_training(demo_local.with_local_models(cfg, plan, servers), preflight=preflight)


def _in_store(cfg: RunConfig, store: str | None) -> RunConfig:
    return cfg.model_copy(update={"storage": cfg.storage.model_copy(update={"uri": outcome_store(store)})})
