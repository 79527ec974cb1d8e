"""Imports point one way (ops <- memory <- construct / retrieve <- engine / service / cli): each
package's modules may import only the packages listed for it. Read from the source with an AST
walk (no import needed), so a new upward import fails here."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "xmemory_gpu"
TOP = {"text", "config", "tokens"}  # neutral modules every layer may use

# package -> the xmemory_gpu packages its modules may import (besides itself and TOP)
ALLOWED: dict[str, set[str]] = {
    "ops": set(),
    "embed": set(),
    "llm": {"ops"},
    "memory": {"ops"},
    "datasets": {"memory"},
    "construct": {"ops", "memory", "embed", "llm", "datasets"},
    "retrieve": {"ops", "memory", "embed", "llm"},
    "eval": {"ops", "memory", "embed", "llm", "datasets", "construct", "retrieve"},
    "dist": {"ops", "memory", "embed", "llm", "datasets", "construct"},
    "engine": {"ops", "memory", "embed", "llm", "datasets", "construct", "retrieve"},
    "service": {"ops", "memory", "embed", "llm", "datasets", "construct", "retrieve", "engine"},
    "integrations": {"ops", "memory", "embed", "llm", "datasets", "construct", "retrieve", "engine", "service"},
    "cli": {"ops", "memory", "embed", "llm", "datasets", "construct", "retrieve", "eval", "dist", "engine", "service",
            "integrations"},
}


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, top-level xmemory_gpu package or module) for every import in ``path``."""
    rel = path.relative_to(PKG).with_suffix("").parts
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(rel[: len(rel) - node.level])
                mod = base + (node.module.split(".") if node.module else [])
                names = [mod + [a.name] for a in node.names] if not node.module else [mod]
            elif node.module and node.module.startswith("xmemory_gpu"):
                names = [node.module.split(".")[1:]]
            else:
                continue
            out += [(node.lineno, n[0]) for n in names if n]
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name.split(".")[1]) for a in node.names if a.name.startswith("xmemory_gpu.")]
    return out


def _layer(path: Path) -> str:
    parts = path.relative_to(PKG).parts
    return parts[0] if len(parts) > 1 else Path(parts[0]).stem


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_imports_point_one_way(layer: str) -> None:
    bad = []
    for path in sorted(PKG.rglob("*.py")):
        if _layer(path) != layer:
            continue
        for line, target in _imports(path):
            if target in (layer, *TOP) or target.startswith("_") or target == "__init__":
                continue
            if target not in ALLOWED[layer]:
                bad.append(f"{path.relative_to(PKG.parent)}:{line} imports xmemory_gpu.{target}")
    assert not bad, "upward or sideways imports:\n" + "\n".join(bad)


def test_every_package_has_a_rule() -> None:
    packages = {p.name for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert packages <= set(ALLOWED), f"add a layering rule for {sorted(packages - set(ALLOWED))}"


def test_the_walk_sees_relative_and_absolute_imports(tmp_path: Path) -> None:
    """The checker itself: an upward import in a retrieve module is found."""
    mod = PKG / "retrieve" / "context.py"
    found = {t for _, t in _imports(mod)}
    assert {"memory", "tokens", "text"} <= found
