"""Imports point one way (ops <- memory <- construct / retrieve <- engine / service / cli): each
package's modules may import only the packages listed for it. Read from the source with an AST
walk (no import needed), so a new upward import fails here."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "xmemory_gpu"
TOP = {"text", "config", "tokens", "api", "heap"}  # neutral modules every layer may use

# package -> the xmemory_gpu packages its modules may import (besides itself and TOP)
ALLOWED: dict[str, set[str]] = {
    "ops": set(),
    "embed": {"ops"},  # the CPU encoder's dense layers run on ops.linear
    "llm": {"ops"},
    "memory": {"ops"},
    "datasets": {"memory"},
    "construct": {"ops", "memory", "embed", "llm", "datasets"},
    "retrieve": {"ops", "memory", "embed", "llm"},
    "eval": {"ops", "memory", "embed", "llm", "datasets", "construct", "retrieve"},
    "distributed": {
        "ops",
        "memory",
        "embed",
        "llm",
        "datasets",
        "construct",
        "retrieve",
        "engine",
        "service",
    },
    "engine": {"ops", "memory", "embed", "llm", "datasets", "construct", "retrieve"},
    "service": {"ops", "memory", "embed", "llm", "datasets", "construct", "retrieve", "engine"},
    "integrations": {
        "ops",
        "memory",
        "embed",
        "llm",
        "datasets",
        "construct",
        "retrieve",
        "engine",
        "service",
    },
    "cli": {
        "ops",
        "memory",
        "embed",
        "llm",
        "datasets",
        "construct",
        "retrieve",
        "eval",
        "distributed",
        "engine",
        "service",
        "integrations",
    },
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
            out += [
                (node.lineno, a.name.split(".")[1]) for a in node.names if a.name.startswith("xmemory_gpu.")
            ]
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


ROOT = PKG.parent


def _ops_modules(path: Path) -> list[tuple[int, list[str]]]:
    """(line, path under xmemory_gpu.ops) of every import of an ops module in ``path`` (absolute, or
    relative from inside the package)."""
    rel = path.relative_to(PKG).with_suffix("").parts if path.is_relative_to(PKG) else None
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level and rel is not None:
                mod = list(rel[: len(rel) - node.level]) + (node.module.split(".") if node.module else [])
            elif node.module and node.module.startswith("xmemory_gpu."):
                mod = node.module.split(".")[1:]
            else:
                continue
            if mod[:1] == ["ops"]:
                out += [(node.lineno, mod[1:] + [a.name]) for a in node.names]
        elif isinstance(node, ast.Import):
            out += [
                (node.lineno, a.name.split(".")[2:])
                for a in node.names
                if a.name.startswith("xmemory_gpu.ops.")
            ]
    return out


def _private_ops_imports(path: Path) -> list[str]:
    """``line: xmemory_gpu.ops.<path>`` for each import in ``path`` of a private ops module or name."""
    return [
        f"{line}: xmemory_gpu.ops.{'.'.join(parts)}"
        for line, parts in _ops_modules(path)
        if any(p.startswith("_") and p != "__init__" for p in parts)
    ]


def test_no_private_ops_module_is_imported_from_outside_ops() -> None:
    """Outside ``xmemory_gpu/ops`` and ``tests/ops``, code uses the ops' public names only: no module
    path component under ``ops`` that starts with ``_`` (``ops._dispatch``, ``ops.knn._torch``), and no
    private name imported from an ops module. Benchmarks included."""
    files = [p for p in PKG.rglob("*.py") if "ops" not in p.relative_to(PKG).parts[:1]]
    files += [
        p for p in (ROOT / "tests").rglob("*.py") if "ops" not in p.relative_to(ROOT / "tests").parts[:1]
    ]
    files += list((ROOT / "benchmarks").rglob("*.py"))
    bad = [f"{path.relative_to(ROOT)}:{hit}" for path in sorted(files) for hit in _private_ops_imports(path)]
    assert not bad, "private ops modules or names imported from outside ops:\n" + "\n".join(bad)


def test_the_private_ops_walk_sees_every_import_form(tmp_path: Path) -> None:
    """The checker itself: absolute ``from``/``import`` forms and relative imports inside the package."""
    mod = tmp_path / "m.py"
    mod.write_text(
        "import xmemory_gpu.ops.knn._torch\n"
        "from xmemory_gpu.ops._dispatch import host\n"
        "from xmemory_gpu.ops import _arrays\n"
        "from xmemory_gpu.ops.knn import _GRAPH_IMPLS\n"
        "from xmemory_gpu.ops.devices import host\n"
        "from xmemory_gpu.ops import knn_graph\n"
        "import xmemory_gpu.ops.knn\n",
        encoding="utf-8",
    )
    assert [h.split(": ")[1] for h in _private_ops_imports(mod)] == [
        "xmemory_gpu.ops.knn._torch",
        "xmemory_gpu.ops._dispatch.host",
        "xmemory_gpu.ops._arrays",
        "xmemory_gpu.ops.knn._GRAPH_IMPLS",
    ]
    found = {".".join(parts) for _, parts in _ops_modules(PKG / "retrieve" / "grouped.py")}
    assert {"checks.csr_offsets", "devices.host", "knn.knn_search"} <= found  # relative imports resolved


def _module_of(parts: list[str]) -> str | None:
    """The package module a dotted path (relative to the package) names: a module file, a package's
    ``__init__``, or the module an attribute is imported from."""
    for n in range(len(parts), 0, -1):
        base = PKG.joinpath(*parts[:n])
        if base.with_suffix(".py").is_file():
            return ".".join(parts[:n])
        if (base / "__init__.py").is_file():
            return ".".join(parts[:n] + ["__init__"])
    return None


def _module_graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports (anywhere in it: a lazy import counts too)."""
    graph: dict[str, set[str]] = {}
    for path in sorted(PKG.rglob("*.py")):
        rel = list(path.relative_to(PKG).with_suffix("").parts)
        name = ".".join(rel)
        deps = graph.setdefault(name, set())
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[list[str]] = []
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    pkg = rel[:-1] if rel[-1] != "__init__" else rel[:-1]
                    base = pkg[: len(pkg) - (node.level - 1)] + (
                        node.module.split(".") if node.module else []
                    )
                elif node.module and node.module.startswith("xmemory_gpu"):
                    base = node.module.split(".")[1:]
                else:
                    continue
                targets = [base + [a.name] for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name.split(".")[1:] for a in node.names if a.name.startswith("xmemory_gpu.")]
            for t in targets:
                mod = _module_of(t)
                if mod is not None and mod != name:
                    deps.add(mod)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_circle() -> None:
    """No two modules import each other, directly or through others (a package's ``__init__``
    re-exporting its modules is not a circle unless one of them imports the ``__init__`` back)."""
    cycles = _cycles(_module_graph())
    assert not cycles, "import circles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_the_circle_check_finds_one() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
