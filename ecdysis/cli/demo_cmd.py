"""``ecdysis demo``: the main job on the embedded defaults — one real training round on a small airline slice."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from ecdysis.cli.common import console

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
) -> None:
    """Train the `human` seed harness for one round on 3 airline tasks, then evaluate it on 2 held-out tasks."""
    from ecdysis.cli.train_cmd import resolve_config_path, run_training
    from ecdysis.config import load_config

    cfg = load_config(resolve_config_path("demo"))
    if store:
        cfg = cfg.model_copy(update={"storage": cfg.storage.model_copy(update={"uri": store})})
    model = demo_model()
    if model is not None:
        models = cfg.models.model_copy(update={"task": [model], "user": model, "diagnoser": model, "coder": model})
        console.print(f"demo models: {model} (from the environment)", highlight=False)
        run_training(cfg.model_copy(update={"models": models}))
        return
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
        run_training(cfg.model_copy(update={"models": models}))
    finally:
        server.__exit__(None, None, None)
