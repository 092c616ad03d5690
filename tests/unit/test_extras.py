"""Benchmark packages are extras: a run on a benchmark whose extra is missing stops with the install to type."""

from __future__ import annotations

import subprocess
import sys

import pytest

_BUILD_HIDDEN = """
import sys
from ecdysis.imports import optional_imports_hidden
from ecdysis.benchmarks import config_for
from ecdysis.errors import MissingExtra
with optional_imports_hidden([sys.argv[1]]):
    try:
        config_for(sys.argv[2]).build()
    except MissingExtra as err:
        print(err)
        raise SystemExit(3)
print("built")
"""


@pytest.mark.parametrize(("hidden", "benchmark", "extra"), [("tau2", "tau2", "tau2"),
                                                             ("pymysql", "agentbench-db", "agentbench")])
def test_a_benchmark_without_its_extra_names_the_install(hidden: str, benchmark: str, extra: str) -> None:
    # A fresh interpreter: this one may have imported the package already, and hiding works only before that.
    done = subprocess.run([sys.executable, "-c", _BUILD_HIDDEN, hidden, benchmark], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 3, done.stdout + done.stderr
    assert f"benchmark '{benchmark}' needs the optional package '{hidden}'" in done.stdout
    assert f"pip install 'ecdysis[{extra}]'" in done.stdout


def test_with_the_extra_installed_the_benchmark_builds() -> None:
    done = subprocess.run([sys.executable, "-c", _BUILD_HIDDEN, "nothing-hidden", "tau2"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip().endswith("built"), done.stdout + done.stderr
