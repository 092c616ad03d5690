"""A run whose task models are on llama-servers runs as many episodes at once as the servers have slots."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import pytest

from ecdysis.config import parse_config, rollout_settings
from ecdysis.httpserve import BackgroundHTTPServer


class _Props(BaseHTTPRequestHandler):
    slots = 3

    def do_GET(self) -> None:
        body = json.dumps({"total_slots": self.slots}).encode() if self.path == "/props" else b"{}"
        self.send_response(200 if self.path == "/props" else 404)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def llama_props() -> Iterator[str]:
    """A loopback server answering ``/props`` as llama-server does (3 slots)."""
    with BackgroundHTTPServer(_Props) as server:
        yield f"{server.url}/v1"


def _config(task: str, api_base: str | None, **rollouts: object) -> object:
    models = {task: {"api_base": api_base}} if api_base else {}
    return parse_config({"run_name": "t", "benchmark": {"type": "refund-desk"}, "rollouts": rollouts,
                         "models": {"task": task, "diagnoser": "scripted/x:y", "coder": "scripted/x:y"},
                         "llm": {"models": models}})


def test_local_task_models_run_as_many_episodes_as_the_server_has_slots(llama_props: str) -> None:
    settings = rollout_settings(_config("local/qwen", llama_props))
    assert (settings.workers, settings.episodes_per_worker) == (1, 3)
    two_workers = rollout_settings(_config("local/qwen", llama_props, workers=2, episodes_per_worker=8))
    assert (two_workers.workers, two_workers.episodes_per_worker) == (2, 2)


def test_other_models_keep_the_configured_concurrency(llama_props: str) -> None:
    scripted = rollout_settings(_config("scripted/ecdysis.benchmarks.refund_desk.scripted:task_model", None,
                                        episodes_per_worker=5))
    assert (scripted.workers, scripted.episodes_per_worker) == (None, 5)
    silent = rollout_settings(_config("local/qwen", "http://127.0.0.1:9/v1", episodes_per_worker=5))
    assert silent.episodes_per_worker == 5  # nothing answers there: the config stands
