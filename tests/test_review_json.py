"""Review of the machine-readable outputs: every ``--json`` output is one strict JSON object on
stdout (no NaN / Infinity tokens, which other languages' parsers refuse), and every JSON file a
command writes is strict JSON, also in degenerate runs (episodes cut short, gaps over a zero)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from tests.test_hostile_v2 import _run  # aryl-gym ARGV: exit code, stdout, stderr


def _refuse(c: str) -> None:
    raise ValueError(f"non-standard JSON constant {c}")


def strict_loads(text: str) -> Any:
    """``json.loads`` that refuses NaN, Infinity and -Infinity."""
    return json.loads(text, parse_constant=_refuse)


def _one_object(out: str) -> dict[str, Any]:
    """stdout holds exactly one strict JSON object and nothing else."""
    d = strict_loads(out)  # trailing text (a table, a second object) fails here
    assert isinstance(d, dict)
    return d


def _cut_scenario(tmp_path: Path) -> Path:
    """``tiny`` with a 3-minute horizon: every episode ends with all its jobs unfinished."""
    from aryl_gym.config import configs_dir

    text = (configs_dir() / "scenarios" / "tiny.yaml").read_text()
    text = text.replace("name: tiny", "name: tinycut").replace("  interval: 60.0", "  interval: 60.0\n  horizon_hours: 0.05")
    p = tmp_path / "cut.yaml"
    p.write_text(text)
    return p


def test_leaderboard_list_json_includes_the_reclaim_suite(capsys: pytest.CaptureFixture[str]) -> None:
    # was: exit 2 and nothing on stdout (the reclaim suite was loaded as an episode suite)
    rc, out, err = _run(["leaderboard", "--list", "--json"], capsys)
    assert rc == 0, err[-400:]
    d = _one_object(out)
    assert d["reclaim"]["kind"] == "reclaim"
    assert "optimum" in d["reclaim"]["entrants"]
    assert d["quick"]["kind"] == "episodes"
    for entry in d.values():
        assert {"scenarios", "seeds", "entrants", "description"} <= set(entry)


def test_reclaim_suite_json_is_one_strict_object(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # was: the text table on stdout with --json, and "gap": Infinity in leaderboard.json where
    # the optimum preempts nothing and the entrant does
    from aryl_gym.leaderboard import reclaim_suite as rs

    suite = tmp_path / "r.yaml"
    suite.write_text(
        "name: r\nkind: reclaim\ndescription: tiny\n"
        "instances:\n  - {synthetic: 1, servers: [4, 5], seed: 11, elastic: 1.0}\n"
        "nontrivial_only: false\nseed: 0\npolicies: [optimum, random]\n"
    )
    orig = rs.aggregate

    def optimum_preempts_nothing(rows: Any, entrants: Any, *a: Any, **k: Any) -> Any:
        # events where the optimum preempts no job and random preempts two
        rows = [{**r, "optimal_preemptions": 0, "preemptions": 0 if r["entrant"] == "optimum" else 2}
                for r in rows]
        return orig(rows, entrants, *a, **k)

    monkeypatch.setattr(rs, "aggregate", optimum_preempts_nothing)
    rc, out, err = _run(["leaderboard", "--suite", str(suite), "--out", str(tmp_path / "out"),
                         "--no-progress", "--json"], capsys)
    assert rc == 0, err[-400:]
    d = _one_object(out)
    assert {"table", "decisions", "instances", "wall_s", "files", "notes"} <= set(d)
    gaps = {t["entrant"]: t["gap"] for t in d["table"]["entrants"]}
    assert gaps == {"optimum": 0.0, "random": None}  # infinite: null
    f = strict_loads(Path(d["files"]["json"]).read_text())
    assert {t["entrant"]: t["gap"] for t in f["entrants"]} == gaps
    assert {t["entrant"]: t["gap"] for t in f["by_size"]["<60"]["entrants"]} == gaps


def test_bench_json_writes_non_finite_figures_as_null(capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # was: json.dumps(default=float): "sim s / wall s": Infinity (a wall time of 0), NaN means
    import aryl_gym.benchmarks as bm

    fake = bm.Benchmark("fake", "non-finite figures",
                        lambda quick: [{"case": "a", "sim s / wall s": math.inf, "ms mean": math.nan, "ms": 1.5}])
    monkeypatch.setattr(bm, "BENCHMARKS", [*bm.BENCHMARKS, fake])
    rc, out, err = _run(["bench", "--only", "fake", "--json"], capsys)
    assert rc == 0, err[-400:]
    d = _one_object(out)
    assert d == {"fake": [{"case": "a", "sim s / wall s": None, "ms mean": None, "ms": 1.5}]}


def test_learning_curve_of_evaluations_with_no_finished_job(tmp_path: Path) -> None:
    # was: ValueError "Axis limits cannot be NaN or Inf", which ended `aryl-gym train` (exit 2,
    # nothing on stdout with --json) after a run whose evaluations finished no job
    pytest.importorskip("matplotlib")
    from aryl_gym.train.curve import plot_learning_curve

    (tmp_path / "eval.csv").write_text(
        "timesteps,avg_jct,jobs_unfinished,aryl_avg_jct,fifo_avg_jct\n"
        "0,nan,30,nan,nan\n32,nan,30,nan,nan\n"
    )
    assert plot_learning_curve(tmp_path).is_file()
    (tmp_path / "eval.csv").write_text(
        "timesteps,avg_jct,jobs_unfinished,aryl_avg_jct,fifo_avg_jct\n"
        "0,nan,30,900,nan\n32,1000,0,900,nan\n"
    )
    assert plot_learning_curve(tmp_path).is_file()


@pytest.mark.slow
def test_train_json_and_summary_are_strict_when_no_job_finishes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # was: summary.json held "avg_jct": NaN for each evaluation (and the run ended with exit 2
    # on the learning curve's NaN axis limits, nothing on stdout)
    pytest.importorskip("sb3_contrib")
    scen = _cut_scenario(tmp_path)
    rc, out, err = _run(["train", "--config", "maskable_ppo", "--scenario", str(scen), "--timesteps", "64",
                         "--eval-freq", "32", "--eval-seeds", "5", "--n-envs", "1", "--set", "n_steps=32",
                         "--set", "batch_size=32", "--out", str(tmp_path / "runs"), "--quiet", "--json"], capsys)
    assert rc == 0, err[-600:]
    d = _one_object(out)
    run_dir = Path(d["run_dir"])
    s = strict_loads((run_dir / "summary.json").read_text())
    assert {"num_timesteps", "trained_steps", "wall_s", "steps_per_s", "eval", "references", "dagger"} <= set(s)
    assert s["eval"] and all(e["avg_jct"] is None and e["jobs_unfinished"] == 30 for e in s["eval"])
