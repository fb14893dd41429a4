"""The package's shape, from its source: no import cycle, no module over 400 lines, nothing imported from
lab/ or scripts/, and layers that import only downward (../shared/ARCHITECTURE.md, docs/architecture.md).

Imports are read with ast: module-level and function-level imports both count (a function-level import
is the usual way to hide a cycle), relative imports are resolved, and `from pkg import name` counts as
an import of the module pkg.name when that is a module, else of pkg. A package's own __init__ is not
counted as imported by its submodules (Python runs it first either way; a cycle through it is one
only when it is spelled out)."""
from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "attnbench"
MAX_LINES = 400

# Lowest first: a module imports only from its own layer or one below it. `model` (model steps, a
# second job type of the runner) is not in ARCHITECTURE.md's list; it uses backends and measure and
# is used by runner, report and cli, so it sits between measure and runner.
LAYERS = ("workloads", "backends", "measure", "model", "runner", "store", "selftest", "analysis", "report", "cli",
          "__main__")
# Importable from every layer; they import only one another (and the standard library).
SHARED = ("status", "record", "procinfo", "__init__")

# Edges that break the layer order today, each with why it is still here. Any other upward edge fails
# the test, and so does an entry here that no longer exists (the list only shrinks).
ALLOWED = {
    # The runner writes rows into the store and resumes from it: ARCHITECTURE.md lists store above runner,
    # the code has had the runner on top of the store since the first row sink (conduct, sink). The
    # session (the run's store lifecycle) and the model job type (jobs, jobs_model) are new this week on
    # the same edge. Either the list's order or the dependency is to change; until then, these and no more.
    ("attnbench.runner.conduct", "attnbench.store.db"),
    ("attnbench.runner.sink", "attnbench.store.db"),
    ("attnbench.runner.session", "attnbench.store.db"),
    ("attnbench.runner.jobs", "attnbench.store.db"),
    ("attnbench.runner.jobs", "attnbench.store.model_rows"),
    ("attnbench.runner.jobs_model", "attnbench.store.db"),
    ("attnbench.runner.jobs_model", "attnbench.store.model_rows"),
    ("attnbench.runner.sink", "attnbench.store.counters"),  # issue 39: an attempt's counters row beside its row
    # record/attempts.py declares the workload columns from the workload axes (one declaration per axis), so the
    # shared record module stands on workloads rather than below it.
    ("attnbench.record.attempts", "attnbench.workloads.axes"),
}


# ---- reading a package's imports -----------------------------------------------------------------
def modules(src: Path, package: str) -> dict[str, Path]:
    """Dotted module name -> file, for every module of `package` under `src` (a package is its __init__)."""
    out = {}
    for path in sorted((src / package).rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """Every module name `name` imports, anywhere in its file, relative imports resolved."""
    is_pkg = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".") if is_pkg else name.split(".")[:-1]
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            for a in node.names:
                sub = f"{target}.{a.name}"
                found.add(sub if sub in known else target)
    return found


def import_graph(src: Path, package: str) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (itself left out)."""
    known = modules(src, package)
    return {m: {d for d in imports(m, p, known) if d in known and d != m} for m, p in known.items()}


def external_imports(src: Path, package: str) -> dict[str, set[str]]:
    """Module -> the top-level names it imports from outside the package."""
    known = modules(src, package)
    return {m: {d.split(".")[0] for d in imports(m, p, known) if d.split(".")[0] != package} for m, p in known.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles: strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        m = stack.pop()
                        on_stack.discard(m)
                        component.append(m)
                        if m == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def oversized(src: Path, package: str, limit: int = MAX_LINES) -> dict[str, int]:
    """Modules longer than `limit` lines, with their length."""
    lengths = {m: len(p.read_text().splitlines()) for m, p in modules(src, package).items()}
    return {m: n for m, n in lengths.items() if n > limit}


def layer(module: str) -> str:
    """The layer of a module: its first name under the package ('__init__' for the package itself)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def upward(graph: dict[str, set[str]], layers=LAYERS, shared=SHARED) -> set[tuple[str, str]]:
    """Edges that import from a higher layer, from a layer the order does not name, or out of a shared
    module into a layer."""
    bad = set()
    for m, deps in graph.items():
        for d in deps:
            lm, ld = layer(m), layer(d)
            if lm == ld or ld in shared:
                continue
            if lm in shared or lm not in layers or ld not in layers or layers.index(ld) > layers.index(lm):
                bad.add((m, d))
    return bad


# ---- the package ---------------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def _graph() -> dict[str, set[str]]:
    return import_graph(SRC, PACKAGE)


def test_no_import_cycle():
    assert cycles(_graph()) == []


def test_no_module_over_400_lines():
    assert oversized(SRC, PACKAGE) == {}


def test_the_package_never_imports_lab_or_scripts():
    offenders = {m: sorted(ext & {"lab", "scripts"}) for m, ext in external_imports(SRC, PACKAGE).items()}
    assert {m: e for m, e in offenders.items() if e} == {}


def test_every_layer_is_named():
    named = set(LAYERS) | set(SHARED)
    assert {layer(m) for m in modules(SRC, PACKAGE)} <= named


def test_layers_import_only_downward():
    bad = upward(_graph())
    assert sorted(bad - ALLOWED) == []
    assert sorted(ALLOWED - bad) == [], "an allowed edge is gone: remove it from ALLOWED"


# ---- the checks themselves fail when they must ---------------------------------------------------
def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = tmp_path / "pkg" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_a_planted_cycle_through_a_function_level_relative_import_is_found(tmp_path):
    src = _package(tmp_path, {
        "__init__.py": "",
        "low/__init__.py": "",
        "low/a.py": "from ..high import b\n",
        "high/__init__.py": "",
        # a function-level import closes the loop: it counts as much as a module-level one
        "high/b.py": "def f():\n    from ..low.a import x\n    return x\n",
        "high/c.py": "from . import b\n",  # imports b, is in no cycle
    })
    assert cycles(import_graph(src, "pkg")) == [["pkg.high.b", "pkg.low.a"]]


def test_a_longer_cycle_and_a_clean_package(tmp_path):
    src = _package(tmp_path, {"__init__.py": "", "a.py": "import pkg.b\n", "b.py": "from pkg import c\n",
                              "c.py": "from .a import name\n"})
    assert cycles(import_graph(src, "pkg")) == [["pkg.a", "pkg.b", "pkg.c"]]
    (src / "pkg" / "c.py").write_text("import os\n")
    assert cycles(import_graph(src, "pkg")) == []


def test_a_planted_oversized_module_is_found(tmp_path):
    src = _package(tmp_path, {"__init__.py": "", "small.py": "x = 1\n" * MAX_LINES,
                              "big.py": "x = 1\n" * (MAX_LINES + 1)})
    assert oversized(src, "pkg") == {"pkg.big": MAX_LINES + 1}


def test_a_planted_lab_import_and_upward_import_are_found(tmp_path):
    src = _package(tmp_path, {"__init__.py": "", "status.py": "", "workloads/__init__.py": "",
                              "workloads/w.py": "from ..status import X\n",
                              "runner/__init__.py": "", "runner/r.py": "from ..workloads import w\n",
                              "backends/__init__.py": "",
                              "backends/b.py": "def f():\n    import lab.probe\n    from ..runner import r\n"})
    assert external_imports(src, "pkg")["pkg.backends.b"] == {"lab"}
    assert upward(import_graph(src, "pkg")) == {("pkg.backends.b", "pkg.runner.r")}
