"""Layers: no module of the package imports itself back through a circle, and the simulator
package stays free of gymnasium and the upper layers.

Every import counts: module level, inside functions and under ``TYPE_CHECKING``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from .helpers import load_script

ROOT = Path(__file__).resolve().parents[1]


def _load_import_graph():  # scripts/import_graph.py holds the graph builder and Tarjan's algorithm
    return load_script("import_graph")


_IG = _load_import_graph()


def _graph() -> dict[str, set[str]]:
    return _IG.edges(_IG.modules(ROOT), type_checking=True)


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    return _IG.circles(edges)


def test_no_import_circle_in_the_package():
    """Every module of ``aryl_gym`` and ``agents`` (installed as ``aryl_gym.agents``): a circle
    means a shared piece sits on the wrong floor; move it down."""
    assert _cycles(_graph()) == []


def test_the_detector_finds_a_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_simulator_imports_only_its_own_layer():
    edges = _graph()
    # aryl_gym.families: names only, a leaf that imports nothing of the package
    allowed = {"aryl_gym.config", "aryl_gym.metrics", "aryl_gym.progress", "aryl_gym.families"}
    assert not {w for w in edges.get("aryl_gym.families", set()) if w.startswith("aryl_gym")}
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


#: modules whose function-local imports are not yet audited (none: every package module is)
UNAUDITED: set[str] = set()


def test_function_local_imports_say_why():
    """An import inside a function is there to keep a costly or optional module out of an import
    (torch, Ray, matplotlib, pydantic, pyarrow, tqdm, a command's work at CLI start-up): a
    comment on it, or on the group of imports it belongs to, says which."""
    silent = []
    for mod, path in _IG.modules(ROOT).items():
        if mod in UNAUDITED:
            continue
        lines = path.read_text().splitlines()
        tree = ast.parse("\n".join(lines))
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if not isinstance(node, (ast.Import, ast.ImportFrom)):
                    continue
                i = node.lineno - 1
                said = "#" in lines[i]
                j = i - 1
                while not said and j >= 0:
                    s = lines[j].strip()
                    if s.startswith("#"):
                        said = True
                    elif s == "" or s.startswith(("from ", "import ")):
                        j -= 1
                        continue
                    break
                if not said:
                    silent.append(f"{mod}:{node.lineno}: {ast.unparse(node)}")
    assert silent == []


def test_git_commit_is_defined_once() -> None:
    """One implementation of the commit stamp: training's (``-dirty`` when tracked files changed)
    calls the leaderboard's."""
    import subprocess
    from pathlib import Path

    from aryl_gym.provenance import git_commit
    from aryl_gym.train.runner import git_commit as train_commit

    root = Path(__file__).resolve().parents[1]
    if not (root / ".git").exists():
        pytest.skip("not a git checkout")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True).stdout.strip()
    assert git_commit() == head
    assert train_commit() in (head, head + "-dirty")
    pkg = Path(__file__).resolve().parents[1] / "aryl_gym"
    defs = [p for p in pkg.rglob("*.py") if "def git_commit(" in p.read_text(encoding="utf-8")]
    assert len(defs) == 2  # the implementation and training's one-line wrapper
