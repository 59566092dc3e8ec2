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
    base.load_plugins()  # the built-ins are registered before the registry is saved
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


FORMAT_PLUGIN = '''
"""A JSON-lines trace format: one {"t": submit_s, "gpus": n, "dur": seconds} object per line."""
import json

import numpy as np

from aryl_gym.workload.formats import ReadRequest, TraceFormat
from aryl_gym.workload.traces_formats import RowChecks, TraceRows


def _read(req: ReadRequest) -> TraceRows:
    rows = [json.loads(line) for line in req.path.read_text().splitlines() if line.strip()]
    req.report.rows = len(rows)
    n = len(rows)
    submit = np.array([float(r["t"]) for r in rows])
    gpus = np.array([int(r["gpus"]) for r in rows], dtype=np.int64)
    dur = np.array([float(r["dur"]) for r in rows])
    line = np.arange(1, n + 1, dtype=np.int64)
    chk = RowChecks(req.path, line, req.report, req.skip)
    chk.flag(dur <= 0, "dur", "bad_duration", lambda i: f"duration {dur[i]:g} <= 0", "give a positive dur")
    keep = np.flatnonzero(chk.finish())
    name = np.array([f"job{i}" for i in range(n)], dtype=object)
    return TraceRows(line=line, submit=submit, gpus=gpus, duration=dur,
                     key=np.arange(n, dtype=np.int64), name=name).take(keep)


FORMAT = TraceFormat(name="jsonl", read=_read, description="JSON lines (t, gpus, dur)",
                     time_column="t", guess=lambda p: p.endswith(".jsonl"))
'''


def test_trace_format_plugin_is_one_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """A new trace format is one module: installed through ``aryl_gym.trace_formats`` it is
    listed, guessed from the file name and loaded by ``trace-info`` and ``load_trace``."""
    from aryl_gym.cli import main
    from aryl_gym.workload import formats
    from aryl_gym.workload.traces import load_trace

    site = tmp_path / "site"
    site.mkdir()
    (site / "jsonl_format.py").write_text(FORMAT_PLUGIN)
    info = site / "jsonl_format-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: jsonl-format\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{formats.ENTRY_POINT_GROUP}]\njsonl = jsonl_format\n")
    monkeypatch.syspath_prepend(str(site))
    saved = dict(formats._FORMATS)
    try:
        assert "jsonl" in formats.trace_formats(reload=True)
        trace = tmp_path / "jobs.jsonl"
        trace.write_text('{"t": 0, "gpus": 1, "dur": 600}\n{"t": 60, "gpus": 2, "dur": 1200}\n'
                         '{"t": 90, "gpus": 1, "dur": -5}\n')
        assert formats.guess_format(str(trace)) == "jsonl"
        jobs, report = load_trace(trace, "jsonl", skip_bad_rows=True)
        assert [j.submit for j in jobs] == [0.0, 60.0]
        assert report.skipped == {"bad_duration": 1}
        rc = main(["trace-info", str(trace), "--skip-bad-rows", "--json"])
        out = json.loads(capsys.readouterr().out)
        assert rc == 0 and out["stats"]["jobs"] == 2
    finally:
        formats._FORMATS.clear()
        formats._FORMATS.update(saved)
        sys.modules.pop("jsonl_format", None)


def test_unknown_run_option_is_named() -> None:
    from aryl_gym.leaderboard.runner import run_options

    assert run_options(workers=3).workers == 3
    with pytest.raises(TypeError, match="unknown run option 'worker'; options: .*workers"):
        run_options(worker=3)
