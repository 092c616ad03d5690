"""The one registry of every extension: benchmarks, evolution methods, acceptance policies, sandbox backends, coding
agents and exporters, each an :class:`Extension` found by ``(kind, name)``.

Built-in extensions register themselves from their own folders (each listed once in :data:`BUILTINS`); a package
installed beside Ecdysis registers through the entry-point group ``ecdysis.extensions``, whose value is a callable
that registers (``my_pkg.plugin:register``) or a module whose import registers. A kind's built-ins load on its first
lookup, the entry points once, on the first lookup of any kind (in each process: Ray workers load their own).

>>> lookup("method", "ecdysis-fdcr").summary
'batch aggregation refined by Analyst, Critic and Engineer, then a Moderator'
>>> names("acceptance")
['strict', 'paired']
"""

from __future__ import annotations

import importlib
import logging
import threading
import types
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any, Literal, get_args

log = logging.getLogger(__name__)

Kind = Literal["benchmark", "method", "acceptance", "sandbox", "coder", "exporter"]
KINDS: tuple[Kind, ...] = get_args(Kind)

LABELS: dict[Kind, str] = {"benchmark": "benchmark", "method": "evolution method", "acceptance": "acceptance policy",
                           "sandbox": "sandbox backend", "coder": "coding agent", "exporter": "export format"}
"""How errors name each kind."""

ENTRY_POINT_GROUP = "ecdysis.extensions"

BUILTINS: dict[Kind, tuple[str, ...]] = {
    "benchmark": ("ecdysis.benchmarks.tau2.config:register_extensions",
                  "ecdysis.benchmarks.refund_desk.config:register_extensions",
                  "ecdysis.benchmarks.agentbench.config:register_extensions"),
    "method": ("ecdysis.evolution.methods:register_extensions",),
    "acceptance": ("ecdysis.evolution.acceptance.strict:register_extensions",
                   "ecdysis.evolution.acceptance.paired:register_extensions"),
    "sandbox": ("ecdysis.sandbox.config:register_extensions",),
    "coder": ("ecdysis.coders.builtin:register_extensions", "ecdysis.coders.opencode:register_extensions",
              "ecdysis.coders.aider:register_extensions"),
    "exporter": ("ecdysis.benchmarks.official:register_extensions", "ecdysis.benchmarks.tau2.config:register_exporter",
                 "ecdysis.benchmarks.agentbench.config:register_exporter"),
}
"""The built-in extensions: per kind, the registering functions of the folders that provide one, in the order
``ecdysis list`` shows. A kind's are loaded on its first lookup, so a rollout worker that only looks up a sandbox
never imports the evolution methods."""


@dataclass(frozen=True)
class Extension:
    """One registered extension."""

    kind: Kind
    name: str
    """Its ``type`` in a config section (and its name on the command line)."""
    summary: str
    """One line for ``ecdysis list``."""
    config: type[Any] | None = None
    """The config section class (a pydantic model whose ``type`` is :attr:`name`) that builds the extension; None
    for kinds with no config section (exporters)."""
    factory: Callable[..., Any] | None = None
    """For kinds without a config section: what builds it (an exporter: its adapter module, loaded on call)."""
    covers: tuple[str, ...] | None = None
    """Exporters: the benchmarks whose trajectories it writes (None: each benchmark in its own format)."""
    source: str = "ecdysis"
    """Who registered it: ``ecdysis`` or the entry point's distribution."""
    builtin: bool = False
    """Registered by one of :data:`BUILTINS` (listed before every other, whatever loaded first)."""


class UnknownExtension(ValueError):
    """A name that no registered extension of its kind has; the message lists the known ones."""


_entries: dict[Kind, dict[str, Extension]] = {kind: {} for kind in KINDS}
_lock = threading.RLock()
_loaded: set[Kind] = set()
_loading: set[Kind] = set()
_state: dict[str, Any] = {"plugins": "no", "source": "ecdysis", "builtin": False}
"""``plugins``: no | loading | loaded (the entry points); ``source``: who is registering now."""


def register(kind: Kind, name: str, summary: str, *, config: type[Any] | None = None,
             factory: Callable[..., Any] | None = None, covers: tuple[str, ...] | None = None) -> Extension:
    """Add an extension; registering the same name twice with a different config or factory is an error."""
    if kind not in KINDS:
        raise ValueError(f"unknown extension kind {kind!r}; known: {', '.join(KINDS)}")
    _ensure_loaded(kind)  # the built-ins come first, and a clash with one is caught here
    entry = Extension(kind, name, summary, config, factory, covers, str(_state["source"]),
                      builtin=bool(_state["builtin"]))
    with _lock:
        known = _entries[kind].get(name)
        if known is not None and (known.config, known.factory) != (config, factory):
            raise ValueError(f"{LABELS[kind]} {name!r} is registered twice ({known.source} and {entry.source})")
        _entries[kind][name] = entry
    return entry


def entries(kind: Kind) -> list[Extension]:
    """Every registered extension of ``kind``: the built-ins, then the others, each in registration order (an entry
    point may load while a kind's built-ins are loading)."""
    _ensure_loaded(kind)
    registered = list(_entries[kind].values())
    return [e for e in registered if e.builtin] + [e for e in registered if not e.builtin]


def names(kind: Kind) -> list[str]:
    """The names of every registered extension of ``kind``."""
    return [entry.name for entry in entries(kind)]


def lookup(kind: Kind, name: str) -> Extension:
    """The extension ``name`` of ``kind``; :class:`UnknownExtension` lists the known ones."""
    _ensure_loaded(kind)
    try:
        return _entries[kind][name]
    except KeyError:
        raise UnknownExtension(unknown_message(kind, name)) from None


def unknown_message(kind: Kind, name: object) -> str:
    """``unknown <kind> 'x'; known: a, b``."""
    return f"unknown {LABELS[kind]} {name!r}; known: {', '.join(names(kind))}"


def reset() -> None:
    """Forget every registration; the next lookup loads the built-ins and entry points again (for tests)."""
    with _lock:
        for table in _entries.values():
            table.clear()
        _loaded.clear()
        _state["plugins"] = "no"


def _ensure_loaded(kind: Kind) -> None:
    if kind in _loaded and _state["plugins"] == "loaded":
        return
    with _lock:  # another thread waits here until the load is done; this thread may re-enter while registering
        _load_builtins(kind)
        _load_plugins()


def _load_builtins(kind: Kind) -> None:
    if kind in _loaded or kind in _loading:
        return
    _loading.add(kind)
    source, _state["source"] = _state["source"], "ecdysis"
    builtin, _state["builtin"] = _state["builtin"], True
    try:
        for reference in BUILTINS[kind]:
            _call(_resolve(reference))
        _loaded.add(kind)
    finally:
        _loading.discard(kind)
        _state["source"], _state["builtin"] = source, builtin


def _load_plugins() -> None:
    if _state["plugins"] != "no":
        return
    _state["plugins"] = "loading"
    try:
        for point in entry_points(group=ENTRY_POINT_GROUP):
            _load_entry_point(point)
        _state["plugins"] = "loaded"
    finally:
        if _state["plugins"] == "loading":
            _state["plugins"] = "no"
        _state["source"] = "ecdysis"


def _load_entry_point(point: Any) -> None:
    _state["source"] = point.dist.name if point.dist is not None else point.value
    builtin, _state["builtin"] = _state["builtin"], False
    try:
        _call(point.load())
    except Exception as exc:  # a broken plugin must not take the built-ins down with it
        warnings.warn(f"ecdysis: extension entry point {point.name!r} ({point.value}) failed to load: {exc}",
                      stacklevel=2)
        log.warning("extension entry point %s (%s) failed: %s", point.name, point.value, exc)
    finally:
        _state["builtin"] = builtin


def _resolve(reference: str) -> Any:
    module, _, attribute = reference.partition(":")
    loaded = importlib.import_module(module)
    return getattr(loaded, attribute) if attribute else loaded


def _call(target: Any) -> None:
    if not isinstance(target, types.ModuleType):  # a module registered as it was imported
        target()
