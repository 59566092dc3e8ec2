"""``aryl-gym train``: train an SB3 agent (PPO, MaskablePPO, ...) on a scenario (SPEC 7).

Hyperparameters come from ``configs/algos/NAME.yaml`` keyed by scenario; command-line options
override them. Needs the ``train`` extra (torch, stable-baselines3, sb3-contrib, tensorboard).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from aryl_gym.commands._common import (
    add_data_root_arg,
    nonneg_int,
    out_arg,
    positive_int,
    seed_arg,
    seeds_arg,
)

NAME = "train"
HELP = "train a learned agent with stable-baselines3 or RLlib (run folder, TensorBoard, checkpoints)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", default=None,
                   help="algorithm YAML (configs/algos/NAME.yaml) or its NAME, e.g. maskable_ppo")
    p.add_argument("--scenario", default=None, help="scenario name or YAML path (default testbed)")
    add_data_root_arg(p)
    p.add_argument("--timesteps", type=positive_int, default=None, help="total environment steps of the run (overrides the config); with --resume "
                        "the run's total counted from its start, not extra steps: a checkpoint at "
                        "40000 steps with --timesteps 100000 trains 60000 more")
    p.add_argument("--seed", type=seed_arg, default=None, help="training seed (env i starts at seed + i)")
    p.add_argument("--out", type=out_arg, default="runs", help="parent folder of run folders (default runs/)")
    p.add_argument("--n-envs", type=positive_int, default=None, help="parallel envs (overrides the config)")
    p.add_argument("--vec-env", choices=("dummy", "subproc"), default=None)
    p.add_argument("--resume", default=None, metavar="CKPT",
                   help="checkpoint .zip to continue from (keeps its step count; continues in its run "
                        "folder, or in a new one when the run already went further)")
    p.add_argument("--bc-demos", default=None, metavar="FILE",
                   help="demonstrations for a behaviour-cloning warm start: an .npz (aryl-gym demos) "
                        "or a Minari dataset, minari:ID (aryl-gym demos --format minari)")
    p.add_argument("--bc-any-scenario", action="store_true", default=None,
                   help="clone --bc-demos recorded in another scenario than the run's (by default "
                        "demonstrations whose stored scenario hash differs are refused)")
    p.add_argument("--init-from", default=None, metavar="MODEL",
                   help="start from this model's weights (e.g. a run's warm_start.zip) instead of BC")
    p.add_argument("--bc-epochs", type=nonneg_int, default=None, help="behaviour-cloning epochs")
    p.add_argument("--eval-freq", type=nonneg_int, default=None, help="env steps between evaluations (0 = off)")
    p.add_argument("--eval-seeds", type=seeds_arg, default=None, help="held-out evaluation seeds, e.g. 1000-1004")
    p.add_argument("--checkpoint-freq", type=nonneg_int, default=None, help="env steps between checkpoints (0 = off)")
    p.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                   help="override an env keyword argument, e.g. --env window=8 (YAML value)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a hyperparameter, e.g. --set learning_rate=1e-4 (YAML value)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.add_argument("--verbose", action="store_true", help="also print SB3's log table")
    p.add_argument("--json", action="store_true", help='print {"run_dir": ...} as one JSON object')
    p.add_argument("--backend", choices=("sb3", "rllib"), default="sb3",
                   help="sb3 (default): stable-baselines3 in this process; rllib: RLlib's PPO "
                        "with env runners on Ray (the rllib extra; docs/training.md)")
    p.add_argument("--num-env-runners", type=nonneg_int, default=None, metavar="N",
                   help="--backend rllib: env runner processes (default: the Ray cluster's CPUs "
                        "minus one; 0 samples in this process); RAY_ADDRESS names the cluster")


def build_config(args: argparse.Namespace):
    # at run time: aryl-gym imports every command module to build its parser
    from aryl_gym.config import ConfigError
    from aryl_gym.fileio import load_yaml_value

    # runner imports pydantic: only when a config is validated
    from aryl_gym.train.runner import checkpoint_run_dir, load_run_config

    overrides: dict = {
        "total_timesteps": args.timesteps,
        "seed": args.seed,
        "n_envs": args.n_envs,
        "vec_env": args.vec_env,
        "checkpoint_freq": args.checkpoint_freq,
        "init_from": str(Path(args.init_from)) if args.init_from else None,
    }
    ev: dict = {}
    if args.eval_freq is not None:
        ev["freq"] = args.eval_freq
    if args.eval_seeds:
        ev["seeds"] = list(args.eval_seeds)
    if ev:
        overrides["eval"] = ev
    bc: dict = {}
    if args.bc_demos:
        # a Minari dataset id stays as written (it is no file path)
        bc["demos"] = args.bc_demos if args.bc_demos.startswith("minari:") else str(Path(args.bc_demos))
    if args.bc_epochs is not None:
        bc["epochs"] = args.bc_epochs
    if args.bc_any_scenario:
        bc["any_scenario"] = True
    if bc:
        overrides["bc"] = bc
    for opt, key in (("set", "hyperparams"), ("env", "env_kwargs")):
        kv: dict = {}
        for item in getattr(args, opt):
            if "=" not in item:
                raise ConfigError(f"--{opt} {item!r}: expected KEY=VALUE")
            k, v = item.split("=", 1)
            if k.strip() in kv:  # was: the later value replaced the earlier silently
                raise ConfigError(f"--{opt} {k.strip()}=...: the key is given twice; give each key once")
            kv[k.strip()] = load_yaml_value(v)  # as in the YAML files: 1e-4 is a number
        if kv:
            overrides[key] = kv
    if args.resume and not Path(args.resume).exists():
        raise ConfigError(f"--resume {args.resume}: file not found (give a checkpoint .zip)")
    cfg: Any = _config_of(args, overrides)
    if args.resume:
        run_dir = checkpoint_run_dir(Path(args.resume))
        if run_dir is not None:
            run_scen = load_run_config(run_dir).scenario
            asked = args.scenario if args.scenario is not None else cfg.scenario
            if asked != run_scen:
                # was: the run went on in the same folder on another scenario (its eval.csv and
                # best model mixing both), or --scenario was ignored without a word
                raise ConfigError(f"--resume: the run {run_dir} trains on {run_scen!r}, not {asked!r}; resume it "
                                  f"on {run_scen} (--scenario {run_scen}, or leave out --config and --scenario), or fork a new "
                                  f"run: --init-from {args.resume} "
                                  f"with --scenario {asked}")
    return cfg


def _config_of(args: argparse.Namespace, overrides: dict) -> object:
    """The run's config: ``--config`` with the overrides, or a resumed run's own."""
    # at run time: aryl-gym imports every command module to build its parser
    from aryl_gym.config import ConfigError

    # config imports pydantic: only when a config is validated
    from aryl_gym.train.config import load_train_config

    # runner imports pydantic: only when a config is validated
    from aryl_gym.train.runner import checkpoint_run_dir, load_run_config

    if args.config is None:
        if not args.resume:
            raise ConfigError("give --config configs/algos/NAME.yaml (or --resume a checkpoint of a run)")
        run_dir = checkpoint_run_dir(Path(args.resume))
        if run_dir is None:
            raise ConfigError(f"--resume {args.resume}: no config.yaml in its run folder; also give --config")
        # config imports pydantic: only when a config is validated
        from aryl_gym.train.config import _merge, config_from_run_dict

        base = load_run_config(run_dir).to_dict()
        merged = _merge(base, {k: v for k, v in overrides.items() if v is not None})
        return config_from_run_dict(merged, str(run_dir / "config.yaml"))
    return load_train_config(args.config, scenario=args.scenario, overrides=overrides)


#: options of the SB3 path that the RLlib backend does not take
_SB3_ONLY = (("vec_env", "--vec-env"), ("bc_demos", "--bc-demos"), ("init_from", "--init-from"),
             ("bc_epochs", "--bc-epochs"), ("bc_any_scenario", "--bc-any-scenario"))


def run_rllib(args: argparse.Namespace) -> int:
    """``--backend rllib``: :func:`aryl_gym.train.rllib_backend.train_rllib`."""
    given = [flag for key, flag in _SB3_ONLY if getattr(args, key, None) is not None]
    if given:
        print(f"aryl-gym train: error: {', '.join(given)} belong to the SB3 backend; "
              "--backend rllib does not take them", file=sys.stderr)
        return 2
    # at run time: aryl-gym imports every command module to build its parser
    from aryl_gym.extras import rllib_unavailable

    why = rllib_unavailable()
    if why:  # before any work
        print(f"aryl-gym train: error: {why}", file=sys.stderr)
        return 2
    # rllib_backend imports pydantic (the config); ray and torch only once a run starts
    from aryl_gym.train.rllib_backend import train_rllib
    cfg = build_config(args)
    res = train_rllib(
        cfg,
        out=args.out,
        num_env_runners=args.num_env_runners,
        resume=args.resume,
        args={k: v for k, v in vars(args).items() if not k.startswith("_")},
        data_root=args.data_root,
        verbose=0 if args.quiet else (2 if args.verbose else 1),
    )
    print(json.dumps({"run_dir": str(res.run_dir)}) if args.json else res.run_dir)
    return 0


def run(args: argparse.Namespace) -> int:
    if getattr(args, "backend", "sb3") == "rllib":
        return run_rllib(args)
    if getattr(args, "num_env_runners", None) is not None:
        print("aryl-gym train: error: --num-env-runners needs --backend rllib", file=sys.stderr)
        return 2
    # at run time: aryl-gym imports every command module to build its parser
    from aryl_gym.extras import install_hint, missing_modules

    miss = missing_modules()
    if miss:  # before any work (a missing extra is otherwise found deep in the run)
        print(f"aryl-gym train: error: training needs {', '.join(miss)}: {install_hint('train')}",
              file=sys.stderr)
        return 2
    # runner imports pydantic: only when a config is validated
    from aryl_gym.train.runner import train
    cfg = build_config(args)
    res = train(
        cfg,
        out=args.out,
        resume=args.resume,
        args={k: v for k, v in vars(args).items() if not k.startswith("_")},
        data_root=args.data_root,
        verbose=0 if args.quiet else (2 if args.verbose else 1),
    )
    if args.json:
        print(json.dumps({"run_dir": str(res.run_dir)}))
        return 0
    print(res.run_dir)
    return 0
