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
