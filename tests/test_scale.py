"""The env at the paper's scale (issue 37): the indexes and aggregates that make a step cost
independent of the queue and the cluster give exactly what the scans they replace gave.

* the free-capacity index (servers bucketed by free GPUs, bitsets): best fit and fill equal the
  numpy scan and the list scan on random states (hypothesis), and whole plans equal the numpy
  engine's on random decisions of a basic-size simulator;
* the simulator's aggregates (queued GPU demand, free index) equal a recount after every step of
  random episodes (``aryl_gym.sim.invariants.check``);
* the env's window index and O(window) observation equal :func:`window_lists` and
  :meth:`ObservationBuilder.build` (the scans) step by step, in both window orders;
* the counting masks equal dry runs of every candidate (basic size, preemption).
"""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import aryl_gym  # noqa: F401
from aryl_gym.envs.observation import fit_lists, fit_tables, fits_now, window_lists
from aryl_gym.sim import invariants
from aryl_gym.sim.index import FreeIndex, best_fit_bits, bits_of, fill_bits, ids_of
from aryl_gym.sim.jobs import JobState
from aryl_gym.sim.placement import (
    _plan_index,
    _plan_list,
    _plan_np,
    best_fit,
    best_fit_list,
    fill,
    fill_list,
)

# -- the index against the scans ---------------------------------------------------------------


@st.composite
def _servers(draw):
    n = draw(st.integers(1, 140))
    cap = draw(st.lists(st.sampled_from([4, 8, 8, 8, 16]), min_size=n, max_size=n))
    free = [draw(st.integers(0, c)) for c in cap]
    cand = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    g = draw(st.sampled_from([1, 2, 3, 4, 8]))
    need = draw(st.integers(0, 40))
    return free, cap, cand, g, need


@settings(max_examples=50, deadline=None)
@given(_servers())
def test_best_fit_and_fill_on_the_index_equal_the_scans(case):
    free, cap, cand, g, need = case
    ix = FreeIndex(free, cap, [True] * len(cap), [False] * len(cap))
    cbits = bits_of(cand)
    s, f = best_fit_bits(ix.bins, ix.not_cap, cbits, g)
    want = best_fit(np.array(free), np.array(cap), np.array(cand), g)
    assert s == want
    assert s == best_fit_list(free, cap, [i for i, c in enumerate(cand) if c], g)
    if s >= 0:
        assert f == free[s]
    bins = ix.bins.copy()
    got = fill_bits(bins, ix.not_cap, cbits, g, need)
    fr = np.array(free)
    assert got == fill(fr, np.array(cap), np.array(cand), g, need)
    assert got == fill_list(list(free), cap, [i for i, c in enumerate(cand) if c], g, need)
    # the bins after the fill hold exactly the servers' new free GPUs
    assert bins == FreeIndex(fr.tolist(), cap, [True] * len(cap), [False] * len(cap)).bins


@settings(max_examples=40, deadline=None)
@given(_servers())
def test_index_fit_tables_and_moves(case):
    free, cap, cand, _, _ = case
    ix = FreeIndex(free, cap, cand, [not c for c in cand])
    fits = ix.fits(ix.train)
    for g in (1, 2, 4, 8):
        assert fits[g] == sum(f // g for f, c in zip(free, cand) if c)
    rng = np.random.default_rng(len(free))
    for _ in range(20):
        s = int(rng.integers(len(free)))
        new = int(rng.integers(cap[s] + 1))
        ix.move(s, free[s], new)
        free[s] = new
        assert ix.free_of(s) == new
    assert ix == FreeIndex(free, cap, cand, [not c for c in cand])
    assert ids_of(ix.train) == [i for i, c in enumerate(cand) if c]


@pytest.mark.slow
def test_plans_on_the_index_equal_the_numpy_engine():
    """_plan_index (clusters above 64 servers) against _plan_np and _plan_list on the states of a
    basic-size episode under aryl, for every running and queued job, both pools, grouping."""
    from aryl_gym.agents import make_policy

    from aryl_gym.scenario import make_episode
    from aryl_gym.sim.view import INFER, TRAIN, PlacementOptions

    sim = make_episode("basic", 3).simulator()
    pol = make_policy("aryl")
    pol.reset(sim.seed)
    sim.begin(pol)
    checked = 0
    opts_all = [PlacementOptions(group_flexible=True), PlacementOptions(group_flexible=False)]
    for r in range(4000):
        sim.step(pol)
        if r % 97 or not sim.n_loaned:
            continue
        for j in sim.running_ids()[:20] + sim.queued_ids()[:20]:
            for opts in opts_all:
                for pool in (TRAIN, INFER):
                    for nb, nf in ((0, 3), (int(sim.w_min[j]), 2), (1, 0)):
                        a = _plan_index(sim, j, pool, nb, nf, opts)
                        assert a == _plan_np(sim, j, pool, nb, nf, opts)
                        assert a == _plan_list(sim, j, pool, nb, nf, opts)
                        checked += 1
        if sim.done:
            break
    assert checked > 1000


# -- the simulator's aggregates and the env's indexes, step by step ----------------------------


def _random_episode(env, steps, seed, check):
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    for _ in range(steps):
        check(env)
        ok = np.flatnonzero(env.action_masks())
        _, _, te, tr, _ = env.step(int(ok[rng.integers(len(ok))]))
        if te or tr:
            env.reset()


def _check_env(env):
    sim = env.sim
    invariants.check(sim)  # queued demand and the free index against a recount
    assert fit_lists(sim) == tuple(x.tolist() for x in fit_tables(sim))
    w, qo, ro = window_lists(sim, env.k, env._obs_builder.elastic, env._base_rates, env.window_fit)
    assert list(env.window) == w
    assert env._q_out == qo
    if env.window_fit:  # the rule itself: as many fitting queued jobs shown as asked, where any exist
        fits = fit_lists(sim)
        queued_in = [j for j in w if sim.state[j] == JobState.QUEUED]
        shown = sum(fits_now(sim, j, fits) for j in queued_in)
        hidden = sum(fits_now(sim, j, fits) for j in qo)
        assert shown >= min(env.window_fit, len(queued_in)) or hidden == 0
        assert sorted(queued_in + qo) == sorted(sim.queued_ids())
    # the O(window) observation against the scanning builder
    b = env._obs_builder
    jobs, cluster, outside = b.build(sim, env.window, qo, ro, env.fits, env.codec.target_feature(env),
                                     env.codec.tentative_free(env), env._wsnap)
    obs = env._obs()
    np.testing.assert_array_equal(obs["jobs"], jobs)
    np.testing.assert_array_equal(obs["cluster"], cluster)
    np.testing.assert_array_equal(obs["outside"], outside)


@pytest.mark.parametrize("order,window_fit", [("submit", 0), ("pred_time", 0), ("submit", 3), ("pred_time", 2)])
def test_aggregates_and_window_index_equal_recounts_testbed(order, window_fit):
    cfg = aryl_gym.config.load_scenario("testbed").replace(workload={"load": 1.4})
    env = gym.make("aryl_gym/Aryl-v1", scenario=cfg, action_mode="sequential", window=8,
                   window_order=order, allow_preempt=True, window_fit=window_fit).unwrapped
    _random_episode(env, 700, 3, _check_env)


@pytest.mark.slow
@pytest.mark.parametrize("order,window_fit", [("submit", 0), ("pred_time", 0), ("pred_time", 4)])
def test_aggregates_and_window_index_equal_recounts_basic(order, window_fit):
    env = gym.make("aryl_gym/Aryl-v1", scenario="basic", action_mode="sequential", window=32,
                   window_order=order, allow_preempt=True, observation="v1", window_fit=window_fit).unwrapped
    _random_episode(env, 2500, 4, _check_env)


def test_resample_future_keeps_the_indexes_right():
    env = gym.make("aryl_gym/Aryl-v1", scenario="testbed", action_mode="sequential", window=8).unwrapped
    rng = np.random.default_rng(0)
    env.reset(seed=1)
    for i in range(400):
        if i % 50 == 25:
            env.resample_future(i)
            _check_env(env)
        ok = np.flatnonzero(env.action_masks())
        _, _, te, tr, _ = env.step(int(ok[rng.integers(len(ok))]))
        if te or tr:
            env.reset()
        _check_env(env)


# -- counting masks against dry runs ------------------------------------------------------------


def _masks_equal_dry_runs(env, steps, seed, warmup=0):
    codec = env.codec
    rng = np.random.default_rng(seed)
    for _ in range(warmup):  # into a loaded part of the episode, fast masks only
        ok = np.flatnonzero(env.action_masks())
        env.step(int(ok[rng.integers(len(ok))]))
    compared = 0
    for _ in range(steps):
        codec._mask = None
        fast = codec.mask(env).copy()
        saved = codec._counts
        codec._mask, codec._counts = None, None
        codec.quick_reject = codec.incremental = codec.counting = False
        slow = codec.mask(env).copy()
        codec.quick_reject = codec.incremental = codec.counting = True
        codec._mask, codec._counts = None, saved
        np.testing.assert_array_equal(fast, slow)
        compared += int(slow[:-1].sum())
        allowed = np.flatnonzero(slow[:-1])
        a = int(rng.choice(allowed)) if len(allowed) and rng.random() < 0.85 else codec.commit
        _, _, te, tr, _ = env.step(a)
        if te or tr:
            env.reset()
    assert compared > 100


def test_counting_masks_equal_dry_runs_basic_small_window():
    env = gym.make("aryl_gym/Aryl-v1", scenario="basic", action_mode="sequential", window=8,
                   allow_preempt=True).unwrapped
    env.reset(seed=2)
    _masks_equal_dry_runs(env, 150, 1)


@pytest.mark.slow
@pytest.mark.parametrize("placement", [None, {"group_flexible": False}, {"elastic_prefer_inference": False}])
def test_counting_masks_equal_dry_runs_basic(placement):
    from aryl_gym.envs.allocation import ARYL_PLACEMENT

    kw = {} if placement is None else {"placement": dataclasses.replace(ARYL_PLACEMENT, **placement)}
    env = gym.make("aryl_gym/Aryl-v1", scenario="basic", action_mode="sequential", window=32,
                   allow_preempt=True, window_order="pred_time", **kw).unwrapped
    env.reset(seed=5)
    _masks_equal_dry_runs(env, 300, 2, warmup=2500)


def test_observation_v1_forecast_lists_equal_arrays():
    from aryl_gym.config import load_scenario
    from aryl_gym.envs.obs_v1 import InferenceForecast

    fc = InferenceForecast(load_scenario("testbed"))
    rng = np.random.default_rng(0)
    ahead = (0.0, 900.0, 3600.0, 7200.0, 14400.0, 28800.0)
    for _ in range(2000):
        now = float(rng.uniform(0, 3e6)) if rng.random() < 0.5 else float(rng.integers(0, 50000)) * 60.0
        a = fc.utilization(None, now, np.asarray(ahead))
        assert fc.utilization_list(None, now, ahead) == [float(x) for x in a]
        assert fc.loanable_list(list(a)) == [float(x) for x in fc.loanable(a)]


def test_reserve_fitting_by_hand():
    """window_fit's rule on lists: jobs 3, 6 and 7 fit; the window holds 1-4, the queue's others
    are 5-7 (ids are the order)."""
    from aryl_gym.envs.observation import reserve_fitting

    fit = {3, 6, 7}.__contains__
    q_in, q_out = [1, 2, 3, 4], [5, 6, 7]
    assert reserve_fitting(q_in, q_out, fit, 1, int) == (q_in, q_out)  # job 3 already shows
    assert reserve_fitting(q_in, q_out, fit, 2, int) == ([1, 2, 3, 6], [4, 5, 7])
    assert reserve_fitting(q_in, q_out, fit, 3, int) == ([1, 3, 6, 7], [2, 4, 5])
    assert reserve_fitting(q_in, q_out, fit, 4, int) == ([1, 3, 6, 7], [2, 4, 5])  # none left
    assert reserve_fitting(q_in, [5], fit, 4, int) == (q_in, [5])  # nothing outside fits


def test_window_fit_option_is_checked():
    with pytest.raises(ValueError, match="window_fit must be an integer from 0 to the window"):
        gym.make("aryl_gym/Aryl-v2", scenario="tiny", window=4, window_fit=5)
    with pytest.raises(ValueError, match="window_fit"):
        gym.make("aryl_gym/Aryl-v2", scenario="tiny", window_fit=True)
