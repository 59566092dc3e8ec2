"""The multi-objective view ``aryl_gym/ArylMO-v2`` (issue 35, item 4): its vector reward,
weighted with today's weights, is today's scalar reward on every step; MO-Gymnasium's wrappers
take it."""

from __future__ import annotations

import copy
import pickle

import gymnasium as gym
import numpy as np
import pytest

import aryl_gym  # noqa: F401  (registers the envs)
from aryl_gym.envs.allocation import ArylEnv
from aryl_gym.envs.mo import DEFAULT_OBJECTIVES, ArylMOEnv

from .helpers import tiny_loan_scenario

mo_gym = pytest.importorskip("mo_gymnasium")
from mo_gymnasium.wrappers import LinearReward  # noqa: E402


def _random_action(env: ArylEnv, rng: np.random.Generator, invalid_share: float = 0.0):
    mode = env.action_mode
    if mode == "sequential":
        if invalid_share and rng.random() < invalid_share:  # any action, masked or not
            return int(rng.integers(env.action_space.n))
        return int(rng.choice(np.flatnonzero(env.action_masks())))
    if mode == "targets":
        m = env.action_masks().reshape(env.k, -1)
        return np.array([rng.choice(np.flatnonzero(row)) for row in m])
    return rng.uniform(-1.0, 1.0, env.k).astype(np.float32)


def _compare(scenario: str, seed: int, mode: str, objectives=DEFAULT_OBJECTIVES, invalid_share=0.0,
             **kwargs) -> tuple[int, int, dict[str, bool]]:
    """One episode of random actions through the MO view (wrapped in ``LinearReward`` with
    ``reward_weights``) and through ``Aryl-v2`` with the same actions; returns (steps, steps
    whose reward was rebuilt bit for bit by ``scalarize``, which objectives were ever non-zero)."""
    scenario = {"loan": tiny_loan_scenario(0.0), "loan16": tiny_loan_scenario(16.0)}.get(scenario, scenario)
    plain = ArylEnv(scenario=scenario, action_mode=mode, **kwargs)
    mo = gym.make("aryl_gym/ArylMO-v2", scenario=scenario, action_mode=mode, objectives=objectives, **kwargs)
    u = mo.unwrapped
    assert isinstance(u, ArylMOEnv)
    lin = LinearReward(mo, weight=np.array(u.reward_weights))
    o1, _ = plain.reset(seed=seed)
    o2, _ = lin.reset(seed=seed)
    rng = np.random.default_rng(seed)
    steps = exact = 0
    vsum = np.zeros(len(u.objectives))
    nonzero = np.zeros(len(u.objectives), dtype=bool)
    while True:
        for k in o1:
            assert np.array_equal(o1[k], o2[k]), k
        a = _random_action(plain, rng, invalid_share)
        o1, r, te1, tr1, i1 = plain.step(a)
        o2, s, te2, tr2, i2 = lin.step(a)
        v = i2["vector_reward"]
        steps += 1
        assert (te1, tr1) == (te2, tr2)
        assert v.dtype == np.float64 and u.reward_space.contains(v)
        # the vector is the step's named components, unweighted
        assert v.tolist() == [i1["reward_components"][k] for k in u.objectives]
        assert i2["scalar_reward"] == r  # the scalar Aryl-v2 returns, bit for bit
        # LinearReward's dot product: equal to 1e-12 (a dot product may sum in another order)
        assert abs(s - r) <= 1e-12 * max(1.0, abs(r)), (steps, s, r)
        # the view's own scalarisation sums in the reward's order: bit for bit, but for the
        # early-end charge (added to the scalar after its sum, to the jct entry before)
        if "end_charge" not in i1:
            assert u.scalarize(v) == r, (steps, u.scalarize(v), r)
            exact += 1
        vsum += v
        nonzero |= v != 0
        if te1 or tr1:
            break
    a, b = i1["episode_metrics"], i2["episode_metrics"]
    assert a == b
    res = i1["episode_result"]
    if te1 and "end_charge" not in i1:  # every job finished: jct sums to -(total JCT) / scale
        j = u.objectives.index("jct")
        assert abs(vsum[j] + sum(res.jcts) / u.reward_scale) <= 1e-9 * max(1.0, abs(vsum[j]))
    return steps, exact, dict(zip(u.objectives, nonzero.tolist()))


MIXED = {"jct": 1.0, "preemption": 0.25, "loan_usage": 0.5}


@pytest.mark.parametrize(
    "scenario,seed,mode,kwargs",
    [
        ("tiny", 0, "sequential", {}),
        ("tiny", 1, "targets", {"window": 8}),
        ("tiny", 2, "priority", {}),
        # loans and reclaims: the loan_usage and preemption entries are not zero
        ("loan", 0, "sequential", {"reward": MIXED, "allow_preempt": True}),
        ("loan", 1, "targets", {"reward": MIXED, "window": 8}),
        ("loan16", 2, "priority", {"reward": MIXED}),
        ("testbed", 0, "targets", {"reward": MIXED, "allow_preempt": True}),
        ("tiny", 3, "sequential", {"reward": MIXED, "allow_preempt": True}),
        ("tiny", 4, "targets", {"reward": "jct+preemption", "allow_preempt": True, "window": 8}),
        # ppo-v1's reward settings: scale 36000, early ends charged to the jct entry
        ("tiny", 5, "sequential", {"reward_scale": 36000.0, "allow_preempt": True, "early_end": "charge",
                                   "stall_hours": 0.5}),
        # an invalid-action penalty: the "invalid" component is then an objective
        ("tiny", 6, "sequential", {"invalid_penalty": 0.5, "invalid_share": 0.2,
                                   "objectives": (*DEFAULT_OBJECTIVES, "invalid")}),
    ],
)
def test_weighted_vector_is_the_scalar_reward_on_every_step(scenario, seed, mode, kwargs):
    steps, exact, moved = _compare(scenario, seed, mode, **kwargs)
    assert steps > 10
    if scenario.startswith("loan"):  # loans and preemptions: every weighted entry moved
        assert moved == {"jct": True, "preemption": True, "loan_usage": True}
    if kwargs.get("early_end") != "charge":
        assert exact == steps


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("mode", ["sequential", "targets", "priority"])
def test_weighted_vector_on_testbed(seed, mode):
    # the priority mode never preempts, and allow_preempt there is refused (an inert option)
    steps, exact, _ = _compare("testbed", seed, mode, reward=MIXED, allow_preempt=mode != "priority", window=16)
    assert exact == steps > 100


def test_spaces_weights_and_registration():
    env = gym.make("aryl_gym/ArylMO-v2", scenario="tiny")
    u = env.unwrapped
    assert u.objectives == ("jct", "preemption", "loan_usage")
    assert u.reward_space.shape == (3,) and u.reward_space.dtype == np.float64
    assert u.reward_space.low.tolist() == [-np.inf, -np.inf, 0.0]
    assert u.reward_space.high.tolist() == [0.0, 0.0, np.inf]
    assert u.reward_weights.tolist() == [1.0, 0.0, 0.0]  # Aryl-v2's default reward, "jct"
    assert gym.make("aryl_gym/ArylMO-v1", scenario="tiny").unwrapped.world_version == "v1"
    w = gym.make("aryl_gym/ArylMO-v2", scenario="tiny", reward="jct+preemption",
                 objectives="preemption+jct+usage").unwrapped.reward_weights
    assert w.tolist() == [1.0, 1.0, 0.0]


def test_bad_objectives_are_clear_errors():
    with pytest.raises(ValueError, match="unknown objective 'jtc'"):
        ArylMOEnv(scenario="tiny", objectives=["jtc"])
    with pytest.raises(ValueError, match="leave it out"):
        ArylMOEnv(scenario="tiny", objectives=["preemption"])  # the default reward weights jct
    with pytest.raises(ValueError, match="'invalid'"):
        ArylMOEnv(scenario="tiny", invalid_penalty=1.0)
    with pytest.raises(ValueError, match="repeat"):
        ArylMOEnv(scenario="tiny", objectives=["jct", "jct"])
    with pytest.raises(ValueError, match="at least one"):
        ArylMOEnv(scenario="tiny", objectives=[])
    with pytest.raises(ValueError, match="component names"):
        ArylMOEnv(scenario="tiny", objectives=3)
    with pytest.raises(TypeError, match="objectivs"):
        ArylMOEnv(scenario="tiny", objectivs=["jct"])


def test_copies_continue_exactly_and_mo_wrappers_run():
    env = ArylMOEnv(scenario="tiny", action_mode="sequential", reward=MIXED)
    env.reset(seed=7)
    rng = np.random.default_rng(7)
    for _ in range(20):
        env.step(_random_action(env, rng))
    twins = [copy.deepcopy(env), pickle.loads(pickle.dumps(env))]
    state = rng.bit_generator.state
    runs = []
    for e in [env, *twins]:
        rng.bit_generator.state = state
        out = []
        while True:
            _, v, te, tr, _ = e.step(_random_action(e, rng))
            out.append(v.tolist())
            if te or tr:
                break
        runs.append(out)
    assert runs[0] == runs[1] == runs[2]
    # MO-Gymnasium's episode statistics wrapper reads the vector and reward_space
    from mo_gymnasium.wrappers import MORecordEpisodeStatistics

    rec = MORecordEpisodeStatistics(gym.make("aryl_gym/ArylMO-v2", scenario="tiny", action_mode="sequential"))
    rec.reset(seed=0)
    rng = np.random.default_rng(0)
    while True:
        _, v, te, tr, info = rec.step(_random_action(rec.unwrapped, rng))
        if te or tr:
            break
    ret = info["episode"]["r"]
    assert ret.shape == (3,) and ret[0] < 0 and ret[2] >= 0
