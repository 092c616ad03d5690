"""Response cache (memory + store), accounting rows, prices and budgets."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from ecdysis.llm import BudgetExceeded, CacheRule, Gateway, GatewayConfig
from ecdysis.llm.cache import SCRIPTED_CONTEXT_FIELDS, cache_key
from ecdysis.records import Role, stable_hash
from ecdysis.store import ArtifactStore
from ecdysis.testing.stub_server import StubServer

ECHO = "scripted/ecdysis.testing.models:echo"
ECHO_CONTEXT = "scripted/ecdysis.testing.models:echo_context"
ASK = [{"role": "user", "content": "what is two plus two"}]


def test_second_identical_call_is_a_cache_hit_and_persists(store: ArtifactStore) -> None:
    with Gateway(store=store) as first_gateway:
        miss = first_gateway.complete(ECHO, ASK, role=Role.TASK)
        hit = first_gateway.complete(ECHO, ASK, role=Role.TASK)
    assert not miss.cache_hit and hit.cache_hit
    assert hit.content == miss.content
    assert hit.tokens.total == 0 and hit.cost_usd == 0.0  # a hit spends nothing
    assert first_gateway.usage().cache_hits == 1

    with Gateway(store=store) as second_gateway:  # fresh memory: served from the store's keyed objects
        again = second_gateway.complete(ECHO, ASK, role=Role.TASK)
    assert again.cache_hit and again.content == miss.content


def test_cache_rule_and_overrides(store: ArtifactStore) -> None:
    gateway = Gateway(store=store)
    assert not gateway.complete(ECHO, ASK, role=Role.TASK, temperature=0.7).cache_hit
    assert not gateway.complete(ECHO, ASK, role=Role.TASK, temperature=0.7).cache_hit  # sampled: never cached
    gateway.complete(ECHO, ASK, role=Role.TASK, temperature=0)
    assert gateway.complete(ECHO, ASK, role=Role.TASK, temperature=0).cache_hit
    assert not gateway.complete(ECHO, ASK, role=Role.TASK, temperature=0, cache=False).cache_hit

    always = Gateway(GatewayConfig(cache_rule=CacheRule.ALWAYS), store=store)
    always.complete(ECHO, ASK, role=Role.TASK, temperature=0.7)
    assert always.complete(ECHO, ASK, role=Role.TASK, temperature=0.7).cache_hit

    off = Gateway(GatewayConfig(cache=False), store=store)
    off.complete(ECHO, ASK, role=Role.TASK)
    assert not off.complete(ECHO, ASK, role=Role.TASK).cache_hit


def test_cache_key_covers_model_messages_tools_and_sampling() -> None:
    base = cache_key("m/a", ASK, None, {"temperature": 0})
    assert base == cache_key("m/a", ASK, None, {"temperature": 0, "timeout": 5})  # transport params excluded
    assert base != cache_key("m/b", ASK, None, {"temperature": 0})
    assert base != cache_key("m/a", [{"role": "user", "content": "other"}], None, {"temperature": 0})
    assert base != cache_key("m/a", ASK, [{"type": "function", "function": {"name": "f"}}], {"temperature": 0})
    assert base != cache_key("m/a", ASK, None, {"temperature": 0, "max_tokens": 10})


EPISODE = {"benchmark": "tau2", "domain": "telecom", "task_id": "t1", "trial": 0, "seed": 7}


def test_a_scripted_models_key_holds_the_context_it_may_answer_by(store: ArtifactStore) -> None:
    """Two tasks can put the very same conversation to a scripted model that answers by its task: each field it may
    read (SCRIPTED_CONTEXT_FIELDS) splits the key, while the ids of a run or trajectory do not."""
    gateway = Gateway(store=store)
    first = gateway.complete(ECHO_CONTEXT, ASK, role=Role.TASK, context={**EPISODE, "trajectory_id": "a"})
    assert gateway.complete(ECHO_CONTEXT, ASK, role=Role.TASK,
                            context={**EPISODE, "trajectory_id": "b", "run_id": "other", "round": 3}).cache_hit
    changed = {"benchmark": "other", "domain": "airline", "task_id": "t2", "trial": 1, "seed": 8}
    for field, value in changed.items():
        reply = gateway.complete(ECHO_CONTEXT, ASK, role=Role.TASK, context={**EPISODE, field: value})
        assert not reply.cache_hit and reply.content != first.content, field
    assert not gateway.complete(ECHO_CONTEXT, ASK, role=Role.USER, context=EPISODE).cache_hit
    assert set(changed) | {"role"} == set(SCRIPTED_CONTEXT_FIELDS)


def test_a_real_models_key_is_the_conversation_alone(stub: StubServer, store: ArtifactStore,
                                                    stub_config: Callable[..., GatewayConfig]) -> None:
    """A provider sees only what is sent: its key is model, messages, tools and sampling as before (caches recorded
    earlier, the shipped replay packs among them, still answer), and twin conversations of two tasks share it."""
    gateway = Gateway(stub_config(stub, "openai/gpt-4.1"), store=store, context={"run_id": "run-r"})
    gateway.complete("openai/gpt-4.1", ASK, role=Role.TASK, temperature=0, context=EPISODE)
    twin = gateway.complete("openai/gpt-4.1", ASK, role=Role.TASK, temperature=0,
                            context={**EPISODE, "task_id": "t2", "trial": 1, "seed": 8})
    assert twin.cache_hit and stub.requests == 1
    gateway.flush()
    (key,) = {row.cache_key for row in store.read("llm_calls", run_id="run-r")}
    assert key == stable_hash({"model": "openai/gpt-4.1", "messages": ASK, "tools": [],
                               "params": {"temperature": 0}})


def test_accounting_rows_are_written_to_the_store(store: ArtifactStore) -> None:
    with Gateway(store=store, context={"run_id": "run-a"}) as gateway:
        for task in ("t1", "t2"):  # one task, two trajectories: the second is a cache hit
            gateway.complete(ECHO, ASK, role=Role.TASK, context={"round": 1, "task_id": "t1", "trial": 0,
                                                                   "trajectory_id": f"traj-{task}"})
        gateway.complete(ECHO, [{"role": "user", "content": "diagnose"}], role=Role.DIAGNOSER,
                         context={"round": 2})
        assert store.read("llm_calls", run_id="run-a") == []  # buffered until flush
        assert gateway.flush() == 3
    rows = store.read("llm_calls", run_id="run-a")
    assert len(rows) == 3
    by_trajectory = {row.trajectory_id: row for row in rows}
    assert by_trajectory["traj-t1"].role == Role.TASK and by_trajectory["traj-t1"].round == 1
    assert by_trajectory["traj-t1"].task_id == "t1"
    assert by_trajectory["traj-t1"].tokens.prompt_tokens == 5 and not by_trajectory["traj-t1"].cache_hit
    assert by_trajectory["traj-t2"].cache_hit and by_trajectory["traj-t2"].tokens.total == 0
    assert by_trajectory[None].role == Role.DIAGNOSER and by_trajectory[None].round == 2
    assert len(store.read("llm_calls", run_id="run-a", round=2)) == 1
    usage = gateway.usage("run-a")
    assert (usage.calls, usage.cache_hits, usage.prompt_tokens) == (3, 1, 5 + 1)


def test_close_flushes(store: ArtifactStore) -> None:
    gateway = Gateway(store=store, context={"run_id": "run-close"})
    gateway.complete(ECHO, ASK, role=Role.TASK)
    gateway.close()
    assert len(store.read("llm_calls", run_id="run-close")) == 1


def test_prices_cached_tokens_and_unknown_models(stub: StubServer, store: ArtifactStore,
                                                 stub_config: Callable[..., GatewayConfig]) -> None:
    stub.prompt_tokens, stub.completion_tokens, stub.cached_tokens = 1000, 100, 400
    gateway = Gateway(stub_config(stub, "openai/gpt-4.1", "openai/ecdysis-unknown-model"), store=store)
    priced = gateway.complete("openai/gpt-4.1", ASK, role=Role.TASK)
    assert priced.content == "stub: what is two plus two"
    assert priced.cost_usd is not None and priced.cost_usd > 0
    assert priced.tokens.cached_prompt_tokens == 400
    unknown = gateway.complete("openai/ecdysis-unknown-model", ASK, role=Role.TASK)
    assert unknown.cost_usd is None
    assert unknown.tokens.prompt_tokens == 1000
    usage = gateway.usage()
    assert usage.unpriced_calls == 1 and usage.cost_usd == pytest.approx(priced.cost_usd)
    assert usage.cached_prompt_tokens == 800


def test_a_self_hosted_model_is_priced_from_its_config(stub: StubServer, store: ArtifactStore) -> None:
    from ecdysis.llm.config import ModelConfig

    stub.prompt_tokens, stub.completion_tokens, stub.cached_tokens = 1000, 100, 0
    models = {"openai/ecdysis-self-hosted": ModelConfig(api_base=stub.api_base, input_cost_per_token=2e-6,
                                                        output_cost_per_token=8e-6),
              "openai/ecdysis-self-hosted-unpriced": ModelConfig(api_base=stub.api_base)}
    gateway = Gateway(GatewayConfig(models=models, cache=False), store=store)
    priced = gateway.complete("openai/ecdysis-self-hosted", ASK, role=Role.TASK)
    assert priced.cost_usd == pytest.approx(1000 * 2e-6 + 100 * 8e-6)
    unpriced = gateway.complete("openai/ecdysis-self-hosted-unpriced", ASK, role=Role.TASK)
    assert unpriced.cost_usd is None and unpriced.tokens.prompt_tokens == 1000
    with pytest.raises(ValueError, match="input_cost_per_token"):
        ModelConfig(api_base=stub.api_base, input_cost_per_token=-1)


def test_token_budget_stops_the_run_and_keeps_the_record(store: ArtifactStore) -> None:
    gateway = Gateway(GatewayConfig(max_tokens=20, cache=False), store=store, context={"run_id": "run-b"})
    done = 0
    with pytest.raises(BudgetExceeded, match="max_tokens 20") as info:
        for i in range(100):
            gateway.complete(ECHO, [{"role": "user", "content": f"question number {i}"}], role=Role.TASK)
            done += 1
    assert info.value.completion is not None  # the call that crossed the budget was made and is attached
    assert info.value.usage["tokens"] >= 20
    rows = store.read("llm_calls", run_id="run-b")  # flushed when the budget tripped
    assert len(rows) == done + 1
    with pytest.raises(BudgetExceeded):
        gateway.complete(ECHO, ASK, role=Role.TASK)  # refused before calling
    assert gateway.usage("run-b").calls == done + 1
    gateway.complete(ECHO, ASK, role=Role.TASK, context={"run_id": "other-run"})  # budgets are per run


def test_usd_budget(stub: StubServer, store: ArtifactStore, stub_config: Callable[..., GatewayConfig]) -> None:
    stub.prompt_tokens, stub.completion_tokens = 10_000, 1_000
    gateway = Gateway(stub_config(stub, "openai/gpt-4.1", max_usd=0.05, cache=False), store=store,
                      context={"run_id": "run-usd"})
    with pytest.raises(BudgetExceeded, match="max_usd"):
        for _ in range(100):
            gateway.complete("openai/gpt-4.1", ASK, role=Role.TASK)
    usage = gateway.usage("run-usd")
    assert usage.cost_usd >= 0.05 and usage.calls < 100
    assert len(store.read("llm_calls", run_id="run-usd")) == usage.calls


SLOW_ECHO = "scripted/ecdysis.testing.models:slow_echo"


@pytest.mark.parametrize("role", [Role.TASK, Role.USER])
def test_an_episode_cache_hit_takes_as_long_as_its_original_call(store: ArtifactStore, role: Role) -> None:
    # A harness that could tell a hit (ms) from a miss (the model's latency) would read which calls other episodes,
    # trials or runs made: a timing channel. Hits of episode roles are held until the original call's latency.
    import time

    with Gateway(store=store) as gateway:
        miss = gateway.complete(SLOW_ECHO, ASK, role=role)
        started = time.monotonic()
        hit = gateway.complete(SLOW_ECHO, ASK, role=role)
        waited = time.monotonic() - started
    assert not miss.cache_hit and hit.cache_hit and hit.content == miss.content
    assert waited >= miss.latency_s - 0.005


def test_an_episode_cache_hit_past_the_deadline_fails_as_the_call_would(store: ArtifactStore) -> None:
    import time

    from ecdysis.llm import DeadlineExceeded

    with Gateway(store=store) as gateway:
        gateway.complete(SLOW_ECHO, ASK, role=Role.TASK)
        with pytest.raises(DeadlineExceeded):
            gateway.complete(SLOW_ECHO, ASK, role=Role.TASK, deadline=time.monotonic() + 0.05)
        assert gateway.usage().cache_hits == 0 and gateway.usage().errors == 1


def test_hits_outside_episodes_are_served_at_once(store: ArtifactStore) -> None:
    # The diagnoser and coder run on the trusted side, where no harness times them: their hits stay fast. The
    # original call's latency is replaced by the hit's, so a held hit would show here as >= 0.3 s.
    with Gateway(store=store) as gateway:
        miss = gateway.complete(SLOW_ECHO, ASK, role=Role.DIAGNOSER)
        hit = gateway.complete(SLOW_ECHO, ASK, role=Role.DIAGNOSER)
    assert hit.cache_hit and hit.latency_s < miss.latency_s


def test_a_call_row_names_its_response_cache_key(store: ArtifactStore) -> None:
    """A replay pack copies the responses a run's rows name: the miss and its hit carry the key the cache holds
    the response under; an uncached call carries none."""
    with Gateway(store=store, context={"run_id": "run-k"}) as gateway:
        gateway.complete(ECHO, ASK, role=Role.TASK, temperature=0)
        gateway.complete(ECHO, ASK, role=Role.TASK, temperature=0)
        gateway.complete(ECHO, ASK, role=Role.TASK, temperature=0.7)  # sampled, no seed: not cached
    rows = store.read("llm_calls", run_id="run-k")
    keys = sorted((row.cache_hit, row.cache_key) for row in rows if row.cache_key)
    assert len(keys) == 2 and keys[0][1] == keys[1][1] and [hit for hit, _ in keys] == [False, True]
    assert store.get_object("llm_cache", keys[0][1]) is not None
    assert sum(1 for row in rows if row.cache_key is None) == 1
