"""What a rollout worker's process imports: loading a τ² domain, or writing records through pyarrow, must not drag in
packages no episode uses."""

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


ARROW_PROBE = """
import datetime, json, sys
from ecdysis.imports import arrow_without_pandas
from ecdysis.records import LLMCallRecord, Role
from ecdysis.schemas import LLM_CALLS
arrow_without_pandas()
record = LLMCallRecord(call_id="c1", run_id="r", round=0, task_id="1", trajectory_id="t", role=Role.TASK,
                       model="m", latency_s=0.1)
table = LLM_CALLS.to_table([record])
loaded = "pandas" in sys.modules
import pandas  # still importable afterwards
print(json.dumps({"rows": table.num_rows, "loaded": loaded, "pandas_after": pandas.__name__,
                  "back": LLM_CALLS.from_table(table)[0].call_id}))
"""


def test_writing_records_through_arrow_leaves_pandas_out_and_importable() -> None:
    done = subprocess.run([sys.executable, "-c", ARROW_PROBE], capture_output=True, text=True, timeout=120,
                          check=True)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"rows": 1, "loaded": False, "pandas_after": "pandas", "back": "c1"}
