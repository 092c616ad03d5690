"""What a rollout worker's process imports: loading a τ² domain must not drag in packages no episode uses."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import json, sys
from ecdysis.benchmarks.tau2.domain import TauDomain
TauDomain.load("airline")
loaded = sorted({name.split(".")[0] for name in sys.modules} & {"pandas", "polars"})
import deepdiff.deephash
optional = bool(deepdiff.deephash.pandas)
import pandas  # still importable afterwards, for code that really uses it
print(json.dumps({"loaded": loaded, "deepdiff_saw_pandas": optional, "pandas_after": pandas.__name__}))
"""


def test_loading_a_domain_leaves_pandas_out_and_importable() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, check=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"loaded": [], "deepdiff_saw_pandas": False, "pandas_after": "pandas"}
