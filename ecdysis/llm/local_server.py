"""``local/<name>`` models: a llama.cpp OpenAI-compatible server on loopback, started and stopped around a run.

Example::

    with LocalModelServer("smollm2") as server:          # or a path to any .gguf file
        gateway = Gateway(GatewayConfig(models={server.model: server.model_config()}))
        gateway.complete(server.model, messages, role=Role.TASK)

Needs the ``local`` extra (``python -m ecdysis.llm.local_setup`` builds and installs it once).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import IO

from ecdysis.llm.config import ModelConfig, ToolCallParsing
from ecdysis.llm.local_models import SPLIT_MODELS, fetched
from ecdysis.llm.routing import LOCAL_API_BASE_ENV

DEFAULT_MODEL = "smollm2"
CHAT_FORMAT = "chatml-function-calling"


class LocalServerError(RuntimeError):
    """The local model server could not be started."""


def llama_cpp_available() -> bool:
    """Whether ``llama_cpp.server`` can be imported in this environment."""
    return importlib.util.find_spec("llama_cpp") is not None


def resolve_model_path(model: str) -> Path:
    """``smollm2`` → the cached SmolLM2 GGUF (fetched once); ``qwen-1.5b`` / ``qwen-0.5b`` → their cached GGUF
    (never downloaded here: they are opt-in, see :mod:`ecdysis.llm.local_models`); anything else must be an
    existing ``.gguf`` path."""
    if model == DEFAULT_MODEL:
        from ecdysis.llm.local_setup import fetch_smollm2

        return fetch_smollm2()
    if model in SPLIT_MODELS:
        cached = fetched(model)
        if cached is None:
            raise LocalServerError(f"local model {model!r} is not downloaded (opt-in): run "
                                   f"`python -m ecdysis.llm.local_setup --no-runtime --model {model}`")
        return cached
    path = Path(model).expanduser()
    if not path.is_file():
        raise LocalServerError(f"local model {model!r}: no such GGUF file (or use {DEFAULT_MODEL!r} or one of "
                               f"{sorted(SPLIT_MODELS)})")
    return path


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LocalModelServer:
    """Runs ``python -m llama_cpp.server`` on a free loopback port; a context manager.

    Args:
        model: ``"smollm2"`` (default, SmolLM2-135M-Instruct), ``"qwen-1.5b"`` / ``"qwen-0.5b"`` (opt-in, fetched
            beforehand) or a path to a GGUF file.
        name: the ``local/<name>`` model string it serves; defaults to the short model name or the file stem.
        n_threads: CPU threads; default all cores.
        n_ctx: context window in tokens.
        chat_format: llama.cpp's chat format; None uses the template stored in the GGUF file (the model's own,
            which writes tool calls as text: pair it with ``ModelConfig.tool_call_parsing="lenient"``).
        startup_timeout_s: how long to wait for ``/v1/models`` to answer.
        nice: added to the server's niceness (``nice -n``), so it yields the CPU to other work.
    """

    def __init__(self, model: str = DEFAULT_MODEL, *, name: str | None = None, n_threads: int | None = None,
                 n_ctx: int = 4096, chat_format: str | None = CHAT_FORMAT, startup_timeout_s: float = 180.0,
                 nice: int = 0) -> None:
        self.model_path_spec = model
        self.name = name or (model if model == DEFAULT_MODEL or model in SPLIT_MODELS else Path(model).stem)
        self.n_threads = n_threads or os.cpu_count() or 1
        self.n_ctx = n_ctx
        self.chat_format = chat_format
        self.startup_timeout_s = startup_timeout_s
        self.nice = nice
        self.port: int | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._previous_env: str | None = None

    @property
    def model(self) -> str:
        """The gateway model string, ``local/<name>``."""
        return f"local/{self.name}"

    @property
    def api_base(self) -> str:
        if self.port is None:
            raise LocalServerError("LocalModelServer is not started")
        return f"http://127.0.0.1:{self.port}/v1"

    def model_config(self) -> ModelConfig:
        """The gateway routing entry for :attr:`model`: this server's endpoint; lenient tool-call parsing when the
        model runs on its own chat template (``chat_format=None``)."""
        parsing = ToolCallParsing.LENIENT if self.chat_format is None else ToolCallParsing.NATIVE
        return ModelConfig(api_base=self.api_base, tool_call_parsing=parsing)

    def start(self) -> LocalModelServer:
        """Start the server and wait until it answers; raises :class:`LocalServerError` with its log tail."""
        if not llama_cpp_available():
            raise LocalServerError("llama_cpp is not installed: run `python -m ecdysis.llm.local_setup` "
                                   "(or install the `local` extra)")
        path = resolve_model_path(self.model_path_spec)
        self.port = free_port()
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the server
        cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(path), "--host", "127.0.0.1",
               "--port", str(self.port), "--n_threads", str(self.n_threads), "--n_ctx", str(self.n_ctx),
               "--model_alias", self.name]
        if self.chat_format is not None:
            cmd += ["--chat_format", self.chat_format]
        if self.nice:
            cmd = ["nice", "-n", str(self.nice), *cmd]
        self._process = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        self._previous_env = os.environ.get(LOCAL_API_BASE_ENV)
        os.environ[LOCAL_API_BASE_ENV] = self.api_base
        return self

    def _wait_ready(self) -> None:
        assert self._process is not None
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise LocalServerError(f"llama_cpp.server exited with {self._process.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.api_base}/models", timeout=2) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.5)
        raise LocalServerError(f"llama_cpp.server not ready after {self.startup_timeout_s}s:\n{self.log_tail()}")

    def log_tail(self, chars: int = 4000) -> str:
        """The end of the server's combined output."""
        if self._log is None:
            return ""
        self._log.seek(0)
        return self._log.read().decode(errors="replace")[-chars:]

    def stop(self) -> None:
        """Kill the server (its whole process group) and restore the environment. Idempotent."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGTERM)
                process.wait(timeout=10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
        if self._log is not None:
            self._log.close()
            self._log = None
        if os.environ.get(LOCAL_API_BASE_ENV) == (f"http://127.0.0.1:{self.port}/v1" if self.port else None):
            if self._previous_env is None:
                os.environ.pop(LOCAL_API_BASE_ENV, None)
            else:
                os.environ[LOCAL_API_BASE_ENV] = self._previous_env

    def __enter__(self) -> LocalModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
