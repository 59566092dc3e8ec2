"""``aryl-gym seed-study``: how many seeds a suite needs to separate a given difference.

Runs the scenario for every seed and entrant (rows in ``--out``, resumable), then prints the
paired seed-to-seed spread of log(JCT ratio) per entrant pair and the seeds needed (see
:mod:`aryl_gym.leaderboard.seed_study` and docs/leaderboard.md).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from dataclasses import asdict
from typing import Any

from aryl_gym.commands._common import names_list, out_arg, positive_int, seeds_arg

NAME = "seed-study"
HELP = "seeds a suite needs to separate a given difference (paired seed-to-seed spread)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--scenario", default="testbed", help="scenario (default testbed)")
    p.add_argument("--seeds", type=seeds_arg, default="2000-2019", help='seeds, "A-B" or "a,b,c" (default 2000-2019)')
    p.add_argument(
        "--policies",
        default="fifo,sjf,aryl,afs,gandiva,pollux",
        help="reference policies, comma-separated (default fifo,sjf,aryl,afs,gandiva,pollux)",
    )
    p.add_argument("--agent", action="append", default=[], metavar="NAME=SOURCE",
                   help="add a learned agent (as in aryl-gym leaderboard); repeatable")
    p.add_argument("--metric", default="avg_jct", help="metric compared (default avg_jct)")
    p.add_argument("--delta", type=float, default=0.03, help="difference to separate (default 0.03)")
    p.add_argument("--out", type=out_arg, default="results/seed-study", help="output folder (rows, resumable)")
    p.add_argument("--workers", type=positive_int, default=None, help="parallel episodes (default CPU count)")
    p.add_argument("--fresh", action="store_true", help="recompute (moves old rows aside)")
    p.add_argument("--json", action="store_true", help="print JSON instead of the table")


def run(args: argparse.Namespace) -> int:
    # at run time: aryl-gym imports every command module to build its parser
    from aryl_gym.config import ConfigError
    from aryl_gym.episodes import check_entrant

    # runner imports pydantic: only when a config is validated
    from aryl_gym.fileio import DirLock, check_out_folder, claim_folder
    from aryl_gym.leaderboard.results import METRIC_TYPES
    from aryl_gym.leaderboard.runner import prepare_out_dir, run_suite

    # seed_study imports pydantic: only when a config is validated
    from aryl_gym.leaderboard.seed_study import metric_problem, recommendation, render, study

    # suites imports pydantic: only when a config is validated
    from aryl_gym.leaderboard.suites import suite_from_dict

    try:
        if not 0 < args.delta < math.inf:  # was: inf ran every episode, then was refused
            raise ConfigError(f"--delta must be a finite number > 0 (e.g. 0.03), got {args.delta}")
        if args.metric not in METRIC_TYPES:
            raise ConfigError(f"--metric {args.metric!r}: unknown; one of {', '.join(METRIC_TYPES)}")
        policies = names_list(args.policies, "--policies")
        agents = {}
        for a in args.agent:
            if "=" not in a:
                raise ConfigError(f"--agent takes NAME=SOURCE, got {a!r}")
            name, src = a.split("=", 1)
            if name in agents:  # was: the later one replaced the earlier silently
                raise ConfigError(f"--agent {name}=...: the name is given twice; names must be unique")
            agents[name] = src
        seeds: Any = list(args.seeds)  # seeds_arg: distinct, non-negative, 1e3 read as 1000
        suite = suite_from_dict(
            {
                "name": "seed-study",
                "description": "paired seed-to-seed spread (aryl-gym seed-study)",
                "scenarios": [args.scenario],
                "seeds": seeds,
                "baseline": policies[0],
                "policies": policies,
                "agents": agents,
            },
            source="<seed-study arguments>",
        )
        # was: an empty table and exit 0, with no reason
        if len(suite.entrants) < 2:
            raise ConfigError("the seed study compares pairs of entrants: give at least two "
                              "(--policies a,b or --agent NAME=SOURCE)")
        if len(suite.seeds) < 2:
            raise ConfigError("the seed-to-seed spread needs at least two seeds (e.g. --seeds 2000-2019)")
        for e in suite.entrants:  # an agent that cannot run is an error here, not a dropped row
            why = check_entrant(e, suite.env_id)
            if why:
                raise ConfigError(f"--agent {e.name}={e.source}: {why}")
        check_out_folder(args.out, "seed-study")  # not a user's folder (before its lock file)
        out = prepare_out_dir(args.out)
        with DirLock(out):  # the leaderboard's lock; a folder of another command is refused
            claim_folder(out, "seed-study")
            summary = run_suite(
                suite,
                out,
                workers=args.workers or max(1, os.cpu_count() or 1),
                resume=not args.fresh,
                overwrite=args.fresh,
                progress=False,
                keep_timeline=False,
            )
    except (ConfigError, ValueError) as exc:
        print(f"aryl-gym seed-study: error: {exc}", file=sys.stderr)
        return 2
    names = [e.name for e in suite.entrants]
    spreads = study(summary.rows, args.scenario, names, args.metric, args.delta)
    if not spreads:
        why = metric_problem(summary.rows, args.scenario, names, args.metric)
        if why is None:
            why = (f"no pair of entrants has {args.metric} on two common seeds "
                   "(failed or unfinished episodes?)")
        print(f"aryl-gym seed-study: error: {why}; rows in {summary.csv_path}", file=sys.stderr)
        return 1
    rec = recommendation(spreads)
    if args.json:
        print(json.dumps({"pairs": [asdict(p) for p in spreads], "recommendation": rec}, indent=1))
    else:
        print(f"{args.scenario}: {len(suite.seeds)} seeds x {len(names)} entrants, rows in {summary.csv_path}")
        print(render(spreads, rec, args.delta, args.metric))
    if not rec["pairs"]:  # every pair identical: no spread to advise on
        print(f"aryl-gym seed-study: error: every pair of entrants gave identical {args.metric} on every "
              "seed (ratio exactly 1), so there is no seed-to-seed spread to base advice on; compare "
              "entrants that differ (--policies)", file=sys.stderr)
        return 1
    return 1 if summary.failed else 0
