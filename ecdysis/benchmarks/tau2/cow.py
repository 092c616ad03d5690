"""Copy-on-read clones of a τ² DB: an episode pays for the records it touches, not for the whole DB.

A τ² DB is a pydantic model whose fields are tables (``dict[str, Model]``: flights, users, reservations...). A
clone made here shares the process's pristine, validated records and gives each table a :class:`CopyOnReadDict`:
the first ``clone[key]`` (or ``.get``) replaces the shared record with a private deep copy, so every object a tool
can mutate through a lookup is the episode's own. Writes (``clone[key] = record``) land in the clone only.

Iteration (``values()``, ``items()``, serialisation) yields the shared record for keys never looked up. That is
safe because τ²'s tools only *read* what they iterate (flight search, user search by name or email, product
listing); ``tests/tau/test_cow.py`` runs every task's gold actions and every read tool on clones and checks both the
results and that the pristine DB is unchanged. A full validated copy costs ~0.19 s of CPU on airline; a clone ~0.1 ms
plus ~0.1 ms per record touched.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel


class CopyOnReadDict(dict[str, Any]):
    """A table whose records become private deep copies the first time they are looked up by key."""

    __slots__ = ("_private",)

    def __init__(self, shared: dict[str, BaseModel]) -> None:
        super().__init__(shared)
        self._private: set[str] = set()

    def __getitem__(self, key: str) -> Any:
        value = dict.__getitem__(self, key)
        if key not in self._private:
            value = value.model_copy(deep=True)
            dict.__setitem__(self, key, value)
            self._private.add(key)
        return value

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self else default  # noqa: SIM401 (self.get would recurse)

    def __setitem__(self, key: str, value: Any) -> None:
        self._private.add(key)
        dict.__setitem__(self, key, value)

    def setdefault(self, key: str, default: Any = None) -> Any:
        if key not in self:
            self[key] = default
        return self[key]

    def pop(self, key: str, *default: Any) -> Any:
        if key in self:
            value = self[key]
            dict.__delitem__(self, key)
            self._private.discard(key)
            return value
        if default:
            return default[0]
        raise KeyError(key)

    def __delitem__(self, key: str) -> None:
        dict.__delitem__(self, key)
        self._private.discard(key)

    def update(self, *args: Any, **kwargs: Any) -> None:
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def copy(self) -> dict[str, Any]:
        return {key: self[key] for key in self}

    def __iter__(self) -> Iterator[str]:
        # Overridden on purpose: CPython's dict(...) and {**...} then copy through keys() and __getitem__, so a
        # plain-dict copy of a table holds private records, never shared ones.
        return dict.__iter__(self)

    def __reduce__(self) -> Any:  # pickles as a plain, fully private dict
        return (dict, (self.copy(),))

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        return {key: copy.deepcopy(dict.__getitem__(self, key), memo) for key in self}

    @property
    def private_keys(self) -> frozenset[str]:
        """Keys whose records are this clone's own (looked up or written)."""
        return frozenset(self._private)


def is_table(value: Any) -> bool:
    """Whether ``value`` is a ``dict[str, BaseModel]`` table (an empty dict is not: nothing to share)."""
    return isinstance(value, dict) and bool(value) and all(isinstance(v, BaseModel) for v in value.values())


class CopyOnReadSource:
    """A validated τ² DB that episodes clone copy-on-read. Which of its fields are tables is worked out once,
    here, not on every clone. ``pristine`` must never be mutated (clones share its untouched records)."""

    def __init__(self, pristine: BaseModel) -> None:
        self.pristine = pristine
        self._fields = tuple(type(pristine).model_fields)
        self._tables = frozenset(name for name in self._fields if is_table(getattr(pristine, name)))

    def clone(self) -> Any:
        """A clone whose tables copy records on first lookup; other fields are deep-copied."""
        fields: dict[str, Any] = {}
        for name in self._fields:
            value = getattr(self.pristine, name)
            fields[name] = CopyOnReadDict(value) if name in self._tables else copy.deepcopy(value)
        return type(self.pristine).model_construct(_fields_set=set(self.pristine.model_fields_set), **fields)
