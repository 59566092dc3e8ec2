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

Loading is strict (pydantic, :mod:`aryl_gym.schema`): every section is checked against
:class:`TrainConfig`'s annotations, and an unknown key, a wrong type or a value out of range is a
:class:`~aryl_gym.config.ConfigError` naming the file, the key path (``default.eval.freq``), what
was expected and what was found. Step counts may be written as floats with an integral value
(``2.0e5``). Hyperparameters are checked against the algorithm's constructor when the model is
built (:func:`check_hyperparams`). This module imports neither torch nor stable-baselines3.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import importlib
import inspect
import math
import os
import re
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from annotated_types import Ge, Gt, Le, Lt
from pydantic import BeforeValidator

from aryl_gym.agents import policy_names
from aryl_gym.config import ConfigError, configs_dir, list_scenarios, load_scenario, load_yaml
from aryl_gym.schema import model_for, validate, validate_model
from aryl_gym.train.schedules import parse_schedule
from aryl_gym.train.worlds import check_worlds

if TYPE_CHECKING:
    from stable_baselines3.common.base_class import BaseAlgorithm

#: algorithm name -> (module, class, supports action masks)
ALGOS: dict[str, tuple[str, str, bool]] = {
    "ppo": ("stable_baselines3", "PPO", False),
    "a2c": ("stable_baselines3", "A2C", False),
    "dqn": ("stable_baselines3", "DQN", False),
    "maskable_ppo": ("sb3_contrib", "MaskablePPO", True),
    "recurrent_ppo": ("sb3_contrib", "RecurrentPPO", False),
}

#: algorithm name -> the action spaces its SB3 class accepts (``supported_action_spaces`` in
#: each class's constructor), by Gymnasium space class name
ACTION_SPACES: dict[str, tuple[str, ...]] = {
    "ppo": ("Box", "Discrete", "MultiDiscrete", "MultiBinary"),
    "a2c": ("Box", "Discrete", "MultiDiscrete", "MultiBinary"),
    "dqn": ("Discrete",),
    "maskable_ppo": ("Discrete", "MultiDiscrete", "MultiBinary"),
    "recurrent_ppo": ("Box", "Discrete", "MultiDiscrete", "MultiBinary"),
}

#: the allocation env's action modes -> their action space (docs/env.md)
MODE_SPACES = {"sequential": "Discrete", "targets": "MultiDiscrete", "priority": "Box"}


def check_action_space(algo: str, action_space: Any, action_mode: Any, source: str = "config") -> None:
    """A ConfigError naming the action mode when ``algo`` cannot act in ``action_space``. Was:
    SB3's policy failed on the space ("'MultiDiscrete' object has no attribute 'n'" for DQN in
    ``targets`` mode, "not implemented for action space of type Box" for MaskablePPO in
    ``priority`` mode), reported as a fault of ``policy_kwargs``."""
    ok = ACTION_SPACES.get(algo)
    name = type(action_space).__name__
    if ok is None or name in ok:
        return
    modes = [m for m, sp in MODE_SPACES.items() if sp in ok]
    mode = f"action_mode {action_mode!r} gives " if action_mode else ""
    raise ConfigError(
        f"{source}: {algo} acts in {' or '.join(ok)} action spaces; the env's {mode}{name} actions: set "
        f"env_kwargs.action_mode to {' or '.join(repr(m) for m in modes) or 'a mode it supports'}, or choose "
        f"an algo for {name} actions ({', '.join(a for a, sp in ACTION_SPACES.items() if name in sp)})")


DEFAULT_ENV_ID = "aryl_gym/Aryl-v2"

#: the largest run seed: SB3 (``set_random_seed``) and RLlib (``.debugging(seed=)``) both seed
#: numpy's legacy generator with it, which takes 0 to 2**32 - 1; the envs' own seeds (seed + i)
#: go to numpy Generators, which take any size
MAX_RUN_SEED = 2**32 - 1


def algo_class(algo: str) -> type[BaseAlgorithm]:
    """The SB3 class of ``algo`` (a key of :data:`ALGOS`), imported on first use."""
    if algo not in ALGOS:
        raise ConfigError(f"unknown algo {algo!r}; choose one of {', '.join(ALGOS)}")
    mod, cls, _ = ALGOS[algo]
    cls_obj: type[BaseAlgorithm] = getattr(importlib.import_module(mod), cls)
    return cls_obj


def _integral(value: Any) -> Any:
    """``2.0e5`` -> ``200000`` (YAML writes big step counts as floats); anything else as is."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


#: an integer >= 0 (a float with an integral value is read as the integer)
Steps = Annotated[int, BeforeValidator(_integral), Ge(0)]
#: an integer >= 1 (likewise)
PosSteps = Annotated[int, BeforeValidator(_integral), Ge(1)]


@dataclass(frozen=True)
class EvalConfig:
    """Periodic evaluation on fixed held-out seeds (SPEC 7)."""

    freq: Steps = 20_000  # environment steps (summed over the vector envs) between evaluations
    seeds: tuple[Annotated[int, Ge(0)], ...] = (1000, 1001, 1002)  # held out: training seeds start at the run seed
    references: tuple[str, ...] = ("aryl", "baseline")  # native heuristics logged on the same seeds
    deterministic: bool = True
    save_best: bool = True  # keep best_model.zip (lowest eval avg JCT)
    background: bool = False  # evaluate in a worker process (aryl_gym.train.async_eval)
    # more evaluation sets beside the run's scenario and ``seeds``, by label: {basic: {scenario:
    # basic, seeds: [1100, 1101], overrides: {workload: {load: 1.3}}}}. With any, the best model
    # is chosen by ``score``: the geometric mean over the sets of the agent's mean average JCT
    # over the first reference's (a set's own sizes do not weigh more)
    scenarios: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class BCConfig:
    """Behaviour-cloning warm start from demonstrations (``aryl-gym demos``)."""

    demos: str | None = None  # .npz path or minari:ID; None = record from ``policy`` below, or no warm start
    # Without ``demos``: record ``episodes`` demonstrations of this reference policy (episode
    # seeds ``seed``..) in the training env into the run folder first (one-command reproduction)
    policy: str | None = None
    episodes: PosSteps = 96
    seed: Annotated[int, Ge(0)] = 100
    epochs: Steps = 10
    batch_size: PosSteps = 256
    learning_rate: Annotated[float, Gt(0)] = 1.0e-3
    # ``demos`` recorded by ``aryl-gym demos`` in another scenario (another configuration hash)
    # are refused unless this is true (``--bc-any-scenario``)
    any_scenario: bool = False


@dataclass(frozen=True)
class TeacherConfig:
    """A demonstrator in the loop during RL (:mod:`aryl_gym.train.teacher`, kickstarting): every
    state the agent visits is labelled with ``policy``'s action there, and after each PPO update
    the policy takes ``epochs`` passes of cross-entropy towards those labels, weighted ``coef``
    (decaying linearly to 0 over ``decay_steps`` env steps; 0 = constant); a share
    ``demo_share`` of each batch comes from the behaviour-cloning demonstrations. Needs
    ``algo: maskable_ppo`` and ``action_mode: sequential``."""

    policy: str | None = None  # a reference policy name; None = off
    coef: Annotated[float, Ge(0)] = 1.0
    epochs: PosSteps = 1
    learning_rate: Annotated[float, Gt(0)] = 1.0e-4
    batch_size: PosSteps = 512
    decay_steps: Steps = 0
    # share of each distillation batch drawn from demonstrations (DAgger's aggregate): the run's
    # behaviour-cloning demos, or this .npz
    demo_share: Annotated[float, Ge(0), Lt(1)] = 0.5
    demos: str | None = None


@dataclass(frozen=True)
class DaggerConfig:
    """DAgger on the deployed (argmax) policy after the RL phase (:mod:`aryl_gym.train.dagger`):
    ``rounds`` rounds, each playing the current student greedily on ``episodes`` fresh training
    episodes (seeds ``seed``.., worlds included), labelling its states with ``policy``'s action
    (default: ``teacher.policy``, else ``bc.policy``), and ``epochs`` passes of cross-entropy on
    the aggregate of the behaviour-cloning demonstrations and every round's states. Starts from
    the best model of the RL phase. 0 rounds = off. ``worlds`` changes the training worlds for
    the rollouts, key by key (e.g. ``{load: [1.1, 1.4]}`` to collect the states of the loads
    where an argmax policy falls into cycles); empty = the run's ``worlds``. ``keep``: ``best``
    lets a round become ``best_model.zip`` only when its evaluation beats every earlier one;
    ``last`` makes the last round ``best_model.zip`` whenever its evaluation leaves no job
    unfinished (the rounds aim at failures that a few evaluation seeds rarely show)."""

    rounds: Steps = 0
    episodes: PosSteps = 64
    seed: Annotated[int, Ge(0)] = 20_000
    policy: str | None = None
    epochs: PosSteps = 3
    batch_size: PosSteps = 512
    learning_rate: Annotated[float, Gt(0)] = 1.0e-4
    worlds: Mapping[str, Any] = field(default_factory=dict)
    keep: Literal["best", "last"] = "best"


@dataclass(frozen=True)
class TrainConfig:
    """Everything a training run needs, resolved for one scenario."""

    algo: str
    scenario: str
    env_id: str = DEFAULT_ENV_ID
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    # env settings added where the trained agent is deployed (LearnedAgent.make_env: evaluate,
    # leaderboard, eval_v1), saved in the run's config.yaml; never in the run's own envs
    # (training, demos, teacher, DAgger, evaluations and model selection judge the raw policy).
    # E.g. {flap_damping: true} (aryl_gym.envs.damping)
    deploy_env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    n_envs: PosSteps = 2
    vec_env: Literal["dummy", "subproc", "aryl"] = "dummy"  # aryl: aryl_gym.train.fast.ArylVecEnv
    total_timesteps: Steps = 100_000
    normalize_obs: bool = False  # VecNormalize on observation keys (never the action mask)
    normalize_reward: bool = False
    reward_reference: str | None = None  # ReferenceJCTReward: jct reward relative to this policy
    # trace pairing (aryl_gym.train.paired): groups of pair_group envs share episode seeds;
    # pair_baseline "trace_mean" makes the jct reward relative to the mean of earlier runs on
    # the same trace (0 / "none" = off)
    pair_group: Steps = 0
    pair_repeats: PosSteps = 1  # each member plays every trace this many times in a row
    pair_baseline: Literal["none", "trace_mean"] = "none"
    # per-episode world sampling (aryl_gym.train.worlds): {"load": [lo, hi], "train_servers":
    # [..], "elastic_fraction": [lo, hi]}; empty = the scenario as is
    worlds: Mapping[str, Any] = field(default_factory=dict)
    # changes to the scenario for training and evaluation, e.g. {"workload": {"load": 0.9}}
    scenario_overrides: Mapping[str, Any] = field(default_factory=dict)
    policy: str = "MultiInputPolicy"
    policy_kwargs: Mapping[str, Any] = field(default_factory=dict)
    hyperparams: Mapping[str, Any] = field(default_factory=dict)
    checkpoint_freq: Steps = 50_000  # environment steps (summed over envs); 0 = off
    max_minutes: Annotated[float, Ge(0)] = 0.0  # stop training after this much wall time (0 = no limit)
    critic_warmup_steps: Steps = 0  # train only the value function for these first env steps
    # the class to build instead of the algo's: ``module:Class``, a subclass of it (e.g. an
    # experiment's, experiments/); its own constructor arguments go in ``hyperparams``
    model_class: str | None = None
    # start from this model's weights (.zip of the same algo and network, e.g. a run's
    # warm_start.zip); replaces the behaviour-cloning warm start
    init_from: str | None = None
    # rollouts between log dumps (on-policy algorithms), at least 1 (was: 0 accepted, then SB3's
    # ``iteration % log_interval`` failed with ZeroDivisionError after the run folder was made)
    log_interval: PosSteps = 1
    seed: Annotated[int, Ge(0), Le(MAX_RUN_SEED)] = 0  # both backends: see MAX_RUN_SEED
    torch_threads: Steps = 1
    eval: EvalConfig = EvalConfig()
    bc: BCConfig = BCConfig()
    teacher: TeacherConfig = TeacherConfig()
    dagger: DaggerConfig = DaggerConfig()

    @property
    def masked(self) -> bool:
        return ALGOS[self.algo][2]

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["env_kwargs"] = dict(self.env_kwargs)
        d["deploy_env_kwargs"] = copy.deepcopy(dict(self.deploy_env_kwargs))
        d["policy_kwargs"] = copy.deepcopy(dict(self.policy_kwargs))
        d["hyperparams"] = dict(self.hyperparams)
        d["worlds"] = copy.deepcopy(dict(self.worlds))
        d["dagger"]["worlds"] = copy.deepcopy(dict(self.dagger.worlds))
        d["scenario_overrides"] = copy.deepcopy(dict(self.scenario_overrides))
        d["eval"]["seeds"] = list(self.eval.seeds)
        d["eval"]["references"] = list(self.eval.references)
        if self.eval.scenarios:
            d["eval"]["scenarios"] = copy.deepcopy(dict(self.eval.scenarios))
        else:  # a run without extra sets saves the config it saved before the key existed
            del d["eval"]["scenarios"]
        if not self.bc.any_scenario:  # likewise (the shipped agents' configs stay as they are)
            del d["bc"]["any_scenario"]
        return d

    def replace(self, **changes: Any) -> TrainConfig:
        return dataclasses.replace(self, **changes)


#: the fields a section sets (``algo`` and ``scenario`` come from the file and the command line)
_NOT_IN_SECTION = ("algo", "scenario")


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
    """Deep merge: mappings merge key by key, everything else is replaced. An empty ``worlds``
    (or ``dagger.worlds``) replaces too: ``worlds: {}`` in a scenario's section turns the
    default's worlds off, as the shipped recipes' ``tiny`` sections mean it (was: merged with
    nothing, so the default's worlds stayed: a ``tiny`` run drew other cluster sizes and loads)."""
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), Mapping) and (v or k != "worlds"):
            out[k] = _merge(dict(out[k]), v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def _section(data: Any, name: str, source: str) -> dict[str, Any]:
    """One section of an algorithm file, checked on its own (every section, used or not)."""

    if data is None:
        return {}
    validate_model(model_for(TrainConfig, _NOT_IN_SECTION), data, source, prefix=(name,))
    return dict(data)


def scenario_key(scenario: str | os.PathLike[str]) -> str:
    """The key a scenario is looked up under: its ``name`` (a path is loaded to find it)."""
    text = str(scenario)
    if text.endswith((".yaml", ".yml")) or os.sep in text:
        return load_scenario(text).name
    return text


def warn_unknown_sections(sections: Mapping[str, Any], key: str, source: str) -> list[str]:
    """Warn (``UserWarning``) about each section of an algorithm file that names no shipped
    scenario and is not the run's (``key``): it is checked but never used, so a misspelled
    ``tinny:`` left the ``tiny`` run on the ``default`` section without a word. A section named
    after a scenario file of one's own (its ``name:``) is used when training on that file, and
    is warned about otherwise. Returns the names warned about."""
    known = list_scenarios()
    odd = [k for k in sections if k not in ("default", key) and k not in known]
    for k in odd:
        close = difflib.get_close_matches(k.lower(), [*known, key], n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}? " if close else ""
        warnings.warn(
            f"{source}: section {k!r} is not a shipped scenario ({', '.join(known)}) nor this run's "
            f"scenario {key!r}, so it is not used; {hint}(a section for a scenario file of your own is "
            "named by that file's `name:` and applies only when training on it)", UserWarning, stacklevel=3)
    return odd


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
    warn_unknown_sections(sections, key, source)
    merged = _merge(sections.get("default", {}), sections.get(key, {}))
    if overrides:
        over = {k: v for k, v in overrides.items() if v is not None}
        _section(over, "overrides", "command line")
        merged = _merge(merged, over)
    return build_config(algo, scen, merged, source)


_CLASS_RE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


def build_config(algo: str, scenario: str, d: Mapping[str, Any], source: str = "config") -> TrainConfig:
    """A :class:`TrainConfig` from a merged section (also used to reload a run's config.yaml)."""

    cfg = validate(
        TrainConfig, d, source, exclude=_NOT_IN_SECTION, fill={"algo": algo, "scenario": scenario}
    )
    # rules across keys
    for key in ("scenario", "data_root"):
        if key in cfg.env_kwargs or key in cfg.deploy_env_kwargs:
            # was: the env played that scenario while the run's name, config and native
            # references said the run's own (evaluation ratios across two scenarios)
            raise ConfigError(f"{source}: env_kwargs.{key} is set by the run itself (--scenario / the config's "
                              f"scenario{', --data-root' if key == 'data_root' else ''}); drop it")
    if cfg.model_class is not None and not _CLASS_RE.match(cfg.model_class):
        raise ConfigError(f"{source}: model_class must be 'module:Class', got {cfg.model_class!r}")
    if cfg.pair_group > 1 and cfg.n_envs % cfg.pair_group:
        raise ConfigError(
            f"{source}: n_envs ({cfg.n_envs}) must be a multiple of pair_group ({cfg.pair_group})"
        )
    if cfg.pair_repeats > 1 and cfg.pair_group < 2:
        # was: ignored (pairing, repeats included, needs groups of at least 2 envs)
        raise ConfigError(f"{source}: pair_repeats ({cfg.pair_repeats}) needs trace pairing, pair_group >= 2 "
                          f"(found {cfg.pair_group}; 0 and 1 mean no pairing); set pair_group or drop pair_repeats")
    if cfg.eval.freq > 0 and not cfg.eval.seeds:
        # was: no evaluation, no eval.csv and no best_model.zip, without a word
        raise ConfigError(f"{source}: eval.seeds is empty but eval.freq is {cfg.eval.freq}; give held-out "
                          "seeds (e.g. eval.seeds: [1000, 1001, 1002], --eval-seeds 1000-1002), or "
                          "eval.freq: 0 (--eval-freq 0) to train without evaluations")
    _distinct_seeds(cfg.eval.seeds, f"{source}: eval.seeds")
    if cfg.teacher.policy:
        _needs_sequential_maskable(cfg, source, "teacher")
        if cfg.teacher.policy == "sjf-grant":
            raise ConfigError(f"{source}: teacher.policy must be a reference policy name (e.g. aryl-preempt)")
    if cfg.dagger.rounds > 0:
        _needs_sequential_maskable(cfg, source, "dagger")
        if cfg.normalize_obs:
            raise ConfigError(f"{source}: dagger plays the policy on raw observations; it cannot be "
                              "combined with normalize_obs")
        teacher = cfg.dagger.policy or cfg.teacher.policy or cfg.bc.policy
        if not teacher or teacher in ("sjf-grant", "random"):
            raise ConfigError(
                f"{source}: dagger needs a reference policy to label states: set dagger.policy "
                f"(e.g. aryl-preempt), or teacher.policy / bc.policy (found {teacher!r})"
            )
    names = [("bc.policy", cfg.bc.policy), ("reward_reference", cfg.reward_reference)]
    names += [("teacher.policy", cfg.teacher.policy), ("dagger.policy", cfg.dagger.policy)]
    names += [("eval.references", r) for r in cfg.eval.references]
    for key, name in names:
        if name and name not in ("sjf-grant", "random"):
            if name not in policy_names():
                raise ConfigError(
                    f"{source}: {key}: unknown policy {name!r}; known: {', '.join(policy_names())}"
                )
    if cfg.worlds:
        check_worlds(dict(cfg.worlds), f"{source}: worlds")
    if cfg.eval.scenarios:
        check_eval_sets(cfg.eval.scenarios, f"{source}: eval.scenarios")
        if not cfg.eval.references:
            raise ConfigError(f"{source}: eval.scenarios needs eval.references (the first one is what the "
                              "sets' scores divide by, e.g. aryl)")
    if cfg.dagger.worlds:
        check_worlds(dagger_worlds(cfg), f"{source}: dagger.worlds (merged with worlds)")
    return cfg


def _distinct_seeds(seeds: Any, where: str) -> None:
    """Evaluation seeds listed twice (was: played and averaged twice, so the row's mean was not
    the mean over the seeds it names)."""
    seen: set[Any] = set()
    for x in seeds:
        if x in seen:
            raise ConfigError(f"{where}: seed {x} is listed twice (each would count twice in the "
                              "evaluation's means); list each seed once")
        seen.add(x)


_LABEL_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


def check_eval_sets(sets: Mapping[str, Any], source: str = "eval.scenarios") -> dict[str, dict[str, Any]]:
    """Validate ``eval.scenarios`` (label -> ``{scenario, seeds, overrides}``); the checked sets."""
    if not isinstance(sets, Mapping):
        raise ConfigError(f"{source}: give a mapping of labels to {{scenario, seeds, overrides}}, got {sets!r}")
    out: dict[str, dict[str, Any]] = {}
    for label, spec in sets.items():
        where = f"{source}.{label}"
        if not isinstance(label, str) or not _LABEL_RE.match(label):
            raise ConfigError(f"{source}: label {label!r} must be a word (letters, digits, _), it names "
                              "the set's columns and TensorBoard tags")
        if not isinstance(spec, Mapping):
            raise ConfigError(f"{where}: give {{scenario, seeds, overrides}}, got {spec!r}")
        unknown = [k for k in spec if k not in ("scenario", "seeds", "overrides")]
        if unknown:
            raise ConfigError(f"{where}: unknown key {unknown[0]!r}; allowed: scenario, seeds, overrides")
        scen, seeds, over = spec.get("scenario"), spec.get("seeds"), spec.get("overrides", {})
        if not isinstance(scen, str) or not scen:
            raise ConfigError(f"{where}.scenario: give a scenario name or YAML path, got {scen!r}")
        if (not isinstance(seeds, (list, tuple)) or not seeds
                or any(not isinstance(x, int) or isinstance(x, bool) or x < 0 for x in seeds)):
            raise ConfigError(f"{where}.seeds: give a non-empty list of seeds >= 0, got {seeds!r}")
        _distinct_seeds(seeds, f"{where}.seeds")
        if not isinstance(over, Mapping):
            raise ConfigError(f"{where}.overrides: give a mapping such as {{workload: {{load: 1.3}}}}, got {over!r}")
        try:
            load_scenario(scen).replace(**dict(over))
        except (TypeError, ValueError, AttributeError) as exc:
            raise ConfigError(f"{where}: {exc}") from None
        out[label] = {"scenario": scen, "seeds": [int(x) for x in seeds], "overrides": dict(over)}
    return out


def dagger_worlds(cfg: TrainConfig) -> dict[str, Any]:
    """The worlds DAgger's rollouts draw from: ``worlds`` with ``dagger.worlds`` key by key."""
    return {**copy.deepcopy(dict(cfg.worlds)), **copy.deepcopy(dict(cfg.dagger.worlds))}


def _needs_sequential_maskable(cfg: TrainConfig, source: str, what: str) -> None:
    """``what`` (teacher, dagger) labels states with a reference policy's ``sequential`` actions."""
    if cfg.algo != "maskable_ppo":
        raise ConfigError(f"{source}: {what} needs algo: maskable_ppo (this config has {cfg.algo!r})")
    mode = cfg.env_kwargs.get("action_mode", "targets")
    if mode != "sequential":
        raise ConfigError(
            f"{source}: {what} needs env_kwargs.action_mode: sequential (this config has {mode!r})"
        )


def config_from_run_dict(d: Mapping[str, Any], source: str = "run config") -> TrainConfig:
    """Rebuild a :class:`TrainConfig` from :meth:`TrainConfig.to_dict` output."""
    d = dict(d)
    # run folders written before discounting by simulated time moved out of the package
    # (experiments/04-time-discounting) hold ``time_horizon_hours: null``
    if "time_horizon_hours" in d and d["time_horizon_hours"] is None:
        del d["time_horizon_hours"]
    algo = d.pop("algo")
    scenario = d.pop("scenario")
    return build_config(algo, scenario, d, source)


def _yaml_float(x: float) -> str:
    """``x`` as YAML reads a float: ``1.0e-04`` rather than ``1e-04``."""
    m, _, e = f"{x:e}".partition("e")
    return f"{float(m)!r}e{e}"


#: hyperparameters that are a number or a ``lin_START`` schedule
_SCHEDULE_PARAMS = ("learning_rate", "clip_range", "clip_range_vf")
#: hyperparameters that count something: at least 1 (0 used to fail deep inside SB3)
_POSITIVE_COUNTS = ("n_steps", "batch_size", "n_epochs", "gradient_steps", "buffer_size", "train_freq")


def _counts(name: str, default: Any) -> bool:
    """A hyperparameter that is a whole number: a count, or one whose SB3 default is an int."""
    return name in _POSITIVE_COUNTS or (isinstance(default, int) and not isinstance(default, bool))


def whole_counts(algo_cls: type, hyperparams: Mapping[str, Any]) -> dict[str, Any]:
    """``hyperparams`` with a count written as a whole float (``n_steps: 2.56e2``, YAML's reading
    of scientific notation) given to SB3 as the integer it is."""
    sig = inspect.signature(algo_cls).parameters
    out = dict(hyperparams)
    for k, v in hyperparams.items():
        default = sig[k].default if k in sig else inspect.Parameter.empty
        if _counts(k, default) and type(v) is float and v.is_integer():
            out[k] = int(v)
    return out


def check_hyperparams(
    algo_cls: type, hyperparams: Mapping[str, Any], source: str = "config", model_cls: type | None = None
) -> None:
    """Every hyperparameter must be an argument of the algorithm's constructor (or a named
    argument of ``model_cls``'s, a ``model_class`` built in its place)."""

    sig = inspect.signature(algo_cls).parameters
    params = set(sig)
    sig_defaults = {k: p.default for k, p in sig.items()}
    if model_cls is not None:
        named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        params |= {k for k, p in inspect.signature(model_cls).parameters.items() if p.kind in named}
    reserved = {"self", "policy", "env", "seed", "tensorboard_log", "policy_kwargs", "_init_setup_model"}
    allowed = params - reserved
    for k, v in hyperparams.items():
        if k in _SET_BY_RUNNER:  # was: TypeError "got multiple values for keyword argument"
            raise ConfigError(f"{source}: hyperparameter {k!r} is set by the training runner "
                              f"({_SET_BY_RUNNER[k]}); drop it")
        if k.endswith("_class") and k in allowed:  # was: TypeError "'str' object is not callable"
            raise ConfigError(f"{source}: hyperparameter {k!r} takes a Python class, which a config cannot "
                              "give; use model_class: 'module:Class' for a custom model")
        if k.endswith("_kwargs") and k in allowed and v is not None and not isinstance(v, Mapping):
            raise ConfigError(f"{source}: hyperparameter {k}: {v!r} must be a mapping (e.g. {k}: {{}})")
        if k in _BUFFER_KWARGS and k in allowed and v:
            # was: a TypeError from the buffer's constructor ("unexpected keyword argument"), or
            # "got multiple values" for a key the algorithm passes itself, after the run folder was made
            bad = [x for x in v if x not in _BUFFER_KWARGS[k]]
            if bad:
                takes = ", ".join(_BUFFER_KWARGS[k]) or "none"
                raise ConfigError(
                    f"{source}: hyperparameter {k}.{bad[0]}: not a setting SB3's buffer takes from a config "
                    f"(settings it takes: {takes}; its size, gamma, gae_lambda, n_envs and device come from "
                    f"the algorithm's own arguments); drop it")
        if k not in allowed:
            raise ConfigError(
                f"{source}: hyperparameter {k!r} is not an argument of {algo_cls.__name__}. "
                f"Allowed: {', '.join(sorted(allowed))}"
            )
        if k in _POSITIVE_COUNTS and isinstance(v, (int, float)) and not isinstance(v, bool) and not v >= 1:
            raise ConfigError(f"{source}: hyperparameter {k}: {v!r} must be at least 1")
        default = sig_defaults.get(k, inspect.Parameter.empty)
        if _counts(k, default) and (v is None or isinstance(v, bool) or (
                isinstance(v, float) and not v.is_integer())):
            # was: a TypeError deep inside SB3 (n_steps=64.5, or n_steps= read as null)
            raise ConfigError(f"{source}: hyperparameter {k}: {v!r} must be a whole number "
                              f"({algo_cls.__name__}'s default is {default!r})")
        if k in _FLAGS and not isinstance(v, bool):  # was: "maybe" stored as text (truthy)
            raise ConfigError(f"{source}: hyperparameter {k}: {v!r} must be true or false")
        if isinstance(v, str) and v.startswith("lin_"):  # a schedule: checked here, built later
            parse_schedule(k, v, source)
            continue
        numeric = k in _SCHEDULE_PARAMS or (
            isinstance(default, (int, float)) and not isinstance(default, bool))
        if isinstance(v, str):  # a number quoted as text (1e-4 unquoted is a number: fileio)
            try:
                num = float(v)
            except ValueError:
                if numeric:
                    raise ConfigError(
                        f"{source}: hyperparameter {k}: {v!r} is not a number"
                        f"{' (or a lin_START schedule)' if k in _SCHEDULE_PARAMS else ''}; "
                        f"{algo_cls.__name__}'s default is {default!r}"
                    ) from None
                continue  # a genuine string (e.g. a device or a schedule name)
            if not math.isfinite(num):  # was: "write nan as e.g. learning_rate: nane"
                raise ConfigError(f"{source}: hyperparameter {k}: {v!r} must be a finite number")
            raise ConfigError(
                f"{source}: hyperparameter {k}: {v!r} is text, not a number (quoted, or read as "
                f"text by another YAML reader); write {num!r} as e.g. "
                f"{k}: {_yaml_float(num)}"
            )
        _check_range(k, v, source)


#: hyperparameters the training runner passes itself, and how to change what it passes
_SET_BY_RUNNER = {
    "verbose": "SB3's own log lines are off; the runner prints its evaluations",
    "device": "training runs on the CPU build of torch",
}

#: the buffer settings a config may give (the algorithm passes every other argument itself, and
#: SB3's and sb3-contrib's rollout buffers take none beyond those)
_BUFFER_KWARGS: dict[str, tuple[str, ...]] = {
    "rollout_buffer_kwargs": (),
    "replay_buffer_kwargs": ("handle_timeout_termination",),
}

#: hyperparameters that are true or false
_FLAGS = ("normalize_advantage", "use_sde", "optimize_memory_usage")

#: the ranges SB3 does not check and that fail late (a NaN loss after minutes) or not at all:
#: (low, low inclusive, high, high inclusive)
_RANGES: dict[str, tuple[float, bool, float, bool]] = {
    "gamma": (0.0, False, 1.0, True),
    "gae_lambda": (0.0, True, 1.0, True),
    "learning_rate": (0.0, True, math.inf, False),  # 0: no gradient steps (a frozen policy)
    "clip_range": (0.0, False, math.inf, False),
    "clip_range_vf": (0.0, False, math.inf, False),
    "ent_coef": (0.0, True, math.inf, False),
    "vf_coef": (0.0, True, math.inf, False),
    "max_grad_norm": (0.0, False, math.inf, False),
    "target_kl": (0.0, False, math.inf, False),
    "tau": (0.0, False, 1.0, True),
}


def _check_range(k: str, v: Any, source: str) -> None:
    """A number hyperparameter that is NaN, infinite or outside its range (:data:`_RANGES`)
    (was: trained on, or a tensor of NaNs minutes later)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return
    if not math.isfinite(v):
        raise ConfigError(f"{source}: hyperparameter {k}: {v!r} must be a finite number")
    r = _RANGES.get(k)
    if r is None:
        return
    lo, lo_in, hi, hi_in = r
    if (v < lo or (v == lo and not lo_in)) or (v > hi or (v == hi and not hi_in)):
        lo_s = "[" if lo_in else "("
        hi_s = "]" if hi_in else ")"
        hi_txt = "inf" if hi == math.inf else f"{hi:g}"
        raise ConfigError(f"{source}: hyperparameter {k}: {v!r} is outside {lo_s}{lo:g}, {hi_txt}{hi_s}")


def ctor_params(algo_cls: type) -> Mapping[str, inspect.Parameter]:
    """The constructor arguments of ``algo_cls`` that name SB3's hyperparameters: its own, or,
    for a subclass whose constructor only passes ``**kwargs`` on (the teacher's
    ``TeacherMaskablePPO``), the first class up its hierarchy that names them (was: such a class
    showed no ``n_steps``, so the rollout checks skipped every teacher run)."""
    for c in getattr(algo_cls, "__mro__", (algo_cls,)):
        try:
            params = inspect.signature(c).parameters
        except (TypeError, ValueError):  # e.g. object
            continue
        if "n_steps" in params or not any(p.kind is p.VAR_KEYWORD for p in params.values()):
            return params
    return inspect.signature(algo_cls).parameters


def on_policy(algo_cls: type) -> bool:
    """Whether ``algo_cls`` collects rollouts of ``n_steps`` per env (SB3's OnPolicyAlgorithm:
    PPO, A2C, MaskablePPO, RecurrentPPO and their subclasses). DQN takes ``n_steps`` too (the
    n-step return), but learns from a replay buffer. Read from the class hierarchy, so SB3 is
    not imported here."""
    return any(c.__name__ == "OnPolicyAlgorithm" for c in getattr(algo_cls, "__mro__", ()))


def check_rollout_sizes(algo_cls: type, hyperparams: Mapping[str, Any], n_envs: int,
                        source: str = "config", resume: str | None = None) -> None:
    """``batch_size`` against the rollout an on-policy update splits, ``n_steps * n_envs`` (the
    algorithm's defaults where the config gives none). Was: not checked (SB3's PPO asserts some
    of it with a traceback, MaskablePPO nothing): ``batch_size`` above the rollout was silently
    cut to it; one that did not divide it left a short last mini-batch, and a mini-batch (or
    rollout) of one step made advantage normalisation divide by a NaN std, failing mid-run
    after the run folder was made.

    ``resume``: the checkpoint of a run being resumed with these settings, its own (a run made
    before this check, whose checkpoint keeps its batch_size: ``--set`` cannot change it). A
    batch_size that does not fit the rollout is then a warning and the run goes on as it was
    saved (was: refused, naming ``--set batch_size``, which a resume refuses too); one that
    makes the training NaN is still an error, naming how to go on from the checkpoint's weights."""
    sig = ctor_params(algo_cls)
    if not on_policy(algo_cls) or "n_steps" not in sig or "batch_size" not in sig:
        # not a PPO-style rollout (A2C uses the whole rollout, DQN a replay buffer: its n_steps
        # is the n-step return and its batch_size a sample of the replay buffer)
        return

    def given(k: str) -> Any:
        return hyperparams[k] if k in hyperparams else sig[k].default

    n_steps, batch = int(given("n_steps")), int(given("batch_size"))
    normalize = given("normalize_advantage") if "normalize_advantage" in sig else False
    rollout = n_steps * int(n_envs)
    # a resumed run keeps its checkpoint's hyperparameters: the way on is a new run from its weights
    fork = (f"; this run cannot go on as saved: start a new run from its weights, aryl-gym train "
            f"--config CONFIG --init-from {resume} --set batch_size=... (a divisor of n_steps * n_envs)"
            if resume else "")
    if normalize and rollout < 2:
        raise ConfigError(f"{source}: n_steps * n_envs = {n_steps} * {n_envs} = {rollout} step per "
                          f"rollout: advantage normalisation needs at least 2; raise n_steps{fork}")
    if normalize and batch < 2:
        raise ConfigError(f"{source}: hyperparameter batch_size: {batch} is one step per mini-batch, whose "
                          f"advantage normalisation is NaN; give batch_size >= 2 (or normalize_advantage: false){fork}")
    if batch > rollout or rollout % batch:
        fits = _largest_divisor(rollout, min(batch, rollout))
        why = (f"is larger than the rollout n_steps * n_envs = {n_steps} * {n_envs} = {rollout} "
               f"(its mini-batches would hold {rollout} steps, not {batch})" if batch > rollout else
               f"does not divide the rollout n_steps * n_envs = {n_steps} * {n_envs} = {rollout} "
               f"(every update would end on a mini-batch of {rollout % batch})")
        if resume:
            warnings.warn(
                f"{source}: hyperparameter batch_size: {batch} {why}; the run was made before this was "
                f"checked and its checkpoint keeps its batch_size, so it is resumed as saved (a new run "
                f"should give a batch_size that divides {rollout}, e.g. {fits})", UserWarning, stacklevel=2)
            return
        raise ConfigError(f"{source}: hyperparameter batch_size: {batch} {why}; give a batch_size that "
                          f"divides {rollout} (e.g. {fits}), or change n_steps / --n-envs")


def _largest_divisor(n: int, at_most: int) -> int:
    """The largest divisor of ``n`` (>= 1) that is at most ``at_most``, from the divisor pairs up
    to sqrt(n) (was: every number up to ``at_most`` tried, which hung for minutes on an
    ``n_steps`` and ``batch_size`` of 1e9 before saying they did not fit)."""
    if n > 10**12:  # a rollout no memory holds (the memory check refuses it): any divisor will do
        return math.gcd(n, at_most)
    best = 1
    i = 1
    while i * i <= n:
        if n % i == 0:
            for d in (i, n // i):
                if best < d <= at_most:
                    best = d
        i += 1
    return best
