"""Layers of the core: the simulator, the envs, the metrics and the agents import each other
without circles, and the simulator package stays free of gymnasium and the upper layers.

Every import counts: module level, inside functions and under ``TYPE_CHECKING``.
"""

from __future__ import annotations

import ast
from pathlib import Path

from .helpers import load_script

ROOT = Path(__file__).resolve().parents[1]
CORE = ("aryl_gym.sim", "aryl_gym.envs", "aryl_gym.metrics", "aryl_gym.agents")


def _load_import_graph():  # scripts/import_graph.py holds the graph builder and Tarjan's algorithm
    return load_script("import_graph")


_IG = _load_import_graph()


def _graph() -> dict[str, set[str]]:
    return _IG.edges(_IG.modules(ROOT), type_checking=True)


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    return _IG.circles(edges)


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
