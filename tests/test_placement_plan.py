"""The placement engine's dry run (:func:`aryl_gym.sim.placement.plan`) and step-by-step trial
placements (:class:`aryl_gym.sim.placement.Scratch`) follow the real placement exactly, and
never change the simulator."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from aryl_gym.agents import make_policy
from hypothesis import given, settings
from hypothesis import strategies as st

from aryl_gym.scenario import make_episode
from aryl_gym.sim.placement import Scratch, plan
from aryl_gym.sim.view import INFER, TRAIN, Decision, PlacementOptions
from tests.helpers import ScriptedPolicy, examples, job, make_sim, small_config

GROUPED = PlacementOptions(elastic_prefer_inference=True, group_flexible=True)


def _state(sim) -> tuple:
    return (
        sim.srv_free.tolist(),
        sim.srv_base_gpus.tolist(),
        sim.srv_flex_gpus.tolist(),
        sim.workers.tolist(),
        sim.state.tolist(),
        sim.pool.tolist(),
        [dict(sim.base[j]) for j in range(sim.n_jobs)],
        [dict(sim.flex[j]) for j in range(sim.n_jobs)],
    )


def _mid_episode(scenario: str, seed: int, policy: str, rounds: int):
    sim = make_episode(scenario, seed).simulator()
    pol = make_policy(policy)
    pol.reset(sim.seed)
    sim.begin(pol)
    for _ in range(rounds):
        if sim.done:
            break
        sim.step(pol)
    sim.pre_decision(pol)
    return sim, pol


@settings(max_examples=examples(25), deadline=None)
@given(
    seed=st.integers(0, 50),
    rounds=st.integers(0, 60),
    policy=st.sampled_from(["aryl", "afs-loan", "aryl-nogroup"]),
    draws=st.lists(st.integers(0, 10_000), min_size=1, max_size=12),
)
def test_plan_equals_the_real_placement_and_changes_nothing(seed, rounds, policy, draws):
    sim, pol = _mid_episode("testbed", seed, policy, rounds)
    active = sorted(sim.queued_ids() + sim.running_ids())
    if not active:
        return
    targets = {}
    for d in draws:  # random targets, some invalid on purpose (clamped or ignored)
        j = active[d % len(active)]
        targets[j] = (d // 7) % (int(sim.w_max[j]) + 2)
    dec = Decision(targets=targets, order=[active[d % len(active)] for d in draws[::-1]])
    before = _state(sim)
    p = plan(sim, dec, pol.placement)
    assert _state(sim) == before  # the dry run changed nothing
    real = copy.deepcopy(sim)
    rep = real.apply(dec)
    assert p.report == rep
    assert _state(p.after) == _state(real)
    changed, pools = p.changes()
    assert changed == {
        j: int(real.workers[j]) for j in range(sim.n_jobs) if real.workers[j] != sim.workers[j]
    }
    assert all(pools[j] == real.pool[j] for j in pools)


def _grouped_cluster():
    # one training server of 8 GPUs, three loaned 4-GPU inference servers
    cfg = small_config(train_servers=1, train_gpus=8, inf_servers=3, inf_gpus=4)
    jobs = [job(0, work=1e6, g=1, w=6, w_min=2, elastic=True, ta=True)]
    sim = make_sim(cfg, jobs, 0.0)
    pol = ScriptedPolicy(lambda v: Decision())
    sim.begin(pol)
    sim.pre_decision(pol)
    assert sim.n_loaned == 3
    return sim


def test_scratch_grow_follows_the_flexible_grouping_tiers():
    sim = _grouped_cluster()
    s = Scratch(sim.view, GROUPED)
    assert s.grow(0, INFER, 6) == 6
    base, flex = s.base[0], s.flex[0]
    assert sum(base.values()) == 2 and sum(flex.values()) == 4
    assert not set(base) & set(flex)  # flexible workers avoid the base server
    # without grouping, best fit puts the flexible workers next to the base first
    s2 = Scratch(sim.view, PlacementOptions(True, False))
    assert s2.grow(0, INFER, 6) == 6
    assert set(s2.base[0]) & set(s2.flex[0])
    assert sim.workers[0] == 0 and sim.srv_free.sum() == 20  # the simulator is untouched


def test_scratch_fits_release_and_whole():
    sim = _grouped_cluster()
    s = Scratch(sim.view, GROUPED)
    assert s.fits(INFER, 4) == 3 and s.fits(TRAIN, 8) == 1
    assert s.grow(0, INFER, 2) == 2  # the base: 2 workers on one server
    assert s.fits(INFER, 4) == 2  # the cache follows the change
    assert s.grow(0, INFER, 20, whole=True) == 0  # more than fits: nothing placed
    assert s.workers[0] == 2
    assert s.grow(0, INFER, 4) == 4
    s.release(0, 3)  # scale-in: flexible workers first
    assert s.workers[0] == 3 and sum(s.base[0].values()) == 2 and sum(s.flex[0].values()) == 1


def test_plan_fixed_pools_and_whole():
    sim = _grouped_cluster()
    # the preferred pool is tried first
    j8 = Decision(targets={0: 6}, pools={0: TRAIN})
    p = plan(sim, j8, GROUPED)
    assert p.report.started == [0] and p.after.pool[0] == TRAIN
    # an impossible pool: with fixed pools nothing else is tried
    sim.srv_free[0] = 0  # training server full (for this check only)
    try:
        assert plan(sim, j8, GROUPED).report.started == [0]  # falls back to inference
        fixed = plan(sim, j8, GROUPED, fixed_pools=True)
        assert fixed.report.started == [] and fixed.report.unplaced == {0: (6, 0)}
    finally:
        sim.srv_free[0] = 8
    # whole: 6 workers of 4 GPUs do not fit (3 loaned servers, 1 training server; one pool per
    # job): the engine starts the job with 3 on the inference pool, ``whole`` with none
    cfg = small_config(train_servers=1, train_gpus=4, inf_servers=3, inf_gpus=4)
    sim2 = make_sim(cfg, [job(0, work=1e6, g=4, w=6, w_min=1, elastic=True, ta=True)], 0.0)
    pol = ScriptedPolicy(lambda v: Decision())
    sim2.begin(pol)
    sim2.pre_decision(pol)
    dec = Decision(targets={0: 6}, pools={0: INFER})
    assert plan(sim2, dec, GROUPED).workers(0) == 3
    assert plan(sim2, dec, GROUPED, whole=True).workers(0) == 0


@pytest.mark.parametrize("policy", ["afs", "gandiva", "random", "pollux"])
def test_policies_decisions_are_placed_in_full(policy):
    """The allocators cut their targets with the engine's dry run: the engine never reports an
    unplaced target for them."""
    res = make_episode("tiny", 0).simulator().run(make_policy(policy))
    assert res.unplaced_targets == 0 and res.invalid_decisions == 0
    assert np.isfinite(res.avg_jct)
