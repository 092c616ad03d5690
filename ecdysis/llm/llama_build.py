"""llama.cpp's own ``llama-server`` and ``llama-bench``, compiled once from the pinned llama-cpp-python source.

The llama-cpp-python sdist that ``make setup`` already builds its wheel from ships llama.cpp itself
(``vendor/llama.cpp``). Built from that tree, the server matches the library the fallback server loads, and no other
download is needed: pip fetches the sdist from PyPI, CMake builds the two targets, and the binaries are cached under
``~/.cache/ecdysis/llama.cpp-<version>/bin``. The build uses the vector extensions this machine's CPU reports (the
cache is the machine's own; ``ECDYSIS_LLAMA_PORTABLE=1`` builds for any x86-64 with AVX2), never AMX: virtual machines
report AMX that the hypervisor does not let a process use, and ggml's AMX kernels then crash (seen here, where
``GGML_NATIVE`` picked them).

    python -m ecdysis.llm.local_setup --no-runtime --no-model      # build (29 min here, niced, beside other work)

>>> cached_binary("llama-server") is None or cached_binary("llama-server").name == "llama-server"
True
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from ecdysis.llm.local_cache import CACHE_DIR, LLAMA_CPP_VERSION

BUILD_DIR = CACHE_DIR / f"llama.cpp-{LLAMA_CPP_VERSION}"
BINARIES = ("llama-server", "llama-bench")
_CMAKE_OPTIONS = (
    "-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=OFF", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_APP=OFF", "-DLLAMA_CURL=OFF", "-DLLAMA_OPENSSL=OFF",
    # No web UI: the server is an API on loopback, and the prebuilt UI would be a download.
    "-DLLAMA_BUILD_UI=OFF", "-DLLAMA_USE_PREBUILT_UI=OFF",
)


class LlamaBuildError(RuntimeError):
    """llama-server could not be built here (no compiler or CMake, no network to PyPI, a failed compile)."""


def cached_binary(name: str) -> Path | None:
    """The built ``llama-server`` or ``llama-bench`` when the cache has it, else None."""
    path = BUILD_DIR / "bin" / name
    return path if path.is_file() and os.access(path, os.X_OK) else None


_CPU_FLAG_OPTIONS = {
    "avx": "GGML_AVX", "avx2": "GGML_AVX2", "bmi2": "GGML_BMI2", "fma": "GGML_FMA", "f16c": "GGML_F16C",
    "avx_vnni": "GGML_AVX_VNNI", "avx512f": "GGML_AVX512", "avx512vbmi": "GGML_AVX512_VBMI",
    "avx512_vnni": "GGML_AVX512_VNNI", "avx512_bf16": "GGML_AVX512_BF16",
}
_PORTABLE = ("avx", "avx2", "bmi2", "fma", "f16c")


def cpu_options(cpuinfo: str | None = None) -> list[str]:
    """The ggml CMake options of the x86 extensions in ``cpuinfo`` (``/proc/cpuinfo``; AMX always off).

    >>> cpu_options("flags : fpu avx avx2 fma avx512f amx_tile")[:3]
    ['-DGGML_NATIVE=OFF', '-DGGML_AMX_TILE=OFF', '-DGGML_AMX_INT8=OFF']
    >>> "-DGGML_AVX512=ON" in cpu_options("flags : avx avx2 avx512f")
    True
    """
    if os.environ.get("ECDYSIS_LLAMA_PORTABLE") == "1":
        flags = set(_PORTABLE)
    else:
        if cpuinfo is None:
            try:
                cpuinfo = Path("/proc/cpuinfo").read_text()
            except OSError:
                cpuinfo = ""
        line = next((row for row in cpuinfo.splitlines() if row.startswith("flags")), "")
        flags = set(line.partition(":")[2].split())
    options = ["-DGGML_NATIVE=OFF", "-DGGML_AMX_TILE=OFF", "-DGGML_AMX_INT8=OFF", "-DGGML_AMX_BF16=OFF"]
    return options + [f"-D{option}={'ON' if flag in flags else 'OFF'}" for flag, option in _CPU_FLAG_OPTIONS.items()]


def missing_tools() -> list[str]:
    """Build tools this machine lacks (``cmake``, a C++ compiler)."""
    missing = [tool for tool in ("cmake",) if shutil.which(tool) is None]
    if shutil.which("c++") is None and shutil.which("g++") is None:
        missing.append("a C++ compiler (g++)")
    return missing


def build(*, jobs: int | None = None) -> Path:
    """Build both binaries into the cache (at low priority) and return the server's path; raises
    :class:`LlamaBuildError` with the reason and the log's tail."""
    if missing := missing_tools():
        raise LlamaBuildError(f"cannot build llama-server: missing {', '.join(missing)}")
    jobs = jobs or os.cpu_count() or 1
    with tempfile.TemporaryDirectory(prefix="ecdysis-llama-build-") as tmp:
        work = Path(tmp)
        source = _fetch_source(work)
        cpu = cpu_options()
        generator = ["-G", "Ninja"] if shutil.which("ninja") else []
        log = work / "build.log"
        _run(["cmake", "-S", str(source), "-B", str(work / "build"), *generator, *_CMAKE_OPTIONS,
              *cpu], log)
        _run(["nice", "-n", "10", "cmake", "--build", str(work / "build"), "-j", str(jobs), "--target", *BINARIES],
             log)
        staged = BUILD_DIR.with_name(BUILD_DIR.name + ".partial")
        shutil.rmtree(staged, ignore_errors=True)
        (staged / "bin").mkdir(parents=True)
        for name in BINARIES:
            shutil.copy2(work / "build" / "bin" / name, staged / "bin" / name)
        (staged / "BUILD").write_text(f"llama-cpp-python {LLAMA_CPP_VERSION} vendor/llama.cpp {' '.join(cpu)}\n")
        shutil.rmtree(BUILD_DIR, ignore_errors=True)
        staged.replace(BUILD_DIR)
    server = cached_binary("llama-server")
    if server is None:
        raise LlamaBuildError(f"the build finished but {BUILD_DIR / 'bin' / 'llama-server'} is not there")
    return server


def ensure_built() -> Path:
    """The cached ``llama-server``, built first when missing."""
    return cached_binary("llama-server") or build()


def _fetch_source(work: Path) -> Path:
    download = work / "sdist"
    _run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "--disable-pip-version-check",
          "-d", str(download), f"llama-cpp-python=={LLAMA_CPP_VERSION}"], work / "download.log")
    archives = list(download.glob("llama_cpp_python-*.tar.gz"))
    if not archives:
        raise LlamaBuildError(f"pip download of llama-cpp-python=={LLAMA_CPP_VERSION} left no sdist")
    prefix = f"llama_cpp_python-{LLAMA_CPP_VERSION}/vendor/llama.cpp/"
    with tarfile.open(archives[0]) as archive:
        members = [m for m in archive.getmembers() if m.name.startswith(prefix)]
        archive.extractall(work / "src", members=members, filter="data")
    return work / "src" / prefix


def _run(cmd: list[str], log: Path) -> None:
    with log.open("ab") as out:
        done = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        tail = log.read_bytes()[-3000:].decode(errors="replace")
        raise LlamaBuildError(f"{' '.join(cmd[:3])}... failed with exit {done.returncode}:\n{tail}")
