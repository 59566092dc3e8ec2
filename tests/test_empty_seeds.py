"""A generated workload so small that some seeds draw no job: ``make_episode`` (and so an env's
``reset(seed=...)``) raises ConfigError for those seeds, which would stop a training loop at a
random reset. Building an env on such a scenario warns, with the share of such seeds."""

from __future__ import annotations

import math
import warnings

import gymnasium as gym
import pytest

import aryl_gym  # noqa: F401
from aryl_gym.config import ConfigError, load_scenario, scenario_from_dict
from aryl_gym.scenario import EMPTY_SEED_WARN, make_episode, warn_if_seeds_may_be_empty
from aryl_gym.workload.generator import expected_batches


def _small(gpus: int = 4, hours: float = 2.0, load: float = 0.3):  # type: ignore[no-untyped-def]
    return scenario_from_dict({"name": "small", "cluster": {"train_servers": 1, "train_gpus_per_server": gpus,
                                                             "inf_servers": 1, "inf_gpus_per_server": 4},
                               "workload": {"duration_hours": hours, "load": load}})


def test_the_predicted_share_of_empty_seeds_matches_the_draws() -> None:
    cfg = _small()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        share = warn_if_seeds_may_be_empty(cfg)
    empty = 0
    for s in range(200):
        try:
            make_episode(cfg, s)
        except ConfigError:
            empty += 1
    assert 0.2 < share < 0.99  # a scenario where the question matters
    assert abs(empty / 200 - share) < 0.08, (empty, share)  # exp(-mean batches), Poisson


@pytest.mark.parametrize("env_id", ["aryl_gym/Aryl-v2", "aryl_gym/ArylReclaim-v2"])
def test_an_env_on_such_a_scenario_warns(env_id: str) -> None:
    with pytest.warns(UserWarning, match=r"of seeds draw no job and reset\(\) raises ConfigError"):
        gym.make(env_id, scenario=_small())


@pytest.mark.parametrize("name", ["tiny", "testbed", "basic", "ideal", "production"])
def test_shipped_scenarios_do_not_warn(name: str) -> None:
    cfg = load_scenario(name)
    lam = expected_batches(cfg)
    assert lam is None or math.exp(-lam) < EMPTY_SEED_WARN
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert warn_if_seeds_may_be_empty(cfg) < EMPTY_SEED_WARN


def test_a_fixed_job_count_never_warns() -> None:
    cfg = scenario_from_dict({"name": "n", "cluster": {"train_servers": 1, "train_gpus_per_server": 1,
                                                       "inf_servers": 0},
                              "workload": {"duration_hours": 0.5, "num_jobs": 1}})
    assert expected_batches(cfg) is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert warn_if_seeds_may_be_empty(cfg) == 0.0
