"""Diagnosis prompts sized to the diagnosis model's context, with budgets in tokens; character budgets still hold."""

from __future__ import annotations

from pathlib import Path

import pytest

from ecdysis.config import TrainingConfig
from ecdysis.evolution import DiagnoserParts, method
from ecdysis.evolution.diagnosis import BatchDiagnoser, SequentialDiagnoser
from ecdysis.evolution.fdcr import FDCRDiagnoser
from ecdysis.evolution.prompt_budget import MIN_ROOM_TOKENS, budget_chars, fixed_prompt_tokens, room_in_context
from ecdysis.llm import Gateway, GatewayConfig, ModelConfig, structured
from ecdysis.llm.tokens import CHARS_PER_TOKEN, DEFAULT_REPLY_TOKENS, context_window, estimate_tokens, reply_tokens
from ecdysis.records import SpecReply
from ecdysis.testing.aggregation import planted_failures

DIAGNOSER = "scripted/ecdysis.benchmarks.refund_desk.scripted:diagnoser"
AGGREGATORS = "scripted/ecdysis.testing.aggregation"


def test_the_context_window_comes_from_the_config_then_from_litellms_map() -> None:
    config = GatewayConfig(models={"local/qwen": ModelConfig(context_tokens=16_384, params={"max_tokens": 1024})})
    assert context_window("local/qwen", config) == 16_384
    assert reply_tokens("local/qwen", config) == 1024
    assert context_window("local/other", config) is None and context_window(DIAGNOSER, config) is None
    assert reply_tokens("local/other", config) == DEFAULT_REPLY_TOKENS
    known = context_window("openai/gpt-4o", GatewayConfig())
    assert known is not None and known >= 100_000
    assert context_window("nowhere/no-such-model", GatewayConfig()) is None


def test_every_limit_given_holds() -> None:
    assert budget_chars(chars=70_000) == 70_000
    assert budget_chars(chars=70_000, tokens=5_000) == int(5_000 * CHARS_PER_TOKEN)
    assert budget_chars(chars=9_000, tokens=5_000) == 9_000  # an old character setting still binds
    room = room_in_context(16_384, 1_024)
    assert room == 16_384 - 1_024 - fixed_prompt_tokens() - 1_638
    assert budget_chars(chars=1_000_000, context_tokens=16_384, reply_tokens=1_024) == int(room * CHARS_PER_TOKEN)
    with pytest.raises(ValueError, match=r"context of 4096 tokens leaves -?\d+ tokens .* larger context"):
        room_in_context(4_096, 4_096 - MIN_ROOM_TOKENS)


def test_a_prompt_from_the_context_budget_fits_the_context(gateway: Gateway, seed: Path) -> None:
    """200 failure records, a diagnosis model with a 16k window (the local Qwen demo's): the whole prompt (evidence,
    source, instructions, the reply schema) plus the reply fit in it, where the char budget alone would not."""
    records, _ = planted_failures(200, patterns=5)
    parts = DiagnoserParts(llm=gateway, model=DIAGNOSER, aggregator_model=f"{AGGREGATORS}:aggregator",
                           context_tokens=16_384, reply_tokens=1_024)
    assert parts.prompt_chars < parts.prompt_budget_chars
    for name in ("se", "ecdysis"):
        diagnoser = method(name).diagnoser(parts)
        assert isinstance(diagnoser, BatchDiagnoser | SequentialDiagnoser)
        batch = records if name == "ecdysis" else records[:1]
        (message,) = diagnoser.messages(batch, seed, round=0, run_id=f"fit-{name}")
        prompt_tokens = estimate_tokens(message["content"] + structured.instruction(SpecReply))
        assert prompt_tokens + parts.reply_tokens <= 16_384
    fdcr = method("ecdysis-fdcr").diagnoser(parts)
    assert isinstance(fdcr, FDCRDiagnoser)
    split = (fdcr.config.evidence_budget_chars, fdcr.config.harness_budget_chars)
    assert split == (parts.prompt_chars * 4 // 7, parts.prompt_chars * 3 // 7)


def test_training_config_takes_a_token_budget_and_keeps_the_char_one() -> None:
    assert TrainingConfig().prompt_budget_tokens is None
    config = TrainingConfig.model_validate({"prompt_budget_chars": 12_000, "prompt_budget_tokens": 3_000})
    assert (config.prompt_budget_chars, config.prompt_budget_tokens) == (12_000, 3_000)


def test_a_local_models_window_is_its_servers_n_ctx() -> None:
    from ecdysis.cli import demo_local
    from ecdysis.llm import LocalModelServer

    plan = demo_local.LocalPlan(config="demo-qwen", agent="qwen-1.5b", user="qwen-0.5b", chat_format=None,
                                n_ctx=12_288, note="")
    server = LocalModelServer("qwen-1.5b", chat_format=None, n_ctx=plan.n_ctx)
    server.port = 4001  # as start() leaves it; no process is needed to build the routing entry
    routed = demo_local.with_local_models(demo_local.plan_config(plan), plan, {"qwen-1.5b": server})
    assert context_window(routed.models.diagnoser, routed.llm) == 12_288
    assert reply_tokens(routed.models.diagnoser, routed.llm) == 1024  # the config's params.max_tokens
