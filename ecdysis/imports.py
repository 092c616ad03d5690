"""Keeping packages a process never uses out of it, when a library imports them only because they are installed."""

from __future__ import annotations

import contextlib
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
