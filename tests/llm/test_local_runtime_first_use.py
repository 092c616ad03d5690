"""The local-model runtime is built on first use, not by `make setup` (``LocalModelServer._choose_engine``): a missing
llama-server is built once, a missing llama-cpp-python is installed once, and a build that cannot be done is named in
one plain line with the command that shows why. The builds themselves are stood in for: they take minutes."""

from __future__ import annotations

from pathlib import Path

import pytest

from ecdysis.llm import llama_build, local_server, local_setup
from ecdysis.llm.local_server import LLAMA_CPP_PYTHON, LLAMA_SERVER, LocalModelServer, LocalServerError


def test_a_missing_llama_server_is_built_on_first_use(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(llama_build, "BUILD_DIR", tmp_path / "not-built")
    built = tmp_path / "llama-server"
    calls: list[str] = []
    monkeypatch.setattr(llama_build, "ensure_built", lambda: calls.append("build") or built)
    server = LocalModelServer("qwen-1.5b", chat_format=None)
    assert server._choose_engine() == built and server.engine_used == LLAMA_SERVER
    assert calls == ["build"]
    assert "building llama.cpp's llama-server for the local model, once" in capsys.readouterr().err


def test_a_missing_llama_cpp_python_is_installed_on_first_use_or_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_server, "llama_cpp_available", lambda: False)
    installed: list[bool] = []
    monkeypatch.setattr(local_setup, "ensure_runtime", lambda: installed.append(True))
    server = LocalModelServer("smollm2", engine=LLAMA_CPP_PYTHON)
    assert server._choose_engine() is None and server.engine_used == LLAMA_CPP_PYTHON and installed == [True]

    def no_compiler() -> None:
        raise RuntimeError("could not install llama-cpp-python (cmake: not found): run `python -m "
                           "ecdysis.llm.local_setup` to see why")

    monkeypatch.setattr(local_setup, "ensure_runtime", no_compiler)
    with pytest.raises(LocalServerError, match=r"^could not install llama-cpp-python \(cmake: not found\): run"):
        LocalModelServer("smollm2", engine=LLAMA_CPP_PYTHON)._choose_engine()


def test_ensure_runtime_says_it_builds_and_names_a_failure(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    monkeypatch.setattr(local_setup, "WHEEL_DIR", tmp_path / "wheels")

    def failing_build() -> Path:
        raise RuntimeError("pip wheel finished but no llama_cpp_python wheel")

    monkeypatch.setattr(local_setup, "build_wheel", failing_build)
    with pytest.raises(RuntimeError, match=r"could not install llama-cpp-python \(pip wheel finished.*\): run "
                                           r"`python -m ecdysis.llm.local_setup` to see why"):
        local_setup.ensure_runtime()
    assert "building llama-cpp-python 0.3.36 for the local model, once" in capsys.readouterr().err
