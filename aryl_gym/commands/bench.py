"""``aryl-gym bench``: the SPEC 8 performance table (see :mod:`aryl_gym.benchmarks`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from aryl_gym.commands._common import strict_json

NAME = "bench"
HELP = "benchmarks: episode wall time per scenario and policy, knapsack ms per round, ..."


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--quick", action="store_true", help="shorter runs: no production episodes (the scale step rows still step production, fewer steps); skips env, pollux, train"
    )
    p.add_argument("--only", default=None, help="comma-separated benchmark names (default all)")
    p.add_argument("--json", action="store_true", help="print one JSON object {name: rows} (a figure that is not finite is null)")
    p.add_argument(
        "--baseline", default=None, metavar="DIR",
        help="a checkout of an earlier commit: the scale benchmark also plays its step "
             "trajectories with that code, in the same run (ABBA order), beside today's",
    )


def run(args: argparse.Namespace) -> int:
    # at run time: aryl-gym imports every command module to build its parser
    from aryl_gym.benchmarks import BENCHMARKS, QUICK_SKIPS
    from aryl_gym.commands._common import names_list, table

    names = [b.name for b in BENCHMARKS]
    # was: --only '' ran every benchmark, --only , named an unknown benchmark ''
    only = names_list(args.only, "--only", "sim,knapsack") if args.only is not None else names
    bad = [s for s in only if s not in names]
    if bad:
        raise ValueError(f"unknown benchmark(s) {', '.join(bad)}; known: {', '.join(names)}")
    if args.quick and all(s in QUICK_SKIPS for s in only):
        # was: nothing printed, exit 0
        raise ValueError(f"--only {','.join(only)}: not measured with --quick (it skips "
                         f"{', '.join(QUICK_SKIPS)}); drop --quick")
    if args.baseline:
        # the scale benchmark (subprocess timings of a baseline checkout): only when asked
        from aryl_gym.benchmarks import scale

        if not (Path(args.baseline) / "aryl_gym" / "__init__.py").is_file():
            raise ValueError(f"--baseline {args.baseline}: not a checkout of aryl-gym (no aryl_gym/__init__.py)")
        if "scale" not in only:  # was: accepted and unused
            raise ValueError("--baseline applies to the scale benchmark only: add scale to --only (or drop --baseline)")
        scale.BASELINE = args.baseline
    out = {}
    for b in BENCHMARKS:
        if b.name not in only:
            continue
        print(f"running {b.name} ...", file=sys.stderr, flush=True)
        rows = b.fn(args.quick)
        out[b.name] = rows
        if not rows:  # was: left out of the output with no word
            why = ("skipped by --quick" if args.quick and b.name in QUICK_SKIPS
                   else "nothing measured (an optional extra it needs is missing?)")
            print(f"{b.name}: {why}", file=sys.stderr)
            continue
        if args.json:
            continue
        print(f"## {b.name}: {b.title}")
        header = list(dict.fromkeys(k for r in rows for k in r))  # rows may differ in columns
        print(table([[r.get(h) for h in header] for r in rows], header))
        print()
    if args.json:
        # strict JSON (was: a rate over a wall time of 0 written as Infinity, a mean of no sample
        # as NaN, which strict parsers refuse): a figure that is not finite is null
        print(strict_json(out))
    return 0
