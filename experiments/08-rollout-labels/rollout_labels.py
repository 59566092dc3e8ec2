#!/usr/bin/env python3
"""Rollout labels for a learned agent, and a fine-tune towards them (labels.py).

    # label the argmax policy's unsure states by simulation (training worlds, fresh seeds)
    python experiments/08-rollout-labels/rollout_labels.py collect --agent ppo-v1-kickstart --seeds 40001-40060 --out /tmp/labels.npz
    # train towards the labels, with self-distilled anchor states (e.g. a run's DAgger aggregate)
    python experiments/08-rollout-labels/rollout_labels.py finetune --agent ppo-v1-kickstart --labels /tmp/labels.npz \\
        --anchors RUN/dagger/aggregate.npz --out /tmp/ppo-rl.zip
    # the control: the same training with no relabelling
    python experiments/08-rollout-labels/rollout_labels.py finetune ... --margin inf --out /tmp/ppo-ctrl.zip

``collect`` plays each seed in the agent's training env (its config's worlds, no reward
wrappers) and rewrites ``--out`` after every episode. ``finetune`` writes ``OUT`` (a model zip)
and ``OUT``'s config beside it (``.yaml``), so ``scripts/eval_v1.py --agent LABEL=OUT`` plays it
(add ``--undeployed LABEL`` for the raw policy). The log: README.md beside this file.
"""

from __future__ import annotations

import argparse
import math
import shutil
import sys
from pathlib import Path


def _positive(kind: type, name: str):  # noqa: ANN202
    def parse(text: str):  # noqa: ANN202
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a {kind.__name__}, got {text!r}") from None
        if not v > 0:
            raise argparse.ArgumentTypeError(f"{name} must be > 0, got {text!r}")
        return v

    return parse


def _agent_env(agent) -> object:  # noqa: ANN001
    from aryl_gym.train.dagger import RolloutEnvFactory

    try:  # the training worlds, no reward wrappers
        return RolloutEnvFactory.for_agent(agent)()
    except ValueError as exc:
        raise SystemExit(f"{exc}; rollout labels play the agent's training worlds") from None


def _check_npz(ap: argparse.ArgumentParser, flag: str, path: Path, keys: tuple[str, ...]) -> None:
    import numpy as np

    if not path.is_file():
        ap.error(f"{flag} {path}: no such file")
    try:
        files = set(np.load(path, allow_pickle=False).files)
    except (OSError, ValueError) as exc:
        ap.error(f"{flag} {path}: not a readable .npz ({exc})")
    missing = [k for k in keys if k not in files]
    if missing or not any(f.startswith("obs/") for f in files):
        ap.error(f"{flag} {path}: arrays {missing or ['obs/KEY']} missing "
                 f"({'write it with `rollout_labels.py collect`' if flag == '--labels' else 'a demonstrations layout: obs/KEY, actions, masks'})")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect", help="label the agent's unsure states by simulation")
    c.add_argument("--agent", default="ppo-v1-kickstart", help="a shipped name or a model path")
    c.add_argument("--seeds", required=True, help="episode seeds, e.g. 40001-40060 (fresh ones)")
    c.add_argument("--out", required=True, type=Path)
    c.add_argument("--threshold", type=float, default=0.8, help="probe states whose top probability is below this")
    c.add_argument("--min-prob", type=float, default=0.05, help="alternatives need at least this probability")
    c.add_argument("--alternatives", type=_positive(int, "--alternatives"), default=2)
    c.add_argument("--probe-share", type=float, default=0.3, help="share of the unsure states probed")
    c.add_argument("--batch", type=_positive(int, "--batch"), default=64)
    c.add_argument("--futures", type=int, default=0,
                   help="fresh futures per compared action (0: hindsight, the episode's own future)")
    c.add_argument("--horizon-h", type=_positive(float, "--horizon-h"), default=None,
                   help="with --futures: stop the branches this many simulated hours after the probed state")
    c.add_argument("--rng-seed", type=int, default=0)
    f = sub.add_parser("finetune", help="train the agent towards rollout labels")
    f.add_argument("--agent", default="ppo-v1-kickstart")
    f.add_argument("--labels", nargs="+", required=True, type=Path)
    f.add_argument("--anchors", required=True, type=Path,
                   help="states (.npz, the demonstrations layout) relabelled with the agent's own argmax")
    f.add_argument("--out", required=True, type=Path, help="the fine-tuned model (.zip)")
    f.add_argument("--margin", type=float, default=0.0,
                   help="relabel only where the label beat the agent's action by more (reward units); inf: control")
    f.add_argument("--min-t", type=float, default=0.0,
                   help="relabel only where gain / gain_se exceeds this (labels collected with --futures)")
    f.add_argument("--repeat", type=_positive(int, "--repeat"), default=20)
    f.add_argument("--epochs", type=_positive(int, "--epochs"), default=3)
    f.add_argument("--lr", type=_positive(float, "--lr"), default=1e-4)
    f.add_argument("--seed", type=int, default=0, help="torch seed of the fine-tune")
    a = ap.parse_args(argv)

    import torch as th

    from aryl_gym.errors import ConfigError

    th.set_num_threads(1)
    try:
        return _run(ap, a)
    except (ConfigError, ValueError) as exc:
        ap.error(str(exc))


def _run(ap: argparse.ArgumentParser, a: argparse.Namespace) -> int:
    from aryl_gym.agents.learned import load_agent, resolve_agent_path
    from labels import (
        LabelSettings,
        collect_rollout_labels,
        finetune_on_labels,
    )

    from aryl_gym.commands._common import seeds_arg

    agent = load_agent(a.agent)
    if a.cmd == "collect":
        try:
            seeds = seeds_arg(a.seeds)
            settings = LabelSettings(threshold=a.threshold, min_prob=a.min_prob, alternatives=a.alternatives,
                                     probe_share=a.probe_share, batch=a.batch, futures=a.futures,
                                     horizon_h=a.horizon_h)
        except (ValueError, argparse.ArgumentTypeError) as exc:
            ap.error(str(exc))
        a.out.parent.mkdir(parents=True, exist_ok=True)
        env = _agent_env(agent)
        tot = collect_rollout_labels(agent.model, env, seeds, a.out, settings, a.rng_seed,
                                     log=lambda s: print(s, file=sys.stderr, flush=True))
        print(f"{int(tot.get('probes', 0))} probed states, {int(tot.get('switched', 0))} relabelled, "
              f"{int(tot.get('branch_steps', 0)):,} branch steps -> {a.out}")
        return 0
    if math.isnan(a.margin):
        ap.error("--margin must be a number or inf")
    if not math.isfinite(a.min_t) or a.min_t < 0:
        ap.error(f"--min-t must be a finite number >= 0, got {a.min_t}")
    for p in a.labels:
        _check_npz(ap, "--labels", p, ("actions", "masks", "own", "gain"))
    _check_npz(ap, "--anchors", a.anchors, ("actions", "masks"))
    if a.out.suffix != ".zip":
        ap.error(f"--out {a.out}: give a .zip path (the model; its config goes beside it as .yaml)")

    import torch as th

    th.manual_seed(a.seed)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    fit = finetune_on_labels(agent.model, a.labels, a.anchors, a.out.with_suffix(".train.npz"), margin=a.margin,
                             min_t=a.min_t, repeat=a.repeat, epochs=a.epochs, learning_rate=a.lr,
                             log=lambda s: print(s, file=sys.stderr, flush=True))
    agent.model.save(a.out)
    _, cfg, _ = resolve_agent_path(a.agent)
    if cfg is not None:
        shutil.copyfile(cfg, a.out.with_suffix(".yaml"))
    print(f"{int(fit['relabelled'])} of {int(fit['probed'])} probed states relabelled; afterwards the model "
          f"takes {fit['relabelled_taken']:.3f} of those labels; accuracy {fit['accuracy']:.3f} -> {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
