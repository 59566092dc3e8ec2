"""Hostile-user pass (v9) over the vector and API surfaces: ``gym.make_vec``'s batched env, its
subprocess variant, the SB3 adapter, and the multi-objective and two-agent views. Each test
failed on the code before the fix it names."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import aryl_gym  # noqa: F401
from aryl_gym.envs.vector import ArylAsyncVectorEnv, ArylVectorEnv, make_vector

ID = "aryl_gym/Aryl-v2"
MO_ID = "aryl_gym/ArylMO-v2"
KW = {"scenario": "tiny", "action_mode": "sequential", "window": 4}


def test_batched_env_refuses_the_multi_objective_view():
    """was: ``make_vector("aryl_gym/ArylMO-v2", ...)`` (or ``ArylVectorEnv(env_id=...)``) stepped
    the envs through the row writer, bypassing the view's ``step``: the rewards came out as the
    scalar reward, not the view's vector, without a word."""
    for build in (lambda: ArylVectorEnv(2, env_id=MO_ID, **KW),
                  lambda: make_vector(MO_ID, num_envs=2, **KW),
                  lambda: make_vector(MO_ID, num_envs=2, workers=2, **KW)):  # before any worker starts
        with pytest.raises(ValueError, match="vector reward.*MOSyncVectorEnv"):
            build()


def test_make_vec_of_the_multi_objective_view_is_a_clear_error():
    """was: ``gym.make_vec("aryl_gym/ArylMO-v2", num_envs=2)`` built Gymnasium's SyncVectorEnv,
    whose first step raised numpy's "setting an array element with a sequence"."""
    for env_id in ("aryl_gym/ArylMO-v2", "aryl_gym/ArylMO-v1", "ArylMO-v2"):
        with pytest.raises(ValueError, match="vector reward.*MOSyncVectorEnv"):
            gym.make_vec(env_id, num_envs=2, **KW)
    # the single env is unchanged
    env = gym.make(MO_ID, **KW)
    env.reset(seed=0)
    _, r, *_ = env.step(8)
    assert r.shape == (3,)


def test_async_vector_env_renders_as_the_batched_one():
    """was: ``ArylAsyncVectorEnv.render()`` was Gymnasium's NotImplementedError (so SB3's
    ``get_images()`` on the adapter raised too); the batched env renders every env."""
    a = gym.make_vec(ID, num_envs=2, workers=2, render_mode="ansi", **KW)
    b = gym.make_vec(ID, num_envs=2, render_mode="ansi", **KW)
    assert isinstance(a, ArylAsyncVectorEnv)
    try:
        a.reset(seed=3)
        b.reset(seed=3)
        frames = a.render()
        assert isinstance(frames, tuple) and len(frames) == 2
        assert frames == b.render()
        assert all(isinstance(f, str) and f for f in frames)
        pytest.importorskip("stable_baselines3")
        from aryl_gym.envs.vector import sb3_vec_env

        s = sb3_vec_env(gym.make_vec(ID, num_envs=2, workers=2, autoreset_mode="same_step", **KW))
        try:
            s.reset()
            assert list(s.get_images()) == [None, None]  # render_mode None: no frames
        finally:
            s.close()
    finally:
        a.close()
        b.close()
    for v in (a, b):  # both classes, as for step and reset (was: the batched one rendered on)
        with pytest.raises(gym.error.ClosedEnvironmentError):
            v.render()


@pytest.mark.parametrize("workers", [1, 2])
def test_a_set_of_actions_is_refused(workers):
    """was: the batched env took a set as its elements in hash order (env i got whichever action
    the set iterated i-th) while the subprocess variant refused it."""
    v = gym.make_vec(ID, num_envs=2, workers=workers, **KW)
    try:
        v.reset(seed=0)
        for bad in ({0, 8}, frozenset({1, 8})):
            with pytest.raises(ValueError, match="actions"):
                v.step(bad)
        assert v.get_attr("steps") == (0, 0)  # nothing stepped
    finally:
        v.close()


def test_two_agent_view_names_an_unknown_agent():
    """was: ``observation_space("bob")`` and ``action_space("bob")`` raised a bare
    ``KeyError: 'bob'`` (``action_masks("bob")`` and ``step`` named the agents)."""
    pytest.importorskip("pettingzoo")
    from aryl_gym.envs.multiagent import AGENTS, ArylParallelEnv

    env = ArylParallelEnv(**KW)
    for bad in ("bob", "allocatio", None, 0):
        for f in (env.observation_space, env.action_space, env.action_masks):
            with pytest.raises(ValueError, match="unknown agent.*allocation, reclaim"):
                f(bad)  # type: ignore[arg-type]
    for agent in AGENTS:  # the real ones still work
        assert env.observation_space(agent) is env.observation_spaces[agent]
        assert env.action_space(agent) is env.action_spaces[agent]


def test_two_agent_masks_are_all_false_once_the_episode_ends() -> None:
    """Was: after the episode ended, ``action_masks("allocation")`` returned a live-looking mask
    (the commit allowed) while ``agents`` was empty; before the first reset it still raises."""
    pytest.importorskip("pettingzoo")
    from aryl_gym.envs.multiagent import ArylParallelEnv

    env = ArylParallelEnv(scenario="tiny")
    with pytest.raises(RuntimeError, match="reset"):
        env.action_masks("allocation")
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    while env.agents:
        acts = {}
        for a in env.agents:
            ok = np.flatnonzero(env.action_masks(a))
            acts[a] = int(ok[rng.integers(len(ok))]) if len(ok) else 0
        env.step(acts)
    assert not env.action_masks("allocation").any()
    assert not env.action_masks("reclaim").any()
