"""The public surface is small, sorted and importable; layers import downward only."""

from __future__ import annotations

import ast
from pathlib import Path

import polyprof

SRC = Path(polyprof.__file__).resolve().parent

# Layer order (DESIGN.md 3): a module may import only its own layer or lower ones.
LAYERS = ["errors", "wire", "model", "formats", "symbolize", "selection", "api", "analysis", "render", "store", "web", "cli"]


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


def test_layers_import_downward_only():
    problems = []
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC.parent).with_suffix("")
        own = _layer(".".join(rel.parts))
        if own is None:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                target = _layer(node.module)
            elif isinstance(node, ast.Import):
                target = next((_layer(a.name) for a in node.names if _layer(a.name)), None)
            else:
                continue
            if target and LAYERS.index(target) > LAYERS.index(own):
                problems.append(f"{rel}: {own} imports {target}")
    assert not problems, problems
