"""Layers of the core: the simulator, the envs, the metrics and the agents import each other
without circles, and the simulator package stays free of gymnasium and the upper layers.

Every import counts: module level, inside functions and under ``TYPE_CHECKING``.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORE = ("aryl_gym.sim", "aryl_gym.envs", "aryl_gym.metrics", "aryl_gym.agents")


def _modules() -> dict[str, Path]:
    mods: dict[str, Path] = {}
    for base, pkg in ((ROOT / "aryl_gym", "aryl_gym"), (ROOT / "agents", "aryl_gym.agents")):
        for p in base.rglob("*.py"):
            rel = p.relative_to(base).with_suffix("")
            if pkg == "aryl_gym" and rel.parts[0] == "agents":
                continue
            parts = [pkg, *rel.parts]
            if parts[-1] == "__init__":
                parts = parts[:-1]
            mods[".".join(parts)] = p
    return mods


def _imports(path: Path, known: dict[str, Path]) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        out.update(n for n in names if n in known)
    return out


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    return {m: _imports(p, mods) - {m} for m, p in mods.items()}


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
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

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def _core(m: str) -> bool:
    return any(m == c or m.startswith(c + ".") for c in CORE)


def test_no_import_circle_in_the_core():
    edges = _graph()
    core = {m: {w for w in ws if _core(w)} for m, ws in edges.items() if _core(m)}
    # the policy registry (aryl_gym.agents <-> base <-> fifo) is not part of this check
    bad = [c for c in _cycles(core) if not all(m.startswith("aryl_gym.agents") for m in c)]
    assert bad == []


def test_the_detector_finds_a_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_simulator_imports_only_its_own_layer():
    edges = _graph()
    allowed = {"aryl_gym.config", "aryl_gym.metrics", "aryl_gym.progress"}
    for m, ws in edges.items():
        if m.startswith("aryl_gym.sim"):
            outside = {w for w in ws if not w.startswith("aryl_gym.sim")} - allowed
            assert not outside, f"{m} imports {sorted(outside)}"
        if m == "aryl_gym.metrics":
            assert not {w for w in ws if w.startswith("aryl_gym.sim.engine")}
    for p in (ROOT / "aryl_gym" / "sim").glob("*.py"):
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.Import):
                assert not any(a.name.startswith("gymnasium") for a in node.names), p
            elif isinstance(node, ast.ImportFrom):
                assert not (node.module or "").startswith("gymnasium"), p
