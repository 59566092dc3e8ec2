"""Leaderboard statistics (rliable), the seed-count study and the TensorBoard writer (issue 16)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from aryl_gym.leaderboard import Entrant, Suite
from aryl_gym.leaderboard import seed_study as ss

iv = pytest.importorskip("aryl_gym.leaderboard.intervals")
needs_rliable = pytest.mark.skipif(not iv.available(), reason="rliable not installed (the stats extra)")


# ----------------------------------------------------------------------------------------------
# estimators
# ----------------------------------------------------------------------------------------------


@needs_rliable
def test_iqm_hand_computed() -> None:
    # 8 runs: the IQM drops the 2 lowest and 2 highest -> mean(3, 4, 5, 6) = 4.5
    s = np.array([[7.0], [1.0], [100.0], [3.0], [2.0], [6.0], [5.0], [4.0]])
    assert iv.iqm(s) == pytest.approx(4.5)
    # 3 runs: nothing trimmed (int(0.25 * 3) = 0) -> the mean
    assert iv.iqm([1.0, 2.0, 6.0]) == pytest.approx(3.0)
    # over runs and tasks together: 2 x 4 = 8 values
    assert iv.iqm(np.array([[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 100.0]])) == pytest.approx(4.5)


@needs_rliable
def test_fast_iqm_equals_rliable() -> None:
    from rliable import metrics

    rng = np.random.default_rng(0)
    for shape in [(1, 1), (3, 1), (5, 1), (8, 3), (10, 2), (7, 5)]:
        s = rng.lognormal(size=shape)
        assert iv.fast_iqm(s) == pytest.approx(float(metrics.aggregate_iqm(s)), rel=1e-12, abs=0)


def test_ratio_hand_computed() -> None:
    assert iv.ratio([1.0, 3.0], [2.0, 2.0]) == pytest.approx(1.0)
    assert iv.ratio([2.0, 4.0], [4.0, 4.0]) == pytest.approx(0.75)
    # two tasks: geometric mean of the per-task ratios of means, sqrt(0.5 * 2) = 1
    x = np.array([[1.0, 4.0], [1.0, 4.0]])
    y = np.array([[2.0, 2.0], [2.0, 2.0]])
    assert iv.ratio(x, y) == pytest.approx(1.0)
    assert iv.ratio(np.array([[1.0, 8.0]]), np.array([[2.0, 2.0]])) == pytest.approx(math.sqrt(0.5 * 4))


@needs_rliable
def test_bootstrap_support_and_pairing() -> None:
    """Two runs, one task: a paired resample is (0,0), (0,1), (1,0) or (1,1), each with
    probability 1/4, so the ratio takes 0.5, 1.0 or 1.5 and the 95% percentile interval is
    exactly [0.5, 1.5]."""
    point, lo, hi = iv.ratio_ci([1.0, 3.0], [2.0, 2.0])
    assert point == pytest.approx(1.0)
    assert (lo, hi) == (pytest.approx(0.5), pytest.approx(1.5))
    # paired: x == y run by run gives a ratio of exactly 1 in every resample (unpaired would not)
    point, lo, hi = iv.ratio_ci([1.0, 3.0, 7.0], [1.0, 3.0, 7.0])
    assert point == lo == hi == pytest.approx(1.0)
    # a constant per-seed ratio is estimated without spread
    base = np.array([5000.0, 6200.0, 4100.0, 7000.0])
    assert iv.ratio_ci(0.8 * base, base) == pytest.approx((0.8, 0.8, 0.8))


@needs_rliable
def test_bootstrap_stratified_by_task() -> None:
    """Runs are resampled within each task: a task whose runs are all equal contributes no
    spread, whatever the other task does."""
    x = np.array([[1.0, 10.0], [1.0, 30.0]])
    y = np.array([[1.0, 20.0], [1.0, 20.0]])
    point, lo, hi = iv.ratio_ci(x, y)
    # task 1 ratio is always 1; task 2 is 0.5, 1 or 1.5 -> sqrt of that
    assert point == pytest.approx(1.0)
    assert lo == pytest.approx(math.sqrt(0.5)) and hi == pytest.approx(math.sqrt(1.5))


@needs_rliable
def test_bootstrap_deterministic_and_leaves_global_rng_alone() -> None:
    rng = np.random.default_rng(3)
    x, y = rng.uniform(4000, 6000, 10), rng.uniform(4000, 6000, 10)
    np.random.seed(123)
    before = np.random.get_state()[1].copy()
    a = iv.ratio_ci(x, y)
    b = iv.ratio_ci(x, y)
    assert a == b
    assert np.array_equal(np.random.get_state()[1], before)
    assert iv.ratio_ci(x, y, seed=1) != a  # the seed is what fixes it


@needs_rliable
def test_performance_profile_point_values() -> None:
    scores = {"a": np.array([[0.1], [0.5], [0.9], [0.7]]), "b": np.array([[0.2], [0.2], [0.2], [0.2]])}
    taus = [0.0, 0.15, 0.6, 1.0]
    prof, bands = iv.performance_profile(scores, taus, reps=200)
    assert prof["a"] == pytest.approx([1.0, 0.75, 0.5, 0.0])
    assert prof["b"] == pytest.approx([1.0, 1.0, 0.0, 0.0])
    assert bands["a"].shape == (2, 4)
    assert np.all(bands["a"][0] <= prof["a"] + 1e-12) and np.all(prof["a"] <= bands["a"][1] + 1e-12)


@needs_rliable
def test_score_distribution_equals_rliable() -> None:
    from rliable import library

    s = np.random.default_rng(1).uniform(size=(9, 3))
    taus = np.linspace(0, 1, 17)
    assert np.array_equal(iv.score_distribution(s, taus), library.score_distributions(s, taus))


def test_tie_ranks() -> None:
    names = ["a", "b", "c", "d"]
    # a beats c and d; b beats d; a and b are not separated, nor are b and c
    better = {("a", "c"): True, ("a", "d"): True, ("b", "d"): True}
    assert iv.tie_ranks(names, better) == {"a": 1, "b": 1, "c": 2, "d": 3}


# ----------------------------------------------------------------------------------------------
# the table
# ----------------------------------------------------------------------------------------------

SEEDS = list(range(10))


def _row(policy: str, scenario: str, seed: int, jct: float, lb: float = 1000.0) -> dict[str, Any]:
    from aryl_gym.leaderboard.runner import METRIC_TYPES

    r: dict[str, Any] = {k: (0 if t is int else (False if t is bool else 1.0)) for k, t in METRIC_TYPES.items()}
    r.update(
        suite="s", scenario=scenario, seed=seed, policy=policy, kind="policy", source="", commit="c",
        config_hash="h", note="", avg_jct=jct, jct_lower_bound=lb, jobs_unfinished=0,
    )
    return r


def _rows(scenarios: list[str]) -> list[dict[str, Any]]:
    """fifo = 1.25 x aryl; a = 0.8 x aryl exactly; b = a within +-1%, alternating."""
    rows = []
    for k, scen in enumerate(scenarios):
        for s in SEEDS:
            base = 4000.0 + 300.0 * ((s * 7) % 5) + 1000.0 * k
            rows += [
                _row("aryl", scen, s, base),
                _row("fifo", scen, s, 1.25 * base),
                _row("a", scen, s, 0.8 * base),
                _row("b", scen, s, 0.8 * base * (1.01 if s % 2 else 0.99)),
            ]
    return rows


def _suite(scenarios: list[str]) -> Suite:
    return Suite(
        name="s", description="", scenarios=tuple(scenarios), seeds=tuple(SEEDS),
        entrants=tuple(Entrant(name=n) for n in ("fifo", "aryl", "a", "b")), baseline="fifo",
    )


def test_episode_score() -> None:
    from aryl_gym.leaderboard.report import episode_score

    assert episode_score({"jct_lower_bound": 1000.0, "avg_jct": 4000.0}) == pytest.approx(0.25)
    assert episode_score({"jct_lower_bound": 1000.0, "avg_jct": float("nan")}) is None
    assert episode_score({"jct_lower_bound": None, "avg_jct": 5.0}) is None


@needs_rliable
def test_aggregate_ties_cis_and_markdown(tmp_path: Path) -> None:
    from aryl_gym.leaderboard.report import render_console, write_report

    suite = _suite(["tiny"])
    md, js, agg = write_report(tmp_path, suite, _rows(["tiny"]))
    ents = {e["policy"]: e for e in agg["scenarios"]["tiny"]["entrants"]}
    # a and b are not separated (b / a alternates 1.01, 0.99): they share rank 1
    assert ents["a"]["rank"] == ents["b"]["rank"] == 1
    assert ents["a"]["rank_shared"] and ents["b"]["rank_shared"]
    assert ents["a"]["tied_with"] == ["b"] and ents["b"]["tied_with"] == ["a"]
    assert ents["aryl"]["rank"] == 3 and ents["fifo"]["rank"] == 4
    assert not ents["aryl"]["rank_shared"] and ents["aryl"]["tied_with"] == []
    # a = 0.8 x aryl = 0.64 x fifo on every seed: zero-width intervals at those values
    assert ents["a"]["vs_reference"]["value"] == pytest.approx(0.8)
    assert ents["a"]["vs_reference"]["ci"] == pytest.approx([0.8, 0.8])
    assert ents["a"]["vs_baseline"]["ci"] == pytest.approx([0.64, 0.64])
    assert ents["fifo"]["vs_baseline"] == {"value": 1.0, "ci": [1.0, 1.0], "seeds": 10}
    lo, hi = ents["b"]["vs_baseline"]["ci"]
    assert lo < 0.64 < hi
    # the score IQM: lower bound 1000 / avg JCT, trimmed mean over the 10 seeds
    scores = sorted(1000.0 / r["avg_jct"] for r in _rows(["tiny"]) if r["policy"] == "aryl")
    assert ents["aryl"]["score_iqm"]["value"] == pytest.approx(np.mean(scores[2:8]))
    # the order: by rank, then by mean
    assert [e["policy"] for e in agg["scenarios"]["tiny"]["entrants"]][2:] == ["aryl", "fifo"]
    pw = {(p["a"], p["b"]): p for p in agg["scenarios"]["tiny"]["pairwise"]}
    assert len(pw) == 6 and not pw[("a", "b")]["separated"] and pw[("fifo", "aryl")]["separated"]
    text = md.read_text()
    assert "x Baseline [95% CI]" in text and "x aryl [95% CI]" in text and "score IQM [95% CI]" in text
    assert "| 1= | a |" in text and "| 1= | b |" in text and "0.640 [0.640, 0.640]" in text
    assert "stratified bootstrap" in text
    data = json.loads(js.read_text())
    assert data["protocol"]["intervals"]["score"].startswith("jct_lower_bound / avg_jct")
    assert data["scenarios"]["tiny"]["entrants"][0]["rank_shared"] is True
    assert "1=" in render_console(agg)


@needs_rliable
def test_aggregate_overall_is_stratified_over_scenarios(tmp_path: Path) -> None:
    from aryl_gym.leaderboard.report import write_report

    suite = _suite(["tiny", "testbed"])
    _, _, agg = write_report(tmp_path, suite, _rows(["tiny", "testbed"]))
    ov = {e["policy"]: e for e in agg["overall"]["entrants"]}
    assert ov["a"]["vs_baseline"]["value"] == pytest.approx(0.64)
    assert ov["a"]["rank"] == ov["b"]["rank"] == 1 and ov["fifo"]["rank"] == 4
    assert ov["aryl"]["score_iqm"]["seeds"] == 10


def test_aggregate_without_rliable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from aryl_gym.leaderboard.report import write_report

    monkeypatch.setattr(iv, "available", lambda: False)
    md, _, agg = write_report(tmp_path, _suite(["tiny"]), _rows(["tiny"]))
    assert [e["rank"] for e in agg["scenarios"]["tiny"]["entrants"]] == [1, 2, 3, 4]
    assert agg["protocol"]["intervals"] is None
    assert "aryl-gym[stats]" in md.read_text()


# ----------------------------------------------------------------------------------------------
# seed study
# ----------------------------------------------------------------------------------------------


def test_seeds_needed_hand_computed() -> None:
    # (1.96 * 0.05 / log 1.03)^2 = (0.098 / 0.029559)^2 = 10.99 -> 11
    assert ss.seeds_needed(0.05) == 11
    assert ss.seeds_needed(0.05, z=ss.Z95 + ss.Z_POWER80) == math.ceil((2.8016 * 0.05 / math.log(1.03)) ** 2)
    assert ss.seeds_needed(0.0) == 2
    with pytest.raises(ValueError):
        ss.seeds_needed(float("nan"))


def test_pair_spread_and_recommendation() -> None:
    d = [0.02, -0.01, 0.03, 0.00, 0.01]  # log(a / b) per seed
    rows = []
    for s, x in enumerate(d):
        rows += [{"scenario": "t", "policy": "b", "seed": s, "avg_jct": 5000.0},
                 {"scenario": "t", "policy": "a", "seed": s, "avg_jct": 5000.0 * math.exp(x)},
                 {"scenario": "t", "policy": "f", "seed": s, "avg_jct": 9000.0 * (1 + 0.1 * s)}]
    rows.append({"scenario": "t", "policy": "a", "seed": 99, "avg_jct": 1.0})  # unpaired: ignored
    p = ss.pair_spread(rows, "t", "a", "b")
    assert p is not None and p.seeds == 5
    assert p.sd_log == pytest.approx(float(np.std(d, ddof=1)))
    assert p.ratio == pytest.approx(math.exp(np.mean(d)))
    assert p.n_ci == ss.seeds_needed(p.sd_log) and p.close
    spreads = ss.study(rows, "t", ["a", "b", "f"])
    assert {(q.a, q.b) for q in spreads} == {("a", "b"), ("a", "f"), ("b", "f")}
    rec = ss.recommendation(spreads)
    assert rec["close_only"] and rec["pairs"] == 1 and rec["n_ci"] == p.n_ci  # f is far from both
    assert "n (95% CI ±3%)" in ss.render(spreads, rec, 0.03, "avg_jct")


def test_seed_study_command(tmp_path: Path) -> None:
    out = tmp_path / "ss"
    rc = ss.main(["--scenario", "tiny", "--seeds", "0-2", "--policies", "fifo,sjf,aryl",
                  "--out", str(out), "--workers", "1", "--json"])
    assert rc == 0 and (out / "results.csv").exists()
    assert ss.main(["--scenario", "tiny", "--seeds", "0-2", "--policies", "nope", "--out", str(out)]) == 2


# ----------------------------------------------------------------------------------------------
# TensorBoard writer
# ----------------------------------------------------------------------------------------------

tb_mod = pytest.importorskip("aryl_gym.leaderboard.tb")
needs_tbx = pytest.mark.skipif(not tb_mod.tensorboard_available(), reason="tensorboardX not installed (train extra)")


@needs_tbx
def test_scalar_writer_roundtrip(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard", reason="tensorboard (the reader) not installed")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    n = 12_000  # more than the former 5,000-point cap, and than TensorBoard's default 1,000
    with tb_mod.ScalarWriter(tmp_path / "run", wall_time=1.0) as w:
        for i in range(n):
            w.add_scalars(i, {"s/seed0/a": i * 0.25, "s/seed0/b": -i})
        w.add_scalar("s/final/x", 3.5, 7)
        w.add_scalars(8, {"s/final/x": 4.5, "s/final/y": 1.0})  # another tag set, same tag
    assert w.events == n + 2 and w.scalars == 2 * n + 3
    acc = EventAccumulator(str(tmp_path / "run"), size_guidance={"scalars": 0})
    acc.Reload()
    assert set(acc.Tags()["scalars"]) == {"s/seed0/a", "s/seed0/b", "s/final/x", "s/final/y"}
    a = acc.Scalars("s/seed0/a")
    assert [e.step for e in a] == list(range(n))
    assert np.array_equal([e.value for e in a], np.float32(np.arange(n) * 0.25))
    assert [e.value for e in acc.Scalars("s/seed0/b")][-1] == -(n - 1)
    assert [(e.step, e.value) for e in acc.Scalars("s/final/x")] == [(7, 3.5), (8, 4.5)]
    assert all(e.wall_time == 1.0 for e in a[:5])


@needs_tbx
def test_two_writers_in_one_folder_keep_both(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    for k in range(2):
        with tb_mod.ScalarWriter(tmp_path) as w:
            w.add_scalar(f"t{k}", 1.0, 0)
    assert len(list(tmp_path.glob("events.out.tfevents.*"))) == 2
    acc = EventAccumulator(str(tmp_path))
    acc.Reload()
    assert {"t0", "t1"} <= set(acc.Tags()["scalars"])


def test_timeline_scalars_keep_every_minute() -> None:
    from aryl_gym.leaderboard.runner import TIMELINE_COLUMNS

    # 9,000 rounds, one every 30 s -> 4,500 minutes, all kept (last row of a minute wins)
    rows = [[30.0 * i, 1.0, 2.0, 1.0, float(i), 3.0, 0.5] for i in range(9000)]
    pts = tb_mod.timeline_scalars({"timeline_columns": list(TIMELINE_COLUMNS), "timeline": rows}, 10, 4)
    assert [p[0] for p in pts] == list(range(4500))
    assert pts[10][1]["queue_len"] == 21.0  # rows 20 and 21 fall in minute 10
    assert pts[0][1]["combined_usage"] == pytest.approx((1 + 2 + 0.5 * 4) / 10)


@needs_tbx
def test_tb_writer_imports_no_torch(tmp_path: Path) -> None:
    code = (
        "import sys, aryl_gym.leaderboard.tb as tb\n"
        "assert 'torch' not in sys.modules\n"
        f"w = tb.ScalarWriter({str(tmp_path)!r}); w.add_scalar('x', 1.0, 0); w.close()\n"
        "assert tb.native_crc(), 'tensorboardX fell back to its pure-Python CRC (pip install crc32c)'\n"
        "assert 'torch' not in sys.modules, 'writing TensorBoard events imported torch'\n"
        "import torch  # the mask used while importing tensorboardX is gone\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
