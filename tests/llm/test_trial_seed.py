"""Each trial of a task samples a local model with its own seed: trials differ, a rerun of one trial asks (and hits
the response cache) exactly as before."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from ecdysis.benchmarks.episode import call_context
from ecdysis.evaluation import episode_requests
from ecdysis.llm import CacheRule, Gateway, GatewayConfig, ModelConfig
from ecdysis.llm.cache import cache_key
from ecdysis.llm.trial_seed import seeded, trial_seed
from ecdysis.protocols import EpisodeRequest
from ecdysis.records import Role, Task
from ecdysis.rollouts.settings import RolloutSettings
from ecdysis.store import ArtifactStore
from ecdysis.testing.stub_server import StubServer

ASK = [{"role": "user", "content": "book the flight"}]
LOCAL = "local/stub"


def _requests(run_seed: int, trials: int = 2) -> list[EpisodeRequest]:
    tasks = [Task(domain="airline", task_id="7"), Task(domain="airline", task_id="8")]
    return episode_requests(tasks, harness_dir=Path("/nonexistent"), harness_hash="h", model=LOCAL, user_model=None,
                            trials=trials, run_id="run", round=0, phase="eval", settings=RolloutSettings(),
                            seed=run_seed)


def _seed_echo(messages: list[dict[str, Any]], tools: Any, context: dict[str, Any]) -> str:
    return f"sampled with seed {context['request'].get('seed')}"


def test_trials_of_a_task_get_their_own_seed_and_a_rerun_the_same() -> None:
    first, second, other_task_first, other_task_second = _requests(run_seed=3)
    seeds = [trial_seed(call_context(request)) for request in (first, second, other_task_first, other_task_second)]
    assert None not in seeds and len(set(seeds)) == 4
    assert trial_seed(call_context(first)) == trial_seed(call_context(_requests(run_seed=3)[0]))
    assert trial_seed(call_context(first)) != trial_seed(call_context(_requests(run_seed=4)[0]))
    assert trial_seed({"run_id": "run", "round": 1}) is None  # not an episode's call: no seed


def test_the_seed_never_overrides_a_chosen_one_nor_a_greedy_call() -> None:
    context = call_context(_requests(run_seed=0)[0])
    assert seeded({}, {}, context)["seed"] == trial_seed(context)
    assert seeded({"seed": 5}, {}, context) == {"seed": 5}
    assert "seed" not in seeded({}, {"seed": 5}, context)
    assert "seed" not in seeded({"temperature": 0}, {}, context)
    assert "seed" not in seeded({}, {"temperature": 0}, context)


def test_local_calls_carry_the_trial_seed_and_cache_per_trial(store: ArtifactStore) -> None:
    first, second = _requests(run_seed=1)[:2]
    with StubServer(_seed_echo) as server:
        config = GatewayConfig(models={LOCAL: ModelConfig(api_base=server.api_base)}, cache_rule=CacheRule.ALWAYS)
        gateway = Gateway(config, store=store)
        replies = [gateway.complete(LOCAL, ASK, role=Role.TASK, context=call_context(request))
                   for request in (first, second, first)]
        outside = gateway.complete(LOCAL, ASK, role=Role.DIAGNOSER, context={"run_id": "run"})
        assert server.requests == 3  # the rerun of the first trial came from the cache
    assert replies[0].content == f"sampled with seed {trial_seed(call_context(first))}"
    assert replies[1].content == f"sampled with seed {trial_seed(call_context(second))}"
    assert replies[0].content != replies[1].content and not replies[1].cache_hit
    assert replies[2].cache_hit and replies[2].content == replies[0].content
    assert outside.content == "sampled with seed None"  # outside an episode the server picks
    keys = {cache_key(LOCAL, ASK, None, seeded({}, {}, call_context(request))) for request in (first, second)}
    assert len(keys) == 2


def _temperature_and_seed(messages: list[dict[str, Any]], tools: Any, context: dict[str, Any]) -> str:
    request = context["request"]
    return f"temperature {request.get('temperature')} seed {request.get('seed')}"


def test_role_params_let_trials_sample_while_the_diagnoser_stays_greedy_and_all_of_it_is_cached(
        store: ArtifactStore) -> None:
    first, second = _requests(run_seed=1)[:2]
    with StubServer(_temperature_and_seed) as server:
        config = GatewayConfig.model_validate({
            "models": {LOCAL: {"api_base": server.api_base, "params": {"temperature": 0}}},
            "role_params": {"task": {"temperature": 0.7}}})  # the default cache rule: deterministic
        gateway = Gateway(config, store=store)
        task = [gateway.complete(LOCAL, ASK, role=Role.TASK, context=call_context(request))
                for request in (first, second, first)]
        diagnoser = [gateway.complete(LOCAL, ASK, role=Role.DIAGNOSER, context={"run_id": "run"}) for _ in range(2)]
        assert server.requests == 3  # the rerun of trial 1 and the second diagnosis came from the cache
    assert task[0].content == f"temperature 0.7 seed {trial_seed(call_context(first))}"
    assert task[1].content == f"temperature 0.7 seed {trial_seed(call_context(second))}"
    assert task[2].cache_hit and task[2].content == task[0].content
    assert diagnoser[0].content == "temperature 0 seed None" and diagnoser[1].cache_hit


def test_unseeded_sampled_calls_stay_out_of_the_deterministic_cache(store: ArtifactStore) -> None:
    with StubServer(_temperature_and_seed) as server:
        gateway = Gateway(GatewayConfig.model_validate(
            {"models": {LOCAL: {"api_base": server.api_base}}, "role_params": {"diagnoser": {"temperature": 0.7}}}),
            store=store)
        replies = [gateway.complete(LOCAL, ASK, role=Role.DIAGNOSER, context={"run_id": "run"}) for _ in range(2)]
        assert server.requests == 2 and not replies[1].cache_hit


def test_role_params_name_an_unknown_role_by_its_path() -> None:
    with pytest.raises(ValidationError, match=r"role_params\.tasks"):
        GatewayConfig.model_validate({"role_params": {"tasks": {"temperature": 0.7}}})
