"""Registries: a policy installed by another distribution (entry-point group
``aryl_gym.policies``) runs through the CLI with no edit to this package."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from aryl_gym.agents import base

PLUGIN = '''
from aryl_gym.agents.fifo import FifoPolicy


class LastInFirstOut(FifoPolicy):
    """Newest queued job first (a toy order no built-in policy uses)."""

    def __init__(self):
        super().__init__(backfill=True, name="lifo-plugin")

    def _queue(self, view):
        return sorted(view.queued(), reverse=True)


def broken():
    raise RuntimeError("never built")
'''


def _install_plugin(root: Path, entry_points: str) -> Path:
    """A minimal installed distribution: a module plus a ``*.dist-info`` with entry points,
    exactly what ``pip install`` leaves in site-packages."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "lifo_plugin.py").write_text(PLUGIN)
    info = root / "lifo_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: lifo-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{base.ENTRY_POINT_GROUP}]\n{entry_points}")
    return root


@pytest.fixture
def plugin_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = _install_plugin(
        tmp_path / "site",
        "lifo = lifo_plugin:LastInFirstOut\nghost = lifo_plugin:nothing_here\n",
    )
    monkeypatch.syspath_prepend(str(root))
    saved = dict(base._REGISTRY)
    yield root
    base._REGISTRY.clear()
    base._REGISTRY.update(saved)
    base._BROKEN.clear()
    sys.modules.pop("lifo_plugin", None)


def test_plugin_policy_is_registered_and_runs(plugin_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from aryl_gym.cli import main

    base.load_plugins(force=True)
    assert "lifo" in base.policy_names()
    pol = base.make_policy("lifo")
    assert pol.name == "lifo-plugin"
    rc = main(["simulate", "--scenario", "tiny", "--policy", "lifo", "--no-progress", "--json"])
    out = capsys.readouterr().out
    assert rc == 0
    res = json.loads(out)
    assert res["jobs_completed"] > 0
    # a different order than FIFO-with-backfill: the episode differs
    rc = main(["simulate", "--scenario", "tiny", "--policy", "fifo-backfill", "--no-progress", "--json"])
    ref = json.loads(capsys.readouterr().out)
    assert rc == 0 and ref["avg_jct"] != res["avg_jct"]


def test_broken_plugin_is_reported_by_name(plugin_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from aryl_gym.cli import main

    base.load_plugins(force=True)
    assert "ghost" not in base.policy_names()  # the others still load
    rc = main(["simulate", "--scenario", "tiny", "--policy", "ghost", "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err
    assert "plugin 'ghost' is installed but broken" in err and "lifo_plugin:nothing_here" in err


def test_plugin_found_by_a_fresh_process(tmp_path: Path) -> None:
    """The real discovery path: a new interpreter with the plugin on its path."""
    root = _install_plugin(tmp_path / "site", "lifo = lifo_plugin:LastInFirstOut\n")
    code = "from aryl_gym.agents import make_policy; print(make_policy('lifo').name)"
    env_path = f"{root}"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True,
        env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"}, check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "lifo-plugin"


def test_fifo_policy_names_any_order() -> None:
    from aryl_gym.agents.fifo import FifoPolicy

    assert FifoPolicy().name == "fifo"
    assert FifoPolicy(backfill=True).name == "fifo-backfill"
    assert FifoPolicy(backfill=True, order="sjf").name == "sjf"
    assert FifoPolicy(order="sjf", name="mine").name == "mine"
    with pytest.raises(ValueError, match="unknown queue order 'ljf'.*fifo, sjf"):
        FifoPolicy(order="ljf")
