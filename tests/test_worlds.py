"""Training across worlds (aryl_gym.train.worlds) and the training config's new keys."""

from __future__ import annotations

import numpy as np
import pytest

import aryl_gym  # noqa: F401
from aryl_gym.config import ConfigError
from aryl_gym.train.worlds import WorldSampler, check_worlds, draw_world

WORLDS = {"load": [0.8, 1.4], "train_servers": [3, 4, 5], "elastic_fraction": [0.04, 0.2]}


def test_world_is_a_function_of_the_episode_seed_and_in_range():
    ws = [draw_world(check_worlds(WORLDS), s) for s in range(200)]
    assert ws[7] == draw_world(check_worlds(WORLDS), 7)
    assert all(0.8 <= w["load"] <= 1.4 and 0.04 <= w["elastic_fraction"] <= 0.2 for w in ws)
    assert {w["train_servers"] for w in ws} == {3, 4, 5}
    assert len({round(w["load"], 6) for w in ws}) > 150


def test_sampler_plays_the_drawn_world_with_equal_spaces():
    env = WorldSampler("aryl_gym/Aryl-v1", "testbed", WORLDS, action_mode="sequential", observation="v1")
    seen = set()
    for s in range(6):
        obs, info = env.reset(options={"episode_seed": 100 + s})
        w = info["world"]
        assert w == draw_world(check_worlds(WORLDS), 100 + s)
        cfg = env.episode.config
        assert cfg.workload.load == pytest.approx(w["load"])
        assert cfg.cluster.train_servers == w["train_servers"]
        assert env.observation_space.contains(obs)
        seen.add(cfg.cluster.train_servers)
        m = env.action_masks()
        obs, *_ = env.step(int(np.flatnonzero(m)[0]))
        assert env.observation_space.contains(obs)
    assert len(seen) >= 2
    # the same seed again: the same episode
    env.reset(options={"episode_seed": 100})
    a = [j.submit for j in env.episode.jobs]
    env.reset(options={"episode_seed": 100})
    assert a == [j.submit for j in env.episode.jobs]


@pytest.mark.parametrize(
    "bad",
    [{"lod": [1, 2]}, {"load": [1.4, 0.8]}, {"load": 1.0}, {"train_servers": [0]}, {"train_servers": []}],
)
def test_bad_worlds_are_clear_errors(bad):
    with pytest.raises(ConfigError, match="worlds"):
        check_worlds(bad)
