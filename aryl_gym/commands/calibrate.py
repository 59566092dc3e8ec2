"""``aryl-gym calibrate``: the generator and the Baseline set beside the paper's facts (SPEC 4).

Ctrl-C or SIGTERM ends a run (exit 130 or 143) with one line: with ``--relevance`` or
``--load-grid`` and ``--out``, how many episodes are done (kept in ``OUT/episodes``) and the
command that resumes the run from them."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

import numpy as np

from aryl_gym.commands._common import (
    add_scenario_args,
    names_list,
    out_arg,
    positive_int,
    seed_arg,
    seeds_arg,
    strict_json,
    table,
)

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
    ("jobs (the paper: 15 days of production)", "jobs", 50000, "about 50,000"),
]


#: World v1 arrival rows: (label, key); the generator at the trace's rate vs philly.csv.
ARRIVAL_ROWS = [
    ("arrivals: hourly count CV", "hourly_cv"),
    ("arrivals: share of gaps < 10 s", "gap_lt_10s"),
    ("arrivals: p99 hour / mean hour", "p99_hour_over_mean"),
]
#: tolerance of the arrival rows (relative to the trace's figure)
ARRIVAL_TOL = 0.25


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_scenario_args(p, default="production")
    p.set_defaults(scenario=None)  # None: not given (production); --relevance tells them apart
    p.add_argument("--seed", type=seed_arg, default=None, help="the calibration table's seed (default 0)")
    p.add_argument("--json", action="store_true")
    p.add_argument(
        "--relevance",
        action="store_true",
        help="instead: decision relevance (bound, headroom, spread) of every shipped scenario",
    )
    p.add_argument(
        "--load-grid",
        default=None,
        metavar="LOADS",
        help="instead: the load rule (aryl_gym/load_grid.py) over these loads, e.g. 0.3-0.9 or "
        "0.4,0.8: Baseline (and strict FIFO) queues per load (means over --seeds, default 0-4) "
        "and the load the rule picks",
    )
    p.add_argument(
        "--scenarios",
        default=None,
        help="with --relevance: comma-separated scenarios (default: every generated scenario; "
        "--scenario X alone means X)",
    )
    p.add_argument(
        "--seeds",
        type=seeds_arg,
        default=None,
        help="seeds, e.g. 0-4 or 0,1,2: the Baseline figures are then means over these seeds "
        "(instead of --seed); with --relevance, its seeds (default 0-4)",
    )
    p.add_argument(
        "--workers", type=positive_int, default=None,
        help="with --relevance or --load-grid: parallel processes (default 1)"
    )
    p.add_argument(
        "--out",
        type=lambda text: Path(out_arg(text)),
        default=None,
        metavar="DIR",
        help="with --relevance or --load-grid: keep the episodes in an episode cache under "
        "DIR/episodes (reproduce's cache format); a rerun, or a rerun after an interruption, "
        "runs only the episodes not there yet",
    )
    p.add_argument(
        "--policies",
        default=None,
        help="with --relevance: reference policies (default: baseline,fifo,sjf,aryl,afs,gandiva)",
    )


def _arrival_rows(ep) -> list[dict]:
    # at run time: aryl-gym imports every command module to build its parser
    from aryl_gym.workload.fit import PHILLY_ARRIVAL_STATS
    from aryl_gym.workload.generator import generated_arrival_stats

    gen = generated_arrival_stats(ep.config.workload)
    out = []
    for label, key in ARRIVAL_ROWS:
        trace = PHILLY_ARRIVAL_STATS[key]
        ours = gen[key]
        out.append({"name": label, "key": key, "trace": trace, "measured": ours,
                    "within": abs(ours / trace - 1.0) <= ARRIVAL_TOL})
    return out


def check_modes(args: argparse.Namespace) -> None:
    """Options that would be silently ignored are errors: --relevance runs its own grid."""
    if args.load_grid is not None and not args.load_grid.strip():  # was: the calibration table instead
        raise ValueError("--load-grid '': give loads, e.g. 0.3-0.9 or 0.4,0.8 (or leave the flag out)")
    if args.relevance and args.load_grid:
        raise ValueError("--relevance and --load-grid are two different runs; give one of them")
    if args.relevance and args.scenario is not None:
        if args.scenarios is not None:
            raise ValueError("--relevance takes its scenarios from --scenarios; drop --scenario")
        args.scenarios = args.scenario  # --scenario X: the relevance of X
    if args.scenarios is not None and not args.relevance:
        raise ValueError("--scenarios applies to --relevance only (use --scenario)")
    if args.policies is not None and not args.relevance:
        raise ValueError("--policies applies to --relevance only")
    if args.out is not None and not (args.relevance or args.load_grid):
        raise ValueError("--out applies to --relevance and --load-grid only (the calibration "
                         "table runs two episodes per seed and keeps none)")
    for flag, v in (("--scenarios", args.scenarios), ("--policies", args.policies)):
        if v is not None and not [x for x in v.split(",") if x.strip()]:
            raise ValueError(f"{flag} is empty; give comma-separated names (or leave the flag out)")
        if v is not None:
            names_list(v, flag)  # a name given twice is an error (was: counted twice)
    grid = args.relevance or bool(args.load_grid)
    if args.workers is not None and not grid:  # was: accepted and unused
        raise ValueError("--workers applies to --relevance and --load-grid only (the calibration table "
                         "runs its episodes in this process)")
    if args.seed is not None and grid:  # was: ignored
        raise ValueError("--seed is the calibration table's seed; --relevance and --load-grid take --seeds")
    if args.seed is not None and args.seeds:
        raise ValueError("--seed and --seeds both set the seeds; give one of them")
    if args.workers is None:
        args.workers = 1
    if args.seed is None:
        args.seed = 0
    if args.scenario is None:
        args.scenario = "production"


def command_line(args: argparse.Namespace) -> str:
    """The command that makes this run again (after :func:`check_modes`): an interrupted run
    with ``--out`` resumes from its episode cache."""
    parts = ["aryl-gym", "calibrate"]
    if args.relevance:
        parts.append("--relevance")
        parts += ["--scenarios", args.scenarios] if args.scenarios else []
        parts += ["--policies", args.policies] if args.policies else []
    else:
        parts += ["--load-grid", args.load_grid] if args.load_grid else []
        parts += ["--scenario", str(args.scenario)]
        parts += ["--seed", str(args.seed)] if args.seed and not args.seeds else []
    if args.seeds:
        s = [int(x) for x in args.seeds]
        whole = len(s) > 2 and s == list(range(s[0], s[-1] + 1))
        parts += ["--seeds", f"{s[0]}-{s[-1]}" if whole else ",".join(map(str, s))]
    parts += ["--data-root", str(args.data_root)] if args.data_root else []
    parts += ["--workers", str(args.workers)] if args.workers != 1 else []
    parts += ["--out", str(args.out)] if args.out is not None else []
    parts += ["--json"] if args.json else []
    return shlex.join(parts)


def run(args: argparse.Namespace) -> int:
    check_modes(args)
    # at run time: aryl-gym imports every command module to build its parser
    from aryl_gym.episodes import run_interruptible

    # SIGTERM and Ctrl-C: one line (episodes done, the command that resumes), exit 143 / 130
    cmd = command_line(args)
    if args.out is not None:
        hint = (f"the finished episodes are kept in {args.out}/episodes; rerun the same command to "
                f"resume from the cache: {cmd}")
    elif args.relevance or args.load_grid:
        hint = f"nothing was kept (no --out DIR to keep the episodes in); rerun the command: {cmd}"
    else:
        hint = f"the calibration table keeps no episodes; rerun the command: {cmd}"
    return run_interruptible(lambda: _run(args), cmd, hint)


def _run(args: argparse.Namespace) -> int:
    if args.relevance or args.load_grid:
        # at run time: aryl-gym imports every command module to build its parser
        from aryl_gym.episodes import EpisodesFailed

        grid = _run_relevance if args.relevance else _run_load_grid
        try:
            if args.out is None:
                return grid(args)
            # at run time: aryl-gym imports every command module to build its parser
            from aryl_gym.fileio import DirLock, check_out_folder, claim_folder
            from aryl_gym.leaderboard.runner import prepare_out_dir

            # one run per --out at a time, and never another command's folder (as reproduce)
            check_out_folder(args.out, "calibrate")  # not a user's folder (before its lock file)
            if args.load_grid:  # a grid that cannot run is refused before --out is made (was: an
                # empty folder left behind, e.g. for a trace scenario)
                from aryl_gym.load_grid import check_grid, parse_loads

                if args.workers < 1:
                    raise ValueError(f"--workers must be >= 1, got {args.workers}")
                check_grid(args.scenario, parse_loads(args.load_grid),
                           list(args.seeds) if args.seeds else list(range(5)), args.workers)
            with DirLock(prepare_out_dir(args.out)):
                claim_folder(args.out, "calibrate")
                return grid(args)
        except EpisodesFailed as exc:  # was: a RuntimeError traceback holding the worker's traceback
            kept = f"; the finished ones are kept in {args.out}/episodes" if args.out is not None else ""
            print(f"aryl-gym calibrate: error: {exc}{kept}", file=sys.stderr)
            return 1
    # at run time: aryl-gym imports every command module to build its parser
    from aryl_gym.agents import make_policy
    from aryl_gym.scenario import make_episode
    from aryl_gym.workload.generator import workload_summary

    seeds = list(args.seeds) if args.seeds else [args.seed]
    per_seed: list[dict] = []
    for seed in seeds:
        ep = make_episode(args.scenario, seed, data_root=args.data_root)
        summary = workload_summary(ep.jobs, ep.config)
        span = int(np.ceil(summary.get("span_hours", 24.0) * 12))
        u = ep.utilization[: max(span, 288)]
        days = [u[i : i + 288] for i in range(0, len(u) - 287, 288)] or [u]
        summary["inference_mean"] = float(u.mean())
        summary["inference_peak_to_trough"] = float(
            np.mean([d.max() / max(d.min(), 1e-9) for d in days])
        )
        print(f"running baseline and strict fifo on {ep.config.name} (seed {seed}, "
              f"{len(ep.jobs)} jobs)...", file=sys.stderr)
        res = ep.simulator().run(make_policy("baseline"))
        strict = ep.simulator().run(make_policy("fifo"))
        one = {**summary, **res.to_dict()}
        one["strict_queue_ratio"] = strict.avg_queue_time / max(res.avg_queue_time, 1e-9)
        one["max_hourly_queued_share"] = res.max_hourly_queued_share
        per_seed.append(one)
    # means over seeds (a figure missing or not a number in some seed is left out of its mean)
    figures: dict = {}
    for key in per_seed[0]:
        vals = [f.get(key) for f in per_seed]
        nums = [float(v) for v in vals if isinstance(v, (int, float)) and not isinstance(v, bool)]
        figures[key] = float(np.mean(nums)) if len(nums) == len(vals) else vals[0]
    facts = PAPER_FACTS + [
        ("avg queue, strict FIFO / Baseline (head-of-line blocking)", "strict_queue_ratio",
         float("nan"), "for reading (World v2's Baseline does not block)"),
        ("largest hourly share of jobs queued (Baseline)", "max_hourly_queued_share", 0.9,
         ">= 0.9 in some hours (Fig. 2)"),
    ]
    arrivals = _arrival_rows(ep)
    if args.json:
        out_rows = [
            {"name": label, "key": key, "paper": paper, "paper_text": text,
             "measured": figures.get(key)}
            for label, key, paper, text in facts
        ]
        out_rows += [
            {"name": a["name"], "key": a["key"], "trace": a["trace"], "measured": a["measured"],
             "within_25pct": a["within"]}
            for a in arrivals
        ]
        print(strict_json({"scenario": ep.config.name, "seed": seeds[0], "seeds": seeds, "rows": out_rows}))
        return 0
    rows = [[label, figures.get(key), text] for label, key, _paper, text in facts]
    ours = "ours" if len(seeds) == 1 else f"ours (mean of {len(seeds)} seeds)"
    print(table(rows, ["figure", ours, "paper"]))
    arows = [[a["name"], a["measured"], a["trace"], "yes" if a["within"] else "NO"]
             for a in arrivals]
    print()
    print(table(arows, ["arrival statistic (trace's rate and span)", "ours", "philly.csv",
                        "within 25%"]))
    print(f"\noffered load {figures['offered_load']:.3f} of the training pool; "
          f"Baseline wall {figures['wall_s']:.1f} s (per seed, mean)")
    return 0


def _run_relevance(args: argparse.Namespace) -> int:
    # at run time: aryl-gym imports every command module to build its parser
    from aryl_gym.relevance import DEFAULT_POLICIES, GENERATED_SCENARIOS, relevance, relevance_table

    scenarios = (
        [s.strip() for s in args.scenarios.split(",") if s.strip()]
        if args.scenarios
        else list(GENERATED_SCENARIOS)
    )
    policies = (
        [p.strip() for p in args.policies.split(",") if p.strip()]
        if args.policies
        else list(DEFAULT_POLICIES)
    )
    if args.workers < 1:
        raise ValueError(f"--workers must be >= 1, got {args.workers}")
    rel_seeds = list(args.seeds) if args.seeds else list(range(5))
    rows = relevance(scenarios, policies, rel_seeds, workers=args.workers,
                     data_root=args.data_root, out=args.out)
    if args.json:
        print(strict_json({"policies": policies, "seeds": rel_seeds, "rows": rows}))
        return 0
    print(relevance_table(rows))
    return 0


def _run_load_grid(args: argparse.Namespace) -> int:
    # at run time: aryl-gym imports every command module to build its parser
    from aryl_gym.load_grid import load_grid, parse_loads, pick_load

    loads = parse_loads(args.load_grid)
    if args.workers < 1:
        raise ValueError(f"--workers must be >= 1, got {args.workers}")
    seeds = list(args.seeds) if args.seeds else list(range(5))
    rows = load_grid(args.scenario, loads, seeds, workers=args.workers, data_root=args.data_root,
                     out=args.out)
    load, why = pick_load(rows)
    if args.json:
        print(strict_json({"scenario": args.scenario, "seeds": seeds, "rows": rows, "pick": load, "why": why}))
        return 0
    trows = [[f"{r['load']:g}" + (" <- pick" if r["load"] == load else ""), r["avg_queue"],
              r["p95_queue"], r["train_util"], r["strict_ratio"], r["max_queued_share"], r["jobs"]]
             for r in rows]
    print(table(trows, ["load", "avg queue s", "p95 queue s", "train util",
                        "strict FIFO / Baseline", "max hourly queued", "jobs"]))
    print(f"\n{args.scenario}, means over seeds {seeds[0]}-{seeds[-1]} ({len(seeds)}): pick load "
          f"{load:g}: {why}")
    return 0
