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


SIZES = {
    "load": [0.6, 1.4],
    "scenarios": [
        {"scenario": "testbed", "train_servers": [3, 4], "weight": 3},
        {"scenario": "basic", "load": [1.3, 1.4], "duration_hours": 2},
    ],
}


def test_scenarios_are_drawn_by_weight_with_entry_keys_over_the_section():
    w = check_worlds(SIZES)
    ws = [draw_world(w, s) for s in range(400)]
    assert ws[11] == draw_world(w, 11)
    tb = [x for x in ws if x["scenario"] == "testbed"]
    ba = [x for x in ws if x["scenario"] == "basic"]
    assert len(tb) + len(ba) == 400
    assert 0.65 < len(tb) / 400 < 0.85  # weight 3 : 1
    assert all(x["scenario_index"] == 0 and x["train_servers"] in (3, 4) and 0.6 <= x["load"] <= 1.4
               and "duration_hours" not in x for x in tb)
    assert all(x["scenario_index"] == 1 and 1.3 <= x["load"] <= 1.4 and x["duration_hours"] == 2.0
               and "train_servers" not in x for x in ba)
    # without scenarios the draws are the ones made before the key existed
    assert draw_world(check_worlds(WORLDS), 5) == draw_world(check_worlds({**WORLDS}), 5)


def test_sampler_plays_each_size_with_its_own_scales_and_equal_spaces():
    env = WorldSampler("aryl_gym/Aryl-v2", "testbed", SIZES, action_mode="sequential", observation="v1")
    names = {}
    for s in range(12):
        obs, info = env.reset(options={"episode_seed": s})
        cfg = env.episode.config
        w = info["world"]
        assert cfg.name == w["scenario"] and cfg.workload.load == pytest.approx(w["load"])
        if w["scenario"] == "basic":
            assert cfg.cluster.train_servers == 64 and cfg.workload.duration_hours == 2.0
            assert env.max_workers == 64  # basic's own default, as when deployed there
        else:
            assert cfg.cluster.train_servers == w["train_servers"] and env.max_workers == 16
        assert env.observation_space.contains(obs)
        obs, *_ = env.step(int(np.flatnonzero(env.action_masks())[0]))
        assert env.observation_space.contains(obs)
        names[w["scenario"]] = names.get(w["scenario"], 0) + 1
    assert set(names) == {"testbed", "basic"}


@pytest.mark.parametrize(
    "bad",
    [
        {"scenarios": []},
        {"scenarios": "basic"},
        {"scenarios": [{"load": [1, 2]}]},
        {"scenarios": [{"scenario": "basic", "weight": 0}]},
        {"scenarios": [{"scenario": "basic", "duration_hours": -1}]},
        {"scenarios": [{"scenario": "basic", "servers": [2]}]},
        {"scenarios": [{"scenario": "basic", "load": [1.4, 1.3]}]},
        {"scenarios": [{"scenario": "basic", "train_servers": [True]}]},
    ],
)
def test_bad_scenario_entries_are_clear_errors(bad):
    with pytest.raises(ConfigError, match="worlds"):
        check_worlds(bad)


def test_unknown_scenario_in_worlds_names_it():
    with pytest.raises(ConfigError, match="nosuch"):
        WorldSampler("aryl_gym/Aryl-v2", "testbed", {"scenarios": ["nosuch"]}, action_mode="sequential")


def test_spaces_that_differ_between_sizes_are_a_clear_error():
    with pytest.raises(ConfigError, match="other spaces"):
        env = WorldSampler("aryl_gym/Aryl-v2", "testbed", {"scenarios": ["testbed", "basic"]},
                           action_mode="targets", observation="v1")
        for s in range(20):
            env.reset(options={"episode_seed": s})
