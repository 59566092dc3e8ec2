"""``aryl-gym simulate``: run one policy on one scenario and seed."""

from __future__ import annotations

import argparse
import json
import sys

from aryl_gym.commands._common import add_scenario_args, fmt_num

NAME = "simulate"
HELP = "run one policy on one scenario and seed; print a summary or one JSON object"

SUMMARY_KEYS = [
    "jobs_total",
    "jobs_completed",
    "avg_jct",
    "median_jct",
    "p95_jct",
    "avg_queue_time",
    "p95_queue_time",
    "makespan",
    "train_util",
    "combined_usage",
    "loaned_gpu_hours_offered",
    "loaned_gpu_hours_used",
    "preemptions",
    "preemption_ratio",
    "scaling_events",
    "jct_lower_bound",
    "mean_slowdown",
    "decision_ms_mean",
    "rounds",
    "decision_rounds",
    "wall_s",
]


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_scenario_args(p)
    p.add_argument("--policy", default="fifo", help="policy name (see `aryl-gym policies`)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")
    p.add_argument("--series", action="store_true", help="with --json: include per-job and hourly series")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    add_trace_args(p)


def add_trace_args(p: argparse.ArgumentParser) -> None:
    try:
        from aryl_gym.workload.traces import add_trace_arguments
    except ModuleNotFoundError:
        return
    add_trace_arguments(p)


def load_episode(args: argparse.Namespace, seed: int):
    """The episode for ``args`` (scenario, optional trace options) and ``seed``."""
    from aryl_gym.scenario import make_episode

    if getattr(args, "trace", None):
        from aryl_gym.workload.traces import episode_from_args

        return episode_from_args(args, seed)
    return make_episode(args.scenario, seed, data_root=args.data_root)


def run(args: argparse.Namespace) -> int:
    from aryl_gym.agents import make_policy

    policy = make_policy(args.policy)
    ep = load_episode(args, args.seed)
    sim = ep.simulator()
    progress = not args.no_progress and sys.stderr.isatty()
    res = sim.run(policy, progress=progress)
    if args.json:
        print(json.dumps(res.to_dict(series=args.series)))
        return 0
    print(f"scenario {res.scenario}  policy {res.policy}  seed {res.seed}")
    d = res.to_dict()
    for k in SUMMARY_KEYS:
        print(f"  {k:26s} {fmt_num(d[k])}")
    if res.truncated:
        print(f"  (truncated: {res.jobs_unfinished} jobs unfinished{'; stalled' if res.stalled else ''})")
    return 0
