"""``ecdysis demo``: first a short deterministic training run on the scripted models that shows a harness getting
better (training score 0.25 → 1.0, the accepted rule's diff printed), then one real training round on a small
airline slice with a real model, and an HTML report covering both runs."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ecdysis.cli.common import console

if TYPE_CHECKING:
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
    """The provider model named by the environment (``ECDYSIS_DEMO_MODEL`` first), or None for the local model."""
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
) -> None:
    """A harness getting better on scripted models (~1 min), then a real round on a real model; one HTML report."""
    outcome = scripted_part(store)
    run_ids = [outcome.run_id]
    uri = outcome_store(store)
    if not scripted_only:
        import ray

        ray.shutdown()  # the model part's Ray must start after the local model server exports its address
        real = model_part(store)
        run_ids.append(real.run_id)
        console.print(closing_note(real), highlight=False)
    from ecdysis.report import write_report
    from ecdysis.store import ArtifactStore

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
    from ecdysis.cli.train_cmd import resolve_config_path
    from ecdysis.config import load_config

    uri = store or load_config(resolve_config_path("scripted")).storage.uri
    return uri if uri.startswith(("/", "s3://")) else os.path.abspath(uri)


def scripted_part(store: str | None) -> TrainingOutcome:
    """The built-in ``scripted`` config through the normal train path: the seed harness lets the scripted task
    model repeat a write that already succeeded; the scripted diagnoser and coder add the rule that blocks it."""
    from rich.markup import escape
    from rich.syntax import Syntax

    from ecdysis.cli.train_cmd import resolve_config_path, run_training
    from ecdysis.config import load_config
    from ecdysis.records import HarnessVersion
    from ecdysis.store import ArtifactStore

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


def model_part(store: str | None) -> TrainingOutcome:
    """One real training round on 3 airline tasks and 2 held-out ones, with a provider model from the environment
    or the local model."""
    from ecdysis.cli.train_cmd import resolve_config_path, run_training
    from ecdysis.config import load_config

    console.rule("[bold]2. a real model: one training round on a small τ² airline slice")
    cfg = load_config(resolve_config_path("demo"))
    cfg = cfg.model_copy(update={"storage": cfg.storage.model_copy(update={"uri": outcome_store(store)})})
    model = demo_model()
    if model is not None:
        models = cfg.models.model_copy(update={"task": [model], "user": model, "diagnoser": model, "coder": model})
        console.print(f"demo models: {model} (from the environment)", highlight=False)
        return run_training(cfg.model_copy(update={"models": models}))
    from ecdysis.llm import LocalModelServer

    console.print("demo models: local/smollm2 (SmolLM2-135M-Instruct on a llama.cpp server on loopback; no provider "
                  "key in the environment). A 135M model rarely completes τ² tasks or writes a valid specification: "
                  "the run shows the whole pipeline, not a better harness.", highlight=False)
    server = LocalModelServer("smollm2", n_ctx=8192)
    with console.status("starting the local model server"):
        server.__enter__()
    try:
        # The server exports ECDYSIS_LOCAL_API_BASE before Ray starts, so every worker reaches it too.
        m = server.model
        models = cfg.models.model_copy(update={"task": [m], "user": m, "diagnoser": m, "coder": m})
        return run_training(cfg.model_copy(update={"models": models}))
    finally:
        server.__exit__(None, None, None)
