"""Action masks: sequential masks are exact (property test against the real engine), targets
masks are well formed, random masked rollouts finish (issue 5; SPEC 6)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aryl_gym.envs.allocation import ArylEnv
from aryl_gym.sim.jobs import JobState
from aryl_gym.sim.placement import plan
from tests.helpers import examples


def _check_allowed_actions_exactly(env: ArylEnv) -> None:
    """Every allowed grant/release leads to a tentative decision the *real* engine places in
    full (applied on a deep copy of the simulator); commit is always allowed."""
    mask = env.action_masks()
    codec = env.codec
    assert mask[codec.commit]
    for a in np.flatnonzero(mask):
        if a == codec.commit:
            continue
        i = a if a < codec.k else a - codec.k
        dec = codec._decision(env, i, int(codec._cand[a]))
        sim2 = copy.deepcopy(env.sim)
        rep = sim2.apply(dec)
        assert not rep.unplaced and not rep.invalid, (a, dec, rep)
        for j, t in dec.targets.items():
            assert sim2.workers[j] == t
        # the scratch dry run agrees with the real engine
        rep2 = plan(env.sim, dec, env.placement).report
        assert rep2.unplaced == rep.unplaced and sorted(rep2.started) == sorted(rep.started)


@settings(max_examples=examples(20))
@given(seed=st.integers(0, 10_000), picks=st.lists(st.integers(0, 10_000), min_size=5, max_size=60))
def test_sequential_masks_never_allow_an_infeasible_action(seed, picks):
    env = ArylEnv(scenario="tiny", action_mode="sequential", window=8)
    env.reset(options={"episode_seed": seed})
    for p in picks:
        _check_allowed_actions_exactly(env)
        allowed = np.flatnonzero(env.action_masks())
        a = int(allowed[p % len(allowed)])
        _, _, te, tr, info = env.step(a)
        assert info["invalid"] == 0
        if "unplaced" in info:  # a commit: nothing cut
            assert info["unplaced"] == 0
        if te or tr:
            break


@pytest.mark.parametrize("scenario,budget", [("tiny", 20_000), ("testbed", 800)])
def test_sequential_random_masked_rollout_commits_are_placed_in_full(scenario, budget):
    env = ArylEnv(scenario=scenario, action_mode="sequential", allow_preempt=True)
    rng = np.random.default_rng(1)
    env.reset(seed=0)
    commits = 0
    te = False
    for _ in range(budget):
        mask = env.action_masks()
        a = int(rng.choice(np.flatnonzero(mask)))
        _, _, te, tr, info = env.step(a)
        if "unplaced" in info:
            commits += 1
            assert info["unplaced"] == 0
        assert info["invalid"] == 0
        if te or tr:
            break
    if scenario == "tiny":
        assert te, "a random masked agent finishes the trace"
    assert commits > 10


def test_targets_mask_shape_and_rules():
    env = ArylEnv(scenario="testbed", action_mode="targets")
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    L = env.codec.L
    for _ in range(200):
        m = env.action_masks().reshape(env.k, L)
        assert m.any(axis=1).all(), "every slot has an allowed level"
        sim = env.sim
        for i in range(env.k):
            if i >= len(env.window):
                assert m[i, 0] and not m[i, 1:].any()
                continue
            j = int(env.window[i])
            allowed = np.flatnonzero(m[i])
            if sim.state[j] == JobState.RUNNING:
                assert min(int(sim.workers[j]), env.max_workers) in allowed
                assert 0 not in allowed  # no preemption by default
                if not sim.elastic[j]:
                    assert len(allowed) == 1
                else:
                    assert allowed.min() >= min(sim.w_min[j], env.max_workers)
            else:
                assert 0 in allowed
                assert all(v == 0 or sim.w_min[j] <= v <= sim.w_max[j] for v in allowed)
        a = (rng.random(m.shape) * m).argmax(axis=1)
        _, _, te, tr, info = env.step(a)
        assert info["invalid"] == 0
        if te or tr:
            env.reset()


@pytest.mark.parametrize("scenario", ["tiny", "testbed"])
@pytest.mark.parametrize("mode", ["targets", "priority"])
def test_random_masked_rollouts_finish(scenario, mode):
    env = ArylEnv(scenario=scenario, action_mode=mode)
    rng = np.random.default_rng(2)
    env.reset(seed=3)
    for _ in range(50_000):
        m = env.action_masks()
        if mode == "targets":
            m2 = m.reshape(env.k, -1)
            a = (rng.random(m2.shape) * m2).argmax(axis=1)
        else:
            a = rng.uniform(-1, 1, env.k).astype(np.float32)
        obs, r, te, tr, info = env.step(a)
        assert env.observation_space.contains(obs)
        if te or tr:
            break
    assert te
    res = info["episode_result"]
    assert res.jobs_completed == res.jobs_total
    # no GPU used twice, nothing on a returned server
    sim = env.sim
    assert (sim.srv_free >= 0).all() and (sim.srv_free <= sim.srv_cap).all()
