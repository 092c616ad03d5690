"""``local/<name>`` models: a llama.cpp OpenAI-compatible server on loopback, started and stopped around a run.

Two engines serve them. llama.cpp's own ``llama-server`` (:mod:`ecdysis.llm.llama_build` compiles it once from the
pinned source) decodes ``parallel`` sequences in one batch (continuous batching), keeps each slot's prompt in its KV
cache so the next turn of an episode processes only the new tokens, and reads tool calls with the model's own chat
template. llama-cpp-python's server, one request at a time, is the fallback where ``llama-server`` is not built; the
server says which it runs and why (:attr:`LocalModelServer.engine_note`).

Example::

    with LocalModelServer("smollm2", parallel=4) as server:          # or a path to any .gguf file
        gateway = Gateway(GatewayConfig(models={server.model: server.model_config()}))
        gateway.complete(server.model, messages, role=Role.TASK)

Needs the ``local`` extra (``python -m ecdysis.llm.local_setup`` builds and installs it once).
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib.util
import json
import math
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import IO

from ecdysis.llm import llama_build, local_setup
from ecdysis.llm.config import ModelConfig, Streaming, ToolCallParsing
from ecdysis.llm.llama_build import LlamaBuildError, cached_binary
from ecdysis.llm.local_models import SPLIT_MODELS, fetched
from ecdysis.llm.routing import LOCAL_API_BASE_ENV

DEFAULT_MODEL = "smollm2"
CHAT_FORMAT = "chatml-function-calling"
LLAMA_SERVER = "llama-server"
LLAMA_CPP_PYTHON = "llama-cpp-python"
ENGINES = ("auto", LLAMA_SERVER, LLAMA_CPP_PYTHON)


def default_parallel() -> int:
    """Slots of a local server when the config names none: two per core, at least 2 and at most 8 (on a CPU, batched
    decoding reads the weights once per step for every slot, so throughput grows with slots until compute runs out)."""
    return max(2, min(8, 2 * (os.cpu_count() or 1)))


def usable_cores() -> set[int]:
    """The CPUs this process may run on (its affinity mask, as ``taskset`` sets it); all of them where the platform
    has no affinity call."""
    if hasattr(os, "sched_getaffinity"):
        return set(os.sched_getaffinity(0))
    return set(range(os.cpu_count() or 1))


def busy_cores(sample_s: float = 0.5, cpus: set[int] | None = None) -> float:
    """Cores busy with other work right now, among ``cpus`` (None: all): the non-idle share of their CPU time over
    ``sample_s`` seconds of ``/proc/stat``, times their number; the 1-minute load average where ``/proc/stat``
    cannot be read."""
    first = _cpu_times(cpus)
    if first is not None:
        time.sleep(sample_s)
    second = _cpu_times(cpus)
    if first is None or second is None:
        return min(float(len(cpus) if cpus else os.cpu_count() or 1), os.getloadavg()[0])
    (total_0, idle_0, cores), (total_1, idle_1, _) = first, second
    elapsed = total_1 - total_0
    return 0.0 if elapsed <= 0 else cores * (1.0 - (idle_1 - idle_0) / elapsed)


def _cpu_times(cpus: set[int] | None = None) -> tuple[int, int, int] | None:
    """(all jiffies, idle + iowait jiffies, cores) of ``/proc/stat``, summed over ``cpus`` (None: the whole
    machine), or None where there is none."""
    try:
        lines = Path("/proc/stat").read_text().splitlines()
    except OSError:
        return None
    per_cpu = {int(line.split()[0][3:]): line for line in lines[1:] if line.startswith("cpu")}
    chosen = [per_cpu[cpu] for cpu in sorted(cpus)] if cpus and cpus <= per_cpu.keys() else None
    if chosen is None:
        fields = [int(value) for value in lines[0].split()[1:]]
        return sum(fields[:8]), fields[3] + fields[4], max(1, len(per_cpu))  # guest time is in user time already
    total = idle = 0
    for line in chosen:
        fields = [int(value) for value in line.split()[1:]]
        total, idle = total + sum(fields[:8]), idle + fields[3] + fields[4]
    return total, idle, len(chosen)


def free_threads(cores: int, busy: float) -> int:
    """Decoding threads for a server on ``cores`` cores of which ``busy`` (a measured, fractional count) are taken:
    the cores left, at least one. A decoding thread that shares its core with another process stalls every step of
    the others (llama.cpp's threads meet at a barrier per layer): with one busy neighbour on 2 cores, 1 thread made
    15.7 tokens/s and 2 threads 6.8."""
    return max(1, cores - math.floor(busy + 0.5))


def threads_for_now() -> tuple[int, float, int]:
    """(decoding threads, busy cores, usable cores) for a server started now by this process: :func:`free_threads`
    of the cores it may run on (:func:`usable_cores`) and their load."""
    cpus = usable_cores()
    busy = busy_cores(cpus=cpus)
    return free_threads(len(cpus), busy), busy, len(cpus)


PR_SET_PDEATHSIG = 1


def die_with_parent_hook() -> Callable[[], None] | None:
    """A ``preexec_fn`` that has the kernel send the server SIGTERM when the process that started it dies (a study
    killed with SIGTERM or SIGKILL would otherwise leave its server running, holding a core's worth of memory and
    its port). The signal follows the starting *thread*, so only a server started from the main thread gets it (a
    short-lived thread would take its server with it); None where Linux's ``prctl`` is not there."""
    if threading.current_thread() is not threading.main_thread() or not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None

    def hook() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM)

    return hook


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
        return local_setup.fetch_smollm2()
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


def _build_llama_server() -> Path | None:
    """llama.cpp's ``llama-server``, built once on first use (said before it starts); None where it cannot be built
    (the caller falls back to llama-cpp-python's server, or names the failure)."""
    print("building llama.cpp's llama-server for the local model, once (5-13 min on 2 cores; cached in "
          "~/.cache/ecdysis)", file=sys.stderr, flush=True)
    try:
        return llama_build.ensure_built()
    except LlamaBuildError as err:
        last = (str(err).strip().splitlines() or ["failed"])[0]
        print(f"llama-server could not be built ({last}); serving with llama-cpp-python instead", file=sys.stderr,
              flush=True)
        return None


def served_slots(api_base: str, *, timeout_s: float = 2.0) -> int | None:
    """The slots of the llama-server at ``api_base`` (its ``/props``), or None when it does not say (another server,
    not answering)."""
    root = api_base.rstrip("/").removesuffix("/v1")
    try:
        with urllib.request.urlopen(f"{root}/props", timeout=timeout_s) as response:
            slots = json.load(response).get("total_slots")
    except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError, AttributeError):
        return None
    return slots if isinstance(slots, int) and slots > 0 else None


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LocalModelServer:
    """Runs a llama.cpp server (``llama-server``, else ``python -m llama_cpp.server``) on a free loopback port; a
    context manager.

    Args:
        model: ``"smollm2"`` (default, SmolLM2-135M-Instruct), ``"qwen-1.5b"`` / ``"qwen-0.5b"`` (opt-in, fetched
            beforehand) or a path to a GGUF file.
        name: the ``local/<name>`` model string it serves; defaults to the short model name or the file stem.
        n_threads: CPU threads; None: the cores not busy when the server starts (:func:`free_threads`).
        n_ctx: context window in tokens.
        chat_format: llama.cpp's chat format; None uses the template stored in the GGUF file (the model's own,
            which writes tool calls as text: pair it with ``ModelConfig.tool_call_parsing="lenient"``).
        startup_timeout_s: how long to wait for ``/v1/models`` to answer.
        nice: added to the server's niceness (``nice -n``), so it yields the CPU to other work.
        engine: ``auto`` (``llama-server`` when built and the model runs on its own template, ``chat_format=None``;
            else llama-cpp-python), ``llama-server`` (an error when not built) or ``llama-cpp-python``.
        parallel: slots of ``llama-server``, each with ``n_ctx`` tokens of context (None: :func:`default_parallel`);
            llama-cpp-python's server always has one.
    """

    def __init__(self, model: str = DEFAULT_MODEL, *, name: str | None = None, n_threads: int | None = None,
                 n_ctx: int = 4096, chat_format: str | None = CHAT_FORMAT, startup_timeout_s: float = 180.0,
                 nice: int = 0, engine: str = "auto", parallel: int | None = None) -> None:
        if engine not in ENGINES:
            raise LocalServerError(f"unknown local engine {engine!r}; known: {', '.join(ENGINES)}")
        self.model_path_spec = model
        self.name = name or (model if model == DEFAULT_MODEL or model in SPLIT_MODELS else Path(model).stem)
        self.n_threads = n_threads
        """Decoding threads: as given, else chosen by :meth:`start` from the cores free then."""
        self.n_ctx = n_ctx
        self.chat_format = chat_format
        self.startup_timeout_s = startup_timeout_s
        self.nice = nice
        self.engine = engine
        self.parallel = parallel or default_parallel()
        self.engine_used: str | None = None
        """The engine :meth:`start` chose."""
        self.engine_note = ""
        """Which engine serves and, for the fallback, why."""
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

    @property
    def slots(self) -> int:
        """Requests the server decodes at once (1 on llama-cpp-python's server)."""
        return self.parallel if self.engine_used == LLAMA_SERVER else 1

    def model_config(self) -> ModelConfig:
        """The gateway routing entry for :attr:`model`: this server's endpoint and a concurrency of its slots.
        Tool calls: ``llama-server`` parses them with the model's own template, and what it leaves as text is read
        leniently; on llama-cpp-python, lenient where the model runs on its own template (``chat_format=None``).
        Calls stream, so that a call the gateway gives up on stops the server's decoding (:mod:`ecdysis.llm.streaming`:
        llama-cpp-python runs an abandoned plain request to its end, llama-server did half the time); under a
        llama-cpp-python chat format (its ``chatml-function-calling`` refuses to stream a tool choice) only calls that
        offer no tools stream."""
        lenient = self.engine_used == LLAMA_SERVER or self.chat_format is None
        parsing = ToolCallParsing.LENIENT if lenient else ToolCallParsing.NATIVE
        streaming = Streaming.ON if lenient else Streaming.WITHOUT_TOOLS
        return ModelConfig(api_base=self.api_base, tool_call_parsing=parsing, max_concurrency=self.slots,
                           context_tokens=self.n_ctx, streaming=streaming)

    def _choose_engine(self) -> Path | None:
        """The ``llama-server`` binary to run, or None for llama-cpp-python's server; sets :attr:`engine_note`."""
        # llama-server reads tool calls with the model's own template; a llama-cpp-python chat format (SmolLM2's
        # chatml-function-calling, whose grammar forces a named call) has no counterpart there: with one, auto keeps
        # llama-cpp-python (SmolLM2's own template offers no tools, and on it the model answered in prose).
        wanted = self.engine == LLAMA_SERVER or (self.engine == "auto" and self.chat_format is None)
        binary = cached_binary("llama-server") if wanted else None
        if wanted and binary is None:
            binary = _build_llama_server()
        if binary is not None:
            self.engine_used = LLAMA_SERVER
            self.engine_note = f"llama-server with {self.parallel} slots of {self.n_ctx} tokens ({binary})"
            return binary
        if self.engine == LLAMA_SERVER:
            raise LocalServerError("llama-server could not be built: run `python -m ecdysis.llm.local_setup "
                                   "--no-runtime --no-model` to see why")
        if not llama_cpp_available():
            try:
                local_setup.ensure_runtime()  # built once on first use, cached in ~/.cache/ecdysis
            except RuntimeError as err:
                raise LocalServerError(str(err)) from None
        self.engine_used = LLAMA_CPP_PYTHON
        if self.engine == LLAMA_CPP_PYTHON:
            why = "asked for"
        elif not wanted:
            why = f"chat format {self.chat_format!r} is llama-cpp-python's own"
        else:
            why = "llama-server could not be built (python -m ecdysis.llm.local_setup says why)"
        self.engine_note = f"llama-cpp-python's server, one request at a time: {why}"
        return None

    def _choose_threads(self) -> None:
        """Sets :attr:`n_threads` (unless given) to the cores free right now, and says so in :attr:`engine_note`."""
        if self.n_threads is not None:
            self.engine_note += f"; {self.n_threads} threads (as configured)"
            return
        self.n_threads, busy, cores = threads_for_now()
        self.engine_note += f"; {self.n_threads} threads ({busy:.1f} of {cores} cores busy at start)"

    def _command(self, path: Path, binary: Path | None) -> list[str]:
        assert self.port is not None
        if binary is not None:  # the chat format is the model's own (chat_format applies to llama-cpp-python only)
            # --jinja: tool calls read with the model's own template; no web UI; the KV cache keeps each slot's
            # prompt, so a slot re-processes only what follows the longest prefix it still holds.
            return [str(binary), "--model", str(path), "--host", "127.0.0.1", "--port", str(self.port),
                    "--threads", str(self.n_threads), "--ctx-size", str(self.n_ctx * self.parallel),
                    "--parallel", str(self.parallel), "--cont-batching", "--jinja", "--no-webui",
                    "--alias", self.name]
        cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(path), "--host", "127.0.0.1",
               "--port", str(self.port), "--n_threads", str(self.n_threads), "--n_ctx", str(self.n_ctx),
               "--model_alias", self.name]
        if self.chat_format is not None:
            cmd += ["--chat_format", self.chat_format]
        return cmd

    def start(self) -> LocalModelServer:
        """Start the server and wait until it answers; raises :class:`LocalServerError` with its log tail."""
        binary = self._choose_engine()
        self._choose_threads()
        path = resolve_model_path(self.model_path_spec)
        self.port = free_port()
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the server
        cmd = self._command(path, binary)
        if self.nice:
            cmd = ["nice", "-n", str(self.nice), *cmd]
        self._process = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True,
                                         preexec_fn=die_with_parent_hook())
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
                raise LocalServerError(f"{self.engine_used} exited with {self._process.returncode}:\n{self.log_tail()}")
            try:
                # llama-server answers /health with 503 while it loads the model, 200 once it serves.
                probe = "/health" if self.engine_used == LLAMA_SERVER else "/v1/models"
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{probe}", timeout=2) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.5)
        raise LocalServerError(f"{self.engine_used} not ready after {self.startup_timeout_s}s:\n{self.log_tail()}")

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
