"""Paired-seed intervals of ``compare`` and ``evaluate`` (aryl_gym.commands.compare.ratio_cis):
hand-made per-seed figures against the t interval computed here, and the commands' output."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from aryl_gym.commands.compare import ci_table, ratio_cis
from tests.test_hostile_v2 import _run  # aryl-gym ARGV: exit code, stdout, stderr


def _rows(policy: str, jct: dict[int, float | None]) -> list[dict]:
    return [{"policy": policy, "seed": s, "avg_jct": v} for s, v in jct.items()]


def _t_interval(ratios: list[float]) -> tuple[float, float, float]:
    """exp(mean +- t(0.975, n-1) * sd / sqrt(n)) of the log ratios, by hand (t from scipy)."""
    from scipy.stats import t

    x = np.log(ratios)
    half = t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x))
    return math.exp(x.mean()), math.exp(x.mean() - half), math.exp(x.mean() + half)


def test_per_seed_ratios_are_paired_and_their_interval_is_the_t_interval():
    # seed 3 only on one side, seed 4 a failed figure (None): both left out; seeds 0..2 paired
    rows = _rows("a", {0: 100.0, 1: 200.0, 2: 400.0, 4: 50.0}) + _rows(
        "b", {2: 420.0, 0: 110.0, 1: 190.0, 3: 70.0, 4: None})
    st = ratio_cis(rows, ["a", "b"], ("avg_jct",))["b"]["avg_jct"]
    want = _t_interval([110 / 100, 190 / 200, 420 / 400])
    assert st.n == 3 and st.dropped == 0
    assert (st.mean, st.lo, st.hi) == pytest.approx(want, rel=1e-12)
    assert dict(st.per_seed) == pytest.approx({0: 1.1, 1: 0.95, 2: 1.05})
    # the row order does not matter (pairing is by seed id)
    again = ratio_cis(list(reversed(rows)), ["a", "b"], ("avg_jct",))["b"]["avg_jct"]
    assert (again.mean, again.lo, again.hi) == (st.mean, st.lo, st.hi)


def test_a_zero_denominator_is_dropped_and_counted_and_one_seed_has_no_interval():
    rows = _rows("a", {0: 0.0, 1: 10.0}) + _rows("b", {0: 5.0, 1: 20.0})
    st = ratio_cis(rows, ["a", "b"], ("avg_jct",))["b"]["avg_jct"]
    assert st.n == 1 and st.dropped == 1 and st.mean == pytest.approx(2.0)
    assert math.isnan(st.lo) and math.isnan(st.hi)
    text = ci_table({"b": {"avg_jct": st}}, "a", "avg_jct")
    assert "- (fewer than 2 seeds)" in text and "1 (1 undefined)" in text


def test_compare_prints_and_writes_the_paired_interval(capsys):
    code, out, _ = _run(["compare", "--scenario", "tiny", "--policies", "fifo,sjf", "--seeds", "0,1,2",
                         "--quiet"], capsys)
    assert code == 0
    assert "avg_jct, paired by seed: per-seed ratio policy / fifo" in out
    code, out, _ = _run(["compare", "--scenario", "tiny", "--policies", "fifo,sjf", "--seeds", "0,1,2",
                         "--quiet", "--json"], capsys)
    d = json.loads(out)
    ci = d["ratio_ci"]["sjf"]["avg_jct"]
    per = {r["seed"]: r["avg_jct"] for r in d["rows"] if r["policy"] == "sjf"}
    ref = {r["seed"]: r["avg_jct"] for r in d["rows"] if r["policy"] == "fifo"}
    assert ci["n"] == 3
    assert ci["per_seed"] == pytest.approx({str(s): per[s] / ref[s] for s in (0, 1, 2)})
    assert "fifo" not in d["ratio_ci"]  # no interval of the first policy against itself
