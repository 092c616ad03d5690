"""Where AgentBench's data is found when a config names none: the environment, else the user's cache; never beside
the checkout or the working directory (so it runs with no data at all)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ecdysis.benchmarks.agentbench.manifest import DATA_ENV, AgentBenchData, AgentBenchDataError, find_data_dir


def test_the_data_folder_is_the_environments_first_else_the_user_caches_with_a_manifest(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DATA_ENV, str(tmp_path / "named"))
    assert find_data_dir() == tmp_path / "named"  # named: used as given (its files are checked when read)
    monkeypatch.delenv(DATA_ENV)
    monkeypatch.setenv("ECDYSIS_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "cache" / "agentbench").mkdir(parents=True)
    assert find_data_dir() is None  # a folder without a manifest is passed over
    (tmp_path / "cache" / "agentbench" / "MANIFEST.json").write_text("{}")
    assert find_data_dir() == tmp_path / "cache" / "agentbench"
    assert AgentBenchData().root == (tmp_path / "cache" / "agentbench").resolve()  # what a config naming none reads
    # A shared folder beside the working directory (or the checkout) is configuration's to name, never looked for.
    monkeypatch.setenv("ECDYSIS_CACHE_DIR", str(tmp_path / "empty-cache"))
    (tmp_path / "work" / "shared" / "agentbench").mkdir(parents=True)
    (tmp_path / "work" / "shared" / "agentbench" / "MANIFEST.json").write_text("{}")
    monkeypatch.chdir(tmp_path / "work")
    assert find_data_dir() is None
    with pytest.raises(AgentBenchDataError, match="empty-cache/agentbench"):
        AgentBenchData()
