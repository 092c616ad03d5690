"""The in-sandbox runtime: one stdlib-only file, shipped into every sandbox (``/opt/ecdysis/ecdysis_runtime.py``).

This package only locates it for the backends; the runtime itself never imports anything of Ecdysis.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

RUNTIME_PATH = Path(__file__).parent / "ecdysis_runtime.py"
"""The stdlib-only in-sandbox runtime (copied to ``/opt/ecdysis/ecdysis_runtime.py`` in images)."""


@functools.cache
def runtime_hash() -> str:
    """sha256 (hex) of the runtime file; images record it so a changed runtime rebuilds them."""
    return hashlib.sha256(RUNTIME_PATH.read_bytes()).hexdigest()
