"""Training across worlds: the load, the cluster size and the elastic share drawn per episode.

:class:`WorldSampler` is an env that plays each episode in a world drawn from ``worlds`` (a
training config's ``worlds`` section)::

    worlds:
      load: [0.8, 1.4]               # workload.load, uniform in the range
      train_servers: [3, 4, 5, 6]    # cluster.train_servers, one of the list
      elastic_fraction: [0.04, 0.3]  # workload.elastic_fraction, uniform in the range

The world is a function of the episode seed only (``numpy`` generator seeded with
``[seed, 0x3D]``), so envs that share an episode seed (paired groups,
:mod:`aryl_gym.train.paired`) also share the world, and an episode is reproducible from its
seed. One inner ``Aryl-v1`` env is kept per cluster size (the observation's scales follow the
cluster), all with the same window and ``max_workers`` (so the spaces are equal); ``world``
holds the current episode's draw. Attributes it does not define (``sim``, ``episode``,
``reward_scale``, ``action_masks``, ...) are the current inner env's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, cast

import gymnasium as gym
import numpy as np

from aryl_gym.config import ConfigError, ScenarioConfig, load_scenario

WORLD_KEYS = ("load", "train_servers", "elastic_fraction")


def check_worlds(worlds: Mapping[str, Any], source: str = "worlds") -> dict[str, Any]:
    """Validate a ``worlds`` section; a clear error names the key and what is expected."""
    out: dict[str, Any] = {}
    for k, v in worlds.items():
        if k not in WORLD_KEYS:
            raise ConfigError(f"{source}: unknown key {k!r}; allowed: {', '.join(WORLD_KEYS)}")
        if k == "train_servers":
            vals = [v] if isinstance(v, int) else list(v)
            if not vals or any(not isinstance(x, int) or x < 1 for x in vals):
                raise ConfigError(f"{source}.train_servers: give a list of server counts >= 1, got {v!r}")
            out[k] = vals
        else:
            if not (isinstance(v, (list, tuple)) and len(v) == 2 and all(isinstance(x, (int, float)) for x in v)
                    and 0 <= v[0] <= v[1]):
                raise ConfigError(f"{source}.{k}: give a range [low, high] with 0 <= low <= high, got {v!r}")
            out[k] = (float(v[0]), float(v[1]))
    return out


def draw_world(worlds: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """The world of episode ``seed`` (a function of the seed only)."""
    rng = np.random.default_rng([int(seed), 0x3D])
    w: dict[str, Any] = {}
    for k in WORLD_KEYS:
        if k not in worlds:
            continue
        v = worlds[k]
        w[k] = int(v[int(rng.integers(len(v)))]) if k == "train_servers" else float(rng.uniform(*v))
    return w


def world_scenario(base: ScenarioConfig, world: Mapping[str, Any]) -> ScenarioConfig:
    work = {k: world[k] for k in ("load", "elastic_fraction") if k in world}
    over: dict[str, Any] = {}
    if work:
        over["workload"] = work
    if "train_servers" in world:
        over["cluster"] = {"train_servers": world["train_servers"]}
    return base.replace(**over) if over else base


class _WorldEnv(Protocol):
    """What :class:`WorldSampler` sets and reads on its inner (unwrapped) aryl envs."""

    config: ScenarioConfig

    def action_masks(self) -> np.ndarray: ...


class WorldSampler(gym.Env):
    """An allocation env whose every episode is in a world drawn from ``worlds``."""

    metadata = {"render_modes": []}  # noqa: RUF012 (gymnasium convention)

    def __init__(self, env_id: str, scenario: Any, worlds: Mapping[str, Any], **env_kwargs: Any):
        self.env_id = env_id
        self.worlds = check_worlds(worlds)
        self.base = scenario if isinstance(scenario, ScenarioConfig) else load_scenario(scenario)
        self.env_kwargs = dict(env_kwargs)
        if "max_workers" not in self.env_kwargs:  # equal spaces in every world
            c = self.base.cluster
            mw = int(self.base.workload.max_job_gpus or c.train_gpus)
            self.env_kwargs["max_workers"] = max(1, min(mw, c.train_gpus))
        self._envs: dict[int, gym.Env] = {}
        self.current = self._env_for(self.base.cluster.train_servers)
        self.observation_space = self.current.observation_space
        self.action_space = self.current.action_space
        self.world: dict[str, Any] = {}
        self.episode_count = 0  # resets of this env (whichever inner env plays)

    def _env_for(self, servers: int) -> gym.Env:
        env = self._envs.get(servers)
        if env is None:
            cfg = world_scenario(self.base, {"train_servers": servers})
            env = self._envs[servers] = gym.make(self.env_id, scenario=cfg, **self.env_kwargs).unwrapped
        return env

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        opts = dict(options or {})
        ep_seed = opts.get("episode_seed")
        if ep_seed is None:
            ep_seed = int(self.np_random.integers(0, 2**31 - 1))
        self.world = draw_world(self.worlds, int(ep_seed))
        env = self._env_for(int(self.world.get("train_servers", self.base.cluster.train_servers)))
        cast(_WorldEnv, env).config = world_scenario(self.base, self.world)
        self.current = env
        self.episode_count += 1
        opts["episode_seed"] = int(ep_seed)
        obs, info = env.reset(seed=seed, options=opts)
        info["world"] = dict(self.world)
        return obs, info

    def step(self, action: Any):
        return self.current.step(action)

    def action_masks(self) -> np.ndarray:
        return cast(_WorldEnv, self.current).action_masks()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("current", "_envs"):
            raise AttributeError(name)
        return getattr(self.current, name)
