"""The JCT lower bound (aryl_gym.metrics.lower_bounds, aryl_gym.sim.goodput.min_time_factor): no
configuration the simulator runs is faster than the bound says, and no policy's job finishes
sooner than its bound, Pollux and unbounded AFS included."""

from __future__ import annotations

import numpy as np
import pytest
from aryl_gym.agents import make_policy

import aryl_gym.sim.goodput as G
from aryl_gym.metrics import lower_bounds
from aryl_gym.scenario import make_simulator
from aryl_gym.sim.goodput import best_rate_factors, job_curve_of, progress_grid
from aryl_gym.sim.jobs import JobState
from tests.helpers import job, make_sim, small_config

SHAPES = [("resnet50", 1, 1, 1), ("bert", 1, 1, 4), ("cnn", 4, 2, 2), ("lstm", 8, 4, 4),
          ("rl", 2, 1, 8), ("gan", 1, 2, 4)]


def _brute_factor(curve: G.JobCurve, base: np.ndarray, w_ceil: int, p: float, dense: int) -> float:
    """The best rate factor by scalar loops over workers and batch factors (JobCurve's own
    methods, as the simulator calls them; the reference batch is untuned, a factor of 1): the
    vectorised search's candidates and ``dense`` more log-spaced factors per worker count."""
    best = 0.0
    kinks = np.arange(1, 17) * curve.curve.max_local / curve.u_ref
    for w in range(1, w_ceil + 1):
        rel = float(base[w]) if w <= curve.w_max else curve.beyond(w, p)
        lo, hi = curve.lam_range(w)
        lams = np.concatenate([np.geomspace(lo, hi, G.LAM_POINTS), np.geomspace(lo, hi, dense),
                               np.clip(kinks, lo, hi)])
        tuning = max([1.0] + [curve.tuned(w, float(lam), p) for lam in lams])
        best = max(best, rel * tuning)
    return best


@pytest.mark.parametrize("family,g,w_req,w_max", SHAPES)
def test_best_rate_factor_equals_brute_force_and_is_at_least_the_reference(family, g, w_req, w_max):
    """The vectorised search finds what scalar loops find over its own candidates (so it never
    claims a rate no configuration reaches), and a 601-point batch grid finds at most
    GRID_MARGIN more."""
    curve = job_curve_of(family, None, g, w_req, w_max, None)
    base = np.arange(w_max + 1) / w_max
    w_ceil = max(w_max, 64 // g)
    ps = np.array([0.0, 0.37, 1.0])
    fast = best_rate_factors(curve, base, w_ceil, ps)
    assert (fast >= 1.0 - 1e-12).all()  # w_max at the reference batch is one of the choices
    for p, f in zip(ps, fast):
        assert f == pytest.approx(_brute_factor(curve, base, w_ceil, float(p), 2), rel=1e-9)
        assert f * (1 + G.GRID_MARGIN) >= _brute_factor(curve, base, w_ceil, float(p), 601)


@pytest.mark.parametrize("family,g,w_req,w_max", SHAPES)
def test_bound_envelope_holds_between_grid_points(family, g, w_req, w_max):
    """The bound takes, on each progress interval, the larger end's factor: on a 2,001-point
    progress grid no factor exceeds it."""
    curve = job_curve_of(family, None, g, w_req, w_max, None)
    base = np.arange(w_max + 1) / w_max
    w_ceil = max(w_max, 64 // g)
    ps = progress_grid(curve.curve)
    env = np.maximum(*(lambda f: (f[:-1], f[1:]))(best_rate_factors(curve, base, w_ceil, ps)))
    dense = np.linspace(0.0, 1.0, 2001)
    fd = best_rate_factors(curve, base, w_ceil, dense)
    idx = np.clip(np.searchsorted(ps, dense, side="right") - 1, 0, len(ps) - 2)
    assert (fd <= env[idx] * (1 + 1e-9)).all()


def test_no_configuration_of_the_simulator_beats_the_bound():
    """The simulator's own rate for random worker counts, batches and progress never exceeds
    the best rate factor times the rate at w_max (the margin covers the batch grid)."""
    rng = np.random.default_rng(0)
    cfg = small_config(train_servers=8, train_gpus=8, inf_servers=0)
    for family in ("cnn", "bert", "rl", "resnet50"):
        sim = make_sim(cfg, [job(0, work=1e5, w=4, w_min=1, elastic=True, family=family, w_req=2)])
        curve = sim.job_curve(0)
        base = np.arange(5) / 4
        w_ceil = int(sim.w_ceil[0])
        for _ in range(40):
            p = float(rng.uniform(0, 1))
            sim.remaining[0] = sim.work[0] * (1 - p)
            w = int(rng.integers(1, w_ceil + 1))
            lo, hi = curve.lam_range(w)
            lam = float(np.exp(rng.uniform(np.log(lo), np.log(hi))))
            sim.batch_lam[0] = lam
            r = sim.rate_for(0, w, 0)
            sim.batch_lam.pop(0)
            ref = sim.rate_for(0, 4, 0)
            f = best_rate_factors(curve, base, w_ceil, np.array([sim.progress(0)]))[0]
            assert r <= ref * f * (1 + G.GRID_MARGIN), (family, w, lam, p)


@pytest.mark.parametrize("policy", ["aryl", "afs-all", "pollux"])
def test_no_job_finishes_before_its_bound(policy):
    """Every completed job's JCT is at least its bound, under the policies that use more
    workers than the request and tuned batches; so the leaderboard's score is at most 1."""
    sim = make_simulator("tiny", 0)
    res = sim.run(make_policy(policy))
    done = sim.state == JobState.DONE
    lb = lower_bounds(sim)
    assert done.all() and (lb > 0).all()
    assert ((sim.finish - sim.submit)[done] >= lb[done]).all()
    assert res.jct_lower_bound <= res.avg_jct and res.mean_slowdown >= 1.0


def test_bound_follows_the_cluster_room():
    """A job alone cannot use more workers than the cluster holds: on a cluster of 4 GPUs the
    bound of a 1-GPU job is its factor at 4 workers, larger (slower) than at the 64-GPU ceiling."""
    jobs = [job(0, work=3600.0, w=2, w_min=1, elastic=True, family="cnn")]
    small = make_sim(small_config(train_servers=1, train_gpus=4, inf_servers=0), jobs)
    big = make_sim(small_config(train_servers=16, train_gpus=4, inf_servers=0), jobs)
    j = jobs[0]
    f4 = G.job_min_time_factor(j.family, j.app, j.g, j.w_req, j.w_max, j.batch_size, j.scaling, 4)
    f64 = G.job_min_time_factor(j.family, j.app, j.g, j.w_req, j.w_max, j.batch_size, j.scaling, 64)
    assert lower_bounds(small)[0] == pytest.approx(3600.0 / 2 * f4)
    assert lower_bounds(big)[0] == pytest.approx(3600.0 / 2 * f64)
    assert f64 < f4 <= 1.0


@pytest.mark.slow
def test_no_pollux_workload_job_finishes_before_its_bound():
    """On a Pollux workload (jobs with their own application, batch and scaling curve) under
    Pollux itself, which tunes batches and uses up to the ceiling (15 s)."""
    from aryl_gym.workload.paths import default_data_root

    root = default_data_root()
    if root is None or not (root / "traces" / "pollux-philly").is_dir():
        pytest.skip(f"real traces absent (traces/pollux-philly under the data root {root}): set "
                    "ARYL_GYM_DATA to the folder holding them")
    sim = make_simulator("pollux-w6", 0)
    sim.run(make_policy("pollux"))
    done = sim.state == JobState.DONE
    assert done.all() and ((sim.finish - sim.submit) >= lower_bounds(sim)).all()
