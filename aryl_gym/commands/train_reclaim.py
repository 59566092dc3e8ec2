"""``aryl-gym train-reclaim``: train the learned reclaim agent (imitation of the exact optimum
with DAgger; :mod:`aryl_gym.train.reclaim_agent`).

One command, one core, deterministic per seed. The defaults are the recipe of the shipped
``reclaim-v1`` (agents/pretrained/reclaim-v1.md)::

    aryl-gym train-reclaim --out runs/reclaim-v1

writes ``runs/reclaim-v1/reclaim-agent.npz`` (weights and training record, loadable with
``--agent NAME=runs/reclaim-v1/reclaim-agent.npz`` on the ``reclaim`` leaderboard suite),
``curve.csv``, ``curve.png`` and ``config.json``. Training events never include the suite's
(basic seeds 0-2, production seed 0, synthetic seed 0): such seeds are refused.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from aryl_gym.commands._common import (
    add_data_root_arg,
    nonneg_int,
    out_arg,
    positive_int,
    seed_arg,
    seeds_arg,
    strict_json,
)

NAME = "train-reclaim"
HELP = "train the learned reclaim agent (DAgger on the exact optimum) for the reclaim suite"


def events_arg(text: str) -> tuple[str, tuple[int, ...]] | None:
    """``SCENARIO:SEEDS`` (``basic:100-119``), or ``none``."""
    if text.strip().lower() == "none":
        return None
    if ":" not in text:
        raise argparse.ArgumentTypeError(f"expected SCENARIO:SEEDS such as basic:100-119 (or none), got {text!r}")
    sc, seeds = text.rsplit(":", 1)
    if not sc.strip():
        raise argparse.ArgumentTypeError(f"missing scenario name in {text!r}")
    return sc.strip(), tuple(seeds_arg(seeds))


def servers_arg(text: str) -> tuple[int, int]:
    """``MIN-MAX`` loaned servers, e.g. 20-200."""
    try:
        a, b = (int(x) for x in text.split("-", 1))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected MIN-MAX such as 20-200, got {text!r}") from None
    if not 2 <= a <= b <= 400:
        raise argparse.ArgumentTypeError(f"need 2 <= MIN <= MAX <= 400, got {text!r}")
    return a, b


def share_arg(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number in [0, 1], got {text!r}") from None
    if not 0.0 <= v <= 1.0:
        raise argparse.ArgumentTypeError(f"must be a number in [0, 1], got {text!r}")
    return v


def positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number > 0, got {text!r}") from None
    if not v > 0 or v != v or v == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text!r}")
    return v


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", type=out_arg, default=None, help="run folder (default runs/reclaim-agent-seedN)")
    p.add_argument("--overwrite", action="store_true", help="replace the weights of an earlier run in --out")
    p.add_argument("--seed", type=seed_arg, default=0, help="training seed (data order, DAgger draws, weights)")
    p.add_argument("--events", action="append", type=events_arg, default=None, metavar="SCENARIO:SEEDS",
                   help="reclaim events of these episodes under Aryl (repeatable; default basic:100-119 "
                        "and production:100-103; 'none' for synthetic events only)")
    p.add_argument("--synthetic", type=nonneg_int, default=None, help="synthetic training events (default 600)")
    p.add_argument("--synthetic-seed", type=seed_arg, default=None, help="seed of the synthetic events (default 1)")
    p.add_argument("--synthetic-servers", type=servers_arg, default=None, metavar="MIN-MAX",
                   help="loaned servers of the synthetic events (default 20-200)")
    p.add_argument("--elastic", type=share_arg, default=None, help="elastic share of synthetic jobs (default 0.5)")
    p.add_argument("--val-events", action="append", type=events_arg, default=None, metavar="SCENARIO:SEEDS",
                   help="validation events (default basic:300-302 and production:300)")
    p.add_argument("--val-synthetic", type=nonneg_int, default=None, help="synthetic validation events (default 80)")
    p.add_argument("--val-synthetic-seed", type=seed_arg, default=None, help="their seed (default 5000)")
    p.add_argument("--rounds", type=positive_int, default=None,
                   help="rounds: the teacher's, then DAgger's (default 6)")
    p.add_argument("--epochs", type=positive_int, default=None, help="passes over the data per round (default 4)")
    p.add_argument("--final-epochs", type=positive_int, default=None, help="passes in the last round (default 8)")
    p.add_argument("--hidden", type=positive_int, default=None, help="hidden width of the scorer (default 64)")
    p.add_argument("--lr", type=positive_float, default=None, help="Adam learning rate (default 1e-3)")
    p.add_argument("--batch", type=positive_int, default=None, help="states per batch (default 64)")
    p.add_argument("--states-per-event", type=positive_int, default=None,
                   help="states kept per event and round (default 12)")
    p.add_argument("--milp-time-limit", type=positive_float, default=None,
                   help="seconds HiGHS may take per teacher solve (default 120)")
    p.add_argument("--threads", type=positive_int, default=None, help="torch threads (default 1: one core)")
    p.add_argument("--cache", type=out_arg, default=None, metavar="DIR",
                   help="folder of recorded events (SCENARIO-seedN.npz; default OUT/snapshots)")
    add_data_root_arg(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")


#: what a run writes into its --out
OUTPUT_FILES = ("reclaim-agent.npz", "config.json", "curve.csv", "curve.png")


def build_config(args: argparse.Namespace):
    # reclaim_agent imports torch: only when a run starts
    from aryl_gym.train.reclaim_agent import ReclaimTrainConfig

    kw: dict = {}
    for opt, key in (("seed", "seed"), ("synthetic", "synthetic"), ("synthetic_seed", "synthetic_seed"),
                     ("synthetic_servers", "synthetic_servers"), ("elastic", "elastic"),
                     ("val_synthetic", "val_synthetic"), ("val_synthetic_seed", "val_synthetic_seed"),
                     ("rounds", "rounds"), ("epochs", "epochs"), ("final_epochs", "final_epochs"),
                     ("hidden", "hidden"), ("lr", "lr"), ("batch", "batch"),
                     ("states_per_event", "states_per_event"), ("milp_time_limit", "milp_time_limit"),
                     ("threads", "threads")):
        v = getattr(args, opt)
        if v is not None:
            kw[key] = v
    for opt, key in (("events", "scenarios"), ("val_events", "val_scenarios")):
        items = getattr(args, opt)
        if items is not None:
            if any(i is None for i in items) and len(items) > 1:
                raise ValueError(f"--{opt.replace('_', '-')} none cannot be combined with other events")
            kw[key] = tuple(i for i in items if i is not None)
    return ReclaimTrainConfig(**kw).check()


def run(args: argparse.Namespace) -> int:
    # at run time: aryl-gym imports every command module to build its parser
    from aryl_gym.extras import install_hint, missing_modules

    if missing_modules(("torch",)):
        print(f"aryl-gym {NAME}: error: training needs torch: {install_hint('train')}", file=sys.stderr)
        return 2
    cfg = build_config(args)
    out = Path(args.out) if args.out else Path("runs") / f"reclaim-agent-seed{cfg.seed}"
    # was: only reclaim-agent.npz was checked, so config.json and curve.csv of any folder (another
    # run's, or another command's results) were replaced without a word
    # at run time: aryl-gym imports every command module to build its parser
    from aryl_gym.fileio import DirLock, check_out_folder, claim_folder

    # a folder of the user's (--out ~ holding a config.json) is refused, not offered --overwrite
    check_out_folder(out, NAME)
    held = [n for n in OUTPUT_FILES if (out / n).exists()]
    if held and not args.overwrite:
        raise ValueError(f"--out {out}: holds {', '.join(held)}; pass --overwrite to replace them, or choose "
                         "another --out")
    # at run time: aryl-gym imports every command module to build its parser
    from aryl_gym.leaderboard.runner import prepare_out_dir
    from aryl_gym.train.reclaim_agent import _pct, train_reclaim_agent  # torch: not at CLI start-up

    with DirLock(prepare_out_dir(out)):  # one run per folder, never another command's folder
        claim_folder(out, NAME)
        res = train_reclaim_agent(cfg, out, cache_dir=args.cache, data_root=args.data_root,
                                  progress=not args.no_progress)
    best = res.curve[res.best_round]
    if args.json:
        print(strict_json({"run_dir": str(res.out_dir), "weights": str(res.weights), "selected_round": res.best_round,
                           "val_gap": best["val_gap"], "wall_s": res.wall_s, "cpu_s": res.cpu_s}))
        return 0
    print(f"weights        {res.weights}")
    print(f"selected round {res.best_round}: validation gap {_pct(best['val_gap'])} "
          f"(Aryl's rule {_pct(best['val_aryl_gap'])})")
    print(f"time           {res.wall_s:.0f} s wall, {res.cpu_s:.0f} s CPU")
    print(f"use it         aryl-gym leaderboard --suite reclaim --agent mine={res.weights}")
    return 0
