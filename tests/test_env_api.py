"""The Gymnasium envs' contract: checkers, registration, determinism, copies, invalid actions,
reward identity, rendering, vector envs (issue 5; SPEC 6)."""

from __future__ import annotations

import copy
import pickle
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import aryl_gym  # noqa: F401
from aryl_gym.envs.allocation import ArylEnv
from aryl_gym.scenario import make_episode

MODES = [
    {"action_mode": "targets"},
    {"action_mode": "sequential"},
    {"action_mode": "sequential", "release": False},
    {"action_mode": "priority"},
]


def _random_action(env, rng):
    u = env.unwrapped
    mask = u.action_masks()
    if u.__class__.__name__ == "ArylReclaimEnv":
        return int(rng.choice(np.flatnonzero(mask)))
    if u.action_mode == "targets":
        m = mask.reshape(u.k, -1)
        return (rng.random(m.shape) * m).argmax(axis=1)
    if u.action_mode == "sequential":
        return int(rng.choice(np.flatnonzero(mask)))
    return rng.uniform(-1, 1, u.k).astype(np.float32)


def _rollout(env, seed, rng_seed=0, max_steps=10_000):
    rng = np.random.default_rng(rng_seed)
    obs, _ = env.reset(seed=seed)
    trace = [obs]
    rewards = []
    for _ in range(max_steps):
        obs, r, te, tr, info = env.step(_random_action(env, rng))
        trace.append(obs)
        rewards.append(r)
        if te or tr:
            return trace, rewards, info
    raise AssertionError("episode did not end")


@pytest.mark.parametrize("kw", MODES, ids=lambda k: "-".join(f"{v}" for v in k.values()))
def test_gymnasium_and_sb3_checkers_allocation(kw):
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    env = gym.make("aryl_gym/Aryl-v1", scenario="tiny", **kw)
    check_env(env.unwrapped, skip_render_check=True)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*unconventional shape.*")
        sb3_check_env(env.unwrapped)


def test_gymnasium_and_sb3_checkers_reclaim():
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    env = gym.make("aryl_gym/ArylReclaim-v1", scenario="tiny")
    check_env(env.unwrapped, skip_render_check=True)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*unconventional shape.*")
        sb3_check_env(env.unwrapped)


def test_registered_ids_and_module_form():
    for env_id in ("aryl_gym/Aryl-v1", "aryl_gym/ArylReclaim-v1", "aryl_gym:Aryl-v1", "aryl_gym:ArylReclaim-v1"):
        env = gym.make(env_id, scenario="tiny")
        obs, _ = env.reset(seed=0)
        assert env.observation_space.contains(obs)
        env.close()


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_vector_envs(mode):
    v = gym.make_vec("aryl_gym:Aryl-v1", num_envs=2, vectorization_mode=mode, scenario="tiny")
    try:
        obs, _ = v.reset(seed=3)
        assert obs["jobs"].shape == (2, 16, 17)
        for _ in range(20):
            m = obs["action_mask"].reshape(2, 16, -1)
            obs, r, te, tr, info = v.step(m.argmax(axis=2))  # lowest allowed level (0 or keep)
        assert r.shape == (2,) and np.all(np.isfinite(r))
    finally:
        v.close()


@pytest.mark.parametrize("kw", MODES[:2] + MODES[3:], ids=["targets", "sequential", "priority"])
def test_same_seed_same_episode_and_global_rng_does_not_matter(kw):
    a_obs, a_r, a_info = _rollout(gym.make("aryl_gym/Aryl-v1", scenario="tiny", **kw), seed=5)
    np.random.seed(123)  # disturb the global generators
    import random

    random.seed(99)
    np.random.random(1000)
    b_obs, b_r, b_info = _rollout(gym.make("aryl_gym/Aryl-v1", scenario="tiny", **kw), seed=5)
    assert a_r == b_r
    assert len(a_obs) == len(b_obs)
    for x, y in zip(a_obs, b_obs):
        for k in x:
            np.testing.assert_array_equal(x[k], y[k])
    assert a_info["episode_metrics"] == b_info["episode_metrics"]
    # a different seed draws a different trace
    c_obs, c_r, _ = _rollout(gym.make("aryl_gym/Aryl-v1", scenario="tiny", **kw), seed=6)
    assert c_r != a_r


def test_episode_seed_option_is_the_native_episode():
    env = ArylEnv(scenario="tiny")
    env.reset(options={"episode_seed": 7})
    native = make_episode("tiny", 7)
    assert env.sim.jobs == native.jobs
    np.testing.assert_array_equal(env.sim.loan.util, native.utilization)


@pytest.mark.parametrize("how", ["pickle", "deepcopy"])
@pytest.mark.parametrize("mode", ["targets", "sequential"])
def test_pickle_and_deepcopy_mid_episode(how, mode):
    env = ArylEnv(scenario="tiny", action_mode=mode)
    rng = np.random.default_rng(0)
    env.reset(seed=1)
    for _ in range(25):
        env.step(_random_action(env, rng))
    clone = pickle.loads(pickle.dumps(env)) if how == "pickle" else copy.deepcopy(env)
    rng_a = np.random.default_rng(4)
    rng_b = np.random.default_rng(4)
    for _ in range(60):
        oa, ra, ta, tra, _ = env.step(_random_action(env, rng_a))
        ob, rb, tb, trb, _ = clone.step(_random_action(clone, rng_b))
        assert ra == rb and ta == tb and tra == trb
        for k in oa:
            np.testing.assert_array_equal(oa[k], ob[k])
        if ta or tra:
            break


@pytest.mark.parametrize(
    "mode,bad",
    [
        ("targets", np.full(16, np.nan)),
        ("targets", np.array([1, 2, 3])),
        ("targets", np.full(16, 99)),
        ("targets", "junk"),
        ("sequential", np.nan),
        ("sequential", 10_000),
        ("sequential", -1),
        ("sequential", [1, 2]),
        ("priority", np.full(16, np.nan, dtype=np.float32)),
        ("priority", np.zeros(3)),
    ],
)
def test_invalid_actions_are_counted_noops(mode, bad):
    env = ArylEnv(scenario="tiny", action_mode=mode, invalid_penalty=0.5)
    env.reset(seed=0)
    t0, q0, r0 = env.sim.now, env.sim.n_queued, env.sim.n_running
    obs, reward, te, tr, info = env.step(bad)
    assert info["invalid"] >= 1 and info["invalid_total"] >= 1
    assert info["reward_components"]["invalid"] == -info["invalid"]
    assert reward <= -0.5 * info["invalid"] + 1e-12  # jct part is <= 0 too
    if mode == "sequential":  # a sub-step no-op: nothing moved
        assert (env.sim.now, env.sim.n_queued, env.sim.n_running) == (t0, q0, r0)
    else:  # committed an empty decision: nobody started
        assert info["running"] == r0 or env.sim.now > t0


def test_masked_action_in_sequential_is_noop():
    env = ArylEnv(scenario="tiny", action_mode="sequential")
    env.reset(seed=0)
    mask = env.action_masks()
    bad = int(np.flatnonzero(~mask)[0])
    tent = env.codec.tent.copy()
    _, _, _, _, info = env.step(bad)
    assert info["invalid"] == 1
    np.testing.assert_array_equal(env.codec.tent, tent)


@pytest.mark.parametrize(
    "scenario, mode",
    [
        ("tiny", "targets"),
        ("tiny", "sequential"),
        ("testbed", "targets"),
        ("testbed", "sequential"),
    ],
)
def test_jct_reward_sums_to_total_jct(scenario, mode):
    env = ArylEnv(scenario=scenario, action_mode=mode)
    _, rewards, info = _rollout(env, seed=2)
    res = info["episode_result"]
    assert info["episode_metrics"]["jobs_completed"] == res.jobs_total  # terminated: all done
    total_jct = float(np.sum(np.asarray(res.jcts)))
    assert np.isclose(sum(rewards), -total_jct / 3600.0, rtol=1e-9, atol=1e-9)


def test_reward_components_and_weights():
    env = ArylEnv(scenario="tiny", reward={"jct": 1.0, "queue": 0.5, "preemption": 2.0, "usage": 1.0})
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(30):
        _, r, te, tr, info = env.step(_random_action(env, rng))
        c = info["reward_components"]
        assert set(c) == {"jct", "queue", "preemption", "usage", "slowdown", "invalid", "loan_usage"}
        expect = c["jct"] + 0.5 * c["queue"] + 2.0 * c["preemption"] + c["usage"]
        assert np.isclose(r, expect)
        assert c["usage"] >= 0 and c["jct"] <= 0 and c["queue"] <= 0
        assert 0 <= c["loan_usage"] <= c["usage"]  # the loaned part of usage
        if te or tr:
            break
    with pytest.raises(ValueError, match="unknown reward component"):
        ArylEnv(scenario="tiny", reward="bogus")


def test_registered_reward_component():
    """A component registered with ``reward_component`` is weighted and reported like a built-in."""
    from aryl_gym.envs import reward as rw

    seen: list[float] = []

    @rw.reward_component("test_hours")
    def _hours(step: rw.RewardStep) -> float:  # elapsed hours, a hand-checkable component
        seen.append(step.dt)
        return step.dt / 3600.0

    try:
        assert "test_hours" in rw.component_names()
        with pytest.raises(ValueError, match="registered twice"):
            rw.reward_component("test_hours")(_hours)
        env = ArylEnv(scenario="tiny", reward={"jct": 1.0, "test_hours": 0.25})
        env.reset(seed=0)
        rng = np.random.default_rng(0)
        t0 = env.unwrapped.sim.now
        for _ in range(20):
            _, r, te, tr, info = env.step(_random_action(env, rng))
            c = info["reward_components"]
            assert c["test_hours"] == pytest.approx(seen[-1] / 3600.0)
            assert np.isclose(r, c["jct"] + 0.25 * c["test_hours"])
            if te or tr:
                break
        assert sum(seen) == pytest.approx(env.unwrapped.sim.now - t0)
    finally:
        rw._REGISTRY.pop("test_hours", None)
    with pytest.raises(ValueError, match="identifier"):
        rw.reward_component("not a name")


def test_max_steps_truncates_with_result():
    env = ArylEnv(scenario="tiny", max_steps=5)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(5):
        _, _, te, tr, info = env.step(_random_action(env, rng))
    assert tr and not te
    assert info["episode_result"].truncated
    with pytest.raises(RuntimeError):
        env.step(_random_action(env, rng))


def test_stall_is_truncated_and_each_round_is_a_decision_point():
    # an agent that never starts anything: rounds during the stall are decision points (no
    # unbounded fast-forward), and the stall guard truncates
    env = ArylEnv(scenario="tiny", stall_hours=1.0, max_steps=100_000)
    env.reset(seed=0)
    zero = np.zeros(env.k, dtype=np.int64)
    for _ in range(100_000):
        _, r, te, tr, info = env.step(zero)
        assert np.isfinite(r)
        if te or tr:
            break
    assert tr and info["episode_result"].stalled
    assert env.sim.now < 24 * 3600.0 * 10


def test_fixed_trace_option():
    jobs = make_episode("tiny", 11).jobs[:5]
    env = ArylEnv(scenario="tiny", jobs=jobs)
    env.reset(seed=0)
    assert env.sim.n_jobs == 5
    env.reset(seed=1, options={"jobs": jobs[:3]})
    assert env.sim.n_jobs == 3


def test_render_modes():
    env = ArylEnv(scenario="testbed", render_mode="ansi")
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(10):
        env.step(_random_action(env, rng))
    text = env.render()
    assert "queued=" in text and text.count("\n") >= env.sim.n_servers + 1
    env = ArylEnv(scenario="testbed", render_mode="rgb_array")
    env.reset(seed=0)
    for _ in range(10):
        env.step(_random_action(env, rng))
    img = env.render()
    assert img.dtype == np.uint8 and img.ndim == 3 and img.shape[2] == 3
    assert img.shape[0] >= env.sim.n_servers * 6 and img.any()


def test_bad_arguments_raise_clear_errors():
    with pytest.raises(ValueError, match="action_mode"):
        ArylEnv(action_mode="nope")
    with pytest.raises(ValueError, match="window"):
        ArylEnv(window=0)
    with pytest.raises(ValueError, match="reclaim"):
        ArylEnv(reclaim="no-such-rule")


def test_reclaim_env_rollouts_and_masks():
    env = gym.make("aryl_gym/ArylReclaim-v1", scenario="testbed").unwrapped
    rng = np.random.default_rng(0)
    obs, _ = env.reset(seed=0)
    steps = 0
    while True:
        mask = env.action_masks()
        assert mask.any()
        if env.need:
            # only loaned, not yet picked servers
            loaned = env.sim.srv_loaned[env.n_train :]
            assert not (mask & ~loaned).any()
            for s in env.picks:
                assert not mask[s - env.n_train]
        obs, r, te, tr, info = env.step(int(rng.choice(np.flatnonzero(mask))))
        steps += 1
        assert env.observation_space.contains(obs)
        if te or tr:
            break
    res = info["episode_result"]
    assert res.reclaimed_servers == steps or steps == 1
    assert res.jobs_completed == res.jobs_total


def test_trace_file_as_kwarg_and_reset_option(tmp_path):
    # a generic CSV trace written here: submit time, GPUs, duration (seconds)
    p = tmp_path / "mine.csv"
    p.write_text("submit,gpus,duration\n0,1,600\n30,2,1200\n90,4,300\n")
    m = tmp_path / "map.yaml"
    m.write_text("columns:\n  submit: submit\n  gpus: gpus\n  duration: duration\n")
    env = ArylEnv(scenario="tiny", trace=str(p), trace_format="csv", trace_map=str(m))
    env.reset(seed=0)
    assert env.sim.n_jobs == 3
    assert [j.g * j.w_req for j in env.sim.jobs] == [1, 2, 4]  # the trace's GPUs are the request
    env.reset(seed=1, options={"trace": str(p), "trace_format": "csv", "trace_map": str(m)})
    assert env.sim.n_jobs == 3
    with pytest.raises(ValueError, match="trace_format"):
        env.reset(seed=2, options={"trace": str(p), "trace_format": None})


def _commit_only_until(env, steps):
    """Let the queue build: commit every round without starting anything (sequential mode)."""
    commit = env.codec.commit
    for _ in range(steps):
        _, _, te, tr, info = env.step(commit)
        if te or tr:
            return info
    return None


def test_window_order_pred_time_is_shortest_first():
    # A long queue (nothing is ever started): the window's queued slots must be the shortest
    # queued jobs by predicted time at base demand on the training pool, shortest first, ties by
    # id -- checked against a brute force over every queued job with the view's pred_time.
    env = ArylEnv(scenario="testbed", action_mode="sequential", window=8, window_order="pred_time")
    env.reset(options={"episode_seed": 3})
    seen_long = False
    for _ in range(60):
        sim = env.sim
        view = sim.view
        queued = view.queued()
        key = {j: (view.pred_time(j, int(sim.w_min[j]), 0), j) for j in queued}
        expect = sorted(queued, key=lambda j: key[j])
        win_q = [int(j) for j in env.window if sim.state[j] != 2]  # queued part of the window
        assert win_q == expect[: len(win_q)]
        assert sorted(int(j) for j in env._q_out) == sorted(expect[len(win_q):])
        seen_long |= len(queued) > len(win_q) > 0
        if _commit_only_until(env, 1) is not None:
            break
    assert seen_long, "the test never saw a queue longer than the window"
    # the default keeps the documented submit order (head of the queue first)
    env2 = ArylEnv(scenario="testbed", action_mode="sequential", window=8)
    assert env2.window_order == "submit"
    env2.reset(options={"episode_seed": 3})
    _commit_only_until(env2, 40)
    q = sorted(env2.sim.view.queued())
    win_q = [int(j) for j in env2.window if env2.sim.state[j] != 2]
    assert len(q) > 8 and win_q[:6] == q[:6]


def test_stall_cutoff_truncates_after_stall_hours():
    # an agent that never starts a job: after the last arrival the cluster stalls and every
    # 60 s round is a decision point; stall_hours=0.5 truncates after about 30 of them
    env = ArylEnv(scenario="tiny", action_mode="sequential", stall_hours=0.5)
    env.reset(options={"episode_seed": 0})
    commit = env.codec.commit
    stall_steps = 0
    for _ in range(100_000):
        _, _, te, tr, info = env.step(commit)
        sim = env.sim
        if not sim.n_running and sim.arrivals_left == 0:
            stall_steps += 1
        if te or tr:
            break
    assert tr and not te and info["episode_result"].stalled
    assert info["episode_result"].jobs_unfinished > 0
    assert 30 <= stall_steps <= 32  # 0.5 h of 60 s rounds (+ the round that detects it)
    assert ArylEnv(scenario="tiny").stall_hours == 6.0  # the default


def test_info_elapsed_sums_to_simulated_time():
    env = ArylEnv(scenario="tiny", action_mode="sequential")
    env.reset(options={"episode_seed": 1})
    t0 = env.sim.now
    rng = np.random.default_rng(0)
    total = 0.0
    while True:
        a = _random_action(env, rng)
        _, _, te, tr, info = env.step(a)
        if a != env.codec.commit:
            assert info["elapsed"] == 0.0  # a sub-step takes no simulated time
        total += info["elapsed"]
        if te or tr:
            break
    assert total == pytest.approx(env.sim.now - t0)


def test_window_order_and_stall_hours_are_checked():
    with pytest.raises(ValueError, match="window_order"):
        ArylEnv(scenario="tiny", window_order="random")
    with pytest.raises(ValueError, match="stall_hours"):
        ArylEnv(scenario="tiny", stall_hours=0)
