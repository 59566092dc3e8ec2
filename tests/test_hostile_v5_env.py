"""Hostile-user pass over the vector envs (``gym.make_vec``'s batched env, its subprocess
variant) and their API edges: each test failed on the code before the fix it names."""

from __future__ import annotations

import copy
import os
import pickle
import signal
import time

import gymnasium as gym
import numpy as np
import pytest

import aryl_gym  # noqa: F401
from aryl_gym.envs.vector import ArylAsyncVectorEnv, ArylVectorEnv

ID = "aryl_gym/Aryl-v2"
KW = {"scenario": "tiny", "action_mode": "sequential", "window": 4}


def _actions(obs, rng):
    m = obs["action_mask"] > 0.5
    return (rng.random(m.shape) * m).argmax(axis=1)


def _same_obs(a, b):
    assert set(a) == set(b)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def test_pickled_or_copied_vector_env_keeps_writing_its_observations():
    """was: a copy made after a step wrote its observations into detached copies of the row
    views, so every later observation it returned was stale (masks disagreed with
    action_masks())."""
    v = gym.make_vec(ID, num_envs=2, **KW)
    rng = np.random.default_rng(0)
    o, _ = v.reset(seed=3)
    for _ in range(5):
        o, *_ = v.step(_actions(o, rng))
    copies = [pickle.loads(pickle.dumps(v)), copy.deepcopy(v)]
    for _ in range(15):
        a = _actions(o, rng)
        o, r, *_ = v.step(a)
        for w in copies:
            o2, r2, *_ = w.step(a)
            _same_obs(o, o2)
            np.testing.assert_array_equal(r, r2)
            np.testing.assert_array_equal(o2["action_mask"] > 0.5, w.action_masks())


def test_max_episode_steps_is_an_error_not_ignored():
    """was: ``gym.make_vec(..., max_episode_steps=5)`` dropped the limit silently (episodes ran
    to their end); Gymnasium's sync mode applies it as a TimeLimit."""
    with pytest.raises(ValueError, match="max_episode_steps.*max_steps=N"):
        gym.make_vec(ID, num_envs=2, max_episode_steps=5, **KW)
    with pytest.raises(ValueError, match="max_episode_steps"):  # before any worker starts
        gym.make_vec(ID, num_envs=2, workers=2, max_episode_steps=5, **KW)
    # the env's own limit is the way
    v = gym.make_vec(ID, num_envs=2, max_steps=2, **KW)
    o, _ = v.reset(seed=0)
    v.step(np.zeros(2, dtype=np.int64))
    *_, tr, _ = v.step(np.zeros(2, dtype=np.int64))
    assert tr.all()


def test_bad_seeds_are_checked_before_any_env_resets():
    """was: a negative seed (or one in a list) raised Gymnasium's ``error.Error`` after the envs
    before it had been reset; ``True`` in a list was seed 1."""
    v = gym.make_vec(ID, num_envs=3, **KW)
    v.reset(seed=10)
    before = [e.sim.seed for e in v.envs]
    for bad in (-1, np.int64(-3), [5, 6, -1], [5, 6.0, 7], [5, True, 7], [5, "6", 7]):
        with pytest.raises(ValueError, match="seed"):
            v.reset(seed=bad)
        assert [e.sim.seed for e in v.envs] == before, bad  # nothing was reset


def test_numpy_array_of_seeds_is_the_list_and_the_single_envs():
    """was: ``reset(seed=np.arange(n))`` was rejected (SyncVectorEnv over gym.make takes it);
    now it is the list of seeds, and the stack is N separate ``gym.make`` envs bit for bit."""
    v = gym.make_vec(ID, num_envs=3, **KW)
    singles = [gym.make(ID, **KW) for _ in range(3)]
    o, _ = v.reset(seed=np.array([3, 4, 5]))
    os_ = [s.reset(seed=seed)[0] for s, seed in zip(singles, (3, 4, 5))]
    rng = np.random.default_rng(1)
    for _ in range(20):
        for i, oi in enumerate(os_):
            _same_obs({k: x[i] for k, x in o.items()}, oi)
        np.testing.assert_array_equal(v.action_masks(), np.stack([s.unwrapped.action_masks() for s in singles]))
        a = _actions(o, rng)
        o, r, te, tr, _ = v.step(a)
        outs = [s.step(int(ai)) for s, ai in zip(singles, a)]
        os_ = [x[0] for x in outs]
        np.testing.assert_array_equal(r, [x[1] for x in outs])
        assert not (te | tr).any()


def test_bad_actions_and_options_name_the_argument():
    """was: a str or dict of num_envs characters / keys was stepped as that many invalid actions,
    a scalar raised "'int' object is not iterable", options="x" raised dict()'s "dictionary
    update sequence element" error."""
    v = gym.make_vec(ID, num_envs=3, **KW)
    v.reset(seed=0)
    for bad in ("abc", {"a": 1, "b": 2, "c": 3}, 5, np.int64(5)):
        with pytest.raises(ValueError, match="actions"):
            v.step(bad)
    assert all(e.steps == 0 for e in v.envs)
    with pytest.raises(ValueError, match=r"options=\.\.\.\) must be a dict"):
        v.reset(options="x")


def test_closed_vector_env_raises():
    """was: step() and reset() went on after close()."""
    v = gym.make_vec(ID, num_envs=2, **KW)
    v.reset(seed=0)
    v.close()
    v.close()  # twice is fine
    with pytest.raises(gym.error.ClosedEnvironmentError, match="closed"):
        v.step(np.zeros(2, dtype=np.int64))
    with pytest.raises(gym.error.ClosedEnvironmentError, match="closed"):
        v.reset(seed=0)
    with pytest.raises(gym.error.ClosedEnvironmentError, match="closed"):
        v.action_masks()


def _end_env_1(v):
    o, _ = v.reset(seed=0)
    for _ in range(2):  # max_steps=2: both envs end
        *_, te, tr, _ = v.step(np.zeros(2, dtype=np.int64))
    assert (te | tr).all()
    v.reset(options={"reset_mask": np.array([True, False])})


def test_disabled_autoreset_refuses_before_any_env_steps():
    """was: stepping with env 1 ended raised at env 1, after env 0 had taken the step."""
    v = gym.make_vec(ID, num_envs=2, autoreset_mode="disabled", max_steps=2, **KW)
    _end_env_1(v)
    with pytest.raises(RuntimeError, match="env 1 has ended"):
        v.step(np.zeros(2, dtype=np.int64))
    assert [e.steps for e in v.envs] == [0, 2]


def test_async_worker_error_is_raised_as_is_and_the_worker_goes_on():
    """was: any error in a worker (step before reset, an unknown reset option) ended that worker:
    the parent raised a RuntimeError with its traceback, then BrokenPipeError for every later
    call; the disabled-mode check was per worker (env 0 stepped); action_masks() before reset
    read all-False masks from the zeroed shared memory; ragged actions were numpy's error."""
    a = gym.make_vec(ID, num_envs=2, workers=2, autoreset_mode="disabled", max_steps=2, **KW)
    assert isinstance(a, ArylAsyncVectorEnv)
    try:
        with pytest.raises(RuntimeError, match="reset"):
            a.action_masks()
        with pytest.raises(RuntimeError, match=r"call reset\(\) before step\(\)"):
            a.step(np.zeros(2, dtype=np.int64))
        with pytest.raises(ValueError, match="unknown key 'bogus'"):
            a.reset(options={"bogus": 1})
        with pytest.raises(ValueError, match="actions"):
            a.step([1, [1, 2]])
        b = ArylVectorEnv(2, env_id=ID, autoreset_mode="disabled", max_steps=2, **KW)
        o1, _ = a.reset(seed=4)
        o2, _ = b.reset(seed=4)
        _same_obs(o1, o2)
        np.testing.assert_array_equal(a.action_masks(), b.action_masks())
        _end_env_1(a)
        with pytest.raises(RuntimeError, match="env 1 has ended"):
            a.step(np.zeros(2, dtype=np.int64))
        assert a.get_attr("steps") == (0, 2)
        with pytest.raises(TypeError, match="ArylVectorEnv"):
            pickle.dumps(a)
    finally:
        a.close()


def test_async_dead_worker_and_close():
    """was: a killed worker gave BrokenPipeError / ConnectionResetError; action_masks() after
    close() read the unmapped shared memory (a segfault)."""
    a = gym.make_vec(ID, num_envs=2, workers=2, **KW)
    try:
        o, _ = a.reset(seed=0)
        os.kill(a._procs[1].pid, signal.SIGKILL)
        a._procs[1].join(5)
        for _ in range(2):  # and every call after
            with pytest.raises(RuntimeError, match=r"worker 1 \(pid \d+, envs 1\.\.1\) has died \(exit code -9\)"):
                a.step(np.zeros(2, dtype=np.int64))
    finally:
        a.close()
    assert not any(p.is_alive() for p in a._procs)
    with pytest.raises(gym.error.ClosedEnvironmentError):
        a.action_masks()
    with pytest.raises(gym.error.ClosedEnvironmentError):
        a.reset(seed=0)
    assert o["action_mask"].shape == (2, 9)  # what step/reset returned stays readable


def test_async_stopped_worker_times_out_and_close_ends_it():
    """was: a worker stopped (SIGSTOP) but not killed made every call wait forever; close()
    sent it SIGTERM, which a stopped process does not act on."""
    a = gym.make_vec(ID, num_envs=2, workers=2, timeout=1.0, **KW)
    try:
        a.reset(seed=0)
        a.step(np.zeros(2, dtype=np.int64))  # answers in time
        os.kill(a._procs[0].pid, signal.SIGSTOP)
        t0 = time.monotonic()
        with pytest.raises(TimeoutError, match=r"worker 0 \(pid \d+, envs 0\.\.0\) did not answer within timeout=1 s"):
            a.step(np.zeros(2, dtype=np.int64))
        assert time.monotonic() - t0 < 10
        with pytest.raises(RuntimeError, match="did not answer"):  # unusable after it
            a.step(np.zeros(2, dtype=np.int64))
    finally:
        a.close()
    assert not any(p.is_alive() for p in a._procs)


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), "5", True])
def test_bad_timeout_is_a_clear_error(bad):
    with pytest.raises(ValueError, match="timeout must be a number of seconds > 0 or None"):
        gym.make_vec(ID, num_envs=2, workers=2, timeout=bad, **KW)


def test_timeout_without_workers_is_a_clear_error():
    with pytest.raises(ValueError, match="timeout= applies to worker processes only"):
        gym.make_vec(ID, num_envs=2, timeout=5.0, **KW)
    gym.make_vec(ID, num_envs=2, timeout=None, **KW).close()  # None is the default: accepted
