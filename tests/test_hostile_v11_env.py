"""Hostile-user pass (v11) over the allocation env's edge cases: the priority mode's all-False
mask, per-slot actions of more than one axis, and the two vector envs' action checks and
closed state. Each test failed on the code before the change it names (the priority mask test:
the semantics were not written down; the mask itself is unchanged, it is part of the
observation)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import aryl_gym  # noqa: F401
from aryl_gym.envs.allocation import ArylEnv
from aryl_gym.envs.vector import ArylAsyncVectorEnv, ArylVectorEnv

ID = "aryl_gym/Aryl-v2"
KW = {"scenario": "testbed", "action_mode": "targets", "window": 4}
DOCS = Path(__file__).resolve().parents[1] / "docs" / "env.md"


def _env(mode: str, steps: int = 3) -> ArylEnv:
    """A testbed env at a decision point whose window is full of queued jobs (seed 0: after three
    empty decisions, four queued jobs that may start at level 1)."""
    env = ArylEnv(scenario="testbed", action_mode=mode, window=4)
    env.reset(seed=0)
    for _ in range(steps):
        env.step(env.action_space.sample() * 0)
    assert len(env.window) == 4
    return env


def _after(env: ArylEnv, action: Any) -> tuple[int, float, list[int]]:
    """(invalid parts, time, workers of the window's jobs) after stepping a copy with ``action``."""
    e = copy.deepcopy(env)
    _, _, _, _, info = e.step(action)
    assert e.sim is not None
    return info["invalid"], float(e.sim.now), e.sim.workers[env.window].tolist()


def test_priority_mask_is_all_false_only_on_an_empty_window_where_every_action_is_a_no_op():
    """The priority mask marks the slots holding a job; it is all False exactly when the window
    is empty (at time 0 before the first arrival, between jobs), and then every action in the
    Box is the same no-op, counted valid: a masked policy must read it as "nothing to score",
    not as "no action allowed" (docs/env.md; was: undocumented)."""
    env = ArylEnv(scenario="testbed", action_mode="priority", window=4)
    env.reset(seed=0)
    assert len(env.window) == 0 and not env.action_masks().any()  # time 0: nothing has arrived
    rng = np.random.default_rng(0)
    outcomes = {_after(env, a)[:2] for a in (np.zeros(4, np.float32), np.ones(4, np.float32),
                                               -np.ones(4, np.float32), rng.uniform(-1, 1, 4).astype(np.float32))}
    assert len(outcomes) == 1 and next(iter(outcomes))[0] == 0  # no invalid part, the same next time
    for _ in range(60):
        m = env.action_masks()
        assert m.tolist() == [i < len(env.window) for i in range(4)]
        *_, te, tr, _ = env.step(rng.uniform(-1, 1, 4).astype(np.float32))
        assert not (te or tr)
    text = " ".join(DOCS.read_text().split())
    assert "all False exactly when the window is empty" in text


@pytest.mark.parametrize("mode", ["targets", "priority"])
def test_a_per_slot_action_of_two_axes_is_a_wrong_shape(mode: str):
    """was: any shape of K entries was read row by row, so a (2, 2) action for K = 4 (whose
    transpose is another action) was taken without a word; now it is a wrong shape (a counted
    no-op, as any wrong shape). Axes of length 1 are still fine: the entries lie along one axis."""
    env = _env(mode)
    flat = np.ones(4, dtype=np.int64 if mode == "targets" else np.float32)
    wrong = 4 if mode == "targets" else 1  # targets counts a wrong shape per slot
    inv, t, workers = _after(env, flat)
    assert inv == 0 and sum(workers) > 0  # the flat action starts jobs
    for same in (flat.reshape(1, 4), flat.reshape(4, 1), flat.reshape(1, 4, 1), flat.tolist()):
        assert _after(env, same) == (inv, t, workers)
    noop = _after(env, np.full(4, -5, dtype=flat.dtype))
    for bad in (flat.reshape(2, 2), flat.reshape(2, 2).tolist(), flat.reshape(2, 2, 1)):
        assert _after(env, bad) == (wrong, *noop[1:])
        assert sum(_after(env, bad)[2]) == 0


def test_a_targets_action_of_one_slot_may_still_be_a_scalar():
    """K = 1: a scalar, ``[x]`` and ``[[x]]`` are all the one slot's level (unchanged)."""
    env = ArylEnv(scenario="tiny", action_mode="targets", window=1)
    env.reset(seed=0)
    for a in (0, np.int64(0), [0], [[0]], np.zeros((1, 1, 1)), 0.0):
        assert _after(env, a)[0] == 0


def _vec(workers: int, **kw: Any) -> Any:
    return gym.make_vec(ID, num_envs=2, workers=workers, **{**KW, **kw})


def test_vector_envs_refuse_a_ragged_list_with_the_same_message():
    """was: the batched env stepped ``[[0, 0, 0, 0], [0, 0]]`` env by env (env 1's action a
    counted no-op), the subprocess variant raised; and the two worded every bad batch
    differently. Now both raise the same ValueError, naming the expected shape, before any env
    steps."""
    bads: list[Any] = [[[0, 0, 0, 0], [0, 0]], [[0, 0, 0, 0], 0], [[0, 0, 0, 0], [[0, 0], [0]]],
                       np.zeros((3, 4), np.int64), [np.zeros(4)] * 3, None, 0, np.int64(0), "ab"]
    msgs: list[list[str]] = []
    for workers in (1, 2):
        v = _vec(workers)
        assert isinstance(v, ArylAsyncVectorEnv if workers == 2 else ArylVectorEnv)
        try:
            v.reset(seed=0)
            got = []
            for bad in bads:
                with pytest.raises(ValueError, match=r"expected 2 actions, one per env \(an array of shape \(2, 4\)") as e:
                    v.step(bad)
                got.append(str(e.value))
            assert "ragged list" in got[0] and "ragged list" in got[1] and "ragged list" in got[2]
            assert v.get_attr("steps") == (0, 0)  # nothing stepped
            # a list of actions of one shape is fine (each env's action untouched)
            _, _, _, _, info = v.step([[0, 0, 0, 0], np.zeros(4, np.int64)])
            assert info["invalid"].tolist() == [0, 0]
            msgs.append(got)
        finally:
            v.close()
    assert msgs[0] == msgs[1]


@pytest.mark.parametrize("workers", [1, 2])
def test_a_batch_with_two_axes_per_env_is_each_envs_wrong_shape(workers: int):
    """was: a (2, 2, 2) batch for K = 4 gave each env a (2, 2) action, read row by row."""
    v = _vec(workers)
    try:
        v.reset(seed=0)
        _, _, _, _, info = v.step(np.zeros((2, 2, 2), np.int64))
        assert info["invalid"].tolist() == [4, 4]
        _, _, _, _, info = v.step(np.zeros((2, 4), np.int64))
        assert info["invalid"].tolist() == [0, 0]
    finally:
        v.close()


@pytest.mark.parametrize("workers", [1, 2])
def test_closed_vector_envs_refuse_call_get_attr_and_set_attr(workers: int):
    """was: after ``close()`` the batched env still answered ``call``, ``get_attr`` and
    ``set_attr`` (on closed envs) while the subprocess variant raised ClosedEnvironmentError;
    now both raise it for every call but ``close``."""
    v = _vec(workers)
    v.reset(seed=0)
    v.close()
    for f in (lambda: v.step(np.zeros((2, 4), np.int64)), lambda: v.reset(seed=0), v.render,
              v.action_masks, lambda: v.call("action_masks"), lambda: v.get_attr("k"),
              lambda: v.set_attr("invalid_total", 0)):
        with pytest.raises(gym.error.ClosedEnvironmentError, match="is closed"):
            f()
    v.close()  # twice is fine
