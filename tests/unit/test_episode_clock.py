"""The episode clock: the host's waits on a model server are left out of the harness's budget, the hard cap is not."""

from __future__ import annotations

import threading
import time

from ecdysis.protocols import HARD_CAP_FACTOR, EpisodeRequest
from ecdysis.records import Task
from ecdysis.sandbox.clock import EpisodeClock


def test_a_model_wait_is_not_counted_against_the_budget() -> None:
    clock = EpisodeClock(budget_s=0.2, hard_cap_s=5.0)
    with clock.waiting_on_model():
        time.sleep(0.3)
        assert not clock.expired()  # still waiting: the budget does not run down
    assert not clock.expired() and clock.waited_s() >= 0.3
    assert clock.counted_s() < 0.2 <= time.monotonic() - clock.started
    time.sleep(0.25)
    assert clock.expired()
    assert clock.overrun_note().startswith("wall-clock budget of 0.2s exceeded (")
    assert "waiting on models not counted" in clock.overrun_note()


def test_overlapping_waits_count_once() -> None:
    clock = EpisodeClock(budget_s=10.0, hard_cap_s=20.0)
    both = threading.Barrier(2)

    def wait() -> None:
        with clock.waiting_on_model():
            both.wait()
            time.sleep(0.2)

    threads = [threading.Thread(target=wait) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert 0.2 <= clock.waited_s() <= time.monotonic() - clock.started


def test_the_hard_cap_ends_it_whatever_it_waited_on() -> None:
    clock = EpisodeClock(budget_s=0.1, hard_cap_s=0.3)
    with clock.waiting_on_model():
        time.sleep(0.35)
        assert clock.expired() and clock.remaining_s() <= 0
    assert clock.overrun_note().startswith("hard wall-clock cap of 0.3s exceeded (including ")
    assert EpisodeClock(budget_s=2.0).hard_cap_s == 2.0  # without a cap: the budget of plain wall time
    assert EpisodeClock(budget_s=2.0, hard_cap_s=1.0).hard_cap_s == 2.0  # never below the budget


def test_a_request_caps_its_episode_at_a_multiple_of_its_budget_unless_told() -> None:
    task = Task(domain="airline", task_id="1")
    common = {"task": task, "harness_dir": "/nonexistent", "harness_hash": "h", "model": "m/x", "wall_clock_s": 10.0}
    assert EpisodeRequest.model_validate(common).hard_cap_s() == HARD_CAP_FACTOR * 10.0
    assert EpisodeRequest.model_validate({**common, "max_wall_clock_s": 25.0}).hard_cap_s() == 25.0
    assert EpisodeRequest.model_validate({**common, "max_wall_clock_s": 5.0}).hard_cap_s() == 10.0
