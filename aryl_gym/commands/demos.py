"""``aryl-gym demos``: record a reference policy acting through the env, for imitation learning.

``--format minari`` writes a Minari dataset instead (:mod:`aryl_gym.offline`: id
``aryl_gym/{scenario}/{policy}-v0`` unless ``--dataset-id``, under ``--minari-path`` or
``$MINARI_DATASETS_PATH``), which ``--bc-demos minari:ID`` reads back. The default ``--format
npz`` writes one ``.npz`` with, per env step: ``obs_<key>`` for every observation key, ``actions``,
``masks`` (the boolean action mask the policy saw), ``rewards``, ``episode`` (index),
``terminated`` and ``truncated``; plus ``episode_seeds``, ``policy``/``scenario``/
``action_mode``/``env_id``/``label`` strings, ``window``, ``config_hash`` (of the resolved
scenario, stored as a shipped name or an absolute path) and ``decisions_not_expressed``. The
policy decides on the simulator's full state (:class:`aryl_gym.envs.predict.HeuristicPredictor`);
the env uses that policy's loaning, placement and reclaim settings.

**Played through the env, not the native episode.** The policy acts through the env's action
space and reaches only the jobs in its window (``--window``, default 16): its decisions about
jobs outside it are dropped (``decisions_not_expressed`` counts them). The recording is labelled
``POLICY played through ENV (MODE actions, window W)``; only with a window at least as large as
the number of active (queued and running) jobs, in the sequential mode, is it the policy's
native episode (``decisions_not_expressed`` 0; ``--window 64`` on ``tiny``).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import tempfile
from pathlib import Path

import gymnasium as gym
import numpy as np

from aryl_gym.commands._common import (
    MAX_SEEDS,
    add_json_arg,
    add_scenario_args,
    check_seed_range,
    out_arg,
    positive_int,
    seed_arg,
)
from aryl_gym.config import SIZE_OVERRIDE_ENV, size_limits_lifted
from aryl_gym.envs import DEFAULT_ENV_ID
from aryl_gym.rollout import Step, play

NAME = "demos"
HELP = ("record observations, actions and masks of a reference policy played through the env (it sees "
        "only the jobs of its --window: only a window at least as large as the queue gives its native episode)")


def author_arg(text: str) -> str:
    """A ``--author`` name: not empty or blank (was: ``--author ''`` wrote a dataset whose
    author was an empty string)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty; give the dataset author's name, or leave the option "
                                         "out (default aryl-gym)")
    return text


def episodes_arg(text: str) -> int:
    """``--episodes``: an integer from 1 to ``MAX_SEEDS`` (each episode plays its own seed, and
    one run takes at most that many seeds, as ``--seeds`` does elsewhere). Was: no bound, so a
    typo such as ``--episodes 1e12`` started recording every episode in memory, for ever.
    ``ARYL_GYM_ALLOW_HUGE=1`` lifts the bound, as it lifts the other size limits."""
    v = positive_int(text)
    if v > MAX_SEEDS and not size_limits_lifted():
        raise argparse.ArgumentTypeError(
            f"{v:,} episodes: at most {MAX_SEEDS:,} per run (each episode plays its own seed, and a run "
            "takes at most that many seeds; every step is kept in memory until the file is written); "
            f"check the value, record in several runs with other --seed values, or set {SIZE_OVERRIDE_ENV}=1")
    return v


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_scenario_args(p)
    p.add_argument("--policy", default="aryl", help="reference policy (see `aryl-gym policies`)")
    p.add_argument("--episodes", type=episodes_arg, default=1,
                   help=f"episodes to record (1 to {MAX_SEEDS:,})")
    p.add_argument("--seed", type=seed_arg, default=0, help="episode seeds are seed, seed+1, ...")
    p.add_argument("--action-mode", default="sequential", choices=["sequential", "targets", "priority"])
    p.add_argument("--window", type=positive_int, default=16,
                   help="jobs the env shows the policy (default 16); the recording is the policy's native "
                        "episode only when the window is at least as large as the number of active jobs "
                        "(e.g. 64 on tiny); the window is recorded in the output and its label")
    p.add_argument("--format", choices=("npz", "minari"), default="npz",
                   help="npz: one .npz file (--out); minari: a Minari dataset (the offline extra)")
    p.add_argument("--out", type=out_arg, default=None, help="output .npz file (.npz is added when missing; --format npz)")
    p.add_argument("--dataset-id", default=None, metavar="ID",
                   help="Minari dataset id (default aryl_gym/SCENARIO/POLICY-v0)")
    p.add_argument("--minari-path", type=out_arg, default=None, metavar="DIR",  # was: '' = the current folder
                   help="Minari datasets folder (default $MINARI_DATASETS_PATH, else ~/.minari/datasets)")
    p.add_argument("--author", type=author_arg, default="aryl-gym",
                   help="the dataset's author (Minari metadata; not empty)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output (the --out file, or a Minari dataset of that id)")
    add_json_arg(p)


def record(scenario: str, policy: str, episodes: int, seed: int, action_mode: str, window: int,
           data_root: str | None = None) -> dict[str, np.ndarray]:
    """Run ``episodes`` episodes and return the arrays that :func:`run` saves."""

    # at run time: aryl-gym imports every command module to build its parser
    from aryl_gym.envs.predict import HeuristicPredictor, policy_env_kwargs
    from aryl_gym.offline import played_label, scenario_hash, scenario_ref

    scenario = scenario_ref(scenario)  # a path as an absolute path: found from any folder
    env = gym.make(
        DEFAULT_ENV_ID,
        scenario=scenario,
        action_mode=action_mode,
        window=window,
        data_root=data_root,
        **policy_env_kwargs(policy),
    )
    agent = HeuristicPredictor(policy, env)
    obs_log: dict[str, list[np.ndarray]] = {}
    actions, masks, rewards, ep_idx, terms, truncs = [], [], [], [], [], []
    episode = 0

    def keep(st: Step) -> None:
        for k, v in st.obs.items():
            obs_log.setdefault(k, []).append(v)
        actions.append(np.asarray(st.action))
        masks.append(np.asarray(st.mask))
        rewards.append(st.reward)
        ep_idx.append(episode)
        terms.append(st.terminated)
        truncs.append(st.truncated)

    for episode in range(episodes):
        play(agent, env, options={"episode_seed": seed + episode}, on_step=keep, masks=True)
    env.close()
    out = {f"obs_{k}": np.stack(v) for k, v in obs_log.items()}
    out.update(
        actions=np.stack(actions),
        masks=np.stack(masks),
        rewards=np.asarray(rewards, dtype=np.float32),
        episode=np.asarray(ep_idx, dtype=np.int64),
        terminated=np.asarray(terms),
        truncated=np.asarray(truncs),
        episode_seeds=np.arange(seed, seed + episodes),
        policy=np.asarray(policy),
        scenario=np.asarray(str(scenario)),
        config_hash=np.asarray(scenario_hash(scenario)),
        action_mode=np.asarray(action_mode),
        env_id=np.asarray(DEFAULT_ENV_ID),
        window=np.asarray(int(window)),
        label=np.asarray(played_label(policy, DEFAULT_ENV_ID, action_mode, window)),
        decisions_not_expressed=np.asarray(int(agent.skipped)),
    )
    return out


def output_path(text: str) -> Path:
    """The file ``np.savez`` writes for ``--out text`` (it appends ``.npz`` when missing)."""
    out = Path(text)
    if out.is_dir():  # was: written beside it as FOLDER.npz
        raise ValueError(f"--out {text}: is a folder; give a file name such as {out / 'demos.npz'}")
    if out.suffix != ".npz":
        out = out.with_name(out.name + ".npz")
    if out.is_dir():
        raise ValueError(f"--out {text}: {out} is a folder; give a file name such as demos.npz")
    return out


def run_minari(args: argparse.Namespace) -> int:
    """``--format minari``: write the episodes as a Minari dataset."""
    # at run time: minari (the offline extra) is imported by the writer
    from aryl_gym.offline import (
        check_dataset_id,
        datasets_path,
        default_dataset_id,
        summary,
        write_dataset,
    )

    if args.out is not None:
        raise ValueError("--out is for --format npz; a Minari dataset is named by --dataset-id "
                         "and stored under --minari-path (or $MINARI_DATASETS_PATH)")
    # was: --dataset-id '' silently recorded under the default id
    dataset_id = check_dataset_id(args.dataset_id if args.dataset_id is not None
                                  else default_dataset_id(args.scenario, args.policy))
    with datasets_path(args.minari_path):
        ds = write_dataset(dataset_id, args.scenario, args.policy, args.episodes, args.seed,
                           action_mode=args.action_mode, window=args.window, data_root=args.data_root,
                           author=args.author, overwrite=args.overwrite)
        info = summary(ds)
    if args.json:
        print(json.dumps(info))
        return 0
    print(f"wrote Minari dataset {info['dataset_id']} ({info['path']}): {info['episodes']} episodes, "
          f"{info['steps']} steps of {info['label']} on {info['scenario']}; read it with "
          f"minari.load_dataset({info['dataset_id']!r}) or --bc-demos minari:{info['dataset_id']}")
    _note_not_native(args.policy, args.window, info["decisions_not_expressed"])
    return 0


def _note_not_native(policy: str, window: int, not_expressed: int) -> None:
    """Say when the recording is not the policy's native episode (was: labelled by its bare name)."""
    if not_expressed:
        print(f"note: {not_expressed} part(s) of {policy}'s decisions could not be expressed through the env "
              f"(jobs outside the window of {window}, or masked actions): these are not {policy}'s native "
              "episodes; a --window at least as large as the number of active jobs records those")


def run(args: argparse.Namespace) -> int:
    # episode i plays seed + i: every one must be a valid seed (was: seeds past 2**63 - 1 ran)
    check_seed_range(args.seed, args.episodes, "--seed", "episodes")
    if args.format == "minari":
        return run_minari(args)
    for flag in ("dataset_id", "minari_path"):
        if getattr(args, flag) is not None:
            raise ValueError(f"--{flag.replace('_', '-')} is for --format minari")
    if args.out is None:
        raise ValueError("--out FILE is needed with --format npz (or use --format minari)")
    out = output_path(args.out)
    if out.exists() and not args.overwrite:  # was: replaced without a word
        raise ValueError(f"--out {args.out}: {out} exists; pass --overwrite to replace it, or give another file")
    # was: checked only after every episode ran (an unwritable --out lost them, naming a temporary)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".probe", dir=out.parent)
    except OSError as exc:
        raise ValueError(f"--out {args.out}: cannot write in {out.parent} ({exc.strerror or exc}); "
                         "give a file path in a writable folder") from None
    os.close(fd)
    os.unlink(probe)
    arrays = record(args.scenario, args.policy, args.episodes, args.seed, args.action_mode,
                    args.window, args.data_root)

    # at run time: aryl-gym imports every command module to build its parser
    from aryl_gym.fileio import atomic_write_bytes

    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)  # type: ignore[arg-type]
    atomic_write_bytes(out, buf.getvalue())
    n = len(arrays["actions"])
    label = str(arrays["label"])
    not_expressed = int(arrays["decisions_not_expressed"])
    if args.json:
        print(json.dumps({"path": str(out), "episodes": args.episodes, "steps": n,
                          "policy": args.policy, "label": label, "env_id": DEFAULT_ENV_ID,
                          "action_mode": args.action_mode, "window": args.window,
                          "decisions_not_expressed": not_expressed, "scenario": str(arrays["scenario"]),
                          "config_hash": str(arrays["config_hash"])}))
        return 0
    print(f"wrote {out}: {args.episodes} episodes, {n} steps of {label} on {args.scenario}")
    _note_not_native(args.policy, args.window, not_expressed)
    return 0
