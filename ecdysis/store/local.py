"""A store backend on a local folder: atomic writes by temp file + ``os.replace`` in the same directory."""

from __future__ import annotations

import contextlib
import os
import uuid
from pathlib import Path

from ecdysis.store.errors import StoreError


class LocalBackend:
    """Keys map to files under ``root``; the folder is created on first write."""

    def __init__(self, root: Path) -> None:
        self.root = root.expanduser().resolve()
        self.uri = str(self.root)
        if self.root.exists() and not self.root.is_dir():
            raise StoreError(f"store root {self.root} exists and is not a directory")

    def location(self, key: str) -> str:
        return str(self.root / key)

    def put(self, key: str, data: bytes) -> None:
        path = self.root / key
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise StoreError(f"cannot create directory {path.parent}: {err}") from err
        tmp = path.parent / f".{path.name}.tmp-{uuid.uuid4().hex}"
        try:
            with open(tmp, "wb") as handle:
                handle.write(data)
            os.replace(tmp, path)
        except OSError as err:
            raise StoreError(f"cannot write {path}: {err}") from err
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()

    def get(self, key: str) -> bytes | None:
        path = self.root / key
        try:
            return path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as err:
            raise StoreError(f"cannot read {path}: {err}") from err

    def exists(self, key: str) -> bool:
        return (self.root / key).is_file()

    def list(self, prefix: str) -> list[str]:
        base = self.root / prefix
        if not base.is_dir():
            return []
        keys = []
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            rel = Path(dirpath).relative_to(self.root)
            keys += [(rel / name).as_posix() for name in filenames if not name.startswith(".")]
        return sorted(keys)
