"""Hostile review of the env options (Aryl-v2, ArylReclaim-v2, ArylMO-v2, gym.make_vec): each
case here was accepted, ignored, or refused with a misleading message or a traceback from
inside before the fix."""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import aryl_gym  # noqa: F401
from aryl_gym.envs.options import EnvOptions
from aryl_gym.envs.reclaim import ArylReclaimEnv
from aryl_gym.reclaim_snapshots import synthetic_snapshots

ID = "aryl_gym/Aryl-v2"


def _make(how: str, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if how == "vec":
            return gym.make_vec(ID, num_envs=2, **kw)
        return gym.make(ID, **kw)


@pytest.mark.parametrize("how", ["make", "vec"])
@pytest.mark.parametrize("reward", [{"jct": 1.0, "invalid": 0.5}, "jct+invalid"])
def test_invalid_weight_given_twice_is_refused(how: str, reward: object) -> None:
    # was: invalid_penalty replaced the reward's own 'invalid' weight without a word
    with pytest.raises(ValueError, match="both set the weight of the 'invalid' component"):
        _make(how, reward=reward, invalid_penalty=0.2)
    # one of them alone, or the same value twice, is as before
    assert EnvOptions(reward={"jct": 1.0, "invalid": 0.5}).reward == {"jct": 1.0, "invalid": 0.5}
    EnvOptions(reward={"jct": 1.0, "invalid": 0.2}, invalid_penalty=0.2)


@pytest.mark.parametrize("how", ["make", "vec"])
def test_numpy_bool_reward_weight_is_refused(how: str) -> None:
    # was: np.True_ read as the weight 1.0 (True is refused)
    with pytest.raises(ValueError, match="reward weight 'jct' must be a finite number"):
        _make(how, reward={"jct": np.True_})


@pytest.mark.parametrize("how", ["make", "vec"])
@pytest.mark.parametrize("fallback", ["nope", None, 5, "random"])
def test_bad_end_fallback_is_named_before_the_combination(how: str, fallback: object) -> None:
    # was: "end_fallback='nope' is the policy early_end='charge' bills ... set early_end='charge'",
    # and following that advice only then reported the value itself
    with pytest.raises(ValueError, match=r"^end_fallback (must be a reference policy|'nope')"):
        _make(how, end_fallback=fallback)


def test_world_version_error_names_the_option() -> None:
    # was: "world must be one of v1, v2" (the option is world_version)
    for bad in ("v3", None, ["v2"]):
        with pytest.raises(ValueError, match="^world_version must be one of v1, v2"):
            _make("make", world_version=bad)
        with pytest.raises(ValueError, match="^world_version must be one of v1, v2"):
            ArylReclaimEnv(world_version=bad)


@pytest.mark.parametrize("bad", [5, None, ["tiny"], b"tiny", 1.5])
def test_scenario_of_a_wrong_type_is_named(bad: object) -> None:
    # was: loaded as str(bad): "unknown scenario '5'" / "unknown scenario 'None'"
    for build in (lambda: _make("make", scenario=bad), lambda: _make("vec", scenario=bad),
                  lambda: ArylReclaimEnv(scenario=bad)):
        with pytest.raises(ValueError, match="^scenario must be a scenario name, a YAML path"):
            build()
    assert EnvOptions(scenario=Path("tiny")).scenario == Path("tiny")  # a path stays accepted


@pytest.mark.parametrize("how", ["make", "vec"])
@pytest.mark.parametrize("kw, match", [
    ({"early_end": "charge"}, "early_end='charge' charges episodes the stall or thrash rule ends"),
    ({"thrash_sustained": True}, "thrash_sustained=True changes the thrash rule"),
])
def test_options_inert_with_the_stall_rule_off(how: str, kw: dict, match: str) -> None:
    # was: accepted; stall_hours=math.inf switches both rules off, so neither ever acted
    with pytest.raises(ValueError, match=match):
        _make(how, stall_hours=math.inf, **kw)
    EnvOptions(stall_hours=math.inf)  # alone, as before


@pytest.mark.parametrize("how", ["make", "vec"])
def test_flap_damping_in_priority_mode_is_refused(how: str) -> None:
    # was: accepted; the shield refuses releases and the priority mode never releases a job
    with pytest.raises(ValueError, match="the priority mode never releases a job"):
        _make(how, action_mode="priority", flap_damping=True)
    EnvOptions(action_mode="priority", flap_damping=False)


@pytest.mark.parametrize("bad", [5, ["x"], b"x"])
def test_reclaim_env_checks_data_root(bad: object) -> None:
    # was: accepted (Aryl-v2 refuses it)
    with pytest.raises(ValueError, match="data_root must be a folder path"):
        gym.make("aryl_gym/ArylReclaim-v2", data_root=bad)


@pytest.mark.parametrize("kw", [
    {"reward": "queue"}, {"reward_scale": 7.0}, {"stall_hours": -1}, {"allocator": "nope"},
    {"scenario": "testbed"}, {"jobs": [1]}, {"data_root": 5},
])
def test_reclaim_snapshot_mode_refuses_simulator_options(kw: dict) -> None:
    # was: accepted and ignored, even a bad value
    (name,) = kw
    with pytest.raises(ValueError, match=f"^{name} applies to the simulator mode"):
        gym.make("aryl_gym/ArylReclaim-v2", snapshots=synthetic_snapshots(2, 4, 6, seed=1), **kw)
    ArylReclaimEnv(snapshots=synthetic_snapshots(2, 4, 6, seed=1), observation="v1")  # its own options


@pytest.mark.parametrize("bad", [5, [1], [None], {"a": 1}])
def test_reclaim_snapshots_of_a_wrong_type(bad: object) -> None:
    # was: TypeError "'int' object is not iterable", AttributeError "'int' object has no attribute 'n'"
    with pytest.raises(ValueError, match="snapshots must be a .npz path"):
        ArylReclaimEnv(snapshots=bad)


def test_reclaim_max_servers_too_large() -> None:
    # was: a MemoryError from numpy allocating the observation
    with pytest.raises(ValueError, match="max_servers=1000000000 is too large"):
        ArylReclaimEnv(snapshots=synthetic_snapshots(2, 4, 6, seed=1), max_servers=10**9)


def test_reclaim_render_mode_message_names_the_value() -> None:
    # was: "render_mode must be one of ['ansi', 'rgb_array'] or None" without the value given
    with pytest.raises(ValueError, match=r"or None, got 'hmn'"):
        ArylReclaimEnv(render_mode="hmn")
