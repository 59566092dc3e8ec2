"""Leaderboard statistics with rliable (Agarwal et al., "Deep RL at the Edge of the Statistical
Precipice", NeurIPS 2021): interquartile mean, stratified bootstrap confidence intervals,
performance profiles.

Scores are matrices of shape ``(runs, tasks)``: one row per seed, one column per scenario (the
rliable layout). Everything here is a thin layer over :mod:`rliable`:

* :func:`iqm` -- ``rliable.metrics.aggregate_iqm`` (the 25% trimmed mean over all runs and tasks);
* :func:`bootstrap_ci` -- ``rliable.library.StratifiedBootstrap``: runs are resampled with
  replacement *within* each task; with several arrays the *same* run indices are drawn for all of
  them, so a comparison of two entrants stays paired by seed; percentile intervals;
* :func:`ratio` -- the statistic of a paired comparison: per task the ratio of the means over the
  runs, then the geometric mean over tasks (for one task, simply ``mean(x) / mean(y)``);
* :func:`performance_profile` -- ``rliable.library.create_performance_profile``: the fraction of
  runs whose score exceeds ``tau``, with its bootstrap band.

rliable draws its resampling indices from NumPy's *global* generator; every call here seeds that
generator (``seed``, 0 by default) for the duration of the call and then restores its state, so
the intervals are reproducible bit for bit and nothing else in the process is disturbed.

rliable is in the ``stats`` extra (``pip install 'aryl-gym[stats]'``); :func:`available` says
whether it can be imported (it needs ``arch`` < 8, which needs ``pandas`` < 3).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

#: bootstrap replications (rliable's examples use 2,000 for profiles and 50,000 for aggregates;
#: 2,000 puts the Monte-Carlo error of a 95% percentile bound at about 0.1 of a standard error)
REPS = 2000
#: coverage of every interval
CI_SIZE = 0.95
#: seed of NumPy's global generator during a bootstrap
SEED = 0


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


@contextlib.contextmanager
def seeded_global_rng(seed: int) -> Iterator[None]:
    """Seed ``np.random`` (which rliable's resampling uses) and restore its state afterwards."""
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(state)


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
    from rliable import metrics

    return float(metrics.aggregate_iqm(as_matrix(scores)))


def ratio(x: Any, y: Any) -> float:
    """Geometric mean over tasks of ``mean_runs(x) / mean_runs(y)`` (paired (runs, tasks) arrays)."""
    mx = as_matrix(x).mean(axis=0)
    my = as_matrix(y).mean(axis=0)
    return float(np.exp(np.mean(np.log(mx / my))))


def bootstrap_ci(
    func: Callable[..., float],
    *arrays: Any,
    reps: int = REPS,
    size: float = CI_SIZE,
    seed: int = SEED,
) -> tuple[float, float, float]:
    """``(point, low, high)``: ``func(*arrays)`` and its stratified bootstrap percentile interval.

    The arrays share one shape ``(runs, tasks)``; each replication draws, per task, ``runs``
    run indices with replacement and applies the same indices to every array (paired)."""
    from rliable import library

    mats = [as_matrix(a) for a in arrays]
    if any(m.shape != mats[0].shape for m in mats):
        raise ValueError(f"paired arrays must share a shape, got {[m.shape for m in mats]}")
    point = float(func(*mats))
    with seeded_global_rng(seed):
        bs = library.StratifiedBootstrap(*mats)
        ci = bs.conf_int(lambda *a: np.array([func(*a)]), reps=reps, size=size, method="percentile")
    lo, hi = float(ci[0, 0]), float(ci[1, 0])
    return point, lo, hi


def fast_iqm(scores: np.ndarray) -> float:
    """The same number as ``rliable.metrics.aggregate_iqm`` (``scipy.stats.trim_mean(scores,
    0.25, axis=None)``: drop ``int(0.25 n)`` values at each end of the sorted ``n`` values, average
    the rest), without scipy's per-call argument handling, which costs about 0.4 ms: it runs once
    per bootstrap replication. ``tests/test_leaderboard_stats.py`` checks the two agree."""
    a = np.sort(np.asarray(scores, dtype=float), axis=None)
    cut = int(0.25 * a.size)
    return float(a[cut:a.size - cut].mean())


def iqm_ci(scores: Any, reps: int = REPS, seed: int = SEED) -> tuple[float, float, float]:
    """IQM (rliable's ``aggregate_iqm``) and its stratified bootstrap 95% interval."""
    point = iqm(scores)
    _, lo, hi = bootstrap_ci(fast_iqm, scores, reps=reps, seed=seed)
    return point, lo, hi


def ratio_ci(x: Any, y: Any, reps: int = REPS, seed: int = SEED) -> tuple[float, float, float]:
    """:func:`ratio` of two paired arrays and its stratified (paired) bootstrap 95% interval."""
    return bootstrap_ci(ratio, x, y, reps=reps, seed=seed)


def score_distribution(scores: np.ndarray, taus: Any) -> np.ndarray:
    """``P(score > tau)`` over all runs and tasks, for every ``tau``: rliable's default profile
    (``run_score_deviation`` through ``np.vectorize``), computed in one array operation."""
    s = np.asarray(scores, dtype=float).ravel()
    return (s[:, None] > np.asarray(taus, dtype=float)[None, :]).mean(axis=0)


def performance_profile(
    score_dict: Mapping[str, Any],
    taus: Sequence[float] | np.ndarray,
    reps: int = REPS,
    seed: int = SEED,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Score distributions ``P(score > tau)`` over runs and tasks, with 95% bands (rliable).

    Returns ``(profiles, bands)``: per name an array of ``len(taus)`` fractions, and a
    ``(2, len(taus))`` array of lower and upper bounds."""
    from rliable import library

    mats = {k: as_matrix(v) for k, v in score_dict.items()}
    with seeded_global_rng(seed):
        prof, cis = library.create_performance_profile(
            mats, np.asarray(taus, dtype=float), custom_profile_func=score_distribution, reps=reps
        )
    return {k: np.asarray(v, dtype=float) for k, v in prof.items()}, {
        k: np.asarray(v, dtype=float) for k, v in cis.items()
    }


def tie_ranks(
    names: Sequence[str],
    better: Mapping[tuple[str, str], bool],
) -> dict[str, int]:
    """Competition ranks with ties: ``rank(e) = 1 + #{o : better[(o, e)]}``, where
    ``better[(o, e)]`` says that ``o`` is significantly better than ``e``. Entrants that nobody
    separates share rank 1, and so on."""
    return {e: 1 + sum(1 for o in names if o != e and better.get((o, e), False)) for e in names}


def finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


__all__ = [
    "CI_SIZE",
    "REPS",
    "SEED",
    "as_matrix",
    "available",
    "bootstrap_ci",
    "fast_iqm",
    "score_distribution",
    "iqm",
    "iqm_ci",
    "performance_profile",
    "ratio",
    "ratio_ci",
    "require",
    "seeded_global_rng",
    "tie_ranks",
]
