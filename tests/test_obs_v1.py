"""Observation v1 (aryl_gym.envs.obs_v1): the v0 keys unchanged, per-job times and knapsack
values recomputed by hand from the simulator, and a forecast that never reads ahead."""

from __future__ import annotations

import dataclasses
import math

import gymnasium as gym
import numpy as np
import pytest

import aryl_gym  # noqa: F401
from aryl_gym.envs.obs_v1 import CLUSTER_FEATURES_V1, JOB_FEATURES_V1, InferenceForecast


def _play(env, n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=3)
    out = [obs]
    for _ in range(n):
        m = env.unwrapped.action_masks()
        obs, _, te, tr, _ = env.step(int(rng.choice(np.flatnonzero(m))))
        out.append(obs)
        if te or tr:
            break
    return out


def _sq(x: float) -> float:
    return x / (1 + x)


def test_v1_adds_keys_and_leaves_v0_keys_unchanged():
    kw = {"scenario": "tiny", "action_mode": "sequential", "window": 8}
    a = _play(gym.make("aryl_gym/Aryl-v1", **kw), 300)
    env1 = gym.make("aryl_gym/Aryl-v1", observation="v1", **kw)
    b = _play(env1, 300)
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert set(y) == set(x) | {"jobs_v1", "cluster_v1"}
        for k in x:
            np.testing.assert_array_equal(x[k], y[k])
        assert env1.observation_space.contains(y)
    assert b[-1]["jobs_v1"].shape == (8, len(JOB_FEATURES_V1))
    assert b[-1]["cluster_v1"].shape == (len(CLUSTER_FEATURES_V1),)
    with pytest.raises(ValueError, match="observation"):
        gym.make("aryl_gym/Aryl-v1", observation="v2")


def test_job_times_and_knapsack_value_by_hand():
    env = gym.make("aryl_gym/Aryl-v1", scenario="testbed", action_mode="sequential", observation="v1")
    rng = np.random.default_rng(1)
    obs, _ = env.reset(seed=0, options={"episode_seed": 11})
    u = env.unwrapped
    checked_gain = 0
    for _ in range(1500):
        sim = u.sim
        for s, j in enumerate(u.window.tolist()):
            spec = sim.jobs[j]
            w_req = spec.w_req or spec.w_min
            running = int(sim.workers[j]) > 0
            w = int(sim.workers[j]) if running else w_req
            pool = int(sim.pool[j]) if running else 0
            rem = float(sim.pred_remaining[j])

            def t_h(w_: int, p: int, rem: float = rem, j: int = j, sim=sim) -> float:
                return rem / sim.rate_for(j, w_, p) / 3600.0

            row = obs["jobs_v1"][s]
            assert row[2] == pytest.approx(_sq(t_h(w_req, 0)), rel=1e-5)
            assert row[3] == pytest.approx(_sq(t_h(int(sim.w_max[j]), 0)), rel=1e-5)
            assert row[1] == pytest.approx(_sq(t_h(w, pool)), rel=1e-5)
            if sim.elastic[j] and w < sim.w_max[j]:
                assert row[0] == pytest.approx(_sq(t_h(w, pool) - t_h(w + 1, pool)), rel=1e-4, abs=1e-6)
                checked_gain += row[0] > 0
            else:
                assert row[0] == 0.0
        m = u.action_masks()
        obs, _, te, tr, _ = env.step(int(rng.choice(np.flatnonzero(m))))
        if te or tr:
            break
    assert checked_gain > 0


def test_forecast_is_the_known_daily_shape_or_the_past_only():
    from aryl_gym.config import load_scenario
    from aryl_gym.sim.loaning import diurnal_utilization

    cfg = load_scenario("testbed")
    fc = InferenceForecast(cfg)
    quiet = dataclasses.replace(cfg.inference, day_noise=0.0, sample_noise=0.0)
    shape = diurnal_utilization(quiet, 3 * 86400.0, np.random.default_rng(5))
    ahead = np.array([3600.0, 7200.0, 90000.0])
    got = fc.utilization(None, 1800.0, ahead)
    idx = ((1800.0 + ahead) // cfg.inference.sample_seconds).astype(int)
    np.testing.assert_allclose(got, shape[idx])
    # a CSV series: only values at or before `now` are read
    csv_cfg = cfg.replace(inference={"mode": "constant"})
    fc2 = InferenceForecast(csv_cfg)
    fc2.mode = "csv"
    asked: list[float] = []

    class Loan:
        def utilization(self, t: float) -> float:
            asked.append(t)
            return 0.5 + 0.1 * math.sin(t / 7200.0)

    class Sim:
        loan = Loan()

    now = 30 * 3600.0
    u = fc2.utilization(Sim(), now, np.array([3600.0, 4 * 3600.0, 30 * 3600.0]))
    assert max(asked) <= now
    assert u[0] == pytest.approx(Loan().utilization(now + 3600.0 - 86400.0))
    assert u[2] == pytest.approx(Loan().utilization(now))  # 24 h back is still the future
    # loanable servers from the forecast: N - ceil(N min(1, u + headroom))
    n = cfg.cluster.inf_servers
    h = cfg.inference.headroom
    assert fc.loanable(np.array([0.3]))[0] == n - math.ceil(n * (0.3 + h) - 1e-9)
