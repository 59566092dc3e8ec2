"""``aryl-gym simulate``: run one policy on one scenario and seed."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from aryl_gym.commands._common import add_scenario_args, fmt_num, seed_arg
from aryl_gym.metrics import names as metric_names

NAME = "simulate"
HELP = "run one policy on one scenario and seed; print a summary or one JSON object"

#: the figures of the text summary (aryl_gym.metrics.METRICS, view "simulate")
SUMMARY_KEYS = list(metric_names("simulate"))


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_scenario_args(p)
    p.add_argument("--policy", default="baseline",
                   help="policy name (see `aryl-gym policies`; default: the paper's Baseline)")
    p.add_argument("--seed", type=seed_arg, default=0, help="episode seed (integer >= 0)")
    p.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")
    p.add_argument("--series", action="store_true", help="with --json: include per-job and hourly series")
    p.add_argument("--no-progress", action="store_true", help="no progress bar / progress lines on stderr")
    p.add_argument(
        "--check-invariants",
        action="store_true",
        help="check every simulator invariant after every round (aryl_gym.sim.invariants); slower",
    )
    add_trace_args(p)


#: cluster overrides: (attribute, flag, smallest value)
CLUSTER_OVERRIDES = (
    ("train_servers", "--train-servers", 1),
    ("train_gpus_per_server", "--train-gpus-per-server", 1),
    ("inf_servers", "--inf-servers", 0),
    ("inf_gpus_per_server", "--inf-gpus-per-server", 1),
)
#: options that only shape a trace file read with --trace
TRACE_ONLY = (
    ("trace_format", "--trace-format"),
    ("map", "--map"),
    ("columns", "--columns"),
    ("units", "--units"),
    ("skip_bad_rows", "--skip-bad-rows"),
    ("vc", "--vc"),
    ("time_window", "--time-window"),
    ("time_compression", "--time-compression"),
    ("max_jobs", "--max-jobs"),
    ("trace_option", "--trace-option"),
)


def check_overrides(args: argparse.Namespace) -> dict[str, object]:
    """The ``--train-*``/``--inf-*`` overrides, validated; trace-only options without ``--trace``
    are a ValueError (they would otherwise be silently ignored)."""
    over: dict[str, object] = {}
    for attr, flag, lo in CLUSTER_OVERRIDES:
        v = getattr(args, attr, None)
        if v is None:
            continue
        if v < lo:
            raise ValueError(f"{flag} must be an integer >= {lo}, got {v}")
        over[attr] = v
    for attr in ("train_gpu", "inf_gpu"):
        v = getattr(args, attr, None)
        if v is not None:
            over[attr] = v
    if not getattr(args, "trace", None):
        for attr, flag in TRACE_ONLY:
            v = getattr(args, attr, None)
            # 0 and '' too (was: 0 slipped through; --vc '' was ignored without a word)
            if v is not None and v is not False and v != []:
                hint = (
                    "; to change the synthetic workload's size set workload.num_jobs in a scenario YAML"
                    if attr == "max_jobs" else ""
                )
                raise ValueError(f"{flag} applies to a trace file only: add --trace FILE, or drop {flag}{hint}")
    return over


def scenario_with_overrides(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    """``args.scenario`` with the validated cluster overrides applied."""
    # at run time: aryl-gym imports every command module to build its parser
    from aryl_gym.config import ConfigError, load_scenario, validate_scenario

    cfg = load_scenario(args.scenario)
    over = check_overrides(args)
    if over:
        for attr, flag in (("train_gpu", "--train-gpu"), ("inf_gpu", "--inf-gpu")):
            if attr in over and over[attr] not in cfg.gpu_types:
                raise ConfigError(
                    f"{flag} {over[attr]!r}: unknown GPU type; known: {', '.join(sorted(cfg.gpu_types))} "
                    "(add one under gpu_types in a scenario YAML)"
                )
        cfg = cfg.replace(cluster=over)
        validate_scenario(cfg)
    return cfg


def add_trace_args(p: argparse.ArgumentParser) -> None:
    try:
        # an optional dependency: its absence is handled here
        from aryl_gym.commands._trace_args import add_trace_arguments
    except ModuleNotFoundError:
        return
    add_trace_arguments(p)


def load_episode(args: argparse.Namespace, seed: int):
    """The episode for ``args`` (scenario, optional trace options) and ``seed``."""
    # at run time: aryl-gym imports every command module to build its parser
    from aryl_gym.scenario import make_episode

    cfg = scenario_with_overrides(args)
    if getattr(args, "trace", None):
        # _trace_args imports pyarrow: only when a trace is read
        from aryl_gym.commands._trace_args import episode_from_args

        return episode_from_args(args, seed)
    return make_episode(cfg, seed, data_root=args.data_root)


def failure_note(res: Any) -> str:
    """Why an episode failed (``EpisodeResult.failed``: it ended with jobs unfinished)."""
    if res.thrashing:
        why = "ended by the thrash rule"
    elif res.stalled:
        why = "ended as stalled: no job progressed for the stall rule's hours"
    else:
        why = "cut by the scenario's sim.horizon_hours or sim.max_rounds"
    return f"{res.jobs_unfinished} of {res.jobs_total} jobs unfinished ({why})"


def run(args: argparse.Namespace) -> int:
    # at run time: aryl-gym imports every command module to build its parser
    from aryl_gym.agents import make_policy

    if args.series and not args.json:  # was: accepted and unused
        raise ValueError("--series adds the per-job and hourly series to --json output; add --json")
    policy = make_policy(args.policy)
    ep = load_episode(args, args.seed)
    sim = ep.simulator()
    checker = None
    if args.check_invariants:
        # at run time: aryl-gym imports every command module to build its parser
        from aryl_gym.sim.invariants import InvariantChecker

        checker = InvariantChecker()
    res = sim.run(policy, progress=not args.no_progress, on_round=checker)
    if checker is not None:
        print(
            f"invariants held after each of the {checker.rounds} simulator steps "
            "(eventless rounds between them are fast-forwarded; they move no server or worker)",
            file=sys.stderr,
        )
    if args.json:
        print(json.dumps(res.to_dict(series=args.series)))
    else:
        print(f"scenario {res.scenario}  policy {res.policy}  seed {res.seed}")
        d = res.to_dict()
        for k in SUMMARY_KEYS:
            print(f"  {k:26s} {fmt_num(d[k])}")
        if res.truncated:
            print(f"  (truncated: {res.jobs_unfinished} jobs unfinished{'; stalled' if res.stalled else ''})")
    if res.failed:  # was: exit 0 for an episode that left jobs unfinished
        print(f"aryl-gym simulate: error: the episode failed: {failure_note(res)}; its job-time figures "
              "count the unfinished jobs censored at the episode's end", file=sys.stderr)
        return 1
    return 0
