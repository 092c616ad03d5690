"""A model call in flight is cut off at the episode's wall-clock deadline, and so is a retry that could not finish.

The slow model is the package's OpenAI-compatible stub behind litellm; nothing of ours is mocked.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ecdysis.benchmarks.tau2.benchmark import Tau2Benchmark
from ecdysis.llm import DeadlineExceeded, Gateway, GatewayConfig, LLMCallError
from ecdysis.llm.config import ModelConfig
from ecdysis.records import Role, TerminationReason
from ecdysis.testing.stub_server import StubServer

ASK = [{"role": "user", "content": "hello"}]
SLOW_S = 20.0


@pytest.fixture(scope="module")
def slow_stub() -> Iterator[StubServer]:
    with StubServer(latency_s=SLOW_S) as stub:
        yield stub


def _gateway(stub: StubServer, **fields: object) -> Gateway:
    config = {"models": {"openai/slow": ModelConfig(api_base=stub.api_base)}, "cache": False,
              "backoff_base_s": 0.01, **fields}
    return Gateway(GatewayConfig.model_validate(config))


def test_a_slow_call_is_cut_off_at_the_deadline(slow_stub: StubServer) -> None:
    gateway = _gateway(slow_stub)
    began = time.monotonic()
    with pytest.raises(DeadlineExceeded) as cut:
        gateway.complete("openai/slow", ASK, role=Role.TASK, deadline=began + 0.5)
    assert time.monotonic() - began < SLOW_S  # it did not wait for the reply
    assert cut.value.retries == 0  # no retry could have finished before the deadline
    usage = gateway.usage()
    assert usage.calls == 1 and usage.errors == 1  # the failed attempt is accounted


def test_a_passed_deadline_sends_nothing(slow_stub: StubServer) -> None:
    before = slow_stub.requests
    with pytest.raises(DeadlineExceeded, match="deadline passed"):
        _gateway(slow_stub).complete("openai/slow", ASK, role=Role.TASK, deadline=time.monotonic() - 1)
    assert slow_stub.requests == before


def test_no_retry_starts_that_would_end_after_the_deadline() -> None:
    with StubServer(failure_rate=1.0, fail_statuses=(503,)) as stub:
        gateway = _gateway(stub, backoff_base_s=5.0, max_retries=5)
        with pytest.raises(DeadlineExceeded) as cut:
            gateway.complete("openai/slow", ASK, role=Role.TASK, deadline=time.monotonic() + 1.0)
        assert stub.requests == 1 and cut.value.retries == 0
        with pytest.raises(LLMCallError) as plain:  # without a deadline it is the ordinary failure after retries
            _gateway(stub, max_retries=2).complete("openai/slow", ASK, role=Role.TASK)
        assert not isinstance(plain.value, DeadlineExceeded) and plain.value.retries == 2


def test_an_episode_whose_model_outlives_its_hard_cap_ends_as_timeout(slow_stub: StubServer,
                                                                      process_backend: object) -> None:
    from test_episode import request

    gateway = _gateway(slow_stub)
    episode = request("airline", "1", "direct", "openai/slow", wall_clock_s=1.0, max_wall_clock_s=3.0)
    trajectory = Tau2Benchmark().run(episode, process_backend, gateway)  # type: ignore[arg-type]
    assert trajectory.termination_reason is TerminationReason.TIMEOUT, trajectory.error
    assert trajectory.wall_time_s < SLOW_S and trajectory.reward == 0.0
    assert "hard wall-clock cap of 3s exceeded" in (trajectory.error or "")
    assert "during a task-model call" in (trajectory.error or "")


def _bundle(folder: Path, body: str) -> Path:
    folder.mkdir()
    (folder / "harness.py").write_text(f"def run(session):\n{body}")
    return folder


def test_waiting_on_a_slow_model_is_not_the_harness_timeout(process_backend: object, tmp_path: Path) -> None:
    from test_episode import request

    patient = _bundle(tmp_path / "patient", "    for turn in range(4):\n"
                                            "        session.complete([{'role': 'user', 'content': str(turn)}])\n"
                                            "    return 'agent_stop'\n")
    with StubServer(latency_s=1.0) as server:  # 4 s of model latency against a 2 s budget
        episode = request("airline", "1", patient, "openai/slow", wall_clock_s=2.0, max_wall_clock_s=120.0)
        trajectory = Tau2Benchmark().run(episode, process_backend, _gateway(server))  # type: ignore[arg-type]
    assert trajectory.termination_reason is TerminationReason.AGENT_STOP, trajectory.error
    assert trajectory.llm_calls == 4 and trajectory.wall_time_s > 4 * 1.0 > episode.wall_clock_s


def test_the_hard_cap_ends_a_harness_that_loops_on_the_model(process_backend: object, tmp_path: Path) -> None:
    from test_episode import request

    looping = _bundle(tmp_path / "looping", "    while True:\n"
                                            "        session.complete([{'role': 'user', 'content': 'again'}])\n")
    with StubServer(latency_s=0.5) as server:
        episode = request("airline", "1", looping, "openai/slow", wall_clock_s=1.0, max_wall_clock_s=4.0,
                          max_steps=1000)
        trajectory = Tau2Benchmark().run(episode, process_backend, _gateway(server))  # type: ignore[arg-type]
    assert trajectory.termination_reason is TerminationReason.TIMEOUT, trajectory.error
    assert "hard wall-clock cap of 4s exceeded" in (trajectory.error or "")
    assert trajectory.llm_calls * 0.5 > episode.wall_clock_s  # it waited on the model past its own budget
    assert trajectory.wall_time_s >= 4.0


def test_a_harness_that_spins_still_ends_at_its_own_budget(process_backend: object, tmp_path: Path) -> None:
    from test_episode import request

    spinning = _bundle(tmp_path / "spinning", "    while True:\n        pass\n")
    episode = request("airline", "1", spinning, "openai/slow", wall_clock_s=1.0, max_wall_clock_s=60.0)
    with StubServer() as server:
        trajectory = Tau2Benchmark().run(episode, process_backend, _gateway(server))  # type: ignore[arg-type]
    assert trajectory.termination_reason is TerminationReason.TIMEOUT, trajectory.error
    assert (trajectory.error or "").startswith("wall-clock budget of 1s exceeded")
    assert trajectory.llm_calls == 0


def test_calls_under_a_deadline_share_one_provider_client() -> None:
    from ecdysis.llm._litellm import litellm

    def clients(api_base: str) -> int:
        return sum(1 for key in litellm.in_memory_llm_clients_cache.cache_dict if f"api_base={api_base}" in str(key))

    with StubServer() as stub:
        gateway = _gateway(stub)
        deadline = time.monotonic() + 30.5  # under the config's 120 s timeout: every attempt is cut to it
        seconds_left: set[int] = set()  # the whole seconds of budget the calls started in
        for _ in range(12):
            seconds_left.add(math.ceil(deadline - time.monotonic()))
            gateway.complete("openai/slow", ASK, role=Role.TASK, deadline=deadline)
            seconds_left.add(math.ceil(deadline - time.monotonic()))
            time.sleep(0.01)
        assert stub.requests == 12
        # litellm keys its SDK client (and its connection pool) by the timeout: the exact time left made one per call.
        # One client per whole second of budget the calls ran in (one, on a quiet host; more where the host is busy).
        assert len(seconds_left) < 12, "the calls were too slow for this check to tell one client per call"
        assert clients(stub.api_base) <= len(seconds_left)
