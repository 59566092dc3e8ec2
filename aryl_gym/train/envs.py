"""Environments of a training run: the scenario with its overrides, one env as the config
configures it (world sampling and reward wrappers for training, the plain scenario for
evaluation) and a picklable factory for vector envs.

Below :mod:`aryl_gym.train.runner` and :mod:`aryl_gym.train.bc`, which both build envs.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from aryl_gym.config import ConfigError, load_scenario
from aryl_gym.train.config import TrainConfig
from aryl_gym.train.paired import TraceMeanJCTReward
from aryl_gym.train.worlds import WorldSampler
from aryl_gym.train.wrappers import ReferenceJCTReward


def train_scenario(cfg: TrainConfig) -> Any:
    """The scenario the run trains and evaluates on: ``cfg.scenario`` with
    ``cfg.scenario_overrides`` applied (a ScenarioConfig), or the name itself."""
    if not cfg.scenario_overrides:
        return cfg.scenario

    try:
        return load_scenario(cfg.scenario).replace(**dict(cfg.scenario_overrides))
    except (TypeError, ValueError, AttributeError) as exc:
        raise ConfigError(f"scenario_overrides {dict(cfg.scenario_overrides)}: {exc}") from None


def make_single_env(cfg: TrainConfig, data_root: str | None = None, evaluation: bool = False) -> Any:
    """One env for ``cfg`` (``gym.make(env_id, scenario=..., **env_kwargs)``), registered on
    ``import aryl_gym``. Training envs (``evaluation=False``) draw their worlds per episode
    (``cfg.worlds``, :class:`aryl_gym.train.worlds.WorldSampler`) and get the reward wrappers
    (``pair_baseline``, ``reward_reference``); evaluation envs play the scenario as it is with
    the env's own reward. Neither gets the config's ``deploy_env_kwargs``: a run evaluates and
    selects its models as they act on their own (a model that finishes only thanks to a shield
    such as flap damping is not preferred); they apply where the trained agent is deployed
    (:meth:`aryl_gym.agents.learned.LearnedAgent.make_env`). Wrapped in ``ActionMasker`` if masks are needed and the env has no
    ``action_masks()`` of its own but an ``action_mask`` observation key."""

    kwargs = dict(cfg.env_kwargs)  # never cfg.deploy_env_kwargs: the run judges the raw policy
    kwargs.setdefault("scenario", train_scenario(cfg))
    if data_root is not None:
        kwargs.setdefault("data_root", data_root)
    env: gym.Env[Any, Any]
    try:
        if cfg.worlds and not evaluation:
            scen = kwargs.pop("scenario")
            env = WorldSampler(cfg.env_id, scen, cfg.worlds, **kwargs)
        else:
            env = gym.make(cfg.env_id, **kwargs)
    except gym.error.Error as exc:
        raise ConfigError(f"cannot make env {cfg.env_id!r} with {kwargs}: {exc}") from None
    if not evaluation:
        if cfg.pair_baseline == "trace_mean":
            env = TraceMeanJCTReward(env, cfg.reward_reference or "aryl")
        elif cfg.reward_reference:
            env = ReferenceJCTReward(env, cfg.reward_reference)
    if cfg.masked and not callable(getattr(env.unwrapped, "action_masks", None)):
        # sb3-contrib (the train extra, torch): imported when used
        from sb3_contrib.common.wrappers import ActionMasker

        # an env without action_masks() keeps its mask in the last observation
        env = ActionMasker(env, lambda e: e.unwrapped._last_obs["action_mask"])  # type: ignore[attr-defined]  # pragma: no cover
    return env


class EnvFactory:
    """Picklable env constructor for ``SubprocVecEnv`` (a closure would not pickle everywhere)."""

    def __init__(self, cfg: TrainConfig, data_root: str | None = None, evaluation: bool = False):
        self.cfg = cfg
        self.data_root = data_root
        self.evaluation = evaluation

    def __call__(self, **_: Any) -> Any:
        return make_single_env(self.cfg, self.data_root, self.evaluation)
