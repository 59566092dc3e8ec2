"""``aryl-gym calibrate``: the generator and the Baseline set beside the paper's facts (SPEC 4)."""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from aryl_gym.commands._common import add_scenario_args, seed_arg, table

NAME = "calibrate"
HELP = "print the workload and the Baseline's figures beside the paper's calibration facts"

#: (label, our key, paper value, how to read it)
PAPER_FACTS = [
    ("training GPU utilization (Baseline)", "train_util", 0.82, "about 82%"),
    ("average queuing time, s (Baseline)", "avg_queue_time", 3000.0, "above 3,000 s"),
    ("p95 queuing time, s (Baseline)", "p95_queue_time", 10000.0, "near 10,000 s"),
    ("inference utilization, mean", "inference_mean", 0.65, "about 65%"),
    ("inference peak-to-trough", "inference_peak_to_trough", 2.2, "about 2.2"),
    ("type-agnostic share of jobs", "type_agnostic_share", 0.21, "up to 21%"),
    ("elastic families' share of GPU-time", "elastic_gpu_time_share", 0.36, "about 36%"),
    ("elastic jobs' mean running time, h", "elastic_mean_hours", 14.2, "14.2 h"),
    ("jobs in 15 days (production)", "jobs", 50000, "about 50,000"),
]


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_scenario_args(p, default="production")
    p.add_argument("--seed", type=seed_arg, default=0)
    p.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> int:
    from aryl_gym.agents import make_policy
    from aryl_gym.scenario import make_episode
    from aryl_gym.workload.generator import workload_summary

    ep = make_episode(args.scenario, args.seed, data_root=args.data_root)
    summary = workload_summary(ep.jobs, ep.config)
    span = int(np.ceil(summary.get("span_hours", 24.0) * 12))
    u = ep.utilization[: max(span, 288)]
    days = [u[i : i + 288] for i in range(0, len(u) - 287, 288)] or [u]
    summary["inference_mean"] = float(u.mean())
    summary["inference_peak_to_trough"] = float(np.mean([d.max() / max(d.min(), 1e-9) for d in days]))
    print(f"running fifo on {ep.config.name} (seed {args.seed}, {len(ep.jobs)} jobs)...", file=sys.stderr)
    res = ep.simulator().run(make_policy("fifo"))
    figures = {**summary, **res.to_dict()}
    rows = []
    for label, key, _paper, text in PAPER_FACTS:
        ours = figures.get(key)
        rows.append([label, ours, text])
    if args.json:
        out_rows = [
            {"name": label, "key": key, "paper": paper, "paper_text": text,
             "measured": figures.get(key)}
            for label, key, paper, text in PAPER_FACTS
        ]
        print(json.dumps({"scenario": ep.config.name, "seed": args.seed, "rows": out_rows}))
        return 0
    print(table(rows, ["figure", "ours", "paper"]))
    print(f"\noffered load {summary['offered_load']:.3f} of the training pool; "
          f"Baseline wall {res.wall_s:.1f} s")
    return 0
