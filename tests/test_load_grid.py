"""The load rule of aryl_gym/load_grid.py: hand-computed picks and the command end to end."""

from __future__ import annotations

import json

import pytest

from aryl_gym.cli import main
from aryl_gym.load_grid import parse_loads, pick_load, summarize


def _row(load: float, avg: float, p95: float) -> dict:
    return {"load": load, "avg_queue": avg, "p95_queue": p95}


def test_parse_loads():
    assert parse_loads("0.3-0.6") == [0.3, 0.4, 0.5, 0.6]
    assert parse_loads("0.4, 0.8") == [0.4, 0.8]
    for bad in ("", "a-b", "0.4,-1", "0,0.5", "nan"):
        with pytest.raises(ValueError, match="load-grid"):
            parse_loads(bad)


def test_pick_in_band_by_p95():
    rows = [_row(0.3, 1_000, 4_000), _row(0.4, 3_500, 14_000), _row(0.5, 6_000, 11_000),
            _row(0.6, 9_000, 30_000), _row(0.7, 20_000, 60_000)]
    load, why = pick_load(rows)
    assert load == 0.5  # in band: 0.4, 0.5, 0.6; p95 nearest 10,000 s: 11,000 s
    assert "3 load(s) in the band" in why


def test_pick_outside_band_nearest_on_log_scale():
    # 2,000 s is a factor 1.5 below the band; 14,000 s a factor 1.4 above it
    load, why = pick_load([_row(0.4, 2_000, 5_000), _row(0.5, 14_000, 40_000)])
    assert load == 0.5 and "no load" in why
    load, _ = pick_load([_row(0.4, 2_500, 5_000), _row(0.5, 14_000, 40_000)])
    assert load == 0.4
    with pytest.raises(ValueError):
        pick_load([])


def test_summarize_means_per_load():
    eps = [{"load": 0.4, "seed": s, "avg_queue": q, "p95_queue": 2 * q, "train_util": 0.5,
            "strict_ratio": 0.5, "max_queued_share": 0.9, "jobs": 10} for s, q in ((0, 100), (1, 300))]
    (row,) = summarize(eps, [0.4, 0.9])
    assert row["seeds"] == 2 and row["avg_queue"] == 200 and row["p95_queue"] == 400


def test_load_grid_command(capsys):
    assert main(["calibrate", "--scenario", "testbed", "--load-grid", "0.3,0.9", "--seeds", "0",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["load"] for r in out["rows"]] == [0.3, 0.9]
    lo, hi = out["rows"]
    assert hi["jobs"] > lo["jobs"]  # the load scales the job count
    assert out["pick"] in (0.3, 0.9) and out["why"]


def test_load_grid_bad_input(capsys):
    assert main(["calibrate", "--scenario", "testbed", "--load-grid", "abc"]) == 2
    assert "load-grid" in capsys.readouterr().err


def test_load_grid_out_caches_and_resumes(tmp_path, capsys):
    """--out keeps the grid's episodes in the episode cache: the same figures as without it, a
    rerun runs nothing, and an edited cached episode is an error naming the file."""
    argv = ["calibrate", "--scenario", "testbed", "--load-grid", "0.3,0.9", "--seeds", "0", "--json"]
    assert main(argv) == 0
    plain = json.loads(capsys.readouterr().out)
    out = tmp_path / "grid"
    assert main([*argv, "--out", str(out)]) == 0
    first = capsys.readouterr()
    assert json.loads(first.out) == plain
    assert "4 episode(s) to run, 0 saved" in first.err
    files = sorted(out.glob("episodes/*/*/*.json"))
    assert len(files) == 4  # 2 loads x 1 seed x (baseline, fifo)
    assert (out / ".aryl-gym-owner").read_text().strip() == "calibrate"
    assert main([*argv, "--out", str(out)]) == 0
    again = capsys.readouterr()
    assert json.loads(again.out) == plain
    assert "to run" not in again.err  # every episode was found in the cache
    d = json.loads(files[0].read_text())
    d["result"]["avg_queue_time"] += 1.0
    files[0].write_text(json.dumps(d))
    assert main([*argv, "--out", str(out)]) == 2
    assert str(files[0]) in capsys.readouterr().err


def test_load_grid_out_refusals(tmp_path, capsys):
    # --out without a grid mode would be silently ignored
    assert main(["calibrate", "--scenario", "tiny", "--out", str(tmp_path / "x")]) == 2
    assert "--out applies to --relevance and --load-grid" in capsys.readouterr().err
    # a folder another command owns
    other = tmp_path / "rep"
    other.mkdir()
    (other / ".aryl-gym-owner").write_text("reproduce\n")
    assert main(["calibrate", "--scenario", "testbed", "--load-grid", "0.5", "--seeds", "0",
                 "--out", str(other)]) == 2
    assert "aryl-gym reproduce" in capsys.readouterr().err
    # an empty path (it would have meant the current folder)
    with pytest.raises(SystemExit) as exc:
        main(["calibrate", "--scenario", "testbed", "--load-grid", "0.5", "--out", ""])
    assert exc.value.code == 2
    assert "--out: is empty" in capsys.readouterr().err
    # an existing file
    f = tmp_path / "file"
    f.write_text("x")
    assert main(["calibrate", "--scenario", "testbed", "--load-grid", "0.5", "--seeds", "0",
                 "--out", str(f)]) == 2
    assert "existing file" in capsys.readouterr().err
