"""The learning-curve picture of a run (aryl_gym.train.curve)."""

from __future__ import annotations

import pytest

from aryl_gym.train.curve import main, plot_learning_curve, read_curve

_CSV = """timesteps,avg_jct,p95_jct,aryl_avg_jct,jct_ratio_to_aryl,aryl_preempt_avg_jct,fifo_avg_jct,eval_wall
0.0,5773.5,27784.7,6576.4,0.878,5670.4,30639.0,10.8
50000.0,5800.0,27000.0,6576.4,0.882,5670.4,30639.0,
100000.0,5700.0,26000.0,6576.4,0.867,5670.4,30639.0,9.0
"""


def test_read_curve_takes_steps_agent_and_reference_lines(tmp_path):
    (tmp_path / "eval.csv").write_text(_CSV)
    steps, jct, refs = read_curve(tmp_path)
    assert steps == [0.0, 50000.0, 100000.0]
    assert jct == [5773.5, 5800.0, 5700.0]
    # the *_avg_jct columns are the references; the agent's own avg_jct is not one
    assert refs == {"aryl": 6576.4, "aryl_preempt": 5670.4, "fifo": 30639.0}


def test_plot_writes_a_png_beside_the_csv(tmp_path):
    (tmp_path / "eval.csv").write_text(_CSV)
    (tmp_path / "warm_start.zip").write_bytes(b"")
    pytest.importorskip("matplotlib")
    out = plot_learning_curve(tmp_path)
    assert out == tmp_path / "learning_curve.png"
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    other = plot_learning_curve(tmp_path / "eval.csv", tmp_path / "c.png", log=True, title="t")
    assert other.exists()


def test_missing_or_empty_curve_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no eval.csv"):
        read_curve(tmp_path)
    (tmp_path / "eval.csv").write_text("timesteps,avg_jct\n")
    with pytest.raises(ValueError, match="no evaluation rows"):
        read_curve(tmp_path)
    (tmp_path / "eval.csv").write_text("timesteps,avg_jct\nabc,1\n")
    with pytest.raises(ValueError, match="numeric"):
        read_curve(tmp_path)
    with pytest.raises(SystemExit, match="error: .*numeric"):
        main([str(tmp_path)])


def test_evaluations_with_unfinished_jobs_are_flagged(tmp_path):
    from aryl_gym.train.curve import read_unfinished

    (tmp_path / "eval.csv").write_text(
        "timesteps,avg_jct,jobs_unfinished,aryl_avg_jct\n0,5000,0.0,6000\n50000,4000,12.5,6000\n100000,5100,,6000\n")
    assert read_unfinished(tmp_path) == [False, True, False]
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "eval.csv").write_text(_CSV)  # written before the column existed
    assert read_unfinished(tmp_path / "old") == [False, False, False]
    pytest.importorskip("matplotlib")
    assert plot_learning_curve(tmp_path).is_file()


def test_eval_csv_rows_with_new_columns_keep_one_header(tmp_path):
    """A later evaluation row with columns the file lacks (a resumed run with another reference,
    a new phase) rewrites the file under one header: no value lands under another column."""
    import csv
    from types import SimpleNamespace

    from aryl_gym.train.callbacks import ArylEvalCallback

    cb = SimpleNamespace(run_dir=tmp_path)
    ArylEvalCallback._write_row(cb, {"timesteps": 0.0, "avg_jct": 100.0, "aryl_avg_jct": 90.0})
    ArylEvalCallback._write_row(cb, {"timesteps": 10.0, "avg_jct": 95.0, "aryl_avg_jct": 90.0})
    ArylEvalCallback._write_row(cb, {"timesteps": 20.0, "jobs_unfinished": 0.0, "avg_jct": 80.0,
                                     "sjf_avg_jct": 85.0, "aryl_avg_jct": 90.0})
    ArylEvalCallback._write_row(cb, {"avg_jct": 70.0, "timesteps": 30.0, "aryl_avg_jct": 90.0})
    rows = list(csv.DictReader(open(tmp_path / "eval.csv", newline="")))
    assert [r["avg_jct"] for r in rows] == ["100.0", "95.0", "80.0", "70.0"]
    assert [r["timesteps"] for r in rows] == ["0.0", "10.0", "20.0", "30.0"]
    assert [r["sjf_avg_jct"] for r in rows] == ["", "", "85.0", ""]
    steps, jct, refs = read_curve(tmp_path)
    assert steps == [0.0, 10.0, 20.0, 30.0] and jct == [100.0, 95.0, 80.0, 70.0]
    assert refs == {"aryl": 90.0, "sjf": 85.0}


def test_dagger_rounds_are_read_from_the_summary_and_drawn(tmp_path):
    import json

    from aryl_gym.train.curve import read_dagger_steps

    (tmp_path / "eval.csv").write_text(
        "timesteps,avg_jct,jobs_unfinished,aryl_avg_jct\n0,100,0,90\n10,80,0,90\n20,60,3,90\n35,85,0,90\n")
    assert read_dagger_steps(tmp_path) == set()  # no summary yet
    (tmp_path / "summary.json").write_text("not json")
    assert read_dagger_steps(tmp_path / "eval.csv") == set()
    (tmp_path / "summary.json").write_text("[1, 2]")  # valid JSON, not a summary
    assert read_dagger_steps(tmp_path) == set()
    (tmp_path / "summary.json").write_text(json.dumps({"dagger": [{"round": 1.0, "timesteps": 35.0}]}))
    assert read_dagger_steps(tmp_path) == {35.0}
    png = plot_learning_curve(tmp_path)
    assert png.stat().st_size > 1000
