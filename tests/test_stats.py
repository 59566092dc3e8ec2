"""aryl_gym.stats: t intervals, the paired bootstrap, rliable's stratified bootstrap on an explicit
generator, sample sizes and tied ranks, against hand-computed values and against rliable itself."""

from __future__ import annotations

import math

import numpy as np
import pytest

from aryl_gym import stats as st

needs_rliable = pytest.mark.skipif(not st.available(), reason="rliable not installed (the stats extra)")


# ----------------------------------------------------------------------------------------------
# t intervals
# ----------------------------------------------------------------------------------------------


def test_t_quantiles_match_tables() -> None:
    # printed tables (3 decimals) and the large-df values
    assert st.t_quantile(1) == pytest.approx(12.706, abs=5e-4)
    assert st.t_quantile(2) == pytest.approx(4.303, abs=5e-4)
    assert st.t_quantile(4) == pytest.approx(2.776, abs=5e-4)
    assert st.t_quantile(30) == pytest.approx(2.042, abs=5e-4)
    assert st.t_quantile(60) == pytest.approx(2.0003, abs=5e-5)
    assert st.t_quantile(120) == pytest.approx(1.9799, abs=5e-5)
    assert st.t_quantile(10**6) == pytest.approx(st.Z95, abs=1e-5)
    assert st.t_quantile(4, level=0.9) == pytest.approx(2.132, abs=5e-4)
    with pytest.raises(ValueError):
        st.t_quantile(0)


def test_normal_quantiles_are_scipys() -> None:
    from scipy.stats import norm

    assert st.Z95 == float(norm.ppf(0.975))
    assert st.Z_POWER80 == float(norm.ppf(0.8))


def test_mean_sd_and_half_width_by_hand() -> None:
    # 1, 2, 3, 6: mean 3, sd sqrt((4 + 1 + 0 + 9) / 3) = 2.160247; t_{0.975, 3} = 3.182446
    m, sd = st.mean_sd([1.0, 2.0, 3.0, 6.0])
    assert m == 3.0 and sd == pytest.approx(2.160247, rel=1e-6)
    assert st.t_half_width([1.0, 2.0, 3.0, 6.0]) == pytest.approx(3.182446 * 2.160247 / 2, rel=1e-6)
    assert math.isnan(st.mean_sd([1.0])[1])
    assert st.geometric_mean([1.0, 4.0, 16.0]) == pytest.approx(4.0)


def test_paired_ratio_ci_hand_computed() -> None:
    # ratios 1.2, 1.5, 1.8: logs 0.182322, 0.405465, 0.587787; mean 0.391858, sd 0.203075;
    # half-width t_{0.975, 2} 4.302653 * 0.203075 / sqrt(3) = 0.504466; geometric mean
    # 3.24^(1/3) = 1.479727; CI exp(0.391858 -+ 0.504466) = 0.893501 .. 2.450577.
    r = st.paired_ratio_ci({0: 1.2, 1: 1.5, 2: 1.8})
    assert r.n == 3 and r.dropped == 0
    assert r.mean == pytest.approx(1.479727, rel=1e-6)
    assert r.lo == pytest.approx(0.893501, rel=1e-6)
    assert r.hi == pytest.approx(2.450577, rel=1e-6)
    # identical ratios: zero-width interval
    r = st.paired_ratio_ci([2.0, 2.0])
    assert (r.mean, r.lo, r.hi) == pytest.approx((2.0, 2.0, 2.0))
    assert r.to_dict()["per_seed"] == {"0": 2.0, "1": 2.0}


def test_paired_ratio_ci_drops_undefined_and_single_seed_has_no_interval() -> None:
    r = st.paired_ratio_ci({0: 1.5, 1: math.nan, 2: -1.0, 3: math.inf, 4: None})  # type: ignore[dict-item]
    assert r.n == 1 and r.dropped == 4
    assert r.mean == pytest.approx(1.5)
    assert math.isnan(r.lo) and math.isnan(r.hi)
    assert r.to_dict()["ci_lo"] is None
    r = st.paired_ratio_ci([])
    assert r.n == 0 and math.isnan(r.mean)


def test_paired_ratio_ci_reports_a_real_zero_with_the_arithmetic_mean() -> None:
    # ratios 0, 0.5, 1.0: mean 0.5, sd 0.5, half-width 4.302653 * 0.5 / sqrt(3) = 1.242069
    r = st.paired_ratio_ci([0.0, 0.5, 1.0])
    assert r.method == "arithmetic" and r.n == 3 and r.dropped == 0
    # the t interval reaches below 0, where no ratio lies: it stops at 0 (was: -0.742069)
    assert (r.mean, r.lo, r.hi) == pytest.approx((0.5, 0.0, 0.5 + 1.242069), rel=1e-6)
    # one that stays above 0 is the plain t interval: 0, 2, 2, 2, 2 (mean 1.6, sd 0.894427)
    r = st.paired_ratio_ci([0.0, 2.0, 2.0, 2.0, 2.0])
    half = 2.776445 * 0.894427 / math.sqrt(5)
    assert (r.lo, r.hi) == pytest.approx((1.6 - half, 1.6 + half), rel=1e-5) and r.lo > 0
    assert st.paired_ratio_ci([1.2, 1.5]).method == "geometric"


def test_seeds_needed_hand_computed() -> None:
    # the t rule (the suites' intervals are t intervals): at n = 13, t_{0.975,12} = 2.178813 and
    # 2.178813 * 0.05 / sqrt(13) = 0.030215 > log 1.03 = 0.029559; at n = 14, t_{0.975,13} =
    # 2.160369 and 2.160369 * 0.05 / sqrt(14) = 0.028869 fits (the normal rule gave 11)
    assert st.seeds_needed(0.05) == 14
    # 80% power: (t_{0.975,n-1} + t_{0.8,n-1}) * 0.05 / sqrt(n); n = 25: (2.063899 + 0.856855)
    # * 0.01 = 0.029208 fits, n = 24: (2.068658 + 0.857530) * 0.05 / sqrt(24) = 0.029865 does not
    assert st.seeds_needed(0.05, power=0.8) == 25
    assert st.seeds_needed(0.0) == 2
    with pytest.raises(ValueError):
        st.seeds_needed(float("nan"))


# ----------------------------------------------------------------------------------------------
# the paired bootstrap of per-seed figures
# ----------------------------------------------------------------------------------------------


def test_paired_bootstrap_ratio_by_hand() -> None:
    """A constant per-seed ratio has a zero-width interval; the point is the ratio of means
    (not the mean of ratios); the resampling pairs the seeds."""
    y = np.array([100.0, 1000.0, 10.0])
    assert st.paired_bootstrap_ratio(0.9 * y, y, reps=500) == pytest.approx((0.9, 0.9, 0.9))
    point, lo, hi = st.paired_bootstrap_ratio(np.array([1.0, 3.0]), np.array([1.0, 1.0]), reps=4000)
    assert point == pytest.approx(2.0)
    assert lo == pytest.approx(1.0) and hi == pytest.approx(3.0)  # both seeds drawn twice: 1 and 3


def test_paired_bootstrap_takes_a_generator_and_leaves_the_global_one_alone() -> None:
    g = np.random.default_rng(3)
    x, y = g.uniform(4000, 6000, 12), g.uniform(4000, 6000, 12)
    np.random.seed(123)
    before = np.random.get_state()[1].copy()
    a = st.paired_bootstrap_ratio(x, y, reps=1000, rng=7)
    assert a == st.paired_bootstrap_ratio(x, y, reps=1000, rng=np.random.default_rng(7))
    gen = np.random.default_rng(7)
    first = st.paired_bootstrap_ratio(x, y, reps=1000, rng=gen)
    second = st.paired_bootstrap_ratio(x, y, reps=1000, rng=gen)  # the stream goes on
    assert first == a and second != a
    assert np.array_equal(np.random.get_state()[1], before)
    # the same draws by hand: ratio of resampled means, percentiles 2.5 and 97.5
    idx = np.random.default_rng(7).integers(0, 12, size=(1000, 12))
    r = x[idx].mean(axis=1) / y[idx].mean(axis=1)
    assert a[1:] == (float(np.percentile(r, 2.5)), float(np.percentile(r, 97.5)))


def test_bootstrap_replicates_pairs_and_checks_lengths() -> None:
    reps = st.bootstrap_replicates(lambda a, b: (a - b).max(axis=1), [1.0, 2.0, 3.0], [1.0, 2.0, 3.0], reps=50)
    assert reps.shape == (50,) and np.all(reps == 0.0)  # paired: the same seeds for both
    with pytest.raises(ValueError, match="one length"):
        st.bootstrap_replicates(lambda a, b: a, [1.0, 2.0], [1.0], reps=5)


# ----------------------------------------------------------------------------------------------
# rliable's stratified bootstrap
# ----------------------------------------------------------------------------------------------


@needs_rliable
def test_iqm_hand_computed() -> None:
    # 8 runs: the IQM drops the 2 lowest and 2 highest -> mean(3, 4, 5, 6) = 4.5
    s = np.array([[7.0], [1.0], [100.0], [3.0], [2.0], [6.0], [5.0], [4.0]])
    assert st.iqm(s) == pytest.approx(4.5)
    # 3 runs: nothing trimmed (int(0.25 * 3) = 0) -> the mean
    assert st.iqm([1.0, 2.0, 6.0]) == pytest.approx(3.0)
    # over runs and tasks together: 2 x 4 = 8 values
    assert st.iqm(np.array([[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 100.0]])) == pytest.approx(4.5)


@needs_rliable
def test_fast_iqm_equals_rliable() -> None:
    from rliable import metrics

    rng = np.random.default_rng(0)
    for shape in [(1, 1), (3, 1), (5, 1), (8, 3), (10, 2), (7, 5)]:
        s = rng.lognormal(size=shape)
        assert st.fast_iqm(s) == pytest.approx(float(metrics.aggregate_iqm(s)), rel=1e-12, abs=0)


def test_ratio_hand_computed() -> None:
    assert st.ratio([1.0, 3.0], [2.0, 2.0]) == pytest.approx(1.0)
    assert st.ratio([2.0, 4.0], [4.0, 4.0]) == pytest.approx(0.75)
    # two tasks: geometric mean of the per-task ratios of means, sqrt(0.5 * 2) = 1
    x = np.array([[1.0, 4.0], [1.0, 4.0]])
    y = np.array([[2.0, 2.0], [2.0, 2.0]])
    assert st.ratio(x, y) == pytest.approx(1.0)
    assert st.ratio(np.array([[1.0, 8.0]]), np.array([[2.0, 2.0]])) == pytest.approx(math.sqrt(0.5 * 4))


@needs_rliable
def test_bootstrap_support_and_pairing() -> None:
    """Two runs, one task: a paired resample is (0,0), (0,1), (1,0) or (1,1), each with
    probability 1/4, so the ratio takes 0.5, 1.0 or 1.5 and the 95% percentile interval is
    exactly [0.5, 1.5]."""
    point, lo, hi = st.ratio_ci([1.0, 3.0], [2.0, 2.0])
    assert point == pytest.approx(1.0)
    assert (lo, hi) == (pytest.approx(0.5), pytest.approx(1.5))
    # paired: x == y run by run gives a ratio of exactly 1 in every resample (unpaired would not)
    point, lo, hi = st.ratio_ci([1.0, 3.0, 7.0], [1.0, 3.0, 7.0])
    assert point == lo == hi == pytest.approx(1.0)
    # a constant per-seed ratio is estimated without spread
    base = np.array([5000.0, 6200.0, 4100.0, 7000.0])
    assert st.ratio_ci(0.8 * base, base) == pytest.approx((0.8, 0.8, 0.8))


@needs_rliable
def test_bootstrap_stratified_by_task() -> None:
    """Runs are resampled within each task: a task whose runs are all equal contributes no
    spread, whatever the other task does."""
    x = np.array([[1.0, 10.0], [1.0, 30.0]])
    y = np.array([[1.0, 20.0], [1.0, 20.0]])
    point, lo, hi = st.ratio_ci(x, y)
    # task 1 ratio is always 1; task 2 is 0.5, 1 or 1.5 -> sqrt of that
    assert point == pytest.approx(1.0)
    assert lo == pytest.approx(math.sqrt(0.5)) and hi == pytest.approx(math.sqrt(1.5))


@needs_rliable
def test_stratified_bootstrap_is_rliables_on_the_given_generator() -> None:
    """The interval is rliable's own, bit for bit, as if numpy's global generator had been
    seeded; the caller's RandomState advances; the global generator is left as it was."""
    from rliable import library

    g = np.random.default_rng(3)
    x, y = g.uniform(4000, 6000, (16, 2)), g.uniform(4000, 6000, (16, 2))
    saved = np.random.get_state()
    np.random.seed(5)  # rliable as documented: on the seeded global generator
    bs = library.StratifiedBootstrap(x, y)
    ci = bs.conf_int(lambda *a: np.array([st.ratio(*a)]), reps=500, size=0.95, method="percentile")
    np.random.set_state(saved)
    before = np.random.get_state()[1].copy()
    rng = np.random.RandomState(5)
    point, lo, hi = st.ratio_ci(x, y, reps=500, rng=rng)
    assert (lo, hi) == (float(ci[0, 0]), float(ci[1, 0]))
    assert point == st.ratio(x, y)
    assert st.ratio_ci(x, y, reps=500, rng=5) == (point, lo, hi)  # a seed: a fresh generator
    assert st.ratio_ci(x, y, reps=500, rng=rng) != (point, lo, hi)  # the stream went on
    assert st.ratio_ci(x, y, reps=500) == st.ratio_ci(x, y, reps=500, rng=st.SEED)
    assert np.array_equal(np.random.get_state()[1], before)


@needs_rliable
def test_performance_profile_point_values() -> None:
    scores = {"a": np.array([[0.1], [0.5], [0.9], [0.7]]), "b": np.array([[0.2], [0.2], [0.2], [0.2]])}
    taus = [0.0, 0.15, 0.6, 1.0]
    before = np.random.get_state()[1].copy()
    prof, bands = st.performance_profile(scores, taus, reps=200)
    assert np.array_equal(np.random.get_state()[1], before)
    assert prof["a"] == pytest.approx([1.0, 0.75, 0.5, 0.0])
    assert prof["b"] == pytest.approx([1.0, 1.0, 0.0, 0.0])
    assert bands["a"].shape == (2, 4)
    assert np.all(bands["a"][0] <= prof["a"] + 1e-12) and np.all(prof["a"] <= bands["a"][1] + 1e-12)


@needs_rliable
def test_score_distribution_equals_rliable() -> None:
    from rliable import library

    s = np.random.default_rng(1).uniform(size=(9, 3))
    taus = np.linspace(0, 1, 17)
    assert np.array_equal(st.score_distribution(s, taus), library.score_distributions(s, taus))


def _brute_improvement(a: np.ndarray, b: np.ndarray) -> float:
    """P(X > Y) by enumerating every (run of a, run of b) pair of every task; a tie is 1/2."""
    per = []
    for t in range(a.shape[1]):
        wins = sum(1.0 if u > v else 0.5 if u == v else 0.0 for u in a[:, t] for v in b[:, t])
        per.append(wins / (a.shape[0] * b.shape[0]))
    return sum(per) / len(per)


@needs_rliable
def test_probability_of_improvement_hand_computed() -> None:
    # task 1: x = 3, 5, 7 against y = 1, 4: 3>1, 5>1, 5>4, 7>1, 7>4 -> 5 of 6 pairs
    # task 2: x = 1, 1 against y = 1, 2: two ties (1/2 each) of 4 pairs -> 1/4
    # (runs may differ in number, 3 against 2)
    assert st.probability_of_improvement([[3.0], [5.0], [7.0]], [[1.0], [4.0]]) == pytest.approx(5 / 6)
    assert st.probability_of_improvement([[1.0], [1.0]], [[1.0], [2.0]]) == pytest.approx(0.25)
    # both tasks at once: the mean over tasks (task 1 with x = 3, 5: 3>1, 5>1, 5>4 of 4 pairs)
    both = st.probability_of_improvement([[3.0, 1.0], [5.0, 1.0]], [[1.0, 1.0], [4.0, 2.0]])
    assert both == pytest.approx((3 / 4 + 1 / 4) / 2)
    assert st.probability_of_improvement([1.0, 2.0], [1.0, 2.0]) == 0.5  # itself
    assert st.probability_of_improvement([2.0, 3.0], [1.0, 1.5]) == 1.0
    with pytest.raises(ValueError, match="same tasks"):
        st.probability_of_improvement(np.ones((2, 2)), np.ones((2, 3)))


@needs_rliable
def test_fast_probability_of_improvement_equals_rliable_and_brute_force() -> None:
    g = np.random.default_rng(2)
    for nx, ny, tasks in [(1, 1, 1), (3, 2, 1), (5, 5, 2), (10, 7, 3)]:
        for ties in (False, True):
            x = g.integers(0, 4, (nx, tasks)).astype(float) if ties else g.uniform(size=(nx, tasks))
            y = g.integers(0, 4, (ny, tasks)).astype(float) if ties else g.uniform(size=(ny, tasks))
            ref = st.probability_of_improvement(x, y)
            assert st.fast_probability_of_improvement(x, y) == pytest.approx(ref, abs=1e-12)
            assert _brute_improvement(x, y) == pytest.approx(ref, abs=1e-12)


@needs_rliable
def test_probability_of_improvement_ci_by_brute_force() -> None:
    """The interval is the percentile interval of the pair-counting statistic over resamples
    that draw, per replication, the runs of x then the runs of y (each within its task) from
    the given generator: rliable's StratifiedIndependentBootstrap, replayed by hand."""
    g = np.random.default_rng(4)
    x = g.integers(0, 5, (4, 2)).astype(float)
    y = g.integers(0, 5, (3, 2)).astype(float)
    rs = np.random.RandomState(7)
    cols = np.arange(2)
    vals = [
        _brute_improvement(x[rs.choice(4, (4, 2)), cols], y[rs.choice(3, (3, 2)), cols])
        for _ in range(300)
    ]
    before = np.random.get_state()[1].copy()
    point, lo, hi = st.probability_of_improvement_ci(x, y, reps=300, rng=7)
    assert np.array_equal(np.random.get_state()[1], before)  # the global generator untouched
    assert point == pytest.approx(_brute_improvement(x, y))
    assert (lo, hi) == (pytest.approx(np.percentile(vals, 2.5), abs=1e-12),
                        pytest.approx(np.percentile(vals, 97.5), abs=1e-12))
    assert st.probability_of_improvement_ci(x, y, reps=300, rng=7) == (point, lo, hi)  # same seed
    # one clearly better entrant: every resample has P = 1
    assert st.probability_of_improvement_ci([0.9, 0.8, 0.95], [0.5, 0.4, 0.6], reps=200) == (1.0, 1.0, 1.0)


@needs_rliable
def test_optimality_gap_hand_computed_and_ci_by_brute_force() -> None:
    # 1 - mean(min(score, 1)): 0.5, 0.8 and 1.2 (clipped to 1) -> 1 - 2.3 / 3
    assert st.optimality_gap([0.5, 0.8, 1.2]) == pytest.approx(1 - 2.3 / 3)
    assert st.optimality_gap([[0.5, 1.0], [0.7, 0.9]]) == pytest.approx(1 - 3.1 / 4)
    assert st.optimality_gap([1.0, 1.3]) == 0.0
    assert st.optimality_gap([0.5], gamma=0.8) == pytest.approx(0.3)
    # two runs of one task: a resample is (a, a), (a, b), (b, a) or (b, b), the gap 0.5, 0.25
    # or 0: the percentile interval is exactly [0, 0.5]
    assert st.optimality_gap_ci([0.5, 1.0]) == (pytest.approx(0.25), 0.0, 0.5)
    # brute force: replay the draws (runs within each task) and take the percentiles
    s = np.random.default_rng(5).uniform(0.3, 1.1, (6, 2))
    rs = np.random.RandomState(11)
    vals = [1 - np.minimum(s[rs.choice(6, (6, 2)), np.arange(2)], 1.0).mean() for _ in range(400)]
    point, lo, hi = st.optimality_gap_ci(s, reps=400, rng=11)
    assert point == pytest.approx(1 - np.minimum(s, 1.0).mean())
    assert (lo, hi) == (pytest.approx(np.percentile(vals, 2.5), abs=1e-12),
                        pytest.approx(np.percentile(vals, 97.5), abs=1e-12))


def test_tie_ranks() -> None:
    names = ["a", "b", "c", "d"]
    # a beats c and d; b beats d; a and b are not separated, nor are b and c
    better = {("a", "c"): True, ("a", "d"): True, ("b", "d"): True}
    assert st.tie_ranks(names, better) == {"a": 1, "b": 1, "c": 2, "d": 3}
