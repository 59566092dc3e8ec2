"""The two-agent view (issue 35, item 5): allocation and reclaim agents in one episode, a
PettingZoo ParallelEnv. With Aryl on both seats it is Aryl's native episode; with the shipped
ppo-v1 on the allocation seat and Aryl's reclaim rule on the other it is ppo-v1's single-agent
episode; PettingZoo's own API test passes."""

from __future__ import annotations

import copy
import pickle
import subprocess
import sys
import warnings

import numpy as np
import pytest

pytest.importorskip("pettingzoo")

from aryl_gym.agents import make_policy  # noqa: E402

from aryl_gym.envs.allocation import ArylEnv  # noqa: E402
from aryl_gym.envs.multiagent import (  # noqa: E402
    ALLOCATION,
    RECLAIM,
    ArylParallelEnv,
    single_agent_observation,
)
from aryl_gym.envs.predict import HeuristicPredictor, ReclaimPredictor, policy_env_kwargs  # noqa: E402
from aryl_gym.extras import learned_agents_unavailable  # noqa: E402
from aryl_gym.scenario import make_episode  # noqa: E402

from .helpers import tiny_loan_scenario  # noqa: E402

#: fields that measure wall time or name the policy; everything else must match exactly
TIMING = {"wall_s", "decision_ms_mean", "decision_ms_max", "policy"}


def _scenario(name: str):
    return {"loan0": tiny_loan_scenario(0.0), "loan16": tiny_loan_scenario(16.0)}.get(name, name)


def _same(a, b) -> dict:
    da, db = a.to_dict(series=True), b.to_dict(series=True)
    return {k: (da[k], db[k]) for k in db if k not in TIMING and da[k] != db[k]}


def _play(env: ArylParallelEnv, seed: int, alloc_act, rec_act):
    """One episode, each seat played by its function of (obs); returns (result, steps per seat,
    rewards per seat, the allocation seat's rewards at the steps that closed an allocation step)."""
    obs, infos = env.reset(options={"episode_seed": seed})
    steps = {ALLOCATION: 0, RECLAIM: 0}
    rewards = {ALLOCATION: [], RECLAIM: []}
    closing = []
    while True:
        act = env.active
        assert infos[act]["active"] and sum(i["active"] for i in infos.values()) == 1
        steps[act] += 1
        a = alloc_act(obs[ALLOCATION]) if act == ALLOCATION else rec_act(obs[RECLAIM])
        obs, rew, te, tr, infos = env.step({act: a})
        for k in rew:
            rewards[k].append(rew[k])
        if "reward_components" in infos[ALLOCATION]:
            closing.append(rew[ALLOCATION])
        assert te[ALLOCATION] == te[RECLAIM] and tr[ALLOCATION] == tr[RECLAIM]
        if te[ALLOCATION] or tr[ALLOCATION]:
            assert env.agents == []
            return infos[ALLOCATION]["episode_result"], steps, rewards, closing


def _aryl_seats(scenario, reclaim_rule="aryl", window=128, **kwargs):
    """Aryl on both seats; the window must hold every active job for an exact replay."""
    kw = {**policy_env_kwargs("aryl"), **kwargs}
    kw.pop("reclaim")
    env = ArylParallelEnv(scenario=scenario, action_mode="sequential", window=window, **kw)
    alloc = HeuristicPredictor("aryl", env.alloc, use_policy_reclaim=False)
    rec = ReclaimPredictor(reclaim_rule, env)
    return env, (lambda o: alloc.predict(o)[0]), (lambda o: rec.predict(o)[0]), alloc


@pytest.mark.parametrize("scenario,seed", [("loan0", 0), ("loan0", 2), ("loan16", 0), ("loan16", 1), ("testbed", 1)])
def test_aryl_on_both_seats_is_the_native_aryl_episode(scenario, seed):
    env, a, r, alloc = _aryl_seats(_scenario(scenario))
    res, steps, rewards, _ = _play(env, seed, a, r)
    native = make_episode(_scenario(scenario), seed).simulator().run(make_policy("aryl"))
    assert not _same(res, native)  # every metric and series, job completion times included
    assert res.jcts == native.jcts and res.jobs_completed == res.jobs_total
    assert alloc.skipped == 0
    # the reclaim seat chose every returned server, one per step
    assert steps[RECLAIM] == native.reclaimed_servers > 0
    # the allocation seat's default jct reward sums to -(total JCT) / 3600
    assert abs(sum(rewards[ALLOCATION]) + sum(res.jcts) / 3600.0) < 1e-9 * sum(res.jcts)
    # the reclaim seat's jct + preemption reward: the same, minus every preemption
    expect = -sum(res.jcts) / 3600.0 - res.preemptions
    assert abs(sum(rewards[RECLAIM]) - expect) < 1e-9 * abs(expect)


def test_the_reclaim_seat_decides_what_is_returned():
    """The simulator's default rule on the reclaim seat: not Aryl's native episode, but the
    allocation env's own with ``reclaim="default"`` (the seat's picks are what the loan phase
    returns; on this seed the two rules' picks lead to different episodes)."""
    sc = _scenario("loan0")
    env, a, r, _ = _aryl_seats(sc, reclaim_rule="default")
    res, _, _, _ = _play(env, 0, a, r)
    native = make_episode(sc, 0).simulator().run(make_policy("aryl"))
    assert _same(res, native)
    single = ArylEnv(scenario=sc, action_mode="sequential", window=128,
                     **{**policy_env_kwargs("aryl"), "reclaim": "default"})
    pred = HeuristicPredictor("aryl", single, use_policy_reclaim=False)
    obs, _ = single.reset(options={"episode_seed": 0})
    while True:
        obs, _, te, tr, info = single.step(pred.predict(obs)[0])
        if te or tr:
            break
    assert not _same(res, info["episode_result"])


@pytest.fixture(scope="module")
def ppo_v1():
    if learned_agents_unavailable():
        pytest.skip(learned_agents_unavailable())
    from aryl_gym.agents.learned import load_agent

    return load_agent("ppo-v1")


def _ppo_single_and_two_agent(agent, scenario, seed):
    env1 = agent.make_env(scenario)
    obs, _ = env1.reset(options={"episode_seed": seed})
    rewards = []
    while True:
        obs, r, te, tr, info = env1.step(agent.predict(obs)[0])
        rewards.append(r)
        if te or tr:
            break
    env = ArylParallelEnv(scenario=scenario, **agent.env_kwargs)
    rec = ReclaimPredictor("aryl", env)
    res, steps, _, closing = _play(env, seed, lambda o: agent.predict(single_agent_observation(o))[0],
                                   lambda o: rec.predict(o)[0])
    return info["episode_result"], rewards, res, steps, closing


@pytest.mark.parametrize("scenario,seed", [("loan0", 0), ("loan16", 1)])
def test_ppo_v1_on_the_allocation_seat_is_its_single_agent_episode(ppo_v1, scenario, seed):
    single, r1, res, steps, closing = _ppo_single_and_two_agent(ppo_v1, _scenario(scenario), seed)
    assert not _same(res, single) and res.jcts == single.jcts
    assert steps[RECLAIM] == single.reclaimed_servers > 0
    # the allocation seat's rewards are Aryl-v2's, bit for bit, at the steps that close its steps
    assert closing == r1 and steps[ALLOCATION] == len(r1)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2000])
def test_ppo_v1_on_the_allocation_seat_testbed(ppo_v1, seed):
    single, r1, res, steps, closing = _ppo_single_and_two_agent(ppo_v1, "testbed", seed)
    assert not _same(res, single) and closing == r1


@pytest.mark.slow
@pytest.mark.parametrize("scenario,seed", [("testbed", 0), ("testbed", 2), ("testbed", 2000), ("basic", 0)])
def test_aryl_on_both_seats_longer_scenarios(scenario, seed):
    # basic's queue outgrows a window of 128 (about 45 s on 2 cores; 372 reclaimed servers on seed 0)
    env, a, r, alloc = _aryl_seats(scenario, window=4096 if scenario == "basic" else 128)
    res, steps, _, _ = _play(env, seed, a, r)
    native = make_episode(scenario, seed).simulator().run(make_policy("aryl"))
    assert not _same(res, native) and alloc.skipped == 0
    assert steps[RECLAIM] == native.reclaimed_servers


class _ApiTestEnv(ArylParallelEnv):
    """PettingZoo's ``parallel_api_test`` first calls ``reset(seed=0, options={"options": 1})``
    to see that reset takes options; the env refuses unknown option keys (as ``Aryl-v2``), so
    this one key is dropped here."""

    def reset(self, seed=None, options=None):
        if options == {"options": 1}:
            options = None
        return super().reset(seed=seed, options=options)


@pytest.mark.parametrize("scenario", ["loan0", "loan16"])
def test_pettingzoo_parallel_api_test(scenario):
    from pettingzoo.test import parallel_api_test

    # random masked actions from both seats' observations; sequential mode (a Discrete space:
    # PettingZoo's test samples with the observation's int8 action_mask)
    env = _ApiTestEnv(scenario=_scenario(scenario), action_mode="sequential", window=16, allow_preempt=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # its findings are warnings: none allowed
        parallel_api_test(env, num_cycles=1000)


def _random_seats(env: ArylParallelEnv, seed: int):
    rng = np.random.default_rng(seed)

    def pick(o):
        return int(rng.choice(np.flatnonzero(o["action_mask"])))

    return pick, pick


def test_protocol_idle_seat_and_bad_actions():
    env = ArylParallelEnv(scenario=tiny_loan_scenario(16.0), action_mode="sequential", window=16)
    obs, infos = env.reset(seed=3)
    assert env.agents == [ALLOCATION, RECLAIM] == env.possible_agents
    assert env.observation_space(RECLAIM) is env.observation_space(RECLAIM)
    rng = np.random.default_rng(3)
    seen_reclaim = invalid_seen = False
    while True:
        act = env.active
        idle = RECLAIM if act == ALLOCATION else ALLOCATION
        # the idle seat sees zeros, mask included; the active seat has something to choose
        assert all(not v.any() for v in obs[idle].values())
        assert obs[act]["action_mask"].dtype == np.int8 and obs[act]["action_mask"].any()
        for k, v in obs.items():
            assert env.observation_space(k).contains(v), k
        assert np.array_equal(env.action_masks(act), obs[act]["action_mask"] > 0)
        with pytest.raises(ValueError, match="pending"):
            env.step({idle: 0})
        if act == RECLAIM:
            seen_reclaim = True
            if not invalid_seen:  # an invalid pick: a no-op, counted, the pick stays pending
                bad = int(np.flatnonzero(obs[RECLAIM]["action_mask"] == 0)[0]) if not obs[RECLAIM]["action_mask"].all() else 99
                before = (env.need, list(env.picks))
                obs, rew, te, tr, infos = env.step({RECLAIM: bad})
                assert infos[RECLAIM]["invalid"] == 1 and (env.need, env.picks) == before
                assert env.active == RECLAIM
                invalid_seen = True
                continue
        a = int(rng.choice(np.flatnonzero(obs[act]["action_mask"])))
        # the idle seat's action is ignored, whatever it is
        obs, rew, te, tr, infos = env.step({act: a, idle: "ignored"})
        if te[act] or tr[act]:
            break
    assert seen_reclaim and invalid_seen
    assert infos[RECLAIM]["episode_result"] is infos[ALLOCATION]["episode_result"]
    with pytest.raises(RuntimeError, match="reset"):
        env.step({ALLOCATION: 0})
    with pytest.raises(ValueError, match="unknown agent"):
        env.reset(seed=0)
        env.step({"scheduler": 0, env.active: 0})
    with pytest.raises(ValueError, match="reclaim agent"):
        ArylParallelEnv(scenario="tiny", reclaim="aryl")


def test_same_seed_same_episode_and_copies_continue_exactly():
    def run(env, seed, n_first=None):
        pick, _ = _random_seats(env, seed)
        obs, _ = env.reset(seed=seed)
        trace = []
        while True:
            act = env.active
            obs, rew, te, tr, _ = env.step({act: pick(obs[act])})
            trace.append((act, rew[ALLOCATION], rew[RECLAIM]))
            if te[act] or tr[act] or (n_first is not None and len(trace) == n_first):
                return trace, obs, pick

    sc = tiny_loan_scenario(0.0)
    a, _, _ = run(ArylParallelEnv(scenario=sc, action_mode="targets", window=8), 5)
    b, _, _ = run(ArylParallelEnv(scenario=sc, action_mode="targets", window=8), 5)
    assert a == b and any(t[0] == RECLAIM for t in a)
    # mid-episode copies (deepcopy and pickle) continue exactly as the original
    env = ArylParallelEnv(scenario=sc, action_mode="sequential", window=16, allow_preempt=True)
    first, obs, _ = run(env, 7, n_first=60)
    rng = np.random.default_rng(99)
    state = rng.bit_generator.state
    tails = []
    for e in (env, copy.deepcopy(env), pickle.loads(pickle.dumps(env))):
        rng.bit_generator.state = state
        o, out = copy.deepcopy(obs), []
        while len(out) < 300:
            act = e.active
            o, rew, te, tr, _ = e.step({act: int(rng.choice(np.flatnonzero(o[act]["action_mask"])))})
            out.append((act, rew[ALLOCATION], rew[RECLAIM]))
            if te[act] or tr[act]:
                break
        tails.append(out)
    assert any(t[0] == RECLAIM for t in first + tails[0])
    assert tails[0] == tails[1] == tails[2]


def test_missing_pettingzoo_names_the_extra_and_import_aryl_gym_does_not_load_it():
    code = (
        "import sys; import aryl_gym, aryl_gym.envs.mo\n"
        "assert 'pettingzoo' not in sys.modules and 'mo_gymnasium' not in sys.modules\n"
        "sys.modules['pettingzoo'] = None\n"
        "try:\n    import aryl_gym.envs.multiagent\nexcept ModuleNotFoundError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "pip install 'aryl-gym[multiagent]'" in out.stdout
