"""Leaderboard tables with their intervals, the seed-count study and the TensorBoard writer
(issue 16); the estimators themselves: tests/test_stats.py."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from aryl_gym import stats as st
from aryl_gym.leaderboard import Entrant, Suite
from aryl_gym.leaderboard import seed_study as ss

needs_rliable = pytest.mark.skipif(not st.available(), reason="rliable not installed (the stats extra)")


# ----------------------------------------------------------------------------------------------
# the table
# ----------------------------------------------------------------------------------------------

SEEDS = list(range(10))


def _row(policy: str, scenario: str, seed: int, jct: float, lb: float = 1000.0) -> dict[str, Any]:
    from aryl_gym.leaderboard.results import METRIC_TYPES

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


def test_jct_lower_bound_by_hand(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bound the normalised score and the optimality gap are measured against: each job
    alone, no queuing, at w_max on its fastest allowed GPU type (column 0 = V100, the only type
    of a type-specific job) with its scaling efficiency at w_max, times the job's best-speed
    factor (more workers, a tuned batch; tests/test_lower_bound.py checks it, here it is set by
    hand); the episode's bound is their mean (aryl_gym.metrics.lower_bounds, episode_result)."""
    from types import SimpleNamespace

    import aryl_gym.metrics as M
    from aryl_gym.config import load_scenario
    from aryl_gym.leaderboard.report import episode_score
    from aryl_gym.metrics import lower_bounds

    spec = SimpleNamespace(family="resnet50", app=None, g=1, w_req=1, batch_size=None, hetero=False)
    jobs = [SimpleNamespace(**vars(spec), w_max=w, scaling=sc, type_agnostic=ta)
            for w, sc, ta in ((4, None, False), (2, None, True), (2, (1.0, 1.0, 0.8), False))]
    factors = {4: 1.0, 2: 0.5}  # by w_max: job 0 cannot go faster, jobs 1 and 2 twice as fast
    monkeypatch.setattr(M, "job_min_time_factor", lambda *a: factors[a[4]])
    sim = SimpleNamespace(
        n_jobs=3,
        jobs=jobs,
        config=load_scenario("tiny"),
        work=np.array([3600.0, 1200.0, 800.0]),        # GPU-seconds at speed 1
        w_max=np.array([4, 2, 2]),
        speeds=np.array([[1.0, 0.5], [0.5, 1.0], [0.5, 1.0]]),
        type_agnostic=np.array([False, True, False]),
        scaling=[None, None, (1.0, 1.0, 0.8)],          # job 2 runs at 80% efficiency on 2 GPUs
    )
    # 3600 / (4 x 1.0) = 900; 1200 / (2 x max(0.5, 1.0)) x 0.5 = 300 (the T4 is its fastest);
    # 800 / (2 x 0.5 x 0.8) x 0.5 = 500 (type-specific: V100 only, however slow it is there)
    assert lower_bounds(sim).tolist() == pytest.approx([900.0, 300.0, 500.0])
    monkeypatch.setattr(M, "job_min_time_factor", lambda *a: 1.0)
    assert lower_bounds(sim).tolist() == pytest.approx([900.0, 600.0, 1000.0])
    bound = float(lower_bounds(sim).mean())  # 2500 / 3
    # an episode whose jobs took 1800, 600 and 1600 s: score = bound / avg JCT = 2500 / 4000
    assert episode_score({"jct_lower_bound": bound, "avg_jct": (1800 + 600 + 1600) / 3}) == pytest.approx(0.625)


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
    # the optimality gap: 1 - mean(min(score, 1)) over the 10 seeds (every score is below 1)
    assert ents["aryl"]["optimality_gap"]["value"] == pytest.approx(1 - np.mean(scores))
    lo, hi = ents["aryl"]["optimality_gap"]["ci"]
    assert lo < 1 - np.mean(scores) < hi
    # P(better than aryl), brute force over every (entrant seed, aryl seed) pair of scores
    by = {p: [1000.0 / r["avg_jct"] for r in _rows(["tiny"]) if r["policy"] == p] for p in ents}

    def p_better(xs: list[float], ys: list[float]) -> float:
        return sum(1.0 if u > v else 0.5 if u == v else 0.0 for u in xs for v in ys) / (len(xs) * len(ys))

    for p in ("a", "b", "fifo"):
        assert ents[p]["p_improvement"]["value"] == pytest.approx(p_better(by[p], by["aryl"]))
        lo, hi = ents[p]["p_improvement"]["ci"]
        assert 0.0 <= lo <= ents[p]["p_improvement"]["value"] <= hi <= 1.0
    assert ents["aryl"]["p_improvement"] == {"value": 0.5, "ci": [0.5, 0.5], "seeds": 10}
    # fifo (1.25 x aryl's JCT on every seed) loses most pairs, a (0.8 x) wins most
    assert ents["fifo"]["p_improvement"]["value"] < 0.5 < ents["a"]["p_improvement"]["value"]
    # the order: by rank, then by mean
    assert [e["policy"] for e in agg["scenarios"]["tiny"]["entrants"]][2:] == ["aryl", "fifo"]
    pw = {(p["a"], p["b"]): p for p in agg["scenarios"]["tiny"]["pairwise"]}
    assert len(pw) == 6 and not pw[("a", "b")]["separated"] and pw[("fifo", "aryl")]["separated"]
    text = md.read_text()
    assert "x Baseline [95% CI]" in text and "x aryl [95% CI]" in text and "score IQM [95% CI]" in text
    assert "optimality gap [95% CI]" in text and "P(better than aryl) [95% CI]" in text
    assert "0.5 (itself)" in text and "closer to the episode's lower bound" in text
    assert "| 1= | a |" in text and "| 1= | b |" in text and "0.640 [0.640, 0.640]" in text
    assert "stratified bootstrap" in text
    data = json.loads(js.read_text())
    assert data["protocol"]["intervals"]["score"].startswith("jct_lower_bound / avg_jct")
    assert data["protocol"]["intervals"]["optimality_gap"].startswith("1 - mean")
    assert data["protocol"]["intervals"]["probability_of_improvement"].startswith("P(score of the entrant > score of aryl)")
    assert data["scenarios"]["tiny"]["entrants"][0]["p_improvement"]["ci"][1] <= 1.0
    assert data["scenarios"]["tiny"]["entrants"][0]["rank_shared"] is True
    assert "1=" in render_console(agg)


@needs_rliable
@pytest.mark.slow  # over 1 s: the fast tier stays under 90 s on 2 cores
def test_aggregate_overall_is_stratified_over_scenarios(tmp_path: Path) -> None:
    from aryl_gym.leaderboard.report import write_report

    suite = _suite(["tiny", "testbed"])
    _, _, agg = write_report(tmp_path, suite, _rows(["tiny", "testbed"]))
    ov = {e["policy"]: e for e in agg["overall"]["entrants"]}
    assert ov["a"]["vs_baseline"]["value"] == pytest.approx(0.64)
    assert ov["a"]["rank"] == ov["b"]["rank"] == 1 and ov["fifo"]["rank"] == 4
    assert ov["aryl"]["score_iqm"]["seeds"] == 10
    # over scenarios: the gap pools every episode, P(better) is the mean of the per-scenario Ps
    rows = _rows(["tiny", "testbed"])
    sc = {(r["policy"], r["scenario"]): [] for r in rows}
    for r in rows:
        sc[(r["policy"], r["scenario"])].append(1000.0 / r["avg_jct"])
    assert ov["b"]["optimality_gap"]["value"] == pytest.approx(1 - np.mean(sc[("b", "tiny")] + sc[("b", "testbed")]))
    per_task = [np.mean([[1.0 if u > v else 0.5 if u == v else 0.0 for v in sc[("aryl", t)]] for u in sc[("b", t)]])
                for t in ("tiny", "testbed")]
    assert ov["b"]["p_improvement"]["value"] == pytest.approx(np.mean(per_task))


@needs_rliable
def test_interval_estimates_plot_draws_the_json_numbers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("matplotlib")
    from rliable import plot_utils

    from aryl_gym.leaderboard import plots

    seen: dict[str, Any] = {}
    real = plot_utils.plot_interval_estimates

    def spy(points: Any, cis: Any, metric_names: Any, **kw: Any) -> Any:
        seen.update(points=points, cis=cis, metrics=metric_names, algorithms=kw.get("algorithms"))
        return real(points, cis, metric_names, **kw)

    monkeypatch.setattr(plot_utils, "plot_interval_estimates", spy)

    def en(policy: str, v: float, one_seed: bool = False) -> dict[str, Any]:
        c = {"value": v, "ci": [None, None] if one_seed else [v - 0.1, v + 0.1], "seeds": 2}
        gap = {"value": 1 - v, "ci": [None, None] if one_seed else [0.9 - v, 1.1 - v], "seeds": 2}
        return {"policy": policy, "score_iqm": c, "optimality_gap": gap, "p_improvement": c}

    agg = {"protocol": {"intervals": {"library": "rliable"}, "reference": "aryl"},
           "scenarios": {"tiny": {"entrants": [en("a", 0.7), en("aryl", 0.5), en("c", 0.3, one_seed=True)]}}}
    path = plots.interval_estimates_plot(tmp_path, _suite(["tiny"]), agg, plots._pyplot())
    assert path == tmp_path / "interval_estimates.png" and path.read_bytes()[:4] == b"\x89PNG"
    assert seen["metrics"] == ["score IQM (higher is better)", "optimality gap (lower is better)",
                               "P(better than aryl)"]
    assert seen["algorithms"] == ["aryl", "a"]  # c has no interval (one seed); best rank on top
    assert seen["points"]["a"].tolist() == pytest.approx([0.7, 0.3, 0.7])
    assert seen["cis"]["a"].shape == (2, 3)
    assert seen["cis"]["a"].ravel().tolist() == pytest.approx([0.6, 0.2, 0.6, 0.8, 0.4, 0.8])
    # without a reference: two panels; without intervals: no plot
    agg["protocol"]["reference"] = None
    plots.interval_estimates_plot(tmp_path, _suite(["tiny"]), agg, plots._pyplot())
    assert len(seen["metrics"]) == 2
    agg["protocol"]["intervals"] = None
    assert plots.interval_estimates_plot(tmp_path, _suite(["tiny"]), agg, plots._pyplot()) is None


def test_aggregate_without_rliable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import aryl_gym.leaderboard.report as report
    from aryl_gym.leaderboard.report import write_report

    monkeypatch.setattr(report, "available", lambda: False)
    md, _, agg = write_report(tmp_path, _suite(["tiny"]), _rows(["tiny"]))
    assert [e["rank"] for e in agg["scenarios"]["tiny"]["entrants"]] == [1, 2, 3, 4]
    assert agg["protocol"]["intervals"] is None
    assert "aryl-gym[stats]" in md.read_text()
    # the terminal table says why it has no intervals too (issue 34: only leaderboard.md did)
    from aryl_gym.leaderboard.report import render_console

    assert "pip install 'aryl-gym[stats]'" in render_console(agg)


# ----------------------------------------------------------------------------------------------
# seed study
# ----------------------------------------------------------------------------------------------


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
    assert p.n_ci == st.seeds_needed(p.sd_log) and p.close
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
    from aryl_gym.leaderboard.results import TIMELINE_COLUMNS

    # 9,000 rounds, one every 30 s -> 4,500 minutes, all kept (last row of a minute wins)
    rows = [[30.0 * i, 1.0, 2.0, 1.0, float(i), 3.0, 0.5] for i in range(9000)]
    pts = tb_mod.timeline_scalars({"timeline_columns": list(TIMELINE_COLUMNS), "timeline": rows}, 10, 4)
    assert [p[0] for p in pts] == list(range(4500))
    assert pts[10][1]["queue_len"] == 21.0  # rows 20 and 21 fall in minute 10
    assert pts[0][1]["combined_usage"] == pytest.approx((1 + 2 + 0.5 * 4) / 10)


@needs_tbx
@pytest.mark.slow  # over 1 s: the fast tier stays under 90 s on 2 cores
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
