"""The batched vector env (``gym.make_vec``'s vector entry point) against N single envs.

It must return exactly what Gymnasium's ``SyncVectorEnv`` over N ``gym.make`` envs returns, step
for step: observations (masks included), rewards, flags, infos, through autoresets; the
subprocess variant the same; the SB3 adapter what SB3's ``DummyVecEnv`` returns.
"""

from __future__ import annotations

import functools

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.envs.registration import load_env_creator
from gymnasium.vector import VectorEnv
from hypothesis import given, settings
from hypothesis import strategies as st

import aryl_gym  # noqa: F401
from aryl_gym.envs import ENTRIES, vector_entry
from aryl_gym.envs.vector import ArylAsyncVectorEnv, ArylVectorEnv, _InfoMerger, check_num_envs
from tests.helpers import examples

MODES = {"next_step": gym.vector.AutoresetMode.NEXT_STEP, "same_step": gym.vector.AutoresetMode.SAME_STEP,
         "disabled": gym.vector.AutoresetMode.DISABLED}

KW = {"scenario": "tiny", "action_mode": "sequential", "window": 8, "observation": "v1"}


def _actions(obs, rng):
    m = obs["action_mask"] > 0.5
    return (rng.random(m.shape) * m).argmax(axis=1)


def _same(a, b, path="") -> None:
    """Vector infos / observations equal, recursively (results compared by their dicts)."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b), (path, sorted(a), sorted(b))
        for k in a:
            _same(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, np.ndarray) and a.dtype == object:
        assert isinstance(b, np.ndarray) and a.shape == b.shape, path
        for x, y in zip(a, b):
            _same(x, y, path + "[]")
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype, (path, a.dtype, getattr(b, "dtype", None))
        np.testing.assert_array_equal(a, b, err_msg=path)
    elif hasattr(a, "to_dict"):
        assert a.to_dict() == b.to_dict(), path
    else:
        assert a == b, (path, a, b)


@pytest.mark.parametrize("mode", ["next_step", "same_step"])
def test_make_vec_equals_sync_vector_env_of_single_envs(mode):
    n = 3
    ours = gym.make_vec("aryl_gym/Aryl-v1", num_envs=n, autoreset_mode=mode, **KW)
    assert isinstance(ours, ArylVectorEnv)
    ref = gym.vector.SyncVectorEnv([lambda: gym.make("aryl_gym/Aryl-v1", **KW)] * n, autoreset_mode=MODES[mode])
    assert ours.observation_space == ref.observation_space
    assert ours.action_space == ref.action_space
    o1, i1 = ours.reset(seed=5)
    o2, i2 = ref.reset(seed=5)
    _same(o1, o2)
    _same(i1, i2)
    rng = np.random.default_rng(0)
    ends = 0
    for _ in range(400):
        a = _actions(o1, rng)
        o1, r1, t1, u1, i1 = ours.step(a)
        o2, r2, t2, u2, i2 = ref.step(a)
        _same(o1, o2)
        np.testing.assert_array_equal(r1, r2)
        np.testing.assert_array_equal(t1, t2)
        np.testing.assert_array_equal(u1, u2)
        _same(i1, i2)
        np.testing.assert_array_equal(ours.action_masks(), o1["action_mask"] > 0.5)
        ends += int((t1 | u1).sum())
    assert ends >= 3  # autoresets happened
    ours.close()
    ref.close()


def test_reset_mask_and_disabled_autoreset():
    n = 2
    ours = gym.make_vec("aryl_gym/Aryl-v1", num_envs=n, autoreset_mode="disabled", **KW)
    ref = gym.vector.SyncVectorEnv([lambda: gym.make("aryl_gym/Aryl-v1", **KW)] * n, autoreset_mode=MODES["disabled"])
    o1, _ = ours.reset(seed=1)
    o2, _ = ref.reset(seed=1)
    rng = np.random.default_rng(1)
    done_once = False
    for _ in range(400):
        a = _actions(o1, rng)
        o1, r1, t1, u1, _ = ours.step(a)
        o2, r2, t2, u2, _ = ref.step(a)
        _same(o1, o2)
        np.testing.assert_array_equal(r1, r2)
        d = t1 | u1
        if d.any():
            done_once = True
            o1, i1 = ours.reset(options={"reset_mask": d})
            o2, i2 = ref.reset(options={"reset_mask": d})
            _same(o1, o2)
            _same(i1, i2)
    assert done_once
    with pytest.raises(ValueError, match="reset_mask"):
        ours.reset(options={"reset_mask": np.zeros(n, dtype=bool)})


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True, None, 10**9])
def test_bad_num_envs_is_a_clear_error(bad):
    with pytest.raises(ValueError, match="num_envs"):
        gym.make_vec("aryl_gym/Aryl-v1", num_envs=bad, scenario="tiny")
    with pytest.raises(ValueError, match="num_envs"):
        check_num_envs(bad)


def test_bad_vector_arguments():
    with pytest.raises(ValueError, match="autoreset_mode"):
        ArylVectorEnv(2, scenario="tiny", autoreset_mode="sometimes")
    with pytest.raises(ValueError, match="workers"):
        gym.make_vec("aryl_gym/Aryl-v1", num_envs=2, workers=0, scenario="tiny")
    with pytest.raises(ValueError, match="workers"):
        gym.make_vec("aryl_gym/Aryl-v1", num_envs=2, workers=3, scenario="tiny")
    v = ArylVectorEnv(2, scenario="tiny")
    v.reset(seed=0)
    with pytest.raises(ValueError, match="2 actions"):
        v.step([0, 0, 0])
    with pytest.raises(ValueError, match="seed"):
        v.reset(seed=[1, 2, 3])
    with pytest.raises(ValueError, match="window"):  # the env's own checks still apply
        ArylVectorEnv(2, scenario="tiny", window=0)


def test_registration_is_id_agnostic():
    """Every allocation id of the table has the vector entry point, bound to its own id; the
    entry point builds that id's env class."""
    for env_id, (_, vector, world) in ENTRIES.items():
        spec = gym.spec(env_id)
        assert spec.kwargs["world_version"] == world
        if vector:
            vep = spec.vector_entry_point  # text, so that the spec serialises (EnvSpec.to_json)
            assert isinstance(vep, str) and vep.startswith("aryl_gym.envs:")
            fn = load_env_creator(vep)
            assert isinstance(fn, functools.partial) and fn.args == (env_id,)
            assert gym.envs.registration.EnvSpec.from_json(spec.to_json()).vector_entry_point == vep
        else:
            assert spec.vector_entry_point is None
    v = vector_entry("Aryl-v1", num_envs=2, scenario="tiny")
    assert isinstance(v, ArylVectorEnv) and v.env_id == "Aryl-v1" and len(v.envs) == 2
    # built directly, a vector env draws its id's world
    assert all(e.world_version == "v1" for e in v.envs)
    assert all(e.world_version == "v2" for e in vector_entry("Aryl-v2", num_envs=2, scenario="tiny").envs)
    # the sync and async modes of gym.make_vec still build Gymnasium's own vector envs
    s = gym.make_vec("aryl_gym:Aryl-v1", num_envs=2, vectorization_mode="sync", scenario="tiny")
    assert isinstance(s, gym.vector.SyncVectorEnv)
    s.close()


def test_vector_env_pickles_and_calls():
    import pickle

    v = ArylVectorEnv(2, **KW)
    o, _ = v.reset(seed=3)
    w = pickle.loads(pickle.dumps(v))
    rng = np.random.default_rng(2)
    for _ in range(30):
        a = _actions(o, rng)
        o, r, *_ = v.step(a)
        o2, r2, *_ = w.step(a)
        _same(o, o2)
        np.testing.assert_array_equal(r, r2)
    assert v.get_attr("k") == (8, 8)
    assert len(v.call("episode_result")) == 2
    v.set_attr("invalid_total", 0)


@pytest.mark.slow
def test_async_variant_equals_the_batched_one():
    kw = {**KW, "autoreset_mode": "same_step"}
    a = gym.make_vec("aryl_gym/Aryl-v1", num_envs=4, workers=2, **kw)
    assert isinstance(a, ArylAsyncVectorEnv)
    b = ArylVectorEnv(4, env_id="aryl_gym/Aryl-v1", **kw)
    try:
        o1, i1 = a.reset(seed=9)
        o2, i2 = b.reset(seed=9)
        _same(o1, o2)
        _same(i1, i2)
        rng = np.random.default_rng(4)
        for _ in range(300):
            act = _actions(o1, rng)
            o1, r1, t1, u1, i1 = a.step(act)
            o2, r2, t2, u2, i2 = b.step(act)
            _same(o1, o2)
            np.testing.assert_array_equal(r1, r2)
            np.testing.assert_array_equal(t1 | u1, t2 | u2)
            _same(i1, i2)
        assert a.get_attr("k") == (8, 8, 8, 8)
    finally:
        a.close()
        b.close()


@pytest.mark.slow
def test_sb3_adapter_equals_dummy_vec_env():
    pytest.importorskip("stable_baselines3")
    from stable_baselines3.common.vec_env import DummyVecEnv

    from aryl_gym.envs.vector import sb3_vec_env

    n = 3
    ours = sb3_vec_env(gym.make_vec("aryl_gym/Aryl-v1", num_envs=n, autoreset_mode="same_step", **KW))
    ref = DummyVecEnv([lambda: gym.make("aryl_gym/Aryl-v1", **KW)] * n)
    ours.seed(7)
    ref.seed(7)
    o1, o2 = ours.reset(), ref.reset()
    _same(dict(o1), dict(o2))
    rng = np.random.default_rng(5)
    ends = 0
    for _ in range(500):
        m1 = np.stack(ours.env_method("action_masks"))
        np.testing.assert_array_equal(m1, np.stack(ref.env_method("action_masks")))
        act = (rng.random(m1.shape) * m1).argmax(axis=1)
        o1, r1, d1, f1 = ours.step(act)
        o2, r2, d2, f2 = ref.step(act)
        _same(dict(o1), dict(o2))
        np.testing.assert_array_equal(r1, r2)
        np.testing.assert_array_equal(d1, d2)
        for x, y in zip(f1, f2):
            assert set(x) == set(y)
            for k in x:
                if k == "terminal_observation":
                    _same(x[k], y[k])
                elif k == "window":
                    np.testing.assert_array_equal(x[k], y[k])
                elif k == "episode_result":
                    assert x[k].to_dict() == y[k].to_dict()
                else:
                    assert x[k] == y[k], k
        ends += int(d1.sum())
    assert ends >= 2
    with pytest.raises(ValueError, match="same_step"):
        sb3_vec_env(ArylVectorEnv(2, scenario="tiny"))


# -- the info merge against Gymnasium's own, env by env -----------------------------------------
_VALUE = {
    "int": st.integers(-5, 5),
    "float": st.floats(-1e6, 1e6, allow_nan=False),
    "bool": st.booleans(),
    "f32": st.floats(-10, 10, width=32).map(np.float32),
    "arr": st.integers(0, 9).map(lambda x: np.arange(3, dtype=np.int64) + x),
    "str": st.text(max_size=3),
    "mixed": st.one_of(st.integers(-5, 5), st.floats(-100, 100, allow_nan=False)),  # the first env's type rules
}


@st.composite
def _infos(draw):
    n = draw(st.integers(1, 6))
    keys = {f"k{i}": draw(st.sampled_from(sorted(_VALUE))) for i in range(draw(st.integers(0, 6)))}
    nested = {f"n{i}": draw(st.sampled_from(["int", "float"])) for i in range(draw(st.integers(0, 3)))}
    infos = []
    for _ in range(n):
        if draw(st.integers(0, 5)) == 0:
            infos.append(draw(st.sampled_from([None, {}])))
            continue
        # every env draws its own subset and order of the keys (the types stay per key, as an
        # env's info keys do)
        mine = draw(st.permutations(sorted(keys)))
        inf = {k: draw(_VALUE[keys[k]]) for k in mine if draw(st.integers(0, 3))}
        if nested and draw(st.booleans()):
            inf["sub"] = {k: draw(_VALUE[t]) for k, t in nested.items() if draw(st.integers(0, 3))}
        if draw(st.integers(0, 4)) == 0:
            inf["final_obs"] = {"x": np.full(2, draw(st.integers(0, 9)), dtype=np.float32)}
        infos.append(inf)
    return infos


class _GymMerge:
    """Gymnasium's ``VectorEnv._add_info``, applied env by env as ``SyncVectorEnv`` does."""

    _add_info = VectorEnv._add_info

    def __init__(self, n):
        self.num_envs = n


def _same_ordered(a, b, path=""):
    if isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b), (path, list(a), list(b))
        for k in a:
            _same_ordered(a[k], b[k], f"{path}.{k}")
    else:
        _same(a, b, path)


@settings(max_examples=examples(200), deadline=None)
@given(_infos())
def test_info_merge_equals_gymnasiums_env_by_env_merge(infos):
    n = len(infos)
    ref: dict = {}
    gm = _GymMerge(n)
    for i, inf in enumerate(infos):
        if inf:
            ref = gm._add_info(ref, inf, i)
    got = _InfoMerger(n).merge(infos)
    _same_ordered(got, ref)  # the same keys in the same order, the same dtypes and values
    for k, v in got.items():
        if k.startswith("_"):
            assert v.dtype == np.bool_ and v.shape == (n,)


def test_info_merge_masks_are_independent():
    infos = [{"a": 1, "b": 2.0}, {"a": 3, "b": 4.0}]
    got = _InfoMerger(2).merge(infos)
    got["_a"][0] = False  # the masks of keys every env has may share a buffer: never each other's
    assert got["_b"].tolist() == [True, True]
    assert got["a"].dtype == np.int64 and got["a"].tolist() == [1, 3]
