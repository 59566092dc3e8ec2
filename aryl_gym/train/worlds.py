"""Training across worlds: the load, the cluster size and the elastic share drawn per episode.

:class:`WorldSampler` is an env that plays each episode in a world drawn from ``worlds`` (a
training config's ``worlds`` section)::

    worlds:
      load: [0.8, 1.4]               # workload.load, uniform in the range
      train_servers: [3, 4, 5, 6]    # cluster.train_servers, one of the list
      elastic_fraction: [0.04, 0.3]  # workload.elastic_fraction, uniform in the range

Sizes too (``scenarios``): each episode first draws one entry of a list of scenarios (by
``weight``, default 1), then that entry's world. An entry's own ``load``, ``elastic_fraction``
and ``train_servers`` replace the section's (which are the defaults for every entry), and
``duration_hours`` plays a slice of the scenario (e.g. 12 hours of ``production``)::

    worlds:
      load: [0.6, 1.4]
      scenarios:
        - {scenario: testbed, train_servers: [3, 4, 5], weight: 2}
        - {scenario: basic, load: [1.3, 1.4], duration_hours: 24}
        - {scenario: production, duration_hours: 12}

Without ``scenarios`` the run's own scenario is the only one (and the draws are what they
were before the key existed).

The world is a function of the episode seed only (``numpy`` generator seeded with
``[seed, 0x3D]``), so envs that share an episode seed (paired groups,
:mod:`aryl_gym.train.paired`) also share the world, and an episode is reproducible from its
seed. One inner ``Aryl-v1`` env is kept per scenario and cluster size (the observation's scales
follow the cluster), all with the same window (the spaces must be equal: a clear error says
which entry differs); without ``scenarios`` they share the run's ``max_workers``, with it each
scenario keeps its own default (the one it has when deployed), unless ``env_kwargs`` sets it.
``world`` holds the current episode's draw. Attributes it does not define (``sim``, ``episode``,
``reward_scale``, ``action_masks``, ...) are the current inner env's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, cast

import gymnasium as gym
import numpy as np

from aryl_gym.config import ConfigError, ScenarioConfig, load_scenario

WORLD_KEYS = ("load", "train_servers", "elastic_fraction")
#: the keys of one ``scenarios`` entry
ENTRY_KEYS = ("scenario", "weight", "duration_hours", *WORLD_KEYS)


def _check_keys(worlds: Mapping[str, Any], source: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in worlds.items():
        if k not in WORLD_KEYS:
            raise ConfigError(f"{source}: unknown key {k!r}; allowed: {', '.join((*WORLD_KEYS, 'scenarios'))}")
        if k == "train_servers":
            vals = [v] if isinstance(v, int) and not isinstance(v, bool) else v
            if (not isinstance(vals, (list, tuple)) or not vals
                    or any(not isinstance(x, int) or isinstance(x, bool) or x < 1 for x in vals)):
                raise ConfigError(f"{source}.train_servers: give a list of server counts >= 1, got {v!r}")
            out[k] = list(vals)
        else:
            if not (isinstance(v, (list, tuple)) and len(v) == 2
                    and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v)
                    and 0 <= v[0] <= v[1]):
                raise ConfigError(f"{source}.{k}: give a range [low, high] with 0 <= low <= high, got {v!r}")
            out[k] = (float(v[0]), float(v[1]))
    return out


def _check_entry(entry: Any, source: str) -> dict[str, Any]:
    if isinstance(entry, str):
        entry = {"scenario": entry}
    if not isinstance(entry, Mapping) or not isinstance(entry.get("scenario"), str) or not entry["scenario"]:
        raise ConfigError(f"{source}: give a scenario name, or a mapping with 'scenario' (a name or YAML "
                          f"path) and optional {', '.join(ENTRY_KEYS[1:])}; got {entry!r}")
    unknown = [k for k in entry if k not in ENTRY_KEYS]
    if unknown:
        raise ConfigError(f"{source}: unknown key {unknown[0]!r}; allowed: {', '.join(ENTRY_KEYS)}")
    out = _check_keys({k: v for k, v in entry.items() if k in WORLD_KEYS}, source)
    out["scenario"] = entry["scenario"]
    for k in ("weight", "duration_hours"):
        if k in entry:
            v = entry[k]
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not np.isfinite(v) or v <= 0:
                raise ConfigError(f"{source}.{k}: give a number > 0, got {v!r}")
            out[k] = float(v)
    out.setdefault("weight", 1.0)
    return out


def check_worlds(worlds: Mapping[str, Any], source: str = "worlds") -> dict[str, Any]:
    """Validate a ``worlds`` section; a clear error names the key and what is expected."""
    if not isinstance(worlds, Mapping):
        raise ConfigError(f"{source}: give a mapping of world keys, got {worlds!r}")
    out = _check_keys({k: v for k, v in worlds.items() if k != "scenarios"}, source)
    if "scenarios" in worlds:
        entries = worlds["scenarios"]
        if not isinstance(entries, (list, tuple)) or not entries:
            raise ConfigError(f"{source}.scenarios: give a non-empty list of scenarios, got {entries!r}")
        out["scenarios"] = [_check_entry(e, f"{source}.scenarios[{i}]") for i, e in enumerate(entries)]
    return out


def _draw_keys(keys: Mapping[str, Any], rng: np.random.Generator) -> dict[str, Any]:
    w: dict[str, Any] = {}
    for k in WORLD_KEYS:
        if k not in keys:
            continue
        v = keys[k]
        w[k] = int(v[int(rng.integers(len(v)))]) if k == "train_servers" else float(rng.uniform(*v))
    return w


def draw_world(worlds: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """The world of episode ``seed`` (a function of the seed only).

    With ``scenarios`` the world also names its entry (``scenario``, ``scenario_index``) and,
    where the entry sets it, ``duration_hours``."""
    rng = np.random.default_rng([int(seed), 0x3D])
    entries = worlds.get("scenarios")
    if not entries:
        return _draw_keys(worlds, rng)
    weights = np.array([e["weight"] for e in entries], dtype=float)
    i = int(rng.choice(len(entries), p=weights / weights.sum()))
    entry = entries[i]
    keys = {**{k: v for k, v in worlds.items() if k in WORLD_KEYS}, **{k: v for k, v in entry.items() if k in WORLD_KEYS}}
    w = {"scenario": entry["scenario"], "scenario_index": i, **_draw_keys(keys, rng)}
    if "duration_hours" in entry:
        w["duration_hours"] = entry["duration_hours"]
    return w


def world_scenario(base: ScenarioConfig, world: Mapping[str, Any]) -> ScenarioConfig:
    """``base`` in ``world``: its load, elastic share, duration and training servers."""
    work = {k: world[k] for k in ("load", "elastic_fraction", "duration_hours") if k in world}
    over: dict[str, Any] = {}
    if work:
        over["workload"] = work
    if "train_servers" in world:
        over["cluster"] = {"train_servers": world["train_servers"]}
    return base.replace(**over) if over else base


def check_world_fits(scenario: ScenarioConfig, keys: Mapping[str, Any], where: str = "worlds",
                     inherited: tuple[str, ...] = ()) -> None:
    """A ConfigError when the world keys ``keys`` (checked, one entry's or the section's) cannot
    mean what they say in ``scenario``: a knob the scenario does not follow (was: ignored, every
    world the same episodes), or a range end the scenario rejects (was: an error at the first
    episode that drew it, after the run folder was made, possibly hours into the run)."""
    w = scenario.workload
    name = scenario.name
    if "load" in keys and (w.trace or w.num_jobs is not None):
        fixed = f"replays a trace ({w.trace})" if w.trace else f"fixes workload.num_jobs={w.num_jobs}"
        fix = ("the section's load applies to every entry: move load into the entries whose scenario "
               "follows it" if "load" in inherited else "drop load for it")
        raise ConfigError(f"{where}.load: scenario {name!r} {fixed}, so workload.load does not change its "
                          f"episodes (every world would play the same jobs); {fix}, or use a generated "
                          "scenario without num_jobs (testbed, basic, production)")
    if "duration_hours" in keys and (w.trace or w.num_jobs is not None):
        fixed = (f"replays a trace ({w.trace}), which ignores workload.duration_hours" if w.trace else
                 f"fixes workload.num_jobs={w.num_jobs}: all {w.num_jobs} jobs would arrive within the "
                 "slice instead of its first hours of arrivals")
        raise ConfigError(f"{where}.duration_hours: scenario {name!r} {fixed}; drop duration_hours for it")
    ends: list[tuple[str, Any]] = []
    for k in ("load", "elastic_fraction"):
        if k in keys:
            ends += [(k, keys[k][0]), (k, keys[k][1])]
    if "train_servers" in keys:
        ends += [("train_servers", min(keys["train_servers"])), ("train_servers", max(keys["train_servers"]))]
    if "duration_hours" in keys:
        ends.append(("duration_hours", keys["duration_hours"]))
    for k, v in ends:
        try:
            world_scenario(scenario, {k: v})
        except (ConfigError, TypeError, ValueError) as exc:
            raise ConfigError(f"{where}.{k}: scenario {name!r} rejects {k} {v!r}, an end of the range it "
                              f"draws from ({exc}); give a range the scenario accepts") from None
    largest = {k: max(v) if k == "train_servers" else v for k, v in keys.items()
               if k in ("train_servers", "duration_hours")}
    if len(largest) > 1:  # the largest cluster over the longest slice (the size limits)
        try:
            world_scenario(scenario, largest)
        except (ConfigError, TypeError, ValueError) as exc:
            raise ConfigError(f"{where}: scenario {name!r} rejects its largest world {largest} ({exc})") from None


def check_worlds_fit(worlds: Mapping[str, Any], base: Any, where: str = "worlds") -> dict[int, ScenarioConfig]:
    """:func:`check_world_fits` for a whole ``worlds`` section played from scenario ``base`` (a
    name, path or ScenarioConfig: the run's own); the loaded scenario of each entry by index."""
    worlds = check_worlds(worlds, where)
    section = {k: v for k, v in worlds.items() if k in WORLD_KEYS}
    loaded: dict[int, ScenarioConfig] = {}
    for i, e in enumerate(worlds.get("scenarios", ())):
        loaded[i] = load_scenario(e["scenario"])
        entry = {k: v for k, v in e.items() if k in (*WORLD_KEYS, "duration_hours")}
        check_world_fits(loaded[i], {**section, **entry}, f"{where}.scenarios[{i}]",
                         tuple(k for k in section if k not in entry))
    if "scenarios" not in worlds:
        check_world_fits(base if isinstance(base, ScenarioConfig) else load_scenario(base), section, where)
    return loaded


class _WorldEnv(Protocol):
    """What :class:`WorldSampler` sets and reads on its inner (unwrapped) aryl envs."""

    config: ScenarioConfig

    def action_masks(self) -> np.ndarray: ...


class WorldSampler(gym.Env):
    """An allocation env whose every episode is in a world drawn from ``worlds``."""

    metadata = {"render_modes": []}  # noqa: RUF012 (gymnasium convention)

    def __init__(self, env_id: str, scenario: Any, worlds: Mapping[str, Any], where: str = "worlds",
                 **env_kwargs: Any):
        self.env_id = env_id
        self.worlds = check_worlds(worlds, where)
        self.base = scenario if isinstance(scenario, ScenarioConfig) else load_scenario(scenario)
        self.env_kwargs = dict(env_kwargs)
        # the scenario of each entry (index -1: the run's own scenario)
        self.scenarios: dict[int, ScenarioConfig] = {-1: self.base}
        self.scenarios.update(check_worlds_fit(self.worlds, self.base, where))
        if "max_workers" not in self.env_kwargs and "scenarios" not in self.worlds:
            c = self.base.cluster  # equal spaces in every world of one scenario
            mw = int(self.base.workload.max_job_gpus or c.train_gpus)
            self.env_kwargs["max_workers"] = max(1, min(mw, c.train_gpus))
        self._envs: dict[tuple[int, int], gym.Env] = {}
        self.current = self._env_for(-1, self.base.cluster.train_servers)
        self.observation_space = self.current.observation_space
        self.action_space = self.current.action_space
        self.world: dict[str, Any] = {}
        self.episode_count = 0  # resets of this env (whichever inner env plays)

    def _env_for(self, entry: int, servers: int) -> gym.Env:
        env = self._envs.get((entry, servers))
        if env is None:
            cfg = world_scenario(self.scenarios[entry], {"train_servers": servers})
            env = gym.make(self.env_id, scenario=cfg, **self.env_kwargs).unwrapped
            if self._envs and (env.observation_space != self.observation_space
                               or env.action_space != self.action_space):
                name = self.worlds["scenarios"][entry]["scenario"] if entry >= 0 else cfg.name
                raise ConfigError(
                    f"worlds: scenario {name!r} with {servers} training servers gives other spaces than "
                    f"{self.base.name!r} (observation {env.observation_space} vs {self.observation_space}, "
                    f"action {env.action_space} vs {self.action_space}); set env_kwargs.max_workers or "
                    "use an action mode whose spaces do not follow the cluster (sequential)")
            self._envs[(entry, servers)] = env
        return env

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        opts = dict(options or {})
        ep_seed = opts.get("episode_seed")
        if ep_seed is None:
            ep_seed = int(self.np_random.integers(0, 2**31 - 1))
        self.world = draw_world(self.worlds, int(ep_seed))
        entry = int(self.world.get("scenario_index", -1))
        base = self.scenarios[entry]
        env = self._env_for(entry, int(self.world.get("train_servers", base.cluster.train_servers)))
        cast(_WorldEnv, env).config = world_scenario(base, self.world)
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
