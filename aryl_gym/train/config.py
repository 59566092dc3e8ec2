"""Training configuration: algorithm hyperparameters in YAML, keyed by scenario.

A file under ``configs/algos/`` (rl-baselines3-zoo style) looks like::

    algo: maskable_ppo          # one of ALGOS
    default:                    # used for every scenario, merged under the scenario's section
      env_kwargs: {action_mode: targets}
      n_envs: 2
      hyperparams: {learning_rate: 3.0e-4, n_steps: 256}
      ...
    testbed:                    # overrides for scenario ``testbed`` (deep-merged over default)
      total_timesteps: 300000

Loading is strict: an unknown key (at the top level of a section, under ``eval`` or ``bc``) is a
:class:`~aryl_gym.config.ConfigError` naming the key, the file and the allowed keys;
hyperparameters are checked against the algorithm's constructor when the model is built
(:func:`check_hyperparams`). This module imports neither torch nor stable-baselines3.
"""

from __future__ import annotations

import copy
import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aryl_gym.config import ConfigError, configs_dir, load_yaml

#: algorithm name -> (module, class, supports action masks)
ALGOS: dict[str, tuple[str, str, bool]] = {
    "ppo": ("stable_baselines3", "PPO", False),
    "a2c": ("stable_baselines3", "A2C", False),
    "dqn": ("stable_baselines3", "DQN", False),
    "maskable_ppo": ("sb3_contrib", "MaskablePPO", True),
    "recurrent_ppo": ("sb3_contrib", "RecurrentPPO", False),
}

DEFAULT_ENV_ID = "aryl_gym/Aryl-v1"


@dataclass(frozen=True)
class EvalConfig:
    """Periodic evaluation on fixed held-out seeds (SPEC 7)."""

    freq: int = 20_000  # environment steps (summed over the vector envs) between evaluations
    seeds: tuple[int, ...] = (1000, 1001, 1002)  # held out: training seeds start at the run seed
    references: tuple[str, ...] = ("aryl", "fifo")  # native heuristics logged on the same seeds
    deterministic: bool = True
    save_best: bool = True  # keep best_model.zip (lowest eval avg JCT)
    background: bool = False  # evaluate in a worker process (aryl_gym.train.async_eval)


@dataclass(frozen=True)
class BCConfig:
    """Behaviour-cloning warm start from demonstrations (``aryl-gym demos``)."""

    demos: str | None = None  # .npz path; None = no warm start
    epochs: int = 10
    batch_size: int = 256
    learning_rate: float = 1.0e-3


@dataclass(frozen=True)
class TrainConfig:
    """Everything a training run needs, resolved for one scenario."""

    algo: str
    scenario: str
    env_id: str = DEFAULT_ENV_ID
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    n_envs: int = 2
    vec_env: str = "dummy"  # dummy | subproc | aryl (aryl_gym.train.fast.ArylVecEnv)
    total_timesteps: int = 100_000
    normalize_obs: bool = False  # VecNormalize on observation keys (never the action mask)
    normalize_reward: bool = False
    reward_reference: str | None = None  # ReferenceJCTReward: jct reward relative to this policy
    # trace pairing (aryl_gym.train.paired): groups of pair_group envs share episode seeds;
    # pair_baseline "trace_mean" makes the jct reward relative to the mean of earlier runs on
    # the same trace (0 / "none" = off)
    pair_group: int = 0
    pair_repeats: int = 1  # each member plays every trace this many times in a row
    pair_baseline: str = "none"  # none | trace_mean
    # per-episode world sampling (aryl_gym.train.worlds): {"load": [lo, hi], "train_servers":
    # [..], "elastic_fraction": [lo, hi]}; empty = the scenario as is
    worlds: Mapping[str, Any] = field(default_factory=dict)
    # changes to the scenario for training and evaluation, e.g. {"workload": {"load": 0.9}}
    scenario_overrides: Mapping[str, Any] = field(default_factory=dict)
    policy: str = "MultiInputPolicy"
    policy_kwargs: Mapping[str, Any] = field(default_factory=dict)
    hyperparams: Mapping[str, Any] = field(default_factory=dict)
    checkpoint_freq: int = 50_000  # environment steps (summed over envs); 0 = off
    max_minutes: float = 0.0  # stop training after this much wall time (0 = no limit)
    critic_warmup_steps: int = 0  # train only the value function for these first env steps
    log_interval: int = 1  # rollouts between log dumps (on-policy algorithms)
    seed: int = 0
    torch_threads: int = 1
    eval: EvalConfig = EvalConfig()
    bc: BCConfig = BCConfig()

    @property
    def masked(self) -> bool:
        return ALGOS[self.algo][2]

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["env_kwargs"] = dict(self.env_kwargs)
        d["policy_kwargs"] = copy.deepcopy(dict(self.policy_kwargs))
        d["hyperparams"] = dict(self.hyperparams)
        d["worlds"] = copy.deepcopy(dict(self.worlds))
        d["scenario_overrides"] = copy.deepcopy(dict(self.scenario_overrides))
        d["eval"]["seeds"] = list(self.eval.seeds)
        d["eval"]["references"] = list(self.eval.references)
        return d

    def replace(self, **changes: Any) -> TrainConfig:
        return dataclasses.replace(self, **changes)


_SECTION_KEYS = {
    f.name for f in dataclasses.fields(TrainConfig) if f.name not in ("algo", "scenario")
}
_EVAL_KEYS = {f.name for f in dataclasses.fields(EvalConfig)}
_BC_KEYS = {f.name for f in dataclasses.fields(BCConfig)}
_INT_KEYS = ("n_envs", "total_timesteps", "checkpoint_freq", "log_interval", "seed", "torch_threads",
             "pair_group", "pair_repeats", "critic_warmup_steps")


def resolve_algo_path(name_or_path: str | os.PathLike[str]) -> Path:
    """``maskable_ppo`` -> ``configs/algos/maskable_ppo.yaml``; a path is returned as is."""
    text = str(name_or_path)
    if text.endswith((".yaml", ".yml")) or os.sep in text:
        return Path(text)
    p = configs_dir() / "algos" / f"{text}.yaml"
    if not p.exists():
        known = sorted(q.stem for q in (configs_dir() / "algos").glob("*.yaml"))
        raise ConfigError(
            f"unknown algorithm config {text!r}. Known: {', '.join(known)}; or pass a YAML path"
        )
    return p


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """Deep merge: mappings merge key by key, everything else is replaced."""
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
            out[k] = _merge(dict(out[k]), v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def _check_keys(d: Mapping[str, Any], allowed: set[str], where: str, source: str) -> None:
    for k in d:
        if k not in allowed:
            raise ConfigError(
                f"{source}: unknown key {k!r} in {where}. Allowed keys: {', '.join(sorted(allowed))}"
            )


def _section(data: Any, name: str, source: str) -> dict[str, Any]:
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: section {name!r} must be a mapping, got {type(data).__name__}")
    _check_keys(data, _SECTION_KEYS, f"section {name!r}", source)
    for sub, keys in (("eval", _EVAL_KEYS), ("bc", _BC_KEYS)):
        if sub in data:
            if not isinstance(data[sub], Mapping):
                raise ConfigError(f"{source}: {name}.{sub} must be a mapping")
            _check_keys(data[sub], keys, f"{name}.{sub}", source)
    for sub in ("env_kwargs", "policy_kwargs", "hyperparams", "worlds", "scenario_overrides"):
        if sub in data and not isinstance(data[sub], Mapping):
            raise ConfigError(f"{source}: {name}.{sub} must be a mapping")
    return dict(data)


def scenario_key(scenario: str | os.PathLike[str]) -> str:
    """The key a scenario is looked up under: its ``name`` (a path is loaded to find it)."""
    text = str(scenario)
    if text.endswith((".yaml", ".yml")) or os.sep in text:
        from aryl_gym.config import load_scenario

        return load_scenario(text).name
    return text


def load_train_config(
    path: str | os.PathLike[str],
    scenario: str | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> TrainConfig:
    """Load ``path`` and resolve it for ``scenario`` (default: the file's ``scenario`` key or
    ``testbed``): ``default`` deep-merged with the scenario's own section, then ``overrides``
    (the command line's)."""
    p = resolve_algo_path(path)
    data = load_yaml(p)
    source = str(p)
    if not isinstance(data, Mapping):
        raise ConfigError(f"{source}: expected a mapping with 'algo' and per-scenario sections")
    if "algo" not in data:
        raise ConfigError(f"{source}: missing key 'algo' (one of {', '.join(ALGOS)})")
    algo = str(data["algo"])
    if algo not in ALGOS:
        raise ConfigError(f"{source}: unknown algo {algo!r}; choose one of {', '.join(ALGOS)}")
    sections: dict[str, dict[str, Any]] = {}
    for k, v in data.items():
        if k in ("algo", "scenario"):
            continue
        sections[str(k)] = _section(v, str(k), source)
    scen = scenario or str(data.get("scenario") or "testbed")
    key = scenario_key(scen)
    merged = _merge(sections.get("default", {}), sections.get(key, {}))
    if overrides:
        _check_keys(overrides, _SECTION_KEYS, "overrides", "command line")
        merged = _merge(merged, {k: v for k, v in overrides.items() if v is not None})
    return build_config(algo, scen, merged, source)


def build_config(algo: str, scenario: str, d: Mapping[str, Any], source: str = "config") -> TrainConfig:
    """A :class:`TrainConfig` from a merged section (also used to reload a run's config.yaml)."""
    d = dict(d)
    ev = dict(d.pop("eval", {}) or {})
    bc = dict(d.pop("bc", {}) or {})
    _check_keys(d, _SECTION_KEYS, "section", source)
    _check_keys(ev, _EVAL_KEYS, "eval", source)
    _check_keys(bc, _BC_KEYS, "bc", source)
    for k in _INT_KEYS:
        if k in d:
            v = d[k]
            if isinstance(v, float) and v.is_integer():
                v = int(v)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ConfigError(f"{source}: {k} must be a non-negative integer, got {d[k]!r}")
            d[k] = v
    if d.get("n_envs", 1) < 1:
        raise ConfigError(f"{source}: n_envs must be >= 1")
    if d.get("vec_env", "dummy") not in ("dummy", "subproc", "aryl"):
        raise ConfigError(
            f"{source}: vec_env must be 'dummy', 'subproc' or 'aryl', got {d['vec_env']!r}"
        )
    if d.get("pair_baseline", "none") not in ("none", "trace_mean"):
        raise ConfigError(
            f"{source}: pair_baseline must be 'none' or 'trace_mean', got {d['pair_baseline']!r}"
        )
    pg = d.get("pair_group", 0)
    if pg > 1 and d.get("n_envs", 2) % pg:
        raise ConfigError(f"{source}: n_envs ({d.get('n_envs', 2)}) must be a multiple of pair_group ({pg})")
    if "seeds" in ev:
        ev["seeds"] = tuple(int(s) for s in ev["seeds"])
    if "references" in ev:
        ev["references"] = tuple(str(s) for s in ev["references"])
    if "freq" in ev:
        ev["freq"] = int(ev["freq"])
    for k in ("env_kwargs", "policy_kwargs", "hyperparams", "worlds", "scenario_overrides"):
        d[k] = dict(d.get(k) or {})
    if d["worlds"]:
        from aryl_gym.train.worlds import check_worlds

        check_worlds(d["worlds"], f"{source}: worlds")
    return TrainConfig(algo=algo, scenario=scenario, eval=EvalConfig(**ev), bc=BCConfig(**bc), **d)


def config_from_run_dict(d: Mapping[str, Any], source: str = "run config") -> TrainConfig:
    """Rebuild a :class:`TrainConfig` from :meth:`TrainConfig.to_dict` output."""
    d = dict(d)
    algo = d.pop("algo")
    scenario = d.pop("scenario")
    return build_config(algo, scenario, d, source)


def check_hyperparams(algo_cls: type, hyperparams: Mapping[str, Any], source: str = "config") -> None:
    """Every hyperparameter must be an argument of the algorithm's constructor."""
    import inspect

    params = set(inspect.signature(algo_cls.__init__).parameters)
    reserved = {"self", "policy", "env", "seed", "tensorboard_log", "policy_kwargs", "_init_setup_model"}
    allowed = params - reserved
    for k in hyperparams:
        if k not in allowed:
            raise ConfigError(
                f"{source}: hyperparameter {k!r} is not an argument of {algo_cls.__name__}. "
                f"Allowed: {', '.join(sorted(allowed))}"
            )
