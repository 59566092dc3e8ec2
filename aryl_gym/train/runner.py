"""One training run: vector envs, the SB3 model, callbacks, the run folder, resume (SPEC 7).

The run folder ``{out}/{scenario}__{algo}__{seed}__{time}`` (CleanRL naming) holds::

    config.yaml        the resolved TrainConfig (reloadable: config_from_run_dict)
    args.json          the command-line arguments, the commit, versions
    commit.txt         git commit of the code (``-dirty`` when the tree has changes)
    tb/                TensorBoard events (SB3's rollout/, train/, time/; our cluster/, eval/,
                       teacher/) and progress.csv (the same scalars as CSV)
    eval.csv           the evaluation curve (agent and references on the held-out seeds)
    checkpoints/       rl_model_{N}_steps.zip (+ vecnormalize pickles)
    model.zip          the final model; best_model.zip the best by eval avg JCT
    dagger/            with a DAgger phase: each round's states, the aggregate, each round's
                       model; best_model_rl.zip the RL phase's best
    vecnormalize.pkl   observation statistics (only with normalize_obs)

Resuming (``resume=CKPT``) loads the checkpoint, keeps its ``num_timesteps`` and trains with
``reset_num_timesteps=False`` until ``total_timesteps`` (the run's total, not extra steps; a
total at or below the checkpoint's count is an error, nothing is written); the last saved state
of ``RUN`` continues in ``RUN``, an earlier checkpoint of a run that went further continues in a
new run folder beside it (:func:`resume_plan`), so a run's later state is never overwritten.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import platform
import re
import shutil
import signal
import sys
import threading
import time
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import yaml
from gymnasium import spaces

from aryl_gym.commands._common import strict_json
from aryl_gym.config import ConfigError
from aryl_gym.fileio import DirLock, atomic_write_text, claim_folder, load_yaml_file
from aryl_gym.offline import is_minari_ref
from aryl_gym.provenance import git_commit as _git_commit
from aryl_gym.train.bc import check_demos, check_demos_scenario, load_demos, pretrain, record_demos
from aryl_gym.train.config import (
    MAX_RUN_SEED,
    TrainConfig,
    algo_class,
    check_action_space,
    check_eval_sets,
    check_hyperparams,
    check_rollout_sizes,
    config_from_run_dict,
    ctor_params,
    dagger_worlds,
    on_policy,
    scenario_key,
    whole_counts,
)
from aryl_gym.train.dagger import run_dagger
from aryl_gym.train.envs import EnvFactory, train_scenario
from aryl_gym.train.schedules import resolve_schedules
from aryl_gym.train.vecnorm import read_statistics, statistics_candidates, statistics_path
from aryl_gym.train.worlds import check_worlds_fit

try:  # the address-space limit (ulimit -v) of the rollout memory check
    import resource
except ImportError:  # pragma: no cover - not POSIX
    resource = None  # type: ignore[assignment]


@dataclass
class RunResult:
    """What :func:`train` returns."""

    run_dir: Path
    model_path: Path
    num_timesteps: int
    wall_s: float
    steps_per_s: float
    eval_history: list[dict[str, float]]


# ---------------------------------------------------------------------------------------------
# environments
# ---------------------------------------------------------------------------------------------
def make_vec_env(cfg: TrainConfig, data_root: str | None = None, monitor_dir: str | None = None):
    """``n_envs`` Monitor-wrapped envs in a Dummy/SubprocVecEnv, VecNormalize if configured.

    Env ``i`` first resets with seed ``cfg.seed + i`` (SB3's seeding); later episodes draw
    fresh traces from each env's own generator. Evaluation seeds should lie outside.
    """
    # stable-baselines3 (the train extra, torch): imported when used
    from stable_baselines3.common.env_util import make_vec_env as sb3_make_vec_env
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecNormalize

    vec_cls: type = SubprocVecEnv if cfg.vec_env == "subproc" and cfg.n_envs > 1 else DummyVecEnv
    vec_kwargs: dict[str, Any] | None = None
    if cfg.vec_env == "aryl" or cfg.pair_group > 1 or cfg.teacher.policy:
        # fast imports sb3_contrib: imported when used
        from aryl_gym.train.fast import ArylVecEnv, PairedSeeds

        vec_cls = ArylVecEnv
        vec_kwargs = {}
        if cfg.pair_group > 1:
            vec_kwargs["paired"] = PairedSeeds(cfg.n_envs, cfg.pair_group, cfg.seed, max(cfg.pair_repeats, 1))
        if cfg.teacher.policy:
            vec_kwargs["teacher"] = cfg.teacher.policy
    venv = sb3_make_vec_env(
        EnvFactory(cfg, data_root),
        n_envs=cfg.n_envs,
        seed=cfg.seed,
        vec_env_cls=vec_cls,
        vec_env_kwargs=vec_kwargs,
        monitor_dir=monitor_dir,
    )
    if cfg.normalize_obs or cfg.normalize_reward:
        venv = VecNormalize(
            venv,
            norm_obs=cfg.normalize_obs,
            norm_reward=cfg.normalize_reward,
            norm_obs_keys=_norm_keys(venv.observation_space) if cfg.normalize_obs else None,
            gamma=float(cfg.hyperparams.get("gamma", 0.99)),
        )
    return venv


def eval_sets(cfg: TrainConfig, data_root: str | None = None) -> list[tuple[str, EnvFactory, Any, list[int]]]:
    """The extra evaluation sets of ``cfg.eval.scenarios``: ``(label, env maker, scenario,
    seeds)``, each set's env the run's evaluation env on its scenario and overrides."""
    out = []
    for label, spec in check_eval_sets(cfg.eval.scenarios).items():
        sub = cfg.replace(scenario=spec["scenario"], scenario_overrides=spec["overrides"])
        out.append((label, EnvFactory(sub, data_root, evaluation=True), train_scenario(sub), spec["seeds"]))
    return out


def _norm_keys(space: Any) -> list[str] | None:
    """Every Box key of a Dict space except the action mask (a mask must stay 0/1)."""

    if isinstance(space, spaces.Dict):
        return [k for k, s in space.spaces.items() if isinstance(s, spaces.Box) and "mask" not in k]
    return None


# ---------------------------------------------------------------------------------------------
# models
# ---------------------------------------------------------------------------------------------
def resolve_policy_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    """YAML-friendly ``policy_kwargs``: ``activation_fn: tanh`` -> ``torch.nn.Tanh``."""
    # torch (the train extra): imported when used
    from torch import nn

    out = dict(kwargs)
    act = out.get("activation_fn")
    if isinstance(act, str):
        table = {"tanh": nn.Tanh, "relu": nn.ReLU, "elu": nn.ELU, "leaky_relu": nn.LeakyReLU, "gelu": nn.GELU}
        if act.lower() not in table:
            raise ConfigError(f"activation_fn {act!r} unknown; choose one of {', '.join(table)}")
        out["activation_fn"] = table[act.lower()]
    return out


#: policy names of this package (``policy:`` in a config) -> ``module:class``
POLICIES: dict[str, str] = {
    "FastMaskableMultiInputPolicy": "aryl_gym.train.fast:FastMaskableMultiInputPolicy",
    "FastMaskablePolicy": "aryl_gym.train.fast:FastMaskablePolicy",
    "MaskableSetPolicy": "aryl_gym.train.setpolicy:MaskableSetPolicy",
}


def resolve_policy(name: str) -> Any:
    """SB3's policy names pass through; this package's (:data:`POLICIES`) become classes."""
    if name in POLICIES:
        mod, cls = POLICIES[name].split(":")
        return getattr(importlib.import_module(mod), cls)
    return name


def model_class(cfg: TrainConfig) -> Any:
    """The algorithm class of ``cfg``: ``model_class`` when given (``module:Class``, a subclass
    of the algo's class); else with a ``teacher``
    :class:`~aryl_gym.train.teacher.TeacherMaskablePPO` (MaskablePPO plus distillation); else
    the algo's class."""
    if cfg.model_class:
        mod, _, name = cfg.model_class.partition(":")
        try:
            cls = getattr(importlib.import_module(mod), name)
        except (ImportError, AttributeError) as exc:
            raise ConfigError(f"model_class {cfg.model_class!r} cannot be imported ({exc}); is its "
                              "folder on PYTHONPATH?") from None
        if not (isinstance(cls, type) and issubclass(cls, algo_class(cfg.algo))):
            raise ConfigError(f"model_class {cfg.model_class!r} must be a subclass of {cfg.algo}'s class")
        return cls
    if cfg.teacher.policy:
        # teacher imports sb3_contrib: imported when used
        from aryl_gym.train.teacher import TeacherMaskablePPO

        return TeacherMaskablePPO
    return algo_class(cfg.algo)


def model_kwargs(cfg: TrainConfig) -> dict[str, Any]:
    """Constructor arguments of :func:`model_class` beyond the algorithm's hyperparameters."""
    out: dict[str, Any] = {}
    if cfg.teacher.policy:
        out["teacher_kwargs"] = teacher_kwargs(cfg)
    return out


def teacher_kwargs(cfg: TrainConfig) -> dict[str, Any]:
    t = cfg.teacher
    return {"coef": t.coef, "epochs": t.epochs, "learning_rate": t.learning_rate,
            "batch_size": t.batch_size, "decay_steps": t.decay_steps, "demo_share": t.demo_share,
            "demos": t.demos}


def _save_interrupted(model: Any, venv: Any, run_dir: Path, total: int, eval_cb: Any,
                      what: str = "interrupted") -> Path:
    """Save an interrupted (or failed) run's model as a checkpoint (and its VecNormalize
    statistics) and print the command that continues it."""
    # stable-baselines3 (the train extra, torch): imported when used
    from stable_baselines3.common.vec_env import VecNormalize

    n = int(model.num_timesteps)
    ck = run_dir / "checkpoints" / f"rl_model_{n}_steps.zip"
    ck.parent.mkdir(parents=True, exist_ok=True)
    model.save(ck)
    if isinstance(venv, VecNormalize):
        venv.save(str(ck.parent / f"rl_model_vecnormalize_{n}_steps.pkl"))
    print(f"\n{what} at {n:,} steps: saved {ck}; continue with\n"
          f"  aryl-gym train --resume {ck} --timesteps {total}", file=sys.stderr, flush=True)
    if eval_cb is not None:
        try:
            # stop background evaluations (keeping the ones that finished)
            getattr(eval_cb, "abandon", eval_cb.finish)()
        except Exception:  # noqa: BLE001 - the interruption is what is reported
            pass
    try:
        venv.close()
    except Exception:  # noqa: BLE001 - the interruption is what is reported
        pass
    return ck


def _sigterm_interrupts() -> Callable[[], None]:
    """While training, SIGTERM (a batch scheduler's stop, ``kill``) interrupts as Ctrl-C does, so
    the run saves its model as a checkpoint (was: the process died at once, losing the steps since
    the last checkpoint); a second SIGTERM kills as before. Returns the function that restores
    the previous handler (nothing to do outside the main thread, where handlers cannot be set)."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    previous = signal.getsignal(signal.SIGTERM)

    def on_sigterm(signum: int, frame: Any) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM while saving kills
        raise KeyboardInterrupt("SIGTERM")

    signal.signal(signal.SIGTERM, on_sigterm)

    def restore() -> None:
        signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)

    return restore


#: the largest seed ``stable_baselines3.common.utils.set_random_seed`` accepts (numpy's legacy
#: ``np.random.seed``); a loaded config is checked against it already, one built in code here
SB3_MAX_SEED = MAX_RUN_SEED


def _check_resumed_rollout(cls: type, cfg: TrainConfig, resume: Path) -> None:
    """:func:`check_rollout_sizes` for a resumed run: with the run's own n_envs, a batch_size
    that does not fit is the saved run's (made before the check) and only warned about; with
    another ``--n-envs`` the error says to resume with the run's."""
    source = f"algo config ({cfg.algo})"
    origin = checkpoint_run_dir(resume)
    run_envs = int(cfg.n_envs)
    if origin is not None:
        try:
            run_envs = int(load_run_config(origin).n_envs)
        except ConfigError:
            pass  # a damaged run config: check_resume names it
    if run_envs == int(cfg.n_envs):
        check_rollout_sizes(cls, cfg.hyperparams, cfg.n_envs, source, resume=str(resume))
        return
    try:
        check_rollout_sizes(cls, cfg.hyperparams, cfg.n_envs, source)
    except ConfigError as exc:
        raise ConfigError(f"{exc}. The run {origin} trains with n_envs {run_envs}: resume it with "
                          f"--n-envs {run_envs} (or leave out --n-envs)") from None


def preflight(cfg: TrainConfig, data_root: str | None = None, resume: str | Path | None = None) -> None:
    """What SB3 or the env would reject deep inside a run, as a ConfigError before any work:
    the hyperparameters (names, numbers, counts >= 1) and the env kwargs (one env is built).
    ``resume``: the checkpoint the run continues from (:func:`_check_resumed_rollout`)."""
    cls = model_class(cfg)
    check_hyperparams(algo_class(cfg.algo), cfg.hyperparams, f"algo config ({cfg.algo})",
                      cls if cfg.model_class else None)
    if resume is not None and Path(resume).is_file():
        _check_resumed_rollout(cls, cfg, Path(resume))
    else:
        check_rollout_sizes(cls, cfg.hyperparams, cfg.n_envs, f"algo config ({cfg.algo})")
    # SB3 seeds numpy's legacy generator (np.random.seed) with the run seed, which must be below
    # 2**32 (was: "Seed must be between 0 and 2**32 - 1" after the run folder was made); the envs'
    # own seeds (seed + i) go to numpy Generators, which take any size
    if int(cfg.seed) > SB3_MAX_SEED:
        raise ConfigError(
            f"seed {cfg.seed} is above {SB3_MAX_SEED} (2**32 - 1, the largest seed SB3 accepts: it "
            f"seeds numpy's legacy generator with it); give a seed from 0 to {SB3_MAX_SEED}")
    if cfg.eval.freq > 0 and cfg.pair_group < 2:
        # env i's first episode plays seed + i (EnvFactory; pairing draws its own): an evaluation
        # seed among them replays a training trace (was: accepted, "held out" seeds that were not)
        train_first = range(int(cfg.seed), int(cfg.seed) + int(cfg.n_envs))
        clash = [x for x in cfg.eval.seeds if x in train_first]
        if clash:
            raise ConfigError(
                f"eval.seeds {clash[0]} is also a training seed (--seed {cfg.seed} with n_envs {cfg.n_envs} "
                f"trains on seeds {train_first[0]}-{train_first[-1]} first), so the evaluation would not be "
                f"held out; give other --eval-seeds (e.g. {train_first[-1] + 1}-{train_first[-1] + 3}) "
                "or another --seed")
    # the files the run reads, before a run folder exists (they used to fail after it was made)
    if cfg.bc.demos:
        # missing, damaged or of the wrong layout (rewards and episode ends included): a ConfigError
        check_demos(cfg.bc.demos)
        if not cfg.bc.any_scenario:  # was: demonstrations of any scenario cloned without a word
            scen = cfg.env_kwargs.get("scenario") or train_scenario(cfg)
            what = (f"{cfg.scenario} with scenario_overrides {dict(cfg.scenario_overrides)}"
                    if "scenario" not in cfg.env_kwargs and cfg.scenario_overrides else None)
            check_demos_scenario(cfg.bc.demos, scen, what)
    elif cfg.bc.any_scenario:  # was: accepted, with nothing to apply it to
        raise ConfigError("bc.any_scenario (--bc-any-scenario) applies to bc.demos (--bc-demos), "
                          "which is not set; drop it or give the demonstrations")
    if cfg.teacher.demos and is_minari_ref(cfg.teacher.demos):
        load_demos(cfg.teacher.demos)  # a Minari dataset that is missing: a ConfigError
    elif cfg.teacher.demos and not Path(cfg.teacher.demos).is_file():
        raise ConfigError(f"teacher.demos {cfg.teacher.demos}: file not found (an `aryl-gym demos` .npz)")
    # a resumed run continues from its checkpoint, not from the weights it started from (was: a
    # resume refused when that file had been moved or deleted since, or named relative to another
    # working folder)
    init_from = cfg.init_from if resume is None else None
    if init_from and not Path(init_from).is_file():
        raise ConfigError(f"init_from {cfg.init_from}: file not found (a model .zip, e.g. RUN/warm_start.zip)")
    if init_from and not zipfile.is_zipfile(init_from):
        # was: "its weights do not fit this config's network", after the run folder was made
        raise ConfigError(f"init_from {cfg.init_from}: not a readable model .zip (cut or damaged?); "
                          "give a model or checkpoint .zip that SB3 saved")
    if cfg.worlds:  # the worlds' knobs and range ends against the scenarios they play
        check_worlds_fit(cfg.worlds, train_scenario(cfg))
    if cfg.dagger.rounds > 0 and cfg.dagger.worlds:
        # DAgger's rollout worlds (was: checked when the phase began, after the whole RL phase)
        check_worlds_fit(dagger_worlds(cfg), train_scenario(cfg), "dagger.worlds (merged with worlds)")
    try:
        env = EnvFactory(cfg, data_root)()
    except (TypeError, ValueError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        first = first.split(" was raised from the environment creator")[0]
        raise ConfigError(f"env_kwargs {dict(cfg.env_kwargs)}: the env rejects them: {first}") from None
    try:
        mode = getattr(getattr(env, "unwrapped", env), "action_mode", None)
        check_action_space(cfg.algo, env.action_space, mode, f"algo config ({cfg.algo})")
        check_n_step_returns(cls, cfg.hyperparams, env.observation_space, f"algo config ({cfg.algo})")
        policy = check_policy(cfg, cls, env)
        if init_from:
            check_init_from(init_from, policy)
        check_rollout_memory(cls, cfg.hyperparams, int(cfg.n_envs), env.observation_space,
                             env.action_space, f"algo config ({cfg.algo})", dict(cfg.policy_kwargs))
    finally:
        env.close()


def check_n_step_returns(algo_cls: type, hyperparams: Mapping[str, Any], obs_space: Any,
                         source: str = "config") -> None:
    """An off-policy ``n_steps`` above 1 (DQN's n-step returns) on a Dict observation, which SB3's
    replay buffers cannot hold. Was: SB3's "N-step returns are not supported for Dict observation
    spaces yet" AssertionError, a traceback after the run folder was made."""
    n = hyperparams.get("n_steps", 1)
    if on_policy(algo_cls) or "n_steps" not in ctor_params(algo_cls) or not isinstance(obs_space, spaces.Dict):
        return
    if isinstance(n, (int, float)) and not isinstance(n, bool) and n > 1:
        raise ConfigError(f"{source}: hyperparameter n_steps: {n!r}: {algo_cls.__name__}'s n-step returns need a "
                          "flat observation, and this env's is a Dict (its action mask is one key); "
                          "drop n_steps (1-step returns)")


def _step_bytes(space: Any) -> int:
    """Bytes per step SB3's rollout buffer stores for ``space`` (a Dict: all its keys), in the
    space's own dtype (float32 observations, int64 actions)."""
    if isinstance(space, spaces.Dict):
        return sum(_step_bytes(s) for s in space.spaces.values())
    size = np.dtype(getattr(space, "dtype", None) or np.float32).itemsize
    if isinstance(space, spaces.MultiDiscrete):
        return len(space.nvec) * size
    shape = getattr(space, "shape", None)
    return (int(math.prod(shape)) if shape else 1) * size


def available_memory() -> int | None:
    """Bytes this process may still allocate: the system's available memory
    (``/proc/meminfo``'s ``MemAvailable``), below the address-space limit (``ulimit -v``) minus
    the address space in use; ``None`` where neither is known (not Linux)."""
    out: list[int] = []
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    out.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    try:
        if resource is None:  # pragma: no cover - not POSIX
            raise ImportError("resource")
        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft != resource.RLIM_INFINITY:
            used = 0
            with open("/proc/self/status") as fh:
                for line in fh:
                    if line.startswith("VmSize:"):
                        used = int(line.split()[1]) * 1024
            out.append(max(int(soft) - used, 0))
    except (ImportError, OSError, ValueError, IndexError):
        pass
    return min(out) if out else None


def _lstm_step_bytes(algo_cls: type, policy_kwargs: Mapping[str, Any] | None) -> int:
    """Bytes per step a recurrent rollout buffer (sb3-contrib's RecurrentPPO) keeps of the LSTM
    states: hidden and cell states of the actor's and the critic's LSTM (four float32 arrays of
    ``n_lstm_layers * lstm_hidden_size`` each, whether or not the LSTM is shared: the buffer
    allocates all four); 0 for a policy without LSTM. Was: left out of the estimate, which is
    about 4 KiB per step with the default 256 units (more than the observation here)."""
    if not any("Recurrent" in c.__name__ for c in algo_cls.__mro__):
        return 0
    kw = policy_kwargs or {}
    try:
        hidden = int(kw.get("lstm_hidden_size", 256))
        layers = int(kw.get("n_lstm_layers", 1))
    except (TypeError, ValueError):
        return 0  # not a number: the policy check says so
    return 4 * 4 * max(hidden, 0) * max(layers, 0)


def rollout_bytes(algo_cls: type, hyperparams: Mapping[str, Any], n_envs: int, obs_space: Any,
                  act_space: Any, policy_kwargs: Mapping[str, Any] | None = None) -> int | None:
    """About the memory of an on-policy algorithm's rollout buffer (``n_steps * n_envs`` steps of
    float32 observations, actions, action masks, six scalars and, for RecurrentPPO, the LSTM
    states of ``policy_kwargs``' size: :func:`_lstm_step_bytes`), twice over, as SB3 copies it
    into one flat batch at each update; ``None`` for an algorithm without ``n_steps`` (DQN's
    replay buffer: SB3 checks that one itself; its ``n_steps`` is the n-step return)."""
    sig = ctor_params(algo_cls)
    if not on_policy(algo_cls) or "n_steps" not in sig:
        return None
    n_steps = hyperparams["n_steps"] if "n_steps" in hyperparams else sig["n_steps"].default
    try:
        steps = int(n_steps) * int(n_envs)
    except (TypeError, ValueError):
        return None  # not a number: check_hyperparams says so
    mask = 0
    if any("Maskable" in c.__name__ for c in algo_cls.__mro__):
        mask = int(act_space.n) if isinstance(act_space, spaces.Discrete) else (
            int(sum(act_space.nvec)) if isinstance(act_space, spaces.MultiDiscrete) else 0)
    per_step = (_step_bytes(obs_space) + _step_bytes(act_space) + 4 * (mask + 6)
                + _lstm_step_bytes(algo_cls, policy_kwargs))
    return 2 * steps * per_step


def check_rollout_memory(algo_cls: type, hyperparams: Mapping[str, Any], n_envs: int, obs_space: Any,
                         act_space: Any, source: str = "config",
                         policy_kwargs: Mapping[str, Any] | None = None) -> None:
    """A ConfigError, before the run folder is made, when the rollout buffer
    (:func:`rollout_bytes`) needs more memory than this process may allocate
    (:func:`available_memory`). Was: the run folder was made, then SB3's allocation failed with
    an out-of-memory message that advised fewer ``--workers``, an option ``train`` does not have."""
    need = rollout_bytes(algo_cls, hyperparams, n_envs, obs_space, act_space, policy_kwargs)
    have = available_memory()
    if need is None or have is None or need <= have:
        return
    n_steps = hyperparams.get("n_steps", ctor_params(algo_cls)["n_steps"].default)
    fits = max(int(have // max(need // max(int(n_steps) * int(n_envs), 1), 1)) // max(int(n_envs), 1), 1)
    raise ConfigError(
        f"{source}: the rollout of n_steps * n_envs = {n_steps} * {n_envs} steps needs about "
        f"{need / 2**30:,.1f} GiB of memory (observations, actions, masks and LSTM states of every step, copied once "
        f"at each update), more than the {have / 2**30:,.1f} GiB available; lower n_steps (--set "
        f"n_steps=..., at most about {fits:,} here) or --n-envs")


def check_init_from(path: str, policy: Any) -> None:
    """``init_from``'s weights against the run's network (``policy``, built by
    :func:`check_policy`), before the run folder is made. Was: checked when the model was built,
    so a model of another window or network left a run folder (config.yaml, commit.txt, an empty
    tb/) behind with torch's error of a dozen lines."""
    # stable-baselines3 (the train extra, torch): imported when used
    from stable_baselines3.common.save_util import load_from_zip_file

    try:
        _data, params, _ = load_from_zip_file(path, load_data=False, device="cpu")
    except Exception as exc:  # noqa: BLE001 - whatever stops SB3 reading it: not a model it saved
        raise ConfigError(f"init_from {path}: not a readable model .zip ({type(exc).__name__}: {exc}); "
                          "give a model or checkpoint .zip that SB3 saved") from None
    saved = params.get("policy")
    if saved is None:
        raise ConfigError(f"init_from {path}: holds no policy weights; give a model or checkpoint .zip that SB3 saved")
    own = policy.state_dict()
    missing = [k for k in own if k not in saved]
    extra = [k for k in saved if k not in own]
    shapes = [k for k in own if k in saved and tuple(saved[k].shape) != tuple(own[k].shape)]
    if missing or extra or shapes:
        what = (f"{shapes[0]} has shape {tuple(saved[shapes[0]].shape)} there, {tuple(own[shapes[0]].shape)} "
                f"here" if shapes else f"its network has no {missing[0]}" if missing
                else f"its network has {extra[0]}, this one does not")
        raise ConfigError(f"init_from {path}: its weights do not fit this config's network ({what}"
                          f"{f', and {len(shapes) - 1} more' if len(shapes) > 1 else ''}); use a model trained "
                          "with the same algo, policy, policy_kwargs and env_kwargs (window, observation, "
                          "action_mode)")


def check_policy(cfg: TrainConfig, cls: Any, env: Any) -> Any:
    """``policy`` and ``policy_kwargs``, by building the policy once on ``env``'s spaces (returned). Was: an
    unknown policy name, an unknown ``policy_kwargs`` key or a ``net_arch`` of text failed in
    SB3's constructor (a traceback, or a bare "Policy X unknown") after the run folder was made."""
    policy = resolve_policy(cfg.policy)
    if isinstance(policy, str):
        aliases = getattr(cls, "policy_aliases", {})
        if policy not in aliases:
            raise ConfigError(f"policy {policy!r}: not a policy of {cls.__name__}; choose one of "
                              f"{', '.join(sorted([*aliases, *POLICIES]))}")
        policy = aliases[policy]
    kwargs = resolve_policy_kwargs(dict(cfg.policy_kwargs))
    try:
        return policy(env.observation_space, env.action_space, lambda _: 0.0, **kwargs)
    except (TypeError, ValueError, KeyError, AttributeError, RuntimeError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(f"policy_kwargs {dict(cfg.policy_kwargs)}: {policy.__name__} rejects them: {first}; "
                          "see the policy's arguments (e.g. net_arch: [64, 64], activation_fn: tanh)") from None


def build_model(cfg: TrainConfig, venv: Any, verbose: int = 0) -> Any:
    cls = model_class(cfg)
    check_hyperparams(algo_class(cfg.algo), cfg.hyperparams, f"algo config ({cfg.algo})",
                      cls if cfg.model_class else None)
    hyper = whole_counts(algo_class(cfg.algo), cfg.hyperparams)  # n_steps: 2.56e2 -> 256
    hp = {**resolve_schedules(hyper, f"algo config ({cfg.algo})"), **model_kwargs(cfg)}
    return cls(
        resolve_policy(cfg.policy),
        venv,
        seed=cfg.seed,
        verbose=verbose,
        device="cpu",
        policy_kwargs=resolve_policy_kwargs(dict(cfg.policy_kwargs)),
        **hp,
    )


# ---------------------------------------------------------------------------------------------
# run folder
# ---------------------------------------------------------------------------------------------
def git_commit(repo: Path | None = None) -> str:
    """``git rev-parse HEAD`` of the code, ``-dirty`` if tracked files have changes, or
    ``unknown`` (the one implementation: :func:`aryl_gym.provenance.git_commit`)."""
    return _git_commit(repo, dirty=True)


def run_name(cfg: TrainConfig) -> str:
    return f"{scenario_key(cfg.scenario)}__{cfg.algo}__{cfg.seed}__{time.strftime('%Y%m%d-%H%M%S')}"


def new_run_dir(cfg: TrainConfig, out: str | Path) -> Path:
    """A fresh run folder under ``out``, a folder of training runs (never another command's
    results folder: :func:`~aryl_gym.fileio.claim_folder`)."""
    if (Path(out) / "config.yaml").is_file() and (Path(out) / "commit.txt").is_file():
        # was: accepted (its tb/ looked like a run of examples/ppo_mask.py inside), so the new run
        # was made inside the old one and the old run folder was claimed as a parent of runs
        raise ConfigError(f"--out {out}: is a training run folder itself (config.yaml, commit.txt); --out is "
                          f"the folder that holds run folders: give its parent (--out {Path(out).parent}) for a "
                          f"new run, or continue this one with --resume {Path(out) / 'checkpoints'}/rl_model_N_steps.zip")
    if Path(out).exists() and not Path(out).is_dir():
        raise ConfigError(f"--out {out}: is a file, not a folder; give the folder that holds run folders")
    try:
        Path(out).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"--out {out}: cannot create the folder: {exc.strerror or exc}") from None
    claim_folder(Path(out), "train")
    base = Path(out) / run_name(cfg)
    d = base
    i = 1
    while True:  # two runs in the same second: the second gets NAME-1
        try:
            # exist_ok=False claims the name atomically (was: an exists() check, then mkdir: two
            # processes could both pass the check, and the second failed with "File exists")
            d.mkdir(parents=True)
            return d
        except FileExistsError:
            d = Path(f"{base}-{i}")
            i += 1


def write_run_files(run_dir: Path, cfg: TrainConfig, args: dict[str, Any]) -> None:
    commit = git_commit()
    atomic_write_text(run_dir / "config.yaml", yaml.safe_dump(cfg.to_dict(), sort_keys=False))
    (run_dir / "commit.txt").write_text(commit + "\n")
    # stable-baselines3 (the train extra, torch): imported when used
    import stable_baselines3

    # torch (the train extra): imported when used
    import torch

    meta = {
        "args": args,
        "commit": commit,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "stable_baselines3": stable_baselines3.__version__,
        "gymnasium": gymnasium.__version__,
        "host_cpus": os.cpu_count(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
    name = "args.json" if not (run_dir / "args.json").exists() else f"args-resume-{int(time.time())}.json"
    (run_dir / name).write_text(json.dumps(meta, indent=2, default=str) + "\n")


#: keys every run's config.yaml has held since the first shipped run (later versions add more);
#: one missing means the file was cut or edited (was: filled in with defaults and trusted)
RUN_CONFIG_KEYS = ("algo", "scenario", "env_id", "env_kwargs", "eval", "hyperparams", "n_envs",
                   "policy", "policy_kwargs", "seed", "total_timesteps", "checkpoint_freq", "vec_env")


def load_run_config(run_dir: Path) -> TrainConfig:
    path = run_dir / "config.yaml"
    data = load_yaml_file(path, "run config")
    if isinstance(data, dict):
        missing = [k for k in RUN_CONFIG_KEYS if k not in data]
        if missing:
            raise ConfigError(f"{path}: damaged run config: no {', '.join(missing)} (every run writes them); "
                              "restore the file, or start a new run with --config")
    return config_from_run_dict(data, str(path))


def checkpoint_run_dir(ckpt: Path) -> Path | None:
    """``RUN`` for a checkpoint ``RUN/checkpoints/x.zip`` or ``RUN/model.zip`` (has config.yaml)."""
    for d in (ckpt.parent.parent, ckpt.parent):
        if (d / "config.yaml").exists():
            return d
    return None


def saved_steps(model_zip: Path) -> int | None:
    """The ``num_timesteps`` an SB3 model/checkpoint .zip was saved at (its ``data`` entry; the
    ``rl_model_N_steps`` name as a fallback), or ``None`` when it cannot be told."""
    try:
        with zipfile.ZipFile(model_zip) as zf:
            n = json.loads(zf.read("data")).get("num_timesteps")
        if isinstance(n, int) and not isinstance(n, bool):
            return n
    except (OSError, KeyError, ValueError, zipfile.BadZipFile, AttributeError):
        pass
    m = re.search(r"_(\d+)_steps$", model_zip.stem)
    return int(m.group(1)) if m else None


def later_state(run_dir: Path, steps: int) -> list[tuple[int, Path]]:
    """The run's saved models (checkpoints, ``model.zip``) beyond ``steps``, by step count. A
    save cut by a kill (not a complete zip) is no saved state (was: counted, so resuming the
    last good checkpoint of a killed run forked a new run folder, saying the run "went on to" a
    step count it never saved)."""
    cands = list((run_dir / "checkpoints").glob("*.zip")) + [run_dir / "model.zip"]
    found = []
    for c in cands:
        if c.is_file() and zipfile.is_zipfile(c):
            n = saved_steps(c)
            if n is not None and n > steps:
                found.append((n, c))
    return sorted(found)


def resume_plan(ckpt: Path, total: int) -> tuple[Path | None, int]:
    """Where a resumed run continues (``RUN``, or ``None``: a new run folder) and from how many
    steps. ``total`` is the run's total (``--timesteps``), not a number of extra steps: at or
    below the checkpoint's count there is nothing to train, a ConfigError. A checkpoint of a run
    that went further continues into a new run folder, so the run's later state is never
    overwritten."""
    if ckpt.is_dir():
        raise ConfigError(f"--resume {ckpt}: is a folder; give a checkpoint .zip (e.g. "
                          "RUN/checkpoints/rl_model_N_steps.zip or RUN/model.zip)")
    if not zipfile.is_zipfile(ckpt):  # a save cut by a kill: the zip has no directory yet
        run = checkpoint_run_dir(ckpt)
        others = sorted((saved_steps(c) or -1, c) for c in (run / "checkpoints").glob("*.zip")
                        if c != ckpt and zipfile.is_zipfile(c)) if run is not None else []
        hint = f"; the latest good one is {others[-1][1]}" if others else ""
        raise ConfigError(f"--resume {ckpt}: not a complete model .zip (not a zip file, or its save "
                          f"was cut by an interruption){hint}")
    steps = saved_steps(ckpt)
    if steps is not None and total <= steps:
        raise ConfigError(
            f"--resume {ckpt}: the checkpoint is at {steps:,} steps and --timesteps {total:,} is the "
            f"run's total (not extra steps): nothing to train, nothing written. Give a larger "
            f"total, e.g. --timesteps {steps + total:,} to train {total:,} more"
        )
    run_dir = checkpoint_run_dir(ckpt)
    if run_dir is not None and steps is not None and later_state(run_dir, steps):
        return None, steps
    return run_dir, steps or 0


def check_resume(cfg: TrainConfig, ckpt: Path, origin: Path | None, data_root: str | None = None,
                 same_folder: bool = True) -> None:
    """A checkpoint ``cfg`` cannot continue, as a ConfigError before a run folder is made. Was: a
    zip of another algorithm (or policy) or another env's spaces failed inside SB3's ``load``
    with a traceback, after the run folder was made; and SB3's ``load`` keeps the zip's own
    hyperparameters and network, so ``--resume X --set learning_rate=...`` (or ``--config``
    with other hyperparameters) trained on with the old ones without a word, while the run's
    config.yaml was rewritten to claim the new ones."""
    # stable-baselines3 (the train extra, torch): imported when used
    from stable_baselines3.common.save_util import json_to_data

    try:
        with zipfile.ZipFile(ckpt) as zf:
            data = json_to_data(zf.read("data").decode())
    except (OSError, KeyError, ValueError, zipfile.BadZipFile) as exc:
        raise ConfigError(f"--resume {ckpt}: not a model .zip that SB3 saved ({exc})") from None
    cls = model_class(cfg)
    want = resolve_policy(cfg.policy)
    want = cls.policy_aliases.get(want, want) if isinstance(want, str) else want
    saved = data.get("policy_class")
    if isinstance(saved, type) and isinstance(want, type) and not issubclass(saved, want):
        raise ConfigError(f"--resume {ckpt}: the checkpoint holds a {saved.__name__}, but this config "
                          f"trains {cfg.algo} with a {want.__name__}; resume with the config of the run "
                          "that saved it (leave out --config), or start a new run")
    env = EnvFactory(cfg, data_root)()
    try:
        for what in ("observation_space", "action_space"):
            if what in data and data[what] != getattr(env, what):
                raise ConfigError(f"--resume {ckpt}: the checkpoint's {what.replace('_', ' ')} differs "
                                  f"from this config's env (env_kwargs {dict(cfg.env_kwargs)}); resume "
                                  "with the run's own env_kwargs (drop --env), or start a new run")
    finally:
        env.close()
    if cfg.normalize_obs or cfg.normalize_reward:
        check_resume_vecnormalize(ckpt)
    if origin is None:
        return
    run = load_run_config(origin)
    for key in ("hyperparams", "policy_kwargs", "policy", "model_class", "normalize_obs", "normalize_reward"):
        was, now = getattr(run, key), getattr(cfg, key)
        if isinstance(was, Mapping):
            diff = [k for k in sorted(set(was) | set(now)) if was.get(k) != now.get(k)]
            if not diff:
                continue
            k = diff[0]
            what = (f"{key}.{k} {repr(now[k]) if k in now else 'unset'} "
                    f"(the run has {repr(was[k]) if k in was else 'it unset'})")
        elif was != now:
            what = f"{key} {now!r} (the run has {was!r})"
        else:
            continue
        raise ConfigError(f"--resume {ckpt}: {what}: a resumed model keeps the settings it was saved "
                          f"with, so this would be ignored; drop the change (--set, --config), or start "
                          f"a new run from its weights: --init-from {ckpt}")
    # the world the run trains in, and (continuing in its own folder) the evaluation its
    # best_model.zip is chosen by. Was: accepted, and the run's config.yaml rewritten to claim the
    # new settings for the whole run (e.g. --env reward_scale=100 --seed 7 on a run that trained
    # its first part with 1 and 0); new evaluation seeds compared against the best score read
    # back from eval.csv, measured on the old ones, chose best_model.zip across two sets
    keys = [*_RESUME_WORLD_KEYS, *(_RESUME_EVAL_KEYS if same_folder else ())]
    was_d, now_d = run.to_dict(), cfg.to_dict()
    for key in keys:
        top, _, sub = key.partition(".")
        was = was_d.get(top, {}).get(sub) if sub else was_d.get(top)
        now = now_d.get(top, {}).get(sub) if sub else now_d.get(top)
        if was != now:
            flag = _RESUME_FLAGS.get(key, "--config")
            raise ConfigError(f"--resume {ckpt}: {key} {now!r} (the run has {was!r}): a resumed run goes on "
                              f"with the settings it trained{' and was evaluated' if sub else ''} with, and its "
                              f"config.yaml records them for the whole run; drop the change ({flag}, or leave out "
                              f"--config to resume with the run's own config.yaml), or start a new run from its "
                              f"weights: --init-from {ckpt}")


#: settings of the world a run trains in, which a resume keeps (:func:`check_resume`)
_RESUME_WORLD_KEYS = ("env_id", "env_kwargs", "seed", "worlds", "scenario_overrides", "reward_reference",
                      "pair_group", "pair_repeats", "pair_baseline")
#: settings of the evaluation that chooses best_model.zip, kept by a resume in the run's own folder
_RESUME_EVAL_KEYS = ("eval.seeds", "eval.scenarios", "eval.deterministic")
_RESUME_FLAGS = {"env_kwargs": "--env", "seed": "--seed", "eval.seeds": "--eval-seeds"}


def check_resume_vecnormalize(ckpt: Path) -> None:
    """The VecNormalize statistics a checkpoint of a normalising run resumes with: missing or
    damaged is a ConfigError naming the file. Was: missing (a run killed between saving the
    checkpoint and its statistics, or the pickle deleted) resumed silently with fresh statistics,
    so the policy got observations scaled unlike those it was trained on; damaged failed with the
    unpickler's message (e.g. "invalid literal for int()") naming no file."""
    vn = statistics_path(ckpt)
    if vn is None:
        want = statistics_candidates(ckpt)[0]
        good = sorted((saved_steps(c) or -1, c) for c in ckpt.parent.glob("*.zip")
                      if c != ckpt and zipfile.is_zipfile(c) and statistics_path(c) is not None)
        hint = f"; {good[-1][1]} has its statistics" if good else ""
        raise ConfigError(f"--resume {ckpt}: the run normalises observations or rewards (VecNormalize) and "
                          f"the checkpoint's statistics ({want}) are missing: the policy would get "
                          f"observations scaled unlike those it was trained on. Restore the file, or resume "
                          f"another checkpoint{hint}")
    try:
        read_statistics(vn)
    except ValueError as exc:
        raise ConfigError(f"--resume {ckpt}: its VecNormalize statistics {vn} {exc}; restore the file, or "
                          "resume another checkpoint") from None


# ---------------------------------------------------------------------------------------------
# the run
# ---------------------------------------------------------------------------------------------
def _dagger_phase(model: Any, cfg: TrainConfig, run_dir: Path, demos: str | None, eval_cb: Any,
                  data_root: str | None, say: Callable[[str], None]) -> list[dict[str, float]]:
    """DAgger on the argmax student (:mod:`aryl_gym.train.dagger`), from the best model so far;
    every round is scored by the run's evaluation (a row of ``eval.csv`` at the step count of
    the states collected so far) and may become ``best_model.zip``."""
    # callbacks imports stable_baselines3: imported when used
    from aryl_gym.train.callbacks import ArylEvalCallback

    best = run_dir / "best_model.zip"
    if best.is_file():
        model.set_parameters(str(best), exact_match=True, device="cpu")
        # the RL phase's best stays on disk whatever the rounds make best_model.zip
        shutil.copyfile(best, run_dir / "best_model_rl.zip")
        say(f"dagger: from {best.name} (kept as best_model_rl.zip)")
    if demos is None:  # init_from skips behaviour cloning: the configured or recorded demos
        if cfg.bc.demos:
            demos = cfg.bc.demos
        elif (run_dir / "demos.npz").is_file():
            demos = str(run_dir / "demos.npz")
    evaluate = None
    if eval_cb is not None:
        if getattr(eval_cb, "model", None) is None:
            eval_cb.init_callback(model)

        def evaluate(m: Any, steps: int) -> dict[str, float]:
            eval_cb.num_timesteps = steps
            return ArylEvalCallback.evaluate(eval_cb)  # synchronous, this model

    tic = time.perf_counter()
    rows = run_dagger(model, cfg, run_dir, demos, evaluate, data_root, say)
    say(f"dagger: {len(rows)} rounds in {time.perf_counter() - tic:.0f} s")
    if cfg.dagger.keep == "last" and rows and cfg.eval.save_best:
        unfinished = rows[-1].get("eval_jobs_unfinished", float("nan"))
        if unfinished == 0:  # evaluated, every job finished (NaN: not evaluated)
            model.save(best)
            say(f"dagger: the last round is {best.name} (keep: last)")
        elif not math.isnan(unfinished):
            say(f"dagger: the last round is not {best.name}: its evaluation left "
                f"{unfinished:g} jobs unfinished (model.zip holds it)")
    return rows


def train(
    cfg: TrainConfig,
    out: str | Path = "runs",
    resume: str | Path | None = None,
    args: dict[str, Any] | None = None,
    data_root: str | None = None,
    verbose: int = 1,
    progress: Callable[[str], None] | None = None,
) -> RunResult:
    """Train ``cfg`` (optionally from checkpoint ``resume``); return the run folder and figures."""
    # torch (the train extra): imported when used
    import torch

    say = progress or (lambda s: print(s, flush=True) if verbose else None)
    preflight(cfg, data_root, resume)  # a bad config fails here, before a run folder is made
    torch.set_num_threads(max(int(cfg.torch_threads), 1))
    ckpt = Path(resume) if resume else None
    if ckpt is not None and not ckpt.exists():
        raise ConfigError(f"--resume {ckpt}: file not found (give a checkpoint .zip)")
    run_dir = None
    origin = None  # the run a checkpoint came from
    if ckpt is not None:
        origin = checkpoint_run_dir(ckpt)
        run_dir, ck_steps = resume_plan(ckpt, int(cfg.total_timesteps))
        check_resume(cfg, ckpt, origin, data_root, same_folder=run_dir is not None)
        if run_dir is None and origin is not None:
            later = later_state(origin, ck_steps)
            run_dir = new_run_dir(cfg, origin.parent)
            say(f"{origin} went on to {later[-1][0]:,} steps ({later[-1][1].name}); resuming its "
                f"{ck_steps:,}-step checkpoint in a new run folder {run_dir} (the run is left as it was)")
            args = {**(args or {}), "resumed_from": str(ckpt)}
    if run_dir is None:
        run_dir = new_run_dir(cfg, out)
    # one process per run folder: two resumes of one run at once would write the same files
    with DirLock(run_dir, "run"):
        return _train_locked(cfg, run_dir, ckpt, origin, args, data_root, verbose, say)


def _train_locked(cfg: TrainConfig, run_dir: Path, ckpt: Path | None, origin: Path | None,
                  args: dict[str, Any] | None, data_root: str | None, verbose: int,
                  say: Callable[[str], None]) -> RunResult:
    # stable-baselines3 (the train extra, torch): imported when used
    from stable_baselines3.common.callbacks import CallbackList, CheckpointCallback
    from stable_baselines3.common.logger import configure
    from stable_baselines3.common.vec_env import VecNormalize

    # callbacks imports stable_baselines3: imported when used
    from aryl_gym.train.callbacks import (
        ArylEvalCallback,
        ClusterMetricsCallback,
        HParamsTextCallback,
    )

    write_run_files(run_dir, cfg, args or {})

    venv = make_vec_env(cfg, data_root)
    if ckpt is not None:
        vn_path = statistics_path(ckpt)
        if isinstance(venv, VecNormalize) and vn_path is not None:
            venv = VecNormalize.load(str(vn_path), venv.venv)
            venv.training = True
        model = model_class(cfg).load(str(ckpt), env=venv, device="cpu")
        if cfg.teacher.policy:
            model.teacher_kwargs = teacher_kwargs(cfg)
        say(f"resumed {ckpt} at {model.num_timesteps:,} steps")
    else:
        model = build_model(cfg, venv)
    formats = ["tensorboard", "csv"] + (["stdout"] if verbose >= 2 else [])
    model.set_logger(configure(str(run_dir / "tb"), formats))

    demos = cfg.bc.demos
    if cfg.init_from and ckpt is None:
        src = Path(cfg.init_from)
        if not src.is_file():
            raise ConfigError(f"init_from {src}: file not found (a model .zip, e.g. RUN/warm_start.zip)")
        try:
            model.set_parameters(str(src), exact_match=True, device="cpu")
        except (ValueError, RuntimeError, KeyError) as exc:
            raise ConfigError(
                f"init_from {src}: its weights do not fit this config's network ({exc}); "
                "use a model trained with the same algo, policy and env_kwargs"
            ) from exc
        say(f"init: weights from {src}; behaviour cloning skipped")
        model.save(run_dir / "warm_start.zip")
        demos = None
    elif demos is None and cfg.bc.policy and ckpt is None:
        demos = str(run_dir / "demos.npz")
        tic = time.perf_counter()
        rec = record_demos(cfg, cfg.bc.policy, cfg.bc.episodes, cfg.bc.seed, demos)
        say(f"bc: recorded {cfg.bc.episodes} episodes of {cfg.bc.policy} ({int(rec['steps']):,} "
            f"steps, avg JCT {rec['avg_jct']:,.0f} s) in {time.perf_counter() - tic:.0f} s")
    if demos and ckpt is None:
        stats = pretrain(model, demos, epochs=cfg.bc.epochs, batch_size=cfg.bc.batch_size,
                         learning_rate=cfg.bc.learning_rate, log=say)
        for k, v in stats.items():
            model.logger.record(f"bc/{k}", v)
        model.logger.dump(0)
        model.save(run_dir / "warm_start.zip")  # the step-0 policy, for comparisons with the RL phase
    if cfg.teacher.policy:
        mix = cfg.teacher.demos or demos
        own = (origin or run_dir) / "demos.npz"
        if mix is None and own.is_file():  # resumed: the run's own recording
            mix = str(own)
        if cfg.teacher.demos and not (is_minari_ref(cfg.teacher.demos) or Path(cfg.teacher.demos).is_file()):
            raise ConfigError(f"teacher.demos {cfg.teacher.demos}: file not found (an `aryl-gym demos` .npz)")
        model.teacher_kwargs["demos"] = mix
        if mix is None and cfg.teacher.demo_share > 0:
            say("teacher: no demonstrations to mix in (demo_share needs bc demos or teacher.demos)")

    callbacks: list[Any] = [ClusterMetricsCallback(), HParamsTextCallback(cfg.to_dict())]
    if cfg.max_minutes > 0:
        # callbacks imports stable_baselines3: imported when used
        from aryl_gym.train.callbacks import WallClockLimit

        callbacks.append(WallClockLimit(cfg.max_minutes))
    if cfg.critic_warmup_steps > 0:
        # callbacks imports stable_baselines3: imported when used
        from aryl_gym.train.callbacks import CriticWarmup

        callbacks.append(CriticWarmup(cfg.critic_warmup_steps))
    if cfg.checkpoint_freq > 0:
        callbacks.append(
            CheckpointCallback(
                save_freq=max(cfg.checkpoint_freq // cfg.n_envs, 1),
                save_path=str(run_dir / "checkpoints"),
                name_prefix="rl_model",
                save_vecnormalize=True,
            )
        )
    eval_cb = None
    if cfg.eval.freq > 0 and cfg.eval.seeds:
        eval_cls = ArylEvalCallback
        if cfg.eval.background:
            # async_eval imports stable_baselines3: imported when used
            from aryl_gym.train.async_eval import AsyncArylEvalCallback

            eval_cls = AsyncArylEvalCallback
        eval_cb = eval_cls(
            EnvFactory(cfg, data_root, evaluation=True),
            train_scenario(cfg),
            cfg.eval.seeds,
            cfg.eval.references,
            cfg.eval.freq,
            cfg.eval.deterministic,
            run_dir=run_dir,
            save_best=cfg.eval.save_best,
            data_root=data_root,
            eval_at_start=ckpt is None,
            verbose=verbose,
            extra=eval_sets(cfg, data_root),
        )
        callbacks.append(eval_cb)

    start_steps = int(model.num_timesteps)
    remaining = max(int(cfg.total_timesteps) - start_steps, 0)
    tic = time.perf_counter()
    if remaining > 0:
        restore = _sigterm_interrupts()
        try:
            model.learn(
                total_timesteps=remaining,
                callback=CallbackList(callbacks),
                log_interval=cfg.log_interval,
                reset_num_timesteps=ckpt is None,
            )
        except KeyboardInterrupt:  # Ctrl-C or SIGTERM: keep what was trained, say how to go on
            _save_interrupted(model, venv, run_dir, int(cfg.total_timesteps), eval_cb)
            raise
        except Exception:
            # an error mid-run (was: the steps since the last checkpoint were lost with it)
            if int(model.num_timesteps) > start_steps:
                try:
                    _save_interrupted(model, venv, run_dir, int(cfg.total_timesteps), eval_cb,
                                      "failed (the error follows)")
                except Exception:  # noqa: BLE001 - the run's own error is what is reported
                    pass
            raise
        finally:
            restore()
    wall = time.perf_counter() - tic
    if eval_cb is not None:
        if getattr(eval_cb, "model", None) is None:  # learn() never ran (no steps left to train)
            eval_cb.init_callback(model)
        eval_cb.finish(shutdown=False)  # evaluations still running in the background
        if not eval_cb.history or eval_cb.history[-1]["timesteps"] < model.num_timesteps:
            eval_cb.evaluate()  # a last point at the final step count
        eval_cb.finish()
    model_path = run_dir / "model.zip"
    model.save(model_path)
    steps = int(model.num_timesteps) - start_steps  # the RL phase's (DAgger's states come after)
    sps = steps / wall if wall > 0 else 0.0
    dagger_rows: list[dict[str, float]] = []
    if cfg.dagger.rounds > 0 and cfg.masked:
        dagger_rows = _dagger_phase(model, cfg, run_dir, demos, eval_cb, data_root, say)
        model.save(model_path)  # the final model is the last round's
    if isinstance(venv, VecNormalize):
        venv.save(str(run_dir / "vecnormalize.pkl"))
    summary = {
        "num_timesteps": int(model.num_timesteps),
        "trained_steps": steps,
        "wall_s": wall,
        "steps_per_s": sps,
        "eval": eval_cb.history if eval_cb is not None else [],
        "references": eval_cb.references if eval_cb is not None else {},
        "dagger": dagger_rows,
    }
    # strict JSON (was: NaN for an evaluation with no finished job, which strict parsers
    # refuse): a figure that is not finite is null
    (run_dir / "summary.json").write_text(strict_json(summary, indent=2) + "\n")
    if eval_cb is not None and eval_cb.history:
        try:
            # an optional dependency: its absence is handled here
            from aryl_gym.train.curve import plot_learning_curve

            plot_learning_curve(run_dir)
        except ImportError:
            say("learning_curve.png skipped: matplotlib is not installed")
    venv.close()
    say(f"trained {steps:,} steps in {wall:.0f} s ({sps:,.0f} steps/s); run folder {run_dir}")
    return RunResult(run_dir, model_path, int(model.num_timesteps), wall, sps,
                     eval_cb.history if eval_cb is not None else [])
