"""The layers of ``ecdysis/`` as a contract, and the test that holds the code to it.

The contract is data, here and nowhere else: :data:`LAYERS` orders the package's units (a subpackage or a top-level
module) from the top down. A module may import its own unit and the units of lower layers; units that share a layer
do not import each other; no imports go round in a cycle, between modules or between units. Imports inside
functions count like any other (a deferred import is still an arrow), and they are kept only where they defer a
heavy or optional dependency (:data:`HEAVY`). Imports under ``if TYPE_CHECKING:`` are exempt: they never run.

Why an AST test of our own rather than import-linter: import-linter (2.x) could state the layers (``layers``) and
forbid cycles between siblings (``acyclic_siblings``, set up package by package), but the third rule, that an import
inside a function must defer a heavy dependency, needs each module's third-party imports followed through the
package, which no import-linter contract does; that needs this ``ast`` walk anyway, and the same walk checks the
layers and the cycles in about a second, without grimp (a compiled dev dependency) or a second place for the
contract. The figures the contract is held to print with ``python tests/unit/test_layers.py [--root CHECKOUT]``.
"""

from __future__ import annotations

import ast
import functools
import sys
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

LAYERS: tuple[tuple[str, ...], ...] = (
    # top first; one row is one layer, and the units of a row are independent of each other
    ("testing",),  # the deterministic kit and each benchmark's scripted.py: product code never imports them
    ("cli",),
    ("study",),
    ("replay",),
    ("training",),
    ("build",),
    ("config",),
    ("tracking",),
    ("evaluation", "report", "selection"),
    ("evolution", "rollouts", "verification"),
    ("benchmarks", "coders", "events"),
    ("llm", "sandbox"),
    ("harness", "store"),
    ("metrics", "protocols", "schemas"),
    ("records", "errors", "extensions", "templates", "imports", "collector", "ray_env", "httpserve", "usercache",
     "ecdysis"),
)
"""The ordered layers of ``ecdysis/``: a unit is ``ecdysis.<unit>`` with everything below it (``ecdysis`` alone is
the package's ``__init__``), except the modules :data:`UNIT_OF_MODULE` places elsewhere."""

UNIT_OF_MODULE: Mapping[str, str] = {
    "ecdysis.benchmarks.agentbench.scripted": "testing",
    "ecdysis.benchmarks.refund_desk.scripted": "testing",
    "ecdysis.benchmarks.tau2.scripted": "testing",
}
"""Modules that belong to another unit than their folder's: a benchmark's scripted participants are test doubles
that live beside the seam they fake."""

NOT_MODULES = ("ecdysis/sandbox/runtime/ecdysis_runtime.py", "/harnesses/")
"""Python files that the package ships but never imports: the sandbox runtime and the seed harnesses run inside the
sandbox, on the standard library alone."""

HEAVY: Mapping[str, str] = {
    # import times measured with `python -X importtime -c "import NAME"` on 2 busy cores (load 13), 2026-12-08
    "ray": "the cluster runtime (426 ms): the CLI's own parts and the sandbox side never need it",
    "docker": "the Docker SDK (212 ms): only the Docker backend and task containers speak to a daemon",
    "requests": "HTTP client of the Docker SDK and MLflow (261 ms): only where a daemon or a server is reached",
    "mlflow": "the `mlflow` extra: optional (3,072 ms)",
    "tau2": "the `tau2` extra: optional; τ²'s modules load its scientific stack",
    "loguru": "τ²'s logger (88 ms), silenced only where τ² runs",
    "pymysql": "the `agentbench` extra: optional",
    "sqlglot": "the `agentbench` extra: optional (208 ms)",
    "litellm": "the model gateway (5,386 ms): processes that never call a model go without it",
    "pyarrow": "Parquet and Arrow (304 ms): processes that write no store go without it",
    "boto3": "S3 only (147 ms)",
    "botocore": "S3 only (with boto3)",
    "plotly": "the report's charts only (75 ms)",
}
"""Third-party packages an import inside a function may defer, each with why; an ``ecdysis`` module imported inside
a function must bring in one of them (at its module level, directly or through other ``ecdysis`` modules) that the
importing module does not load already."""

DEFERRED: Mapping[tuple[str, str], str] = {
    ("ecdysis.rollouts.worker", "ecdysis.llm.gateway"): "Ray's worker_process_setup_hook: importing is its job",
    ("ecdysis.rollouts.worker", "ecdysis.sandbox.driver"): "Ray's worker_process_setup_hook: importing is its job",
    **{("ecdysis.rollouts.worker", target): "worker_parts: the gateway brings litellm (~3 CPU-s), which a worker "
       "process imports while it starts (prepare_process), not every module that names the worker"
       for target in ("ecdysis.llm", "ecdysis.sandbox", "ecdysis.sandbox.unavailable")},
}
"""Imports of ``ecdysis`` modules inside functions that defer nothing heavy but stay there, each with why."""


@dataclass(frozen=True)
class Arrow:
    """One import: ``source`` imports ``target`` at ``line``, at module level, inside a function, or only when type
    checking."""

    source: str
    target: str
    line: int
    where: str  # "module", "function" or "type_checking"


@dataclass
class Graph:
    """Every ``ecdysis`` module and the imports it makes: ``arrows`` between ecdysis modules, ``external`` the
    top-level names of other packages, both with where they are made."""

    modules: set[str] = field(default_factory=set)
    arrows: list[Arrow] = field(default_factory=list)
    external: list[Arrow] = field(default_factory=list)

    def runtime(self, *, exempt: Iterable[tuple[str, str]] = ()) -> list[Arrow]:
        """The arrows that run (not under TYPE_CHECKING), less ``exempt`` (source, target) pairs and self-imports."""
        skip = set(exempt)
        return [a for a in self.arrows if a.where != "type_checking" and a.source != a.target
                and (a.source, a.target) not in skip]


def _module_name(path: Path, package_dir: Path) -> str:
    parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.Module) -> Iterator[tuple[ast.Import | ast.ImportFrom, str]]:
    """Every import statement with where it runs."""
    def visit(node: ast.AST, where: str) -> Iterator[tuple[ast.Import | ast.ImportFrom, str]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                yield child, where
            elif isinstance(child, ast.If) and _is_type_checking(child.test):
                for stmt in child.body:
                    yield from visit(ast.Module(body=[stmt], type_ignores=[]), "type_checking")
                for stmt in child.orelse:
                    yield from visit(ast.Module(body=[stmt], type_ignores=[]), where)
            else:
                inner = "function" if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) and \
                    where == "module" else where
                yield from visit(child, inner)
    yield from visit(tree, "module")


def scan(package_dir: Path) -> Graph:
    """Read every module of the package at ``package_dir`` (its ``ecdysis/`` folder) without importing any."""
    graph = Graph()
    files = {}
    for path in sorted(package_dir.rglob("*.py")):
        if not any(part in path.as_posix() for part in NOT_MODULES):
            files[_module_name(path, package_dir)] = path
    graph.modules = set(files)
    root = package_dir.name

    def resolve(name: str) -> str | None:
        while name not in graph.modules:
            if "." not in name:
                return None
            name = name.rsplit(".", 1)[0]
        return name

    for module, path in files.items():
        is_package = path.name == "__init__.py"
        for node, where in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                if node.level:
                    base = module.split(".")[: len(module.split(".")) + is_package - node.level]
                    stem = ".".join(base + ([node.module] if node.module else []))
                else:
                    stem = node.module or ""
                names = [f"{stem}.{alias.name}" if f"{stem}.{alias.name}" in graph.modules else stem
                         for alias in node.names]
            for name in dict.fromkeys(names):
                if name == root or name.startswith(root + "."):
                    target = resolve(name)
                    if target is not None:
                        graph.arrows.append(Arrow(module, target, node.lineno, where))
                else:
                    graph.external.append(Arrow(module, name.split(".")[0], node.lineno, where))
    return graph


def unit_of(module: str) -> str:
    """The contract's unit of a module."""
    if module in UNIT_OF_MODULE:
        return UNIT_OF_MODULE[module]
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def layer_of(layers: tuple[tuple[str, ...], ...]) -> dict[str, int]:
    """Unit → its layer's depth (0 is the top)."""
    return {unit: depth for depth, row in enumerate(layers) for unit in row}


def arrows_against_the_layers(graph: Graph, layers: tuple[tuple[str, ...], ...] = LAYERS,
                              exempt: Iterable[tuple[str, str]] = ()) -> list[str]:
    """Each import that points up the layers, or across to another unit of the same layer."""
    depth = layer_of(layers)
    found = []
    for arrow in graph.runtime(exempt=exempt):
        source, target = unit_of(arrow.source), unit_of(arrow.target)
        if source == target or source not in depth or target not in depth:
            continue
        if depth[target] <= depth[source]:
            kind = "up" if depth[target] < depth[source] else "across"
            found.append(f"{arrow.source}:{arrow.line} -> {arrow.target} ({arrow.where}; {kind}: {source} is "
                         f"layer {depth[source]}, {target} layer {depth[target]})")
    return sorted(found)


def _cycles(edges: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def import_cycles(graph: Graph, exempt: Iterable[tuple[str, str]] = ()) -> list[str]:
    """Cycles between modules and between units, each as the sorted names in it."""
    modules: dict[str, set[str]] = {}
    units: dict[str, set[str]] = {}
    for arrow in graph.runtime(exempt=exempt):
        modules.setdefault(arrow.source, set()).add(arrow.target)
        source, target = unit_of(arrow.source), unit_of(arrow.target)
        if source != target:
            units.setdefault(source, set()).add(target)
    return [f"modules: {', '.join(c)}" for c in _cycles(modules)] + \
        [f"units: {', '.join(c)}" for c in _cycles(units)]


def _heavy_loaded(graph: Graph) -> dict[str, set[str]]:
    """Module → the :data:`HEAVY` packages that importing it loads (module-level imports, followed through ecdysis
    modules)."""
    direct: dict[str, set[str]] = {m: set() for m in graph.modules}
    inner: dict[str, set[str]] = {m: set() for m in graph.modules}
    for arrow in graph.external:
        if arrow.where == "module" and arrow.target in HEAVY:
            direct[arrow.source].add(arrow.target)
    for arrow in graph.arrows:
        if arrow.where == "module":
            inner[arrow.source].add(arrow.target)
    loaded: dict[str, set[str]] = {}
    for module in graph.modules:
        seen, todo, heavy = {module}, [module], set()
        while todo:
            current = todo.pop()
            heavy |= direct[current]
            parents = [".".join(current.split(".")[:i]) for i in range(1, current.count(".") + 1)]
            for nxt in [*inner[current], *parents]:
                if nxt in graph.modules and nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        loaded[module] = heavy
    return loaded


def deferred_without_reason(graph: Graph, exempt: Iterable[tuple[str, str]] = ()) -> list[str]:
    """Imports inside functions that defer no heavy dependency: they belong at module level."""
    skip = set(exempt)
    loaded = _heavy_loaded(graph)
    found = []
    for arrow in graph.external:
        if arrow.where == "function" and arrow.target not in HEAVY:
            found.append(f"{arrow.source}:{arrow.line} imports {arrow.target} inside a function")
    for arrow in graph.arrows:
        if arrow.where != "function" or (arrow.source, arrow.target) in skip:
            continue
        if not loaded[arrow.target] - loaded[arrow.source]:
            found.append(f"{arrow.source}:{arrow.line} imports {arrow.target} inside a function, which defers no "
                         f"heavy dependency")
    return sorted(found)


def figures(graph: Graph, exempt: Iterable[tuple[str, str]] = ()) -> dict[str, int]:
    """The contract's figures: arrows against the layers, cycles, imports inside functions (statements, ecdysis and
    other packages together) and how many of those defer nothing heavy."""
    inside = {(a.source, a.line) for a in [*graph.arrows, *graph.external] if a.where == "function"}
    return {"arrows against the layers": len(arrows_against_the_layers(graph, exempt=exempt)),
            "import cycles": len(import_cycles(graph, exempt=exempt)),
            "imports inside functions": len(inside),
            "of which defer nothing heavy": len(deferred_without_reason(graph, exempt=exempt))}


# -- the contract, held ------------------------------------------------------------------------------------------

@functools.cache
def _graph() -> Graph:
    return scan(ROOT / "ecdysis")


def test_every_unit_stands_in_one_layer() -> None:
    units = {unit_of(m) for m in _graph().modules}
    listed = [unit for row in LAYERS for unit in row]
    assert len(listed) == len(set(listed)), "a unit stands in two layers"
    assert sorted(units - set(listed)) == [], "a new unit: give it its layer in LAYERS"
    assert sorted(set(listed) - units) == [], "a unit that no longer exists: take it out of LAYERS"


def test_no_import_points_up_or_across_the_layers() -> None:
    assert arrows_against_the_layers(_graph()) == []


def test_no_import_cycles_between_modules_or_units() -> None:
    assert import_cycles(_graph()) == []


def test_imports_inside_functions_only_defer_heavy_dependencies() -> None:
    assert deferred_without_reason(_graph(), exempt=DEFERRED.keys()) == []


def test_each_named_exception_still_has_its_import() -> None:
    """An exception whose import is gone goes too, so that the lists name only what is still there."""
    deferred = {(a.source, a.target) for a in _graph().arrows if a.where == "function"}
    assert sorted(set(DEFERRED) - deferred) == []


def test_the_package_never_imports_the_tests_or_the_perf_suite() -> None:
    graph = _graph()
    assert [f"{a.source}:{a.line}" for a in graph.external if a.target in ("tests", "perf")] == []


def test_the_check_reports_an_upward_import_a_cycle_and_a_needless_deferral(tmp_path: Path) -> None:
    """A synthetic package: ``low`` imports ``high`` inside a function (up the layers, and a cycle with ``high``'s
    own import of ``low``), ``high`` defers ``json`` for no reason, and ``a``/``b`` import each other."""
    package = tmp_path / "ecdysis"
    (package / "low").mkdir(parents=True)
    files = {
        "__init__.py": "",
        "low/__init__.py": "",
        "low/a.py": "from ecdysis.low import b\n",
        "low/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ecdysis import high\n"
                    "def f():\n    from ecdysis.low.a import x\n    import ray\n",
        "high.py": "from ecdysis.low import b\ndef g():\n    import json\n",
        "lower.py": "def h():\n    from ecdysis import high\n",
    }
    for name, text in files.items():
        (package / name).write_text(text)
    graph = scan(package)
    layers = (("high",), ("low", "lower"), ("ecdysis",))
    assert arrows_against_the_layers(graph, layers) == [
        "ecdysis.lower:2 -> ecdysis.high (function; up: lower is layer 1, high layer 0)"]
    assert import_cycles(graph) == ["modules: ecdysis.low.a, ecdysis.low.b"]
    assert deferred_without_reason(graph) == [
        "ecdysis.high:3 imports json inside a function",
        "ecdysis.low.b:5 imports ecdysis.low.a inside a function, which defers no heavy dependency",
        "ecdysis.lower:2 imports ecdysis.high inside a function, which defers no heavy dependency",
    ]
    assert arrows_against_the_layers(graph, layers, exempt={("ecdysis.lower", "ecdysis.high")}) == []
    (package / "high.py").write_text("from ecdysis import lower\n")
    assert "units: high, lower" in import_cycles(scan(package))
    (package / "lower.py").write_text("from ecdysis.low import a\n")
    assert arrows_against_the_layers(scan(package), layers) == [
        "ecdysis.lower:1 -> ecdysis.low.a (module; across: lower is layer 1, low layer 1)"]


if __name__ == "__main__":
    checkout = Path(sys.argv[sys.argv.index("--root") + 1]) if "--root" in sys.argv else ROOT
    measured = scan(checkout / "ecdysis")
    held = figures(measured, exempt=DEFERRED.keys())
    for name, value in figures(measured).items():
        print(f"{name}: {value} ({held[name]} with DEFERRED set aside)")
    for line in arrows_against_the_layers(measured) + import_cycles(measured) + (
            deferred_without_reason(measured) if "-v" in sys.argv else []):
        print("  ", line)
