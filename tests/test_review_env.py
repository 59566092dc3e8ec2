"""Hostile review of the Gymnasium env API (actions of odd types, failed resets, the reclaim
env's arguments and rendering), plus property checks of observations and determinism."""

from __future__ import annotations

import copy
import os
import pickle
import subprocess
import sys
import warnings
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import aryl_gym  # noqa: F401  (registers the envs)
from aryl_gym.envs.allocation import ArylEnv
from aryl_gym.envs.multiagent import ArylParallelEnv
from aryl_gym.envs.reclaim import ArylReclaimEnv
from aryl_gym.reclaim_snapshots import synthetic_snapshots

ID = "aryl_gym/Aryl-v2"
K = 4


def _env_with_jobs(mode: str) -> ArylEnv:
    """A testbed env at a decision point with at least two queued window jobs."""
    env = gym.make(ID, scenario="testbed", action_mode=mode, window=K, disable_env_checker=True).unwrapped
    env.reset(seed=0)
    noop: Any = 2 * K if mode == "sequential" else np.zeros(K)
    while len(env.window) < 2:
        env.step(noop)
    return env


def _step(env: ArylEnv, action: Any) -> tuple[int, float]:
    e = pickle.loads(pickle.dumps(env))
    _, _, _, _, info = e.step(action)
    return info["invalid"], info["time"]


@pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")
@pytest.mark.parametrize("mode", ["targets", "priority"])
def test_np_matrix_action_is_its_plain_array(mode: str):
    """was: targets mode raised TypeError on an np.matrix (reshape kept two axes), though a
    (1, K) action is documented as fine and priority took it."""
    env = _env_with_jobs(mode)
    plain = np.array([1, 1, 1, 0])
    want = _step(env, plain)
    assert want[0] == 0
    assert _step(env, np.matrix(plain)) == want
    assert _step(env, np.matrix(plain).T) == want


@pytest.mark.parametrize("mode", ["targets", "priority", "sequential"])
def test_masked_entries_of_a_masked_array_are_invalid(mode: str):
    """was: the values under the mask were taken (priority, sequential: np.ma.masked was
    action 0, a silently different action) or targets raised TypeError."""
    env = _env_with_jobs(mode)
    noop_time = _step(env, None)[1]
    if mode == "sequential":
        bad: list[Any] = [np.ma.masked, np.ma.masked_array(0, mask=True)]
        good = np.ma.masked_array(0, mask=False)
        assert _step(env, good)[0] == 0
    else:
        bad = [np.ma.masked_array([1, 1, 1, 0], mask=[0, 1, 0, 0]), np.ma.masked]
        good = np.ma.masked_array([1, 1, 1, 0])
        assert _step(env, good) == _step(env, np.array([1, 1, 1, 0]))
    for a in bad:
        invalid, t = _step(env, a)
        assert invalid == (K if mode == "targets" else 1), a
        assert t == noop_time  # nothing of it was acted on


def test_failed_reset_of_the_two_agent_view_keeps_the_episode():
    """was: reset() cleared the pending reclaim before the allocation env refused the bad seed
    or options, so the episode went on differently (or the loan phase raised)."""
    env = ArylParallelEnv(scenario="testbed", action_mode="sequential", window=6)
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    while env.active != "reclaim":
        m = env.action_masks("allocation")
        env.step({"allocation": int(rng.choice(np.flatnonzero(m)))})
    twin = copy.deepcopy(env)
    for bad in (dict(seed=-1), dict(seed=True), dict(options={"foo": 1})):
        with pytest.raises((ValueError, gym.error.Error)):
            env.reset(**bad)  # type: ignore[arg-type]
    assert (env.need, env.picks, env.steps) == (twin.need, twin.picks, twin.steps)

    def play(e: ArylParallelEnv) -> list[Any]:
        r, out = np.random.default_rng(1), []
        for _ in range(20):
            ag = e.active
            m = e.action_masks(ag)
            _, rew, _, _, info = e.step({ag: int(r.choice(np.flatnonzero(m)))})
            out.append((ag, rew, info[ag]["invalid"], info[ag]["time"]))
        return out

    assert play(env) == play(twin)


def test_reclaim_render_before_reset_raises():
    """was: None for a render mode that promises text (docs/env.md, "Rendering")."""
    env = ArylReclaimEnv(scenario="tiny", render_mode="ansi")
    with pytest.raises(RuntimeError, match="reset"):
        env.render()
    env.reset(seed=0)
    assert isinstance(env.render(), str)
    assert ArylReclaimEnv(scenario="tiny").render() is None


def test_reclaim_snapshot_arguments_are_checked():
    """was: max_servers=8.7 became 8, "8" a TypeError, and optimum="no" was True."""
    snaps = synthetic_snapshots(2, 4, 6, seed=1)
    for bad in (8.7, "8", True):
        with pytest.raises(ValueError, match="max_servers"):
            ArylReclaimEnv(snapshots=snaps, max_servers=bad)
    with pytest.raises(ValueError, match="optimum"):
        ArylReclaimEnv(snapshots=snaps, optimum="no")
    assert ArylReclaimEnv(snapshots=snaps, max_servers=np.int64(8)).n_inf == 8
    assert ArylReclaimEnv(snapshots=snaps, optimum=1).report_optimum is True


# -- property checks (no fix behind them: they guard what holds) -------------------------------
def _act(env: ArylEnv, rng: np.random.Generator, mode: str, k: int) -> Any:
    m = env.action_masks()
    if mode == "targets":
        return np.array([rng.choice(np.flatnonzero(r)) for r in m.reshape(k, -1)])
    if mode == "sequential":
        return int(rng.choice(np.flatnonzero(m)))
    return rng.uniform(-1, 1, k).astype(np.float32)


def _inside(obs: dict[str, np.ndarray], space: gym.spaces.Dict) -> None:
    assert set(obs) == set(space.spaces)
    for key, sp in space.spaces.items():
        x = obs[key]
        assert x.dtype == sp.dtype and x.shape == sp.shape, key
        assert np.isfinite(x).all() and (x >= sp.low).all() and (x <= sp.high).all(), key


@pytest.mark.parametrize("mode", ["targets", "sequential", "priority"])
@pytest.mark.parametrize("observation", ["v0", "v1"])
def test_observations_stay_inside_the_space_over_a_testbed_episode(mode: str, observation: str):
    k = 6
    env = gym.make(ID, scenario="testbed", action_mode=mode, window=k, observation=observation,
                   allow_preempt=mode != "priority", max_steps=600).unwrapped
    rng = np.random.default_rng(7)
    obs, _ = env.reset(seed=3)
    _inside(obs, env.observation_space)
    while True:
        obs, r, te, tr, _ = env.step(_act(env, rng, mode, k))
        _inside(obs, env.observation_space)
        assert np.isfinite(r)
        if te or tr:
            break


def _episode(env: ArylEnv, seed: int, mode: str, k: int, steps: int) -> list[Any]:
    rng = np.random.default_rng(seed)
    obs, info = env.reset(seed=seed)
    out: list[Any] = [pickle.dumps((obs, sorted(info)))]
    for _ in range(steps):
        obs, r, te, tr, info = env.step(_act(env, rng, mode, k))
        out.append(pickle.dumps((obs, r, te, tr, {k: v for k, v in info.items() if k != "episode_result"})))
        if te or tr:
            break
    return out


def test_reset_seed_after_other_episodes_equals_a_fresh_env():
    k = 6
    kw = dict(scenario="testbed", action_mode="sequential", window=k, allow_preempt=True,
              flap_damping={"engage_share": 0}, observation="v1")
    used = gym.make(ID, **kw).unwrapped
    _episode(used, 1, "sequential", k, 300)
    _episode(used, 5, "sequential", k, 40)
    assert _episode(used, 2, "sequential", k, 150) == _episode(gym.make(ID, **kw).unwrapped, 2, "sequential", k, 150)


_HASH_SCRIPT = """
import hashlib, warnings, numpy as np, gymnasium as gym, aryl_gym
warnings.simplefilter("ignore")
h = hashlib.sha256()
env = gym.make("aryl_gym/Aryl-v2", scenario="testbed", action_mode="sequential", window=6,
               observation="v1", backfill=True).unwrapped
rng = np.random.default_rng(0)
obs, _ = env.reset(seed=3)
for _ in range(150):
    a = int(rng.choice(np.flatnonzero(env.action_masks())))
    obs, r, te, tr, info = env.step(a)
    for k in sorted(obs):
        h.update(obs[k].tobytes())
    h.update(repr((r, te, tr, info["time"], info["window"].tolist())).encode())
    if te or tr:
        break
print(h.hexdigest())
"""


@pytest.mark.slow  # subprocesses
def test_episode_is_the_same_under_other_hash_seeds():
    outs = set()
    for hs in ("0", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": hs, "OMP_NUM_THREADS": "1"}
        res = subprocess.run([sys.executable, "-c", _HASH_SCRIPT], env=env, capture_output=True, text=True,
                             check=True, timeout=120)
        outs.add(res.stdout.strip().splitlines()[-1])
    assert len(outs) == 1


def test_deepcopy_and_pickle_mid_episode_continue_identically():
    k = 6
    env = gym.make(ID, scenario="testbed", action_mode="targets", window=k, allow_preempt=True).unwrapped
    rng = np.random.default_rng(2)
    env.reset(seed=4)
    for _ in range(30):
        env.step(_act(env, rng, "targets", k))
    copies = [env, copy.deepcopy(env), pickle.loads(pickle.dumps(env))]
    runs = []
    for e in copies:
        r = np.random.default_rng(9)
        seq = []
        for _ in range(40):
            obs, rew, te, tr, info = e.step(_act(e, r, "targets", k))
            seq.append(pickle.dumps((obs, rew, te, tr, info["time"], info["invalid"])))
            if te or tr:
                break
        seq.append(pickle.dumps(e.reset()[0]))  # the next episode comes from the same generator
        runs.append(seq)
    assert runs[0] == runs[1] == runs[2]


def test_check_env_on_each_mode():
    from gymnasium.utils.env_checker import check_env

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for mode in ("targets", "sequential", "priority"):
            check_env(gym.make(ID, scenario="tiny", action_mode=mode).unwrapped)
        check_env(gym.make("aryl_gym/ArylReclaim-v2", scenario="tiny").unwrapped)
