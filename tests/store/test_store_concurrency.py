"""Four OS processes append to the same dataset, run and round at once: every row lands exactly once."""

from __future__ import annotations

import multiprocessing

from ecdysis.records import FailureRecord, TerminationReason
from ecdysis.store import ArtifactStore

WORKERS = 4
BATCHES = 5
ROWS = 7


def _append_batches(uri: str, worker: int) -> None:
    store = ArtifactStore(uri)
    for b in range(BATCHES):
        rows = [
            FailureRecord(failure_id=f"w{worker}-b{b}-r{r}", run_id="shared", round=1, trajectory_id=f"t{r}",
                          task_id=f"task-{r}", domain="mock", model=f"m{worker}", reward=0.0,
                          failure_decision="x", termination_reason=TerminationReason.MAX_STEPS, signature="s")
            for r in range(ROWS)
        ]
        store.append("failures", rows, run_id="shared", round=1)


def test_concurrent_process_appends_keep_every_row_once(any_store: ArtifactStore) -> None:
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_append_batches, args=(any_store.uri, w)) for w in range(WORKERS)]
    for proc in procs:
        proc.start()
    try:
        for proc in procs:
            proc.join(timeout=240)
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.terminate()
                proc.join()
    assert [proc.exitcode for proc in procs] == [0] * WORKERS

    ids = [r.failure_id for r in any_store.read("failures", run_id="shared", round=1)]
    expected = {f"w{w}-b{b}-r{r}" for w in range(WORKERS) for b in range(BATCHES) for r in range(ROWS)}
    assert len(ids) == len(expected)
    assert set(ids) == expected
    assert any_store.count("failures", run_id="shared", round=1) == WORKERS * BATCHES * ROWS
    assert {r.model for r in any_store.read("failures", task_id="task-3")} == {f"m{w}" for w in range(WORKERS)}
