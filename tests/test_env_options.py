"""The env contract (issue 33, item 9): options as a validated, documented dataclass
(aryl_gym.envs.options.EnvOptions), clear errors for unknown options, the passive env checker on,
a true version history."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.wrappers.common import PassiveEnvChecker

import aryl_gym  # noqa: F401  (registers the envs)
from aryl_gym.envs import ENTRIES
from aryl_gym.envs.allocation import ArylEnv
from aryl_gym.envs.options import EnvOptions, describe

DOCS = Path(__file__).resolve().parents[1] / "docs" / "env.md"

#: a non-default value for many options at once (the keyword arguments people pass today)
OLD_KWARGS = dict(scenario="tiny", action_mode="sequential", window=8, reward="jct+queue", reward_scale=1800,
                  invalid_penalty=0.5, max_steps=500, max_workers=4, allow_preempt=1, release=False,
                  uses_loaning=True, reclaim="default", stall_hours=12, window_order="pred_time",
                  observation="v1", flap_damping=True, early_end="charge", end_fallback="fifo",
                  backfill=True, render_mode="ansi")


def _steps(env, n=40, seed=3):
    rng = np.random.default_rng(0)
    obs, _ = env.reset(seed=seed)
    out = [obs["jobs"].tobytes()]
    for _ in range(n):
        ok = np.flatnonzero(env.unwrapped.action_masks())
        obs, r, te, tr, _ = env.step(int(rng.choice(ok)))
        out.append(obs["jobs"].tobytes() + np.float64(r).tobytes())
        if te or tr:
            break
    return out


@pytest.mark.parametrize("env_id", ["aryl_gym/Aryl-v2", "aryl_gym/Aryl-v1", "aryl_gym:Aryl-v2"])
def test_old_keyword_arguments_still_work_and_land_in_options(env_id):
    env = gym.make(env_id, **OLD_KWARGS)
    opts = env.unwrapped.options
    assert isinstance(opts, EnvOptions)
    assert opts.window == 8 and opts.allow_preempt is True and opts.release is False
    assert opts.reward_scale == 1800.0 and isinstance(opts.reward_scale, float)
    assert opts.world_version == ("v1" if "v1" in env_id else "v2")
    u = env.unwrapped
    assert (u.k, u.window_order, u.backfill, u.early_end, u.stall_hours) == (8, "pred_time", True, "charge", 12.0)
    env.close()


def test_options_object_positional_scenario_and_kwargs_give_the_same_env():
    kw = dict(action_mode="sequential", window=8, allow_preempt=True)
    a = _steps(ArylEnv(scenario="tiny", **kw))
    b = _steps(ArylEnv(EnvOptions(scenario="tiny", **kw)))
    c = _steps(ArylEnv("tiny", **kw))
    d = _steps(ArylEnv(EnvOptions(scenario="tiny", window=4), action_mode="sequential", window=8, allow_preempt=True))
    assert a == b == c == d


@pytest.mark.parametrize("env_id", ["aryl_gym/Aryl-v2", "aryl_gym/ArylReclaim-v2"])
def test_unknown_option_names_it_and_lists_the_valid_ones(env_id):
    with pytest.raises(TypeError, match=r"unknown env option 'windw'; options: scenario, .*world_version"):
        gym.make(env_id, scenario="tiny", windw=8)


@pytest.mark.parametrize(("kw", "match"), [
    ({"window": 0}, "window must be an integer >= 1"),
    ({"window": True}, "window must be an integer"),
    ({"backfill": "no"}, "backfill must be True or False"),
    ({"max_workers": 10_000}, "max_workers=10000 is too large"),
    ({"reward_scale": 0}, "reward_scale"),
    ({"stall_hours": -1}, "stall_hours"),
    ({"early_end": "stop"}, "early_end"),
    ({"end_fallback": "random"}, "end_fallback"),
    ({"flap_damping": "yes"}, "flap_damping"),
    ({"observation": "v9"}, "observation"),
    ({"reward": "bogus"}, "bogus"),
    ({"reclaim": "no-such-rule"}, "reclaim"),
    ({"world_version": "v7"}, "v7"),
    ({"render_mode": "human"}, "render_mode"),
])
def test_options_are_checked_when_built(kw, match):
    with pytest.raises(ValueError, match=match):
        EnvOptions(**kw)
    if "render_mode" in kw:
        return  # gym.make turns render_mode="human" into rgb_array frames shown by a wrapper
    with pytest.raises(ValueError, match=match):
        gym.make("aryl_gym/Aryl-v2", scenario="tiny", **kw)


def test_every_option_is_documented_in_the_class_and_in_docs_env_md():
    text = DOCS.read_text()
    section = text.split("## Arguments of `Aryl-v2`")[1].split("\n### ")[0]
    for f in dataclasses.fields(EnvOptions):
        assert f.metadata.get("doc"), f.name
        assert f"`{f.name}`" in section, f"docs/env.md 'Arguments' does not name {f.name}"
    assert len(describe().splitlines()) == len(dataclasses.fields(EnvOptions))


def test_passive_env_checker_is_on_by_default():
    for env_id in ENTRIES:
        assert gym.spec(env_id).disable_env_checker is False, env_id
    env = gym.make("aryl_gym/Aryl-v2", scenario="tiny")
    w, chain = env, []
    while isinstance(w, gym.Wrapper):
        chain.append(type(w))
        w = w.env
    assert PassiveEnvChecker in chain
    env.close()
    # and its cost is measured and recorded
    assert re.search(r"scripts/env_checker_cost\.py", DOCS.read_text())


def test_version_history_names_the_ids_and_their_worlds():
    doc = ArylEnv.__doc__ or ""
    hist = doc.split("## Version History")[1]
    assert "Aryl-v2" in hist and "World v2" in hist and "Aryl-v1" in hist and "World v1" in hist
    assert "unreleased" not in hist and "v0" in hist
