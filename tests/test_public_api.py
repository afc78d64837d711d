"""The public surface is small, sorted and importable; layers import downward only."""

from __future__ import annotations

import ast
from pathlib import Path

import polyprof

SRC = Path(polyprof.__file__).resolve().parent

# Layer order (DESIGN.md 3): a module may import only its own layer or lower ones.
# Only layers that exist; a new package takes its place here when it is added
# (the fleet store goes after render, the web view after the store).
LAYERS = ["errors", "wire", "model", "formats", "symbolize", "selection", "api", "analysis", "render", "web", "cli"]
TOP_LEVEL = {"__init__", "__main__"}  # the front door and ``python -m polyprof`` may import anything


def test_all_is_sorted_and_resolves():
    assert polyprof.__all__ == sorted(polyprof.__all__)
    for name in polyprof.__all__:
        assert getattr(polyprof, name) is not None


def test_read_and_write_are_named_alike_across_formats():
    from polyprof.formats import registry

    for spec in registry.available():
        module = spec.load()
        if spec.can_read:
            assert callable(module.read) and callable(module.sniff), spec.name
        if spec.can_write:
            assert callable(module.write), spec.name


def _layer(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "polyprof" or len(parts) < 2:
        return None
    head = parts[1]
    return head if head in LAYERS else None


def _modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name)."""
    out = {}
    for path in SRC.rglob("*.py"):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """The polyprof modules ``path`` imports, at any depth (inside functions
    too) except under ``if TYPE_CHECKING:``; ``from pkg import sub`` counts as
    importing the submodule ``sub``, not the package."""
    out: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                out.add(sub if sub in modules else node.module)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)
    visit(ast.parse(path.read_text()))
    return {m for m in out if m.startswith("polyprof")}


def test_layers_are_the_packages_that_exist():
    present = {p.stem if p.suffix == ".py" else p.name for p in SRC.iterdir()
               if (p.suffix == ".py" or (p / "__init__.py").exists())}
    assert present - TOP_LEVEL == set(LAYERS)


def test_layers_import_downward_only():
    problems = []
    modules = _modules()
    for name, path in modules.items():
        own = _layer(name)
        if own is None:
            continue
        for target in filter(None, map(_layer, _imports(path, modules))):
            if LAYERS.index(target) > LAYERS.index(own):
                problems.append(f"{name}: {own} imports {target}")
    assert not problems, problems


# Cycles that exist today and are being untangled (#10 item 9, the Perfetto
# package); this list may only shrink.
KNOWN_CYCLES = [
    {"_build", "_chrome", "_heap", "_perf", "_reader", "_stack"},
    {"_writer", "_writer_dumps", "_writer_stack"},
]
KNOWN_CYCLES = [{f"polyprof.formats.perfetto.{m}" for m in c} for c in KNOWN_CYCLES]


def _cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative enough for a package)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[set[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(comp)
    for v in graph:
        if v not in index:
            connect(v)
    return out


def test_no_import_cycles_inside_a_package():
    """Within one package (its ``__init__`` and modules, not its subpackages'
    insides), no module may import one that imports it back, even from inside
    a function."""
    modules = _modules()

    def package(m: str) -> str:  # a package's __init__ belongs with its modules
        return m if modules[m].name == "__init__.py" else m.rsplit(".", 1)[0]
    graph = {name: {m for m in _imports(path, modules) if m in modules and m != name and package(m) == package(name)}
             for name, path in modules.items()}
    found = _cycles(graph)
    new = [sorted(c) for c in found if not any(c <= known for known in KNOWN_CYCLES)]
    assert not new, f"import cycles: {new}"
    gone = [sorted(k) for k in KNOWN_CYCLES if not any(len(c & k) > 1 for c in found)]
    assert not gone, f"these cycles are gone: remove them from KNOWN_CYCLES: {gone}"
