"""Replacing the future of an episode: ``Simulator.replace_future``, ``ArylEnv.replace_future`` /
``resample_future`` and ``scenario.fresh_future`` (several futures per state)."""

from __future__ import annotations

import copy
import dataclasses
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from aryl_gym.agents import make_policy

import aryl_gym.envs.allocation as allocation
from aryl_gym.config import load_scenario
from aryl_gym.envs.allocation import ArylEnv
from aryl_gym.envs.predict import HeuristicPredictor, policy_env_kwargs
from aryl_gym.scenario import Episode, fresh_future, make_episode
from aryl_gym.sim.engine import Simulator
from aryl_gym.sim.invariants import check
from aryl_gym.sim.jobs import JobSpec

from .helpers import job, make_sim, small_config


def _spliced(sim: Simulator, util: np.ndarray | None) -> np.ndarray | None:
    """``util`` after the sample holding ``sim.now``, the present series before it."""
    if util is None:
        return None
    i0 = int(sim.now // sim.loan.sample_seconds) + 1
    return np.concatenate([sim.loan.util[:i0], util[i0:]])


def _replace_at(round_index: int, seed: int, box: dict[str, Any]):
    """An ``on_round`` hook: at the first round >= ``round_index``, replace the future by the one
    of ``seed`` and keep what the brute-force twin needs in ``box``. The hook waits for the
    first arrival too (a policy that decides every round, as Pollux, reaches round 150 before
    it)."""

    def hook(sim: Simulator) -> None:
        if sim.round_index >= round_index and sim.now > sim.submit[0] and not box:
            fut, util = fresh_future(sim, seed)
            box.update(fut=fut, util=_spliced(sim, util))
            box["k"] = sim.replace_future(fut, util)
        check(sim)

    return hook


def _renumbered(past: list[JobSpec], future: list[JobSpec]) -> list[JobSpec]:
    k = len(past)
    return past + [dataclasses.replace(j, id=k + i) for i, j in enumerate(future)]


@pytest.mark.parametrize("policy,seed", [("aryl", 0), ("aryl", 2),
                                         pytest.param("pollux", 1, marks=pytest.mark.slow),  # 60 s rounds: 19 s
                                         ("random", 0), ("sjf", 1)])
def test_replaced_future_equals_trace_built_with_it(policy, seed):
    ep = make_episode("testbed", seed)
    sim = ep.simulator()
    box: dict[str, Any] = {}
    sim.run(make_policy(policy), on_round=_replace_at(150, 900 + seed, box))
    assert box, "the hook never fired"
    k = box["k"]
    assert k >= 1 and sim.n_jobs == k + len(box["fut"]) != len(ep.jobs)
    twin = Simulator(ep.config, _renumbered(ep.jobs[:k], box["fut"]), box["util"], seed=seed)
    twin.run(make_policy(policy), on_round=check)
    for name in ("finish", "first_start", "preempt_count", "running_time"):
        assert np.array_equal(getattr(sim, name), getattr(twin, name), equal_nan=True), name
    assert sim.acc.loan_offered_gs == twin.acc.loan_offered_gs
    assert sim.done


def test_same_future_is_a_no_op():
    ep = make_episode("testbed", 3)
    plain = ep.simulator()
    plain.run(make_policy("aryl"))
    sim = ep.simulator()
    fired = []

    def hook(s: Simulator) -> None:
        if s.round_index >= 200 and not fired:
            k = int(np.searchsorted(s.submit, s.now, side="right"))
            assert s.replace_future(ep.jobs[k:]) == k
            fired.append(k)

    sim.run(make_policy("aryl"), on_round=hook)
    assert fired and np.array_equal(sim.finish, plain.finish, equal_nan=True)


def _two_jobs_one_round() -> tuple[Simulator, Any]:
    """Job 0 at 0 s and job 1 at 5000 s on a small cluster, FIFO, after the first round."""
    sim = make_sim(small_config(), [job(0, 0.0, work=600.0), job(1, 5000.0, work=600.0)])
    pol = make_policy("fifo")
    pol.reset(0)
    sim.begin(pol)
    sim.step(pol)
    return sim, pol


def test_empty_future_ends_with_the_jobs_arrived():
    sim, pol = _two_jobs_one_round()
    sim.replace_future([])
    assert sim.n_jobs == 1 and sim.arrivals_left == 0 and sim.next_arrival_time is None
    while not sim.done:
        sim.step(pol)
    assert sim.done_count == 1 and sim.now < 5000.0


def test_future_jobs_are_renumbered_and_keep_their_fields():
    sim, pol = _two_jobs_one_round()
    new = [job(7, 3000.0, work=1200.0, g=2), job(3, 4000.0, work=60.0)]
    sim.replace_future(new)
    assert [j.id for j in sim.jobs] == [0, 1, 2]
    assert sim.submit.tolist() == [0.0, 3000.0, 4000.0]
    assert sim.g.tolist() == [1, 2, 1] and sim.remaining[1:].tolist() == [1200.0, 60.0]
    assert sim.view.jobs is sim.jobs and sim.view.state.shape == (3,)
    while not sim.done:
        sim.step(pol)
    # alone on an idle cluster: each new job starts at its arrival round
    assert sim.first_start[1] == 3000.0 and sim.first_start[2] == 4020.0


def test_bad_futures_are_refused_and_change_nothing():
    ep = make_episode("testbed", 4)
    plain = ep.simulator()
    plain.run(make_policy("sjf"))
    sim = ep.simulator()
    errors: list[str] = []

    def hook(s: Simulator) -> None:
        if s.round_index < 120 or errors:
            return
        k = int(np.searchsorted(s.submit, s.now, side="right"))
        later = ep.jobs[k:]
        early = dataclasses.replace(later[0], submit=s.now)
        bad: list[tuple[Any, Any]] = [
            ([early] + later[1:], None),  # submitted now: it would have arrived already
            (later[::-1], None),  # not sorted
            (["job"], None),  # not a JobSpec
            ([dataclasses.replace(later[0], g=64)], None),  # does not fit a server
            (later, np.zeros(3)),  # a series too short to splice
            (later, np.full(100_000, 2.0)),  # utilisation outside [0, 1]
        ]
        for fut, util in bad:
            with pytest.raises(ValueError) as info:
                s.replace_future(fut, util)
            errors.append(str(info.value))
        assert len(s.jobs) == s.n_jobs == len(ep.jobs) and s.jobs[k:] == later

    sim.run(make_policy("sjf"), on_round=hook)
    assert len(errors) == 6
    assert "not after now" in errors[0] and "not a valid trace" in errors[1]
    assert "must be a JobSpec" in errors[2] and "longer than" in errors[4]
    assert np.array_equal(sim.finish, plain.finish, equal_nan=True)


def test_fresh_future_is_seeded_and_after_now():
    sim = make_episode("testbed", 5).simulator()
    pol = make_policy("fifo")
    pol.reset(0)
    sim.begin(pol)
    while sim.now < 20_000.0:
        sim.step(pol)
    a_jobs, a_util = fresh_future(sim, 11)
    b_jobs, b_util = fresh_future(sim, 11)
    c_jobs, _ = fresh_future(sim, 12)
    assert a_jobs == b_jobs and np.array_equal(a_util, b_util)
    assert a_jobs != c_jobs
    assert a_jobs and all(j.submit > sim.now for j in a_jobs)
    assert a_util is not None and len(a_util) * 300.0 > a_jobs[-1].submit


def test_fresh_future_refuses_a_replayed_trace_and_keeps_fixed_series():
    replay = SimpleNamespace(config=load_scenario("pollux-w6"), now=0.0)
    assert replay.config.workload.trace
    with pytest.raises(ValueError, match="fresh futures need a generated workload"):
        fresh_future(replay, 1)  # type: ignore[arg-type]
    const = make_sim(small_config(), [job(0, 0.0)], util=0.25)
    _, util = fresh_future(const, 1)
    assert util is None  # constant inference: nothing to draw


def _play(env: ArylEnv, agent: HeuristicPredictor, obs: Any, hook=None):
    rewards = []
    while True:
        if hook is not None:
            hook(env, len(rewards))
        a, _ = agent.predict(obs)
        obs, r, te, tr, info = env.step(a)
        rewards.append(r)
        if te or tr:
            return rewards, info["episode_result"]


def test_env_replace_future_equals_env_on_the_spliced_trace(monkeypatch):
    kw = dict(scenario="testbed", action_mode="sequential", window=128, **policy_env_kwargs("aryl"))
    env = ArylEnv(**kw)
    obs, _ = env.reset(options={"episode_seed": 1})
    box: dict[str, Any] = {}

    def hook(e: ArylEnv, n: int) -> None:
        if n == 300:
            sim = e.sim
            fut, util = fresh_future(sim, 4242)
            box.update(fut=fut, util=_spliced(sim, util))
            box["k"] = e.replace_future(fut, util)
            assert box["k"] == sim.n_jobs - sim.arrivals_left  # at a decision point all of them arrived

    rewards, res = _play(env, HeuristicPredictor("aryl", env), obs, hook)
    ep = make_episode("testbed", 1)
    jobs = _renumbered(ep.jobs[: box["k"]], box["fut"])
    monkeypatch.setattr(allocation, "make_episode", lambda *a, **k: Episode(ep.config, jobs, box["util"], 1))
    twin = ArylEnv(**kw)
    obs, _ = twin.reset(options={"episode_seed": 1})
    monkeypatch.undo()
    rewards_twin, res_twin = _play(twin, HeuristicPredictor("aryl", twin), obs)
    assert rewards == rewards_twin
    assert res.jobs_total == len(jobs) and res.avg_jct == res_twin.avg_jct
    assert np.isclose(sum(rewards), -float(np.sum(res.jcts)) / 3600.0, rtol=1e-9)


def test_copies_resampled_alike_play_alike_with_obs_v1_and_damping():
    env = ArylEnv(scenario="testbed", action_mode="sequential", window=32, observation="v1",
                  allow_preempt=True, flap_damping=True, **policy_env_kwargs("aryl"))
    agent = HeuristicPredictor("aryl", env)
    obs, _ = env.reset(options={"episode_seed": 7})
    for _ in range(150):
        obs, *_ = env.step(agent.predict(obs)[0])
    assert env.sim.arrivals_left > 0
    a, b, c = copy.deepcopy(env), copy.deepcopy(env), copy.deepcopy(env)
    assert a.resample_future(31) == b.resample_future(31) > 0
    c.resample_future(32)
    assert a.sim.jobs != env.sim.jobs and a.sim.jobs != c.sim.jobs
    obs_a, obs_b = a._obs(), b._obs()
    assert all(np.array_equal(obs_a[k], obs_b[k]) and obs_a[k].shape == obs[k].shape for k in obs_a)
    ra, res_a = _play(a, HeuristicPredictor("aryl", a), obs_a)
    rb, res_b = _play(b, HeuristicPredictor("aryl", b), obs_b)
    rc, res_c = _play(c, HeuristicPredictor("aryl", c), c._obs())
    assert ra == rb and res_a.avg_jct == res_b.avg_jct and rc != ra
    for e, res in ((a, res_a), (c, res_c)):
        assert res.jobs_completed == res.jobs_total == e.sim.n_jobs


def test_env_future_errors():
    env = ArylEnv(scenario="tiny")
    with pytest.raises(RuntimeError, match="reset"):
        env.resample_future(1)
    with pytest.raises(RuntimeError, match="reset"):
        env.replace_future([])
    env.reset(seed=0)
    for bad in (-1, 1.5, True, "3"):
        with pytest.raises(ValueError, match="seed must be an integer"):
            env.resample_future(bad)  # type: ignore[arg-type]


def test_flap_damping_grows_with_the_trace():
    from aryl_gym.envs.damping import FlapDamping, parse_flap_damping

    d = FlapDamping(parse_flap_damping(True), 3)
    d.change(1, 1, 10.0)
    d.change(1, -1, 20.0)  # a reversal: job 1 flaps
    before = d.value(1, 30.0)
    assert before > 0
    d.grow(5)
    assert d.penalty.shape == d.stamp.shape == d.last_dir.shape == (5,)
    assert d.value(1, 30.0) == before and d.last_dir[1] == -1
    d.change(4, 1, 40.0)
    d.change(4, -1, 50.0)  # a new job flaps like any other
    assert d.value(4, 50.0) == 1.0 and d.flaps == 2
    d.grow(2)
    assert d.penalty.shape == (2,) and d.value(1, 30.0) == before
