#!/usr/bin/env python3
"""Import graph of the package: circles (strongly connected components) and module sizes.

Reads every ``.py`` under ``aryl_gym/`` and ``agents/`` (installed as ``aryl_gym.agents``) with
``ast`` and counts an import anywhere in a module (top level or inside a function) as an edge.
Imports under ``if TYPE_CHECKING:`` are left out (they never run) unless
``--with-type-checking``; ``from pkg import mod`` is an edge to ``pkg.mod``, and an import of
``a.b.c`` is also an edge to the package ``a.b`` (its ``__init__`` runs first) unless the importer
lives in ``a.b``. A circle is a strongly connected component of two or more modules.

    python scripts/import_graph.py [ROOT]        # ROOT: a checkout (default: this one)
    python scripts/import_graph.py --top 15      # also the biggest modules by lines
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path


def modules(root: Path) -> dict[str, Path]:
    out: dict[str, Path] = {}
    for base, pkg in ((root / "aryl_gym", "aryl_gym"), (root / "agents", "aryl_gym.agents")):
        for p in sorted(base.rglob("*.py")):
            rel = p.relative_to(base).with_suffix("")
            parts = [pkg, *rel.parts]
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = p
    return out


def edges(mods: dict[str, Path], type_checking: bool = False) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        tree = ast.parse(path.read_text(), str(path))
        is_pkg = path.name == "__init__.py"
        skip: set[int] = set()
        for node in ast.walk(tree):
            if not type_checking and isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                skip.update(id(n) for b in node.body for n in ast.walk(b))
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = mod.split(".")
                    base = base if is_pkg else base[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    prefix = ".".join(base + ([node.module] if node.module else []))
                else:
                    prefix = node.module or ""
                # ``from pkg import mod`` imports the module mod (the package's __init__ runs
                # first, as for any import, but that is not an edge of the graph)
                names = [f"{prefix}.{a.name}" if f"{prefix}.{a.name}" in mods else prefix
                         for a in node.names]
            for name in names:
                # the longest known module the name refers to
                parts = name.split(".")
                while parts and ".".join(parts) not in mods:
                    parts.pop()
                target = ".".join(parts)
                if target and target != mod and target != "aryl_gym":
                    graph[mod].add(target)
                # importing a module runs the __init__ of every package above it first: an edge
                # to each such package, unless the importer lives in it (its own package is
                # already being imported)
                for k in range(2, len(parts)):
                    pkg = ".".join(parts[:k])
                    if pkg in mods and pkg != mod and not mod.startswith(pkg + "."):
                        graph[mod].add(pkg)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of size >= 2."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]
    sys.setrecursionlimit(10_000)

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
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
    return sorted(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", nargs="?", default=str(Path(__file__).resolve().parent.parent))
    ap.add_argument("--top", type=int, default=0, help="list the N biggest modules by lines")
    ap.add_argument("--with-type-checking", action="store_true",
                    help="count imports under `if TYPE_CHECKING:` too (annotation-only edges)")
    a = ap.parse_args()
    root = Path(a.root)
    mods = modules(root)
    graph = edges(mods, a.with_type_checking)
    cs = circles(graph)
    print(f"{len(mods)} modules, {sum(len(v) for v in graph.values())} import edges, {len(cs)} circles")
    for c in cs:
        print("  circle: " + " <-> ".join(m.removeprefix("aryl_gym.") for m in c))
    if a.top:
        sizes = sorted(((len(p.read_text().splitlines()), m) for m, p in mods.items()), reverse=True)
        print("biggest modules (lines):")
        for n, m in sizes[: a.top]:
            print(f"  {n:5d}  {m}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
