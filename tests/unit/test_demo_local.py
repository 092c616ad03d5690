"""The demo's local-model plans: SmolLM2 by default (no Qwen download), the opt-in Qwen pair on DBBench or τ²."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ecdysis.benchmarks.agentbench.dbbench import server as dbserver
from ecdysis.benchmarks.agentbench.manifest import DATA_ENV
from ecdysis.cli import demo_local
from ecdysis.llm import LocalModelServer, Streaming, ToolCallParsing
from ecdysis.llm.local_server import LLAMA_SERVER


def _started(name: str, port: int, chat_format: str | None) -> LocalModelServer:
    server = LocalModelServer(name, chat_format=chat_format)
    server.port = port  # as start() leaves it; no process is needed to build the routing entry
    return server


def test_default_plan_is_smollm2_on_airline_with_no_split_model() -> None:
    plan = demo_local.smollm2_plan()
    cfg = demo_local.plan_config(plan)
    assert plan.models == ("smollm2",) and plan.chat_format == "chatml-function-calling"
    assert cfg.benchmark.name == "tau2" and cfg.run_name == "demo-airline"


def test_qwen_runs_dbbench_when_data_and_mariadb_are_there(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DATA_ENV, str(tmp_path))
    monkeypatch.setattr(dbserver, "mariadb_available", lambda: True)
    plan = demo_local.qwen_plan()
    cfg = demo_local.plan_config(plan)
    assert (plan.agent, plan.user, plan.chat_format) == ("qwen-1.5b", "qwen-0.5b", None)
    assert cfg.benchmark.name == "agentbench-db" and cfg.benchmark.data_dir == str(tmp_path)  # type: ignore[union-attr]
    assert not cfg.benchmark.needs_user_model


def test_qwen_falls_back_to_airline_with_a_user_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DATA_ENV, raising=False)
    monkeypatch.setenv("ECDYSIS_CACHE_DIR", str(tmp_path / "cache"))
    plan = demo_local.qwen_plan()
    cfg = demo_local.plan_config(plan)
    assert "no AgentBench data folder" in plan.note
    assert cfg.benchmark.name == "tau2" and cfg.benchmark.needs_user_model and cfg.run_name == "demo-qwen"


def test_each_role_is_routed_to_its_own_server() -> None:
    plan = demo_local.LocalPlan(config="demo-qwen", agent="qwen-1.5b", user="qwen-0.5b", chat_format=None,
                                n_ctx=1024, note="")
    cfg = demo_local.plan_config(plan)
    servers = {"qwen-1.5b": _started("qwen-1.5b", 4001, None), "qwen-0.5b": _started("qwen-0.5b", 4002, None)}
    routed = demo_local.with_local_models(cfg, plan, servers)
    assert routed.models.task == ["local/qwen-1.5b"] and routed.models.coder == "local/qwen-1.5b"
    assert routed.models.user == "local/qwen-0.5b"
    big, small = routed.llm.models["local/qwen-1.5b"], routed.llm.models["local/qwen-0.5b"]
    assert (big.api_base, small.api_base) == ("http://127.0.0.1:4001/v1", "http://127.0.0.1:4002/v1")
    assert big.tool_call_parsing == small.tool_call_parsing == ToolCallParsing.LENIENT
    assert big.params == {"max_tokens": 1024, "temperature": 0}  # the config's own entry is kept


def test_smollm2_keeps_native_tool_calls_and_its_params() -> None:
    plan = demo_local.smollm2_plan()
    routed = demo_local.with_local_models(demo_local.plan_config(plan), plan,
                                          {"smollm2": _started("smollm2", 4003, plan.chat_format)})
    entry = routed.llm.models["local/smollm2"]
    assert entry.tool_call_parsing == ToolCallParsing.NATIVE and entry.params == {"max_tokens": 192}
    assert routed.models.user == "local/smollm2" and entry.api_base == "http://127.0.0.1:4003/v1"


def test_episodes_at_once_follow_the_agent_servers_slots() -> None:
    plan = demo_local.smollm2_plan()
    on_fallback = demo_local.with_local_models(demo_local.plan_config(plan), plan,
                                               {"smollm2": _started("smollm2", 4004, plan.chat_format)})
    assert (on_fallback.rollouts.workers, on_fallback.rollouts.episodes_per_worker) == (1, 1)
    batched = LocalModelServer("smollm2", chat_format=plan.chat_format, parallel=3)
    batched.port, batched.engine_used = 4005, LLAMA_SERVER  # as start() leaves them with llama-server built
    routed = demo_local.with_local_models(demo_local.plan_config(plan), plan, {"smollm2": batched})
    entry = routed.llm.models["local/smollm2"]
    assert (routed.rollouts.workers, routed.rollouts.episodes_per_worker) == (1, 3)
    assert entry.max_concurrency == 3 and entry.tool_call_parsing == ToolCallParsing.LENIENT
    assert entry.streaming == Streaming.ON  # a call the gateway gives up on stops the server's decoding
    fallback_entry = on_fallback.llm.models["local/smollm2"]
    assert fallback_entry.streaming == Streaming.WITHOUT_TOOLS  # chatml-function-calling cannot stream a tool choice


@pytest.mark.slow
def test_two_qwen_servers_answer_their_own_roles() -> None:
    """The agent model and the user model on servers of their own (real llama.cpp; needs the opt-in files)."""
    from ecdysis.llm import Gateway
    from ecdysis.llm.local_models import fetched
    from ecdysis.llm.local_server import llama_cpp_available
    from ecdysis.llm.routing import LOCAL_API_BASE_ENV
    from ecdysis.records import Role

    if not llama_cpp_available():
        pytest.skip("llama_cpp is not installed: run `python -m ecdysis.llm.local_setup`")
    missing = [name for name in ("qwen-1.5b", "qwen-0.5b") if fetched(name) is None]
    if missing:
        print(f"SKIP reason: the opt-in {missing} GGUF files are not downloaded")
        pytest.skip(f"the opt-in {missing} GGUF files are not in the model cache: run "
                    "`python -m ecdysis.llm.local_setup --no-runtime --model qwen-1.5b --model qwen-0.5b`")
    plan = demo_local.LocalPlan(config="demo-qwen", agent="qwen-1.5b", user="qwen-0.5b", chat_format=None,
                                n_ctx=1024, note="", benchmark_from="demo")
    cfg = demo_local.plan_config(plan)
    before = os.environ.get(LOCAL_API_BASE_ENV)
    with demo_local.local_servers(plan, with_user=True) as servers:
        routed = demo_local.with_local_models(cfg, plan, servers)
        gateway = Gateway(routed.llm.model_copy(update={"cache": False}))
        replies = {role: gateway.complete(model, [{"role": "user", "content": "Say OK."}], role=role, max_tokens=8)
                   for role, model in ((Role.TASK, routed.models.task[0]), (Role.USER, str(routed.models.user)))}
        ports = {server.port for server in servers.values()}
    assert len(ports) == 2 and all(reply.content for reply in replies.values())
    assert {r.model for r in replies.values()} == {"local/qwen-1.5b", "local/qwen-0.5b"}
    assert os.environ.get(LOCAL_API_BASE_ENV) == before  # both stopped, the endpoint variable restored
