"""Review of the statistics behind ``compare``, ``evaluate``, ``seed-study``, ``leaderboard`` and
``reproduce``: each interval against an independent (scipy / brute-force) computation on
hand-made per-seed data, pairing by seed id, edge cases, determinism, and what the tables print."""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from scipy import stats as sps

from aryl_gym import stats as st

needs_rliable = pytest.mark.skipif(not st.available(), reason="rliable not installed (the stats extra)")


# ----------------------------------------------------------------------------------------------
# t intervals on log ratios
# ----------------------------------------------------------------------------------------------


def _scipy_log_t(ratios: list[float]) -> tuple[float, float, float]:
    logs = np.log(ratios)
    lo, hi = sps.t.interval(0.95, len(logs) - 1, loc=logs.mean(), scale=sps.sem(logs))
    return math.exp(logs.mean()), math.exp(lo), math.exp(hi)


def test_paired_ratio_ci_is_scipys_t_interval_on_log_ratios() -> None:
    r = {3: 1.2, 1: 0.9, 7: 1.5, 2: 1.1, 5: 0.95}
    s = st.paired_ratio_ci(r)
    assert (s.mean, s.lo, s.hi) == pytest.approx(_scipy_log_t(list(r.values())), rel=1e-12)
    assert s.n == 5 and s.dropped == 0 and s.method == "geometric"
    # two seeds: t(0.975, 1) = 12.7
    s2 = st.paired_ratio_ci([1.0, 2.0])
    assert (s2.mean, s2.lo, s2.hi) == pytest.approx(_scipy_log_t([1.0, 2.0]), rel=1e-12)
    # the level is passed through
    s90 = st.paired_ratio_ci(r, level=0.9)
    logs = np.log(list(r.values()))
    lo, hi = sps.t.interval(0.9, 4, loc=logs.mean(), scale=sps.sem(logs))
    assert (s90.lo, s90.hi) == pytest.approx((math.exp(lo), math.exp(hi)), rel=1e-12)


def test_paired_ratio_ci_pairs_by_seed_id_not_by_order() -> None:
    r = dict(enumerate(np.random.default_rng(3).lognormal(0.0, 0.3, 7).tolist()))
    base = st.paired_ratio_ci(r)
    for k in range(20):
        items = list(r.items())
        random.Random(k).shuffle(items)
        s = st.paired_ratio_ci(dict(items))
        assert (s.mean, s.lo, s.hi, s.n) == (base.mean, base.lo, base.hi, base.n)
        assert dict(s.per_seed) == dict(base.per_seed)


def test_paired_ratio_ci_edge_cases() -> None:
    one = st.paired_ratio_ci({9: 1.3})
    assert one.mean == pytest.approx(1.3) and math.isnan(one.lo) and math.isnan(one.hi) and one.n == 1
    flat = st.paired_ratio_ci([2.0, 2.0, 2.0])  # zero variance: a zero-width t interval
    assert (flat.mean, flat.lo, flat.hi) == pytest.approx((2.0, 2.0, 2.0))
    # undefined seeds (NaN, inf, negative, None) are dropped and counted, the rest unchanged
    ref = st.paired_ratio_ci({1: 1.0, 2: 2.0})
    for bad in (math.nan, math.inf, -1.0, None):
        s = st.paired_ratio_ci({0: bad, 1: 1.0, 2: 2.0})
        assert (s.mean, s.lo, s.hi, s.n, s.dropped) == (ref.mean, ref.lo, ref.hi, 2, 1)
    # a real zero: arithmetic mean with a t interval stopping at 0 (docs/reproduction.md)
    z = st.paired_ratio_ci([0.0, 1.0, 2.0])
    half = sps.t.ppf(0.975, 2) * np.std([0.0, 1.0, 2.0], ddof=1) / math.sqrt(3)
    assert z.method == "arithmetic" and (z.mean, z.lo, z.hi) == pytest.approx((1.0, 0.0, 1.0 + half))
    none = st.paired_ratio_ci([math.nan, None])
    assert none.n == 0 and none.dropped == 2 and math.isnan(none.mean)


# ----------------------------------------------------------------------------------------------
# paired bootstrap of per-seed figures
# ----------------------------------------------------------------------------------------------


def test_paired_bootstrap_ratio_one_seed_has_no_interval() -> None:
    """One seed has no spread: no interval, as paired_ratio_ci (was: (0.5, 0.5, 0.5), a
    zero-width interval that looked certain)."""
    point, lo, hi = st.paired_bootstrap_ratio([1.0], [2.0], reps=50)
    assert point == 0.5 and math.isnan(lo) and math.isnan(hi)
    with pytest.raises(ValueError, match="one length"):
        st.paired_bootstrap_ratio([1.0, 2.0], [1.0], reps=5)


def test_paired_bootstrap_ratio_brute_force_and_pairing() -> None:
    x = np.array([10.0, 30.0, 20.0, 50.0])
    y = np.array([12.0, 28.0, 25.0, 40.0])
    point, lo, hi = st.paired_bootstrap_ratio(x, y, reps=2000, rng=4)
    idx = np.random.default_rng(4).integers(0, 4, size=(2000, 4))
    r = np.array([x[i].mean() / y[i].mean() for i in idx])
    assert point == x.mean() / y.mean()
    assert (lo, hi) == (float(np.percentile(r, 2.5)), float(np.percentile(r, 97.5)))
    # the same permutation of both sides (seeds reordered together) keeps the point estimate,
    # and a constant per-seed ratio is exact whatever the order
    perm = np.array([2, 0, 3, 1])
    assert st.paired_bootstrap_ratio(x[perm], y[perm], reps=500)[0] == pytest.approx(point)
    assert st.paired_bootstrap_ratio(0.8 * y[perm], y[perm], reps=500) == pytest.approx((0.8, 0.8, 0.8))


# ----------------------------------------------------------------------------------------------
# rliable's stratified bootstrap: paired, explicit generator, the same across processes
# ----------------------------------------------------------------------------------------------


@needs_rliable
def test_stratified_ratio_ci_is_a_paired_resample_by_brute_force() -> None:
    g = np.random.RandomState(5)
    x = g.uniform(1.0, 2.0, size=(6, 2))
    y = x * g.uniform(0.8, 1.2, size=(6, 2))
    np.random.seed(99)
    before = np.random.get_state()[1].copy()
    point, lo, hi = st.ratio_ci(x, y, reps=300, rng=0)
    assert np.array_equal(np.random.get_state()[1], before)  # the global generator untouched
    rs, cols, reps = np.random.RandomState(0), np.arange(2)[None, :], []
    for _ in range(300):
        idx = rs.choice(6, (6, 2), replace=True)  # the same rows for x and y, per task
        reps.append(st.ratio(x[idx, cols], y[idx, cols]))
    assert point == st.ratio(x, y)
    assert (lo, hi) == pytest.approx(tuple(np.percentile(reps, [2.5, 97.5])), rel=1e-12)
    assert st.ratio_ci(x, y, reps=300, rng=np.random.RandomState(0)) == (point, lo, hi)


_PROC = """
import json, numpy as np
from aryl_gym import stats as st
x = np.linspace(1.0, 2.0, 12).reshape(6, 2); y = x[::-1] * 1.05
out = [st.paired_ratio_ci([1.1, 0.9, 1.3, 1.2]).hi, list(st.paired_bootstrap_ratio(x[:, 0], y[:, 0], reps=300))]
if st.available():
    out.append(list(st.ratio_ci(x, y, reps=200)))
print(json.dumps(out))
"""


@pytest.mark.slow  # two subprocesses
def test_intervals_are_the_same_across_processes() -> None:
    """Another process (another hash seed, numpy's global generator seeded differently here)
    computes the same intervals bit for bit: explicit generators, no global seeding."""
    np.random.seed(12345)
    here: dict[str, Any] = {}
    exec(_PROC.replace("print(json.dumps(out))", "res = json.dumps(out)"), here)
    there = subprocess.run([sys.executable, "-c", _PROC], capture_output=True, text=True, check=True,
                           env={"PYTHONHASHSEED": "7", "OMP_NUM_THREADS": "1", "PATH": ""}).stdout
    assert there.strip() == here["res"] and json.loads(there)


# ----------------------------------------------------------------------------------------------
# leaderboard: pairing, direction, ties, n, ordering
# ----------------------------------------------------------------------------------------------


def _row(key: str, v: float) -> dict[str, Any]:
    return {key: v, "avg_jct": v if key == "avg_jct" else 100.0, "jct_lower_bound": 50.0, "jobs_unfinished": 0}


SEEDS = [0, 1, 2, 3, 4, 5]
A = {s: 100.0 + 10 * s for s in SEEDS}
B = {s: A[s] * (1.2 + 0.01 * s) for s in SEEDS}  # 20-25% more than A on every seed
C = {s: A[s] * (1.02 if s % 2 else 0.98) for s in SEEDS}  # within noise of A


def _per(key: str, order_b: list[int] | None = None) -> dict[str, Any]:
    ob = order_b or SEEDS
    return {"a": {"sc": {s: _row(key, A[s]) for s in SEEDS}},
            "b": {"sc": {s: _row(key, B[s]) for s in ob}},
            "c": {"sc": {s: _row(key, C[s]) for s in reversed(ob)}}}


@needs_rliable
@pytest.mark.slow  # over 1 s: the fast tier stays under 90 s on 2 cores
def test_leaderboard_direction_ties_and_pairing_by_seed() -> None:
    from aryl_gym.leaderboard.report import compare_entrants

    low = compare_entrants(_per("avg_jct"), ["a", "b", "c"], ["sc"], "avg_jct", "a", None)
    e = low["entrants"]
    # lower is better: b (higher JCT) is separated below a and c, which tie
    assert (e["a"]["rank"], e["b"]["rank"], e["c"]["rank"]) == (1, 3, 1)
    assert e["a"]["tied_with"] == ["c"] and e["b"]["tied_with"] == []
    vb = e["b"]["vs_baseline"]  # b / a, the ratio of means over the 6 seeds, its interval around it
    assert vb["seeds"] == 6 and vb["value"] == pytest.approx(sum(B.values()) / sum(A.values()))
    assert 1.0 < vb["ci"][0] <= vb["value"] <= vb["ci"][1]
    # higher is better on the same numbers: the order flips, the ratios do not
    high = compare_entrants(_per("combined_usage"), ["a", "b", "c"], ["sc"], "combined_usage", "a", None)
    h = high["entrants"]
    assert (h["a"]["rank"], h["b"]["rank"], h["c"]["rank"]) == (2, 1, 2)
    assert h["b"]["vs_baseline"] == vb
    # rows in another seed order give the same comparison
    sh = list(SEEDS)
    random.Random(1).shuffle(sh)
    assert compare_entrants(_per("avg_jct", sh), ["a", "b", "c"], ["sc"], "avg_jct", "a", None) == low


@needs_rliable
def test_leaderboard_seeds_on_one_side_one_seed_and_identical_entrants() -> None:
    from aryl_gym.leaderboard.report import compare_entrants, fmt_ci

    per = {"a": {"sc": {s: _row("avg_jct", A[s]) for s in SEEDS}},
           "b": {"sc": {s: _row("avg_jct", B[s]) for s in SEEDS[:4]}}}
    out = compare_entrants(per, ["a", "b"], ["sc"], "avg_jct", "a", None)
    vb = out["entrants"]["b"]["vs_baseline"]  # over the 4 seeds both have, said so
    assert vb["seeds"] == 4 and vb["value"] == pytest.approx(sum(B[s] for s in SEEDS[:4]) / sum(A[s] for s in SEEDS[:4]))
    one = {"a": {"sc": {0: _row("avg_jct", 100.0)}}, "b": {"sc": {0: _row("avg_jct", 120.0)}}}
    out1 = compare_entrants(one, ["a", "b"], ["sc"], "avg_jct", "a", None)["entrants"]["b"]
    assert out1["vs_baseline"] == {"value": 1.2, "ci": [None, None], "seeds": 1}
    assert out1["rank"] == 1 and out1["uncompared"] == ["a"] and "n/a: one seed" in fmt_ci(out1["vs_baseline"])
    same = {"a": per["a"], "b": {"sc": {s: _row("avg_jct", A[s]) for s in SEEDS}}}
    o = compare_entrants(same, ["a", "b"], ["sc"], "avg_jct", "a", None)
    assert o["pairwise"][0]["ci"] == [1.0, 1.0] and not o["pairwise"][0]["separated"]
    assert o["entrants"]["a"]["rank"] == o["entrants"]["b"]["rank"] == 1


@needs_rliable
def test_overall_table_puts_an_uncompared_entrant_after_the_compared_ones_when_higher_is_better() -> None:
    """All-scenarios order within a rank: an entrant without a ratio to the Baseline went first
    when rank_by is higher-is-better (its inf sort value was negated), ahead of a better one."""
    from aryl_gym.leaderboard.report import _overall

    vals = {"base": [0.50, 0.52, 0.48, 0.51], "good": [0.51, 0.53, 0.49, 0.52], "zero": [0.0, 0.1, 0.1, 0.1]}
    per = {n: {sc: {s: _row("combined_usage", v[s]) for s in range(4)} for sc in ("s1", "s2")}
           for n, v in vals.items()}
    suite = SimpleNamespace(entrants=[SimpleNamespace(name=n) for n in vals], scenarios=["s1", "s2"],
                            baseline="base")
    ov = _overall(per, suite, "combined_usage", None)
    order = [(e["policy"], e["rank"]) for e in ov["entrants"]]
    assert order == [("good", 1), ("zero", 1), ("base", 2)]


def test_tie_ranks_competition_ranking() -> None:
    better = {("a", "c"): True, ("b", "c"): True}
    assert st.tie_ranks(["a", "b", "c"], better) == {"a": 1, "b": 1, "c": 3}
    assert st.tie_ranks(["a", "b", "c"], {("a", "c"): True}) == {"a": 1, "b": 1, "c": 2}


# ----------------------------------------------------------------------------------------------
# compare / evaluate, seed study, reproduce, reclaim suite
# ----------------------------------------------------------------------------------------------


def test_compare_ratios_pair_by_seed() -> None:
    from aryl_gym.commands.compare import METRICS, summarize

    m = METRICS[0]
    rows = [{"policy": "f", "seed": s, m: v} for s, v in ((0, 10.0), (1, 20.0), (2, 40.0))]
    rows += [{"policy": "g", "seed": s, m: v} for s, v in ((2, 20.0), (0, 5.0))]  # no seed 1, shuffled
    _, ratios = summarize(rows, ["f", "g"])
    assert ratios["g"][m] == pytest.approx((5.0 + 20.0) / (10.0 + 40.0))  # seeds 0 and 2 only
    rows2 = list(reversed(rows))
    assert summarize(rows2, ["f", "g"])[1]["g"][m] == ratios["g"][m]


def test_seeds_needed_brute_force_and_seed_study_pairs_by_seed() -> None:
    from aryl_gym.leaderboard.seed_study import pair_spread

    def brute(sd: float, delta: float, power: float | None) -> int:
        n = 2
        while (sps.t.ppf(0.975, n - 1) + (sps.t.ppf(power, n - 1) if power else 0.0)) * sd / math.sqrt(n) > math.log1p(delta):
            n += 1
        return n

    for sd in (0.018, 0.098, 0.3):
        for p in (None, 0.8):
            assert st.seeds_needed(sd, 0.03, power=p) == brute(sd, 0.03, p)
    va, vb = {0: 100.0, 1: 150.0, 2: 90.0, 3: 120.0}, {0: 110.0, 1: 140.0, 2: 100.0, 3: 0.0}
    rows = [{"scenario": "t", "policy": "a", "seed": s, "avg_jct": v} for s, v in va.items()]
    rows += [{"scenario": "t", "policy": "b", "seed": s, "avg_jct": v} for s, v in reversed(list(vb.items()))]
    p = pair_spread(rows, "t", "a", "b")
    d = [math.log(va[s] / vb[s]) for s in (0, 1, 2)]  # seed 3: b is 0, left out
    assert p is not None and p.seeds == 3
    assert p.ratio == pytest.approx(math.exp(np.mean(d))) and p.sd_log == pytest.approx(np.std(d, ddof=1))


def test_reproduce_text_table_says_arithmetic_mean_and_undefined_seeds() -> None:
    """As the Markdown table and docs/reproduction.md: a row on the arithmetic mean says so, and
    the undefined seeds are counted (was: the console table showed neither)."""
    from aryl_gym.reproduce import ROWS, RowResult, render_table_md, render_table_text

    spec = next(r for r in ROWS if r.id == "nogroup-preemption")
    rr = RowResult(spec, st.paired_ratio_ci({0: 0.0, 1: 0.1, 2: math.nan}), [0, 1, 2])
    assert rr.stat.method == "arithmetic" and rr.stat.dropped == 1
    md, text = render_table_md([rr]), render_table_text([rr])
    assert "arith. mean" in md and "(1 undefined)" in md
    assert "arith. mean" in text and "(1 undefined)" in text


def test_reclaim_suite_one_instance_has_no_interval() -> None:
    """One instance: no interval for the gap or the extra preemptions (was: [gap, gap] and
    +- 0.000, which looked certain)."""
    from aryl_gym.leaderboard.reclaim_suite import aggregate, render

    def r(e: str, inst: str, pre: int, opt: int) -> dict[str, Any]:
        return {"entrant": e, "instance": inst, "preemptions": pre, "optimal_preemptions": opt,
                "kind": "policy", "overlap": 1.0, "ms": 1.0, "note": ""}

    agg = aggregate([r("aryl", "i0", 5, 4), r("optimum", "i0", 4, 4)], ["optimum", "aryl"], boot=50)
    aryl = next(t for t in agg["entrants"] if t["entrant"] == "aryl")
    assert aryl["gap"] == pytest.approx(0.25)
    assert aryl["gap_ci"] == [None, None] and aryl["extra_ci_half"] is None
    text = render(agg)
    assert "+25.0% [n/a: one instance]" in text and "± 0.000" not in text
    json.dumps(agg, allow_nan=False)
    # two instances still get both intervals
    agg2 = aggregate([r("aryl", "i0", 5, 4), r("aryl", "i1", 3, 2)], ["aryl"], boot=50)
    assert None not in agg2["entrants"][0]["gap_ci"] and agg2["entrants"][0]["extra_ci_half"] is not None
