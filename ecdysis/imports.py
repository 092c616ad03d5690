"""Keeping imports cheap: packages a process never uses stay out of it (a library imports them only because they are
installed), and a large library's import does not pay for the cyclic collector over and over."""

from __future__ import annotations

import contextlib
import gc
import sys
from collections.abc import Iterator, Sequence


class _Hide:
    """A meta path finder that refuses ``names`` (and their submodules)."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = frozenset(names)

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> None:
        if fullname.partition(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named {fullname!r} (hidden here)", name=fullname)


@contextlib.contextmanager
def optional_imports_hidden(names: Sequence[str]) -> Iterator[None]:
    """While inside, ``import`` of each of ``names`` not yet imported raises ImportError (the code that treats them
    as optional then goes without); afterwards they import normally again.

    A finder refuses them, rather than a None in ``sys.modules``: compiled code (Cython's import) takes a None
    there for the module itself."""
    hide = _Hide([name for name in names if name not in sys.modules])
    sys.meta_path.insert(0, hide)
    try:
        yield
    finally:
        sys.meta_path.remove(hide)


def arrow_without_pandas() -> None:
    """Make pyarrow in this process convert Python lists without importing pandas.

    pyarrow's list conversion (``pa.array``, ``pa.table``) imports pandas on its first use, only to ask whether the
    input is a pandas object: 0.4 CPU-s and ~47 MB resident in a process that has no pandas object (a rollout
    worker writing its LLM call records). pyarrow asks once per process; asked here with pandas hidden, it keeps
    the answer. pandas itself still imports afterwards, but pyarrow's own pandas conversions (``to_pandas``) are
    then off in this process. Does nothing where pandas is already imported.
    """
    import pyarrow as pa

    with optional_imports_hidden(["pandas"]):
        pa.array([0])


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Import a large library inside: the cyclic collector is off while inside, and what exists on leaving is frozen
    (``gc.freeze``), so later collections never walk it again.

    A library of hundreds of thousands of objects (litellm, with the openai SDK and pydantic models under it) makes
    each collection during its own import, and every full collection after it, walk all of them: a third of the CPU
    of a process's start-up (measured: ~4.0 → ~2.0 CPU-s to import a rollout worker's modules). Such objects live
    as long as the process, so walking them finds nothing; the few thousand cycles the import leaves behind are
    kept rather than collected. Inside another ``collector_paused`` (or with the collector already off) it changes
    nothing, so only the outermost one freezes.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()
