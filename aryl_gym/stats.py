"""Statistics of paired comparisons: every interval and ratio the project reports comes from here.

Comparisons are paired by seed: two policies play the same drawn episodes, so per seed there is
one figure of each. Three estimators, each with its generator passed in explicitly:

* **t intervals on log ratios** (:func:`paired_ratio_ci`, :class:`RatioStat`): the geometric mean
  of per-seed ratios with ``exp(mean(log r) +- t_{0.975, n-1} sd(log r) / sqrt(n))``; the
  quantile is ``scipy.stats.t.ppf`` (:func:`t_quantile`). ``aryl-gym reproduce`` and the
  scripts use it.
* **the paired bootstrap of per-seed figures** (:func:`paired_bootstrap_ratio`: ``mean(x) /
  mean(y)`` with a percentile interval; :func:`bootstrap_replicates` for any statistic, as the
  reclaim suite's gap to the optimum): seeds are resampled with replacement, the same draw for
  every array, from a ``numpy.random.Generator`` (or a seed for a fresh one).
* **rliable's stratified bootstrap** (Agarwal et al., "Deep RL at the Edge of the Statistical
  Precipice", NeurIPS 2021) over ``(runs, tasks)`` matrices, one row per seed and one column
  per scenario: runs are resampled *within* each task, the same indices for every array, so a
  comparison stays paired (:func:`stratified_bootstrap_ci`, :func:`ratio_ci`, :func:`iqm_ci`,
  :func:`optimality_gap_ci`, :func:`performance_profile`; the leaderboard's tables and plots).
  The probability of improvement (:func:`probability_of_improvement_ci`) compares every run of
  one entrant with every run of the other, so rliable resamples the two independently. rliable draws its indices
  from NumPy's *global* legacy generator; these functions take a ``numpy.random.RandomState``
  (or a seed for a fresh one), run rliable on its state, hand the advanced state back to it and
  restore the global state, so nothing is seeded globally and a seed gives the same interval bit
  for bit. rliable is in the ``stats`` extra (:func:`available`).

Beside them: :func:`geometric_mean`, :func:`mean_sd`, :func:`t_half_width`, the sample size of a
paired comparison (:func:`seeds_needed`, the seed study) and competition ranks with ties
(:func:`tie_ranks`).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

#: coverage of every interval
LEVEL = 0.95
#: bootstrap replications of the stratified bootstrap (rliable's examples use 2,000 for profiles
#: and 50,000 for aggregates; 2,000 puts the Monte-Carlo error of a 95% percentile bound at
#: about 0.1 of a standard error)
REPS = 2000
#: seed of the stratified bootstrap's generator when the caller gives none
SEED = 0
#: two-sided 95% normal quantile (``scipy.stats.norm.ppf(0.975)``), and the extra quantile for
#: 80% power (``norm.ppf(0.8)``); tests/test_stats.py checks both against scipy
Z95 = 1.959963984540054
Z_POWER80 = 0.8416212335729143


# ----------------------------------------------------------------------------------------------
# t intervals
# ----------------------------------------------------------------------------------------------


def t_quantile(df: int, level: float = LEVEL) -> float:
    """``t_{(1 + level) / 2, df}``, the two-sided Student-t quantile (``scipy.stats.t.ppf``)."""
    if df < 1:
        raise ValueError("a t interval needs at least 2 observations (df >= 1)")
    check_level(level)
    # scipy.stats costs about a second to import: only when an interval is computed
    from scipy.stats import t

    return float(t.ppf(0.5 + level / 2, df))


def check_level(level: float) -> float:
    """A confidence level strictly between 0 and 1 (was: 1.5 gave NaN intervals, 0 zero-width ones)."""
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0.0 < level < 1.0:
        raise ValueError(f"the confidence level must be a number between 0 and 1 (e.g. 0.95), got {level!r}")
    return float(level)


def mean_sd(values: Any) -> tuple[float, float]:
    """Mean and sample standard deviation (``ddof=1``; NaN for fewer than two values)."""
    xs = np.asarray(values, dtype=float)
    sd = float(xs.std(ddof=1)) if xs.size >= 2 else math.nan
    return float(xs.mean()) if xs.size else math.nan, sd


def t_half_width(values: Any, level: float = LEVEL) -> float:
    """Half-width ``t_{(1 + level) / 2, n-1} * sd / sqrt(n)`` of the t interval of the mean."""
    xs = np.asarray(values, dtype=float)
    n = xs.size
    return t_quantile(n - 1, level) * float(xs.std(ddof=1)) / math.sqrt(n)


def geometric_mean(values: Any) -> float:
    """``exp(mean(log v))`` of positive values."""
    return float(np.exp(np.mean(np.log(np.asarray(values, dtype=float)))))


def _finite_or_none(v: float) -> float | None:
    return v if math.isfinite(v) else None


@dataclass(frozen=True)
class RatioStat:
    """Geometric mean of paired per-seed ratios with a 95% t interval (NaN when undefined)."""

    mean: float
    lo: float
    hi: float
    n: int
    per_seed: tuple[tuple[int, float], ...] = ()
    dropped: int = 0  # seeds where the ratio was undefined (zero denominator, missing figure)
    method: str = "geometric"  # or "arithmetic" when some ratio is exactly 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "mean": _finite_or_none(self.mean),
            "ci_lo": _finite_or_none(self.lo),
            "ci_hi": _finite_or_none(self.hi),
            "n": self.n,
            "dropped_seeds": self.dropped,
            "per_seed": {str(s): _finite_or_none(r) for s, r in self.per_seed},
        }


def paired_ratio_ci(ratios: Mapping[int, float] | Sequence[float], level: float = LEVEL) -> RatioStat:
    """Geometric mean and t interval of per-seed ratios (``{seed: ratio}`` or a list).

    CI = ``exp(m +- t_{(1 + level) / 2, n-1} * s / sqrt(n))`` with ``m``, ``s`` the mean and
    sample standard deviation of ``log(ratio)``, taken in seed order. Missing, non-finite or negative ratios are
    dropped and counted. A ratio of exactly 0 (the numerator's figure is 0, e.g. no preemption
    at all) has no logarithm: then the row uses the arithmetic mean of the ratios with a t
    interval (``method="arithmetic"``), so a real zero is reported, not hidden.
    """
    # in seed order: the sums, hence the last bits of the interval, do not depend on the order the
    # seeds were given in (was: {0: a, 1: b} and {1: b, 0: a} could differ in the 16th digit)
    items = sorted(ratios.items(), key=lambda kv: int(kv[0])) if isinstance(ratios, Mapping) else list(
        enumerate(ratios))
    good = [(int(s), float(r)) for s, r in items if r is not None and math.isfinite(r) and r >= 0]
    dropped = len(items) - len(good)
    n = len(good)
    if n == 0:
        return RatioStat(math.nan, math.nan, math.nan, 0, (), dropped)
    if any(r == 0 for _, r in good):
        xs = np.array([r for _, r in good])
        mu = float(xs.mean())
        if n == 1:
            return RatioStat(mu, math.nan, math.nan, 1, tuple(good), dropped, "arithmetic")
        half = t_half_width(xs, level)
        # a ratio is never negative: the interval stops at 0 (was: -1.48 for ratios 0, 1, 2)
        return RatioStat(mu, max(mu - half, 0.0), mu + half, n, tuple(good), dropped, "arithmetic")
    logs = np.log([r for _, r in good])
    m = float(logs.mean())
    if n == 1:
        return RatioStat(_exp(m), math.nan, math.nan, 1, tuple(good), dropped)
    half = t_half_width(logs, level)
    return RatioStat(_exp(m), _exp(m - half), _exp(m + half), n, tuple(good), dropped)


def _exp(x: float) -> float:
    """``exp(x)``, inf beyond the float range (was: OverflowError for ratios near 1e-320)."""
    return math.exp(x) if x < 709.0 else math.inf


def seeds_needed(sd_log: float, delta: float = 0.03, level: float = LEVEL, power: float | None = None) -> int:
    """Seeds for a paired comparison whose per-seed log ratios spread by ``sd_log``: the smallest
    ``n >= 2`` (a standard deviation needs two) whose Student-t interval fits, as
    :func:`paired_ratio_ci` computes it.

    Without ``power``: ``t_{(1 + level) / 2, n-1} * sd_log / sqrt(n) <= log(1 + delta)``, so the
    ``level`` interval of the mean log ratio has half-width at most ``log(1 + delta)``. With
    ``power`` (e.g. 0.8): ``(t_{(1 + level) / 2, n-1} + t_{power, n-1}) * sd_log / sqrt(n) <=
    log(1 + delta)``, so a true difference ``delta`` is detected (the interval excludes a ratio
    of 1) with about that probability. The t quantiles grow as ``n`` shrinks, so ``n`` is
    found by search, starting from the normal approximation (a lower bound)."""
    if not (delta > 0 and math.isfinite(delta) and math.isfinite(sd_log) and sd_log >= 0):
        raise ValueError(f"need a finite delta > 0 and a finite sd >= 0, got delta={delta}, sd={sd_log}")
    check_level(level)
    if power is not None and (isinstance(power, bool) or not 0.5 <= power < 1.0):
        raise ValueError(f"power must be a probability in [0.5, 1), e.g. 0.8, got {power!r}")
    target = math.log1p(delta)
    if sd_log == 0:
        return 2
    # scipy.stats costs about a second to import: only when a sample size is computed
    from scipy.stats import norm, t

    hi_q = 0.5 + level / 2
    z = float(norm.ppf(hi_q)) + (float(norm.ppf(power)) if power is not None else 0.0)
    root = z * sd_log / target
    n0 = root * root if root < 1e6 else math.inf
    if not n0 < 1e12:  # was: an OverflowError traceback (delta 1e-300)
        raise ValueError(f"delta={delta} is too small to resolve: it would need about {n0:.3g} seeds")
    lo = max(2, math.ceil(n0))  # t > z: never fewer seeds than the normal approximation
    while True:
        n = np.arange(lo, lo + 64, dtype=float)
        q = t.ppf(hi_q, n - 1)
        if power is not None:
            q = q + t.ppf(power, n - 1)
        fits = np.flatnonzero(q * sd_log / np.sqrt(n) <= target)
        if fits.size:
            return int(n[fits[0]])
        lo += 64


# ----------------------------------------------------------------------------------------------
# Paired bootstrap of per-seed figures (numpy Generator)
# ----------------------------------------------------------------------------------------------


def bootstrap_replicates(
    statistic: Callable[..., np.ndarray],
    *arrays: Any,
    reps: int,
    rng: np.random.Generator | int = 0,
) -> np.ndarray:
    """``statistic`` of ``reps`` paired resamples: seed indices drawn with replacement, the same
    indices for every array. ``statistic`` gets each array resampled, shape ``(reps, n)``, and
    returns one value per kept replication (it may drop undefined ones)."""
    xs = [np.asarray(a, dtype=float) for a in arrays]
    n = len(xs[0])
    if any(len(a) != n for a in xs):
        raise ValueError(f"paired arrays must have one length, got {[len(a) for a in xs]}")
    gen = np.random.default_rng(rng)
    if isinstance(reps, bool) or not isinstance(reps, (int, np.integer)) or reps < 1:
        raise ValueError(f"reps must be an integer >= 1, got {reps!r}")  # was: an IndexError
    idx = gen.integers(0, n, size=(reps, n))
    return np.asarray(statistic(*(a[idx] for a in xs)), dtype=float)


def percentile_interval(replicates: Any, level: float = LEVEL) -> tuple[float, float]:
    """The percentile interval of bootstrap replicates (``np.percentile``, linear)."""
    half = 50.0 * level  # 47.5 exactly for 0.95, so the percentiles are exactly 2.5 and 97.5
    return float(np.percentile(replicates, 50.0 - half)), float(np.percentile(replicates, 50.0 + half))


def paired_bootstrap_ratio(
    x: Any, y: Any, reps: int = 10_000, rng: np.random.Generator | int = 0, level: float = LEVEL
) -> tuple[float, float, float]:
    """``mean(x) / mean(y)`` of paired per-seed figures and its paired bootstrap percentile
    interval (``reps`` replications from ``rng``: a Generator, or a seed for a fresh one). With
    fewer than two seeds the interval is ``(nan, nan)``, as :func:`paired_ratio_ci`'s (was: a
    zero-width interval from one seed, which looked certain)."""
    xa, ya = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(xa) != len(ya):
        raise ValueError(f"paired arrays must have one length, got {[len(xa), len(ya)]}")
    if len(xa) < 2:
        point = float(xa.mean() / ya.mean()) if len(xa) else math.nan
        return point, math.nan, math.nan
    r = bootstrap_replicates(lambda a, b: a.mean(axis=1) / b.mean(axis=1), xa, ya, reps=reps, rng=rng)
    lo, hi = percentile_interval(r, level)
    return float(xa.mean() / ya.mean()), lo, hi


# ----------------------------------------------------------------------------------------------
# rliable's stratified bootstrap over (runs, tasks) matrices (numpy RandomState)
# ----------------------------------------------------------------------------------------------


def available() -> bool:
    """True when rliable (and its dependency arch) can be imported."""
    try:
        import rliable.library  # noqa: F401
        import rliable.metrics  # noqa: F401
    except Exception:  # noqa: BLE001 - ImportError, or arch failing to import under pandas 3
        return False
    return True


def require() -> None:
    if not available():
        raise ImportError(
            "leaderboard confidence intervals need rliable: pip install 'aryl-gym[stats]'"
        )


def legacy_rng(rng: np.random.RandomState | int | None) -> np.random.RandomState:
    """``rng`` itself, or a fresh ``RandomState`` seeded with it (``None``: :data:`SEED`)."""
    if isinstance(rng, np.random.RandomState):
        return rng
    return np.random.RandomState(SEED if rng is None else int(rng))


@contextlib.contextmanager
def drawing_from(rng: np.random.RandomState) -> Iterator[None]:
    """Make ``np.random``'s global generator draw ``rng``'s stream for the duration (rliable
    draws from the global one), hand the advanced state back to ``rng``, and restore the global
    state: callers see an ordinary explicit generator."""
    saved = np.random.get_state()
    np.random.set_state(rng.get_state())
    try:
        yield
    finally:
        rng.set_state(np.random.get_state())
        np.random.set_state(saved)


def as_matrix(values: Any) -> np.ndarray:
    """A float ``(runs, tasks)`` matrix; a 1-D sequence is one task."""
    a = np.asarray(values, dtype=float)
    if a.ndim == 1:
        a = a[:, None]
    if a.ndim != 2 or a.shape[0] < 1 or a.shape[1] < 1:
        raise ValueError(f"scores must be a non-empty (runs, tasks) matrix, got shape {a.shape}")
    return a


def iqm(scores: Any) -> float:
    """Interquartile mean over all runs and tasks (rliable's ``aggregate_iqm``)."""
    from rliable import metrics  # the optional stats extra

    return float(metrics.aggregate_iqm(as_matrix(scores)))


def ratio(x: Any, y: Any) -> float:
    """Geometric mean over tasks of ``mean_runs(x) / mean_runs(y)`` (paired (runs, tasks) arrays)."""
    mx = as_matrix(x).mean(axis=0)
    my = as_matrix(y).mean(axis=0)
    return float(np.exp(np.mean(np.log(mx / my))))


def stratified_bootstrap_ci(
    func: Callable[..., float],
    *arrays: Any,
    reps: int = REPS,
    level: float = LEVEL,
    rng: np.random.RandomState | int | None = None,
) -> tuple[float, float, float]:
    """``(point, low, high)``: ``func(*arrays)`` and its stratified bootstrap percentile interval.

    The arrays share one shape ``(runs, tasks)``; each replication draws, per task, ``runs``
    run indices with replacement and applies the same indices to every array (paired)."""
    from rliable import library  # the optional stats extra

    mats = [as_matrix(a) for a in arrays]
    if any(m.shape != mats[0].shape for m in mats):
        raise ValueError(f"paired arrays must share a shape, got {[m.shape for m in mats]}")
    point = float(func(*mats))
    with drawing_from(legacy_rng(rng)):
        bs = library.StratifiedBootstrap(*mats)
        ci = bs.conf_int(lambda *a: np.array([func(*a)]), reps=reps, size=level, method="percentile")
    lo, hi = float(ci[0, 0]), float(ci[1, 0])
    return point, lo, hi


def fast_iqm(scores: np.ndarray) -> float:
    """The same number as ``rliable.metrics.aggregate_iqm`` (``scipy.stats.trim_mean(scores,
    0.25, axis=None)``: drop ``int(0.25 n)`` values at each end of the sorted ``n`` values, average
    the rest), without scipy's per-call argument handling, which costs about 0.4 ms: it runs once
    per bootstrap replication. ``tests/test_stats.py`` checks the two agree."""
    a = np.sort(np.asarray(scores, dtype=float), axis=None)
    cut = int(0.25 * a.size)
    return float(a[cut:a.size - cut].mean())


def iqm_ci(
    scores: Any, reps: int = REPS, rng: np.random.RandomState | int | None = None
) -> tuple[float, float, float]:
    """IQM (rliable's ``aggregate_iqm``) and its stratified bootstrap 95% interval."""
    point = iqm(scores)
    _, lo, hi = stratified_bootstrap_ci(fast_iqm, scores, reps=reps, rng=rng)
    return point, lo, hi


def ratio_ci(
    x: Any, y: Any, reps: int = REPS, rng: np.random.RandomState | int | None = None
) -> tuple[float, float, float]:
    """:func:`ratio` of two paired arrays and its stratified (paired) bootstrap 95% interval."""
    return stratified_bootstrap_ci(ratio, x, y, reps=reps, rng=rng)


def score_distribution(scores: np.ndarray, taus: Any) -> np.ndarray:
    """``P(score > tau)`` over all runs and tasks, for every ``tau``: rliable's default profile
    (``run_score_deviation`` through ``np.vectorize``), computed in one array operation."""
    s = np.asarray(scores, dtype=float).ravel()
    return (s[:, None] > np.asarray(taus, dtype=float)[None, :]).mean(axis=0)


def performance_profile(
    score_dict: Mapping[str, Any],
    taus: Sequence[float] | np.ndarray,
    reps: int = REPS,
    rng: np.random.RandomState | int | None = None,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Score distributions ``P(score > tau)`` over runs and tasks, with 95% bands (rliable).

    Returns ``(profiles, bands)``: per name an array of ``len(taus)`` fractions, and a
    ``(2, len(taus))`` array of lower and upper bounds."""
    from rliable import library  # the optional stats extra

    mats = {k: as_matrix(v) for k, v in score_dict.items()}
    with drawing_from(legacy_rng(rng)):
        prof, cis = library.create_performance_profile(
            mats, np.asarray(taus, dtype=float), custom_profile_func=score_distribution, reps=reps
        )
    return {k: np.asarray(v, dtype=float) for k, v in prof.items()}, {
        k: np.asarray(v, dtype=float) for k, v in cis.items()
    }


def probability_of_improvement(x: Any, y: Any) -> float:
    """rliable's ``metrics.probability_of_improvement``: per task, ``P(X > Y)`` of a random run
    of ``x`` against a random run of ``y`` (the Mann-Whitney U statistic over ``n_x n_y``, a tie
    counting one half), averaged over tasks. Higher scores are better: pass scores oriented that
    way (the leaderboard's normalised score; never a raw JCT). Runs are not paired."""
    from rliable import metrics  # the optional stats extra

    mx, my = as_matrix(x), as_matrix(y)
    if mx.shape[1] != my.shape[1]:
        raise ValueError(f"both score matrices need the same tasks, got shapes {mx.shape} and {my.shape}")
    return float(metrics.probability_of_improvement(mx, my))


def fast_probability_of_improvement(x: np.ndarray, y: np.ndarray) -> float:
    """The same number as :func:`probability_of_improvement` by counting pairs:
    ``mean_tasks(#{(i, j): x_i > y_j} + #{x_i = y_j} / 2) / (n_x n_y)``, without scipy's
    ``mannwhitneyu`` (about 0.4 ms per task), since it runs once per bootstrap replication.
    ``tests/test_stats.py`` checks the two agree."""
    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    gt = (a[:, None, :] > b[None, :, :]).mean(axis=(0, 1))
    eq = (a[:, None, :] == b[None, :, :]).mean(axis=(0, 1))
    return float(np.mean(gt + 0.5 * eq))


def probability_of_improvement_ci(
    x: Any, y: Any, reps: int = REPS, rng: np.random.RandomState | int | None = None
) -> tuple[float, float, float]:
    """:func:`probability_of_improvement` of ``x`` over ``y`` and its 95% interval from rliable's
    ``library.get_interval_estimates`` with the pair ``[x, y]``: a stratified bootstrap that
    resamples the runs of ``x`` and of ``y`` independently within each task (rliable's
    ``StratifiedIndependentBootstrap``: the statistic compares every run of one with every run of
    the other, so no pairing is kept), percentile interval."""
    from rliable import library  # the optional stats extra

    mx, my = as_matrix(x), as_matrix(y)
    point = probability_of_improvement(mx, my)
    with drawing_from(legacy_rng(rng)):
        _, cis = library.get_interval_estimates(
            {"x": [mx, my]},
            lambda a, b: np.array([fast_probability_of_improvement(a, b)]),
            reps=reps,
            confidence_interval_size=LEVEL,
        )
    return point, float(cis["x"][0, 0]), float(cis["x"][1, 0])


def optimality_gap(scores: Any, gamma: float = 1.0) -> float:
    """rliable's ``metrics.aggregate_optimality_gap``: ``gamma - mean(min(score, gamma))`` over
    all runs and tasks, the mean shortfall below the target score ``gamma`` (a score above
    ``gamma`` counts as ``gamma``). Lower is better; 0 when every run reaches ``gamma``."""
    from rliable import metrics  # the optional stats extra

    return float(metrics.aggregate_optimality_gap(as_matrix(scores), gamma))


def optimality_gap_ci(
    scores: Any, gamma: float = 1.0, reps: int = REPS, rng: np.random.RandomState | int | None = None
) -> tuple[float, float, float]:
    """:func:`optimality_gap` and its stratified bootstrap 95% interval
    (``library.get_interval_estimates``, runs resampled within each task)."""
    from rliable import library, metrics  # the optional stats extra

    m = as_matrix(scores)
    point = optimality_gap(m, gamma)
    with drawing_from(legacy_rng(rng)):
        _, cis = library.get_interval_estimates(
            {"x": m},
            lambda a: np.array([metrics.aggregate_optimality_gap(a, gamma)]),
            reps=reps,
            confidence_interval_size=LEVEL,
        )
    return point, float(cis["x"][0, 0]), float(cis["x"][1, 0])


# ----------------------------------------------------------------------------------------------
# Ranks
# ----------------------------------------------------------------------------------------------


def tie_ranks(
    names: Sequence[str],
    better: Mapping[tuple[str, str], bool],
) -> dict[str, int]:
    """Competition ranks with ties: ``rank(e) = 1 + #{o : better[(o, e)]}``, where
    ``better[(o, e)]`` says that ``o`` is significantly better than ``e``. Entrants that nobody
    separates share rank 1, and so on."""
    return {e: 1 + sum(1 for o in names if o != e and better.get((o, e), False)) for e in names}


__all__ = [
    "LEVEL",
    "REPS",
    "SEED",
    "Z95",
    "Z_POWER80",
    "RatioStat",
    "as_matrix",
    "available",
    "bootstrap_replicates",
    "drawing_from",
    "fast_iqm",
    "fast_probability_of_improvement",
    "geometric_mean",
    "iqm",
    "iqm_ci",
    "legacy_rng",
    "mean_sd",
    "optimality_gap",
    "optimality_gap_ci",
    "paired_bootstrap_ratio",
    "paired_ratio_ci",
    "percentile_interval",
    "performance_profile",
    "probability_of_improvement",
    "probability_of_improvement_ci",
    "ratio",
    "ratio_ci",
    "require",
    "score_distribution",
    "seeds_needed",
    "stratified_bootstrap_ci",
    "t_half_width",
    "t_quantile",
    "tie_ranks",
]
