"""``aryl-gym main``: the README's main job -- the ``quick`` leaderboard, end to end.

Runs the ``quick`` suite (``configs/suites/quick.yaml``: testbed, 16 held-out seeds, the fast
reference policies and the shipped learned agents) into ``./results/quick`` (or ``--out``), resuming finished episodes, prints the table and
says where the table, the plots and the TensorBoard logs are.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from aryl_gym.commands._common import add_json_arg, out_arg
from aryl_gym.commands.leaderboard import (
    add_run_arguments,
    default_workers,
    outputs_json,
    print_outputs,
)

NAME = "main"
HELP = "the main job: run the quick leaderboard and show where its table, plots and logs are"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--suite", default="quick", help="suite to run (default quick)")
    p.add_argument("--out", type=out_arg, default=None, help="output folder (default results/SUITE)")
    p.add_argument("--fresh", action="store_true", help="recompute everything (moves old results aside)")
    add_json_arg(p)
    add_run_arguments(p)


def run(args: argparse.Namespace) -> int:
    # leaderboard imports pydantic: only when a config is validated
    from aryl_gym.leaderboard import load_suite, run_leaderboard

    # A reference policy missing from this checkout is skipped with a note rather than failing
    # the main job; `aryl-gym leaderboard` is strict.
    suite = load_suite(args.suite, allow_missing=True)
    out = Path(args.out) if args.out else Path("results") / suite.name
    print(
        f"aryl-gym main: leaderboard suite '{suite.name}' -> {out}/ "
        f"({len(suite.scenarios)} scenario(s) x {len(suite.seeds)} seeds x "
        f"{len(suite.entrants)} entrants; finished episodes are reused)",
        flush=True,
        file=sys.stderr if args.json else sys.stdout,
    )
    def go(fresh: bool) -> Any:
        return run_leaderboard(
            suite,
            out,
            workers=args.workers or default_workers(),
            resume=not fresh,
            overwrite=fresh,
            data_root=args.data_root,
            progress=not args.no_progress,
            plots=not args.no_plots,
            tensorboard=not args.no_tensorboard,
        )

    # at run time: aryl-gym imports every command module to build its parser
    from aryl_gym.episodes import run_interruptible

    # SIGTERM ends the run as Ctrl-C does, with one line (was: killed without a word)
    return run_interruptible(lambda: _finish(args, go), "aryl-gym main",
                             f"finished rows are kept in {out / 'results.csv'}; rerun aryl-gym main to "
                             "finish the rest (finished episodes are reused)")


def _finish(args: argparse.Namespace, go: Any) -> int:
    """Run the suite (again afresh when its saved rows are stale) and print the outputs."""
    # runner imports pydantic: only when a config is validated
    from aryl_gym.leaderboard.runner import StaleResultsError

    try:
        res = go(args.fresh)
    except StaleResultsError as exc:
        # the main job after an update (new weights or settings): recompute, keeping the old
        # results aside (the leaderboard command itself refuses and lets the user choose)
        print(f"aryl-gym main: {exc}.\naryl-gym main: recomputing every episode; the previous "
              "results are moved aside.", flush=True, file=sys.stderr)
        res = go(True)
    if args.json:
        print(json.dumps(outputs_json(res), default=str))
        return 1 if res.summary.failed else 0
    print()
    print_outputs(res)
    print()
    print(f"Read {res.markdown} for the protocol and the full table.")
    return 1 if res.summary.failed else 0
