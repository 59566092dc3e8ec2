"""``aryl-gym trace-info``: what a trace holds and what loading it skipped, and why."""

from __future__ import annotations

import argparse
import json

from aryl_gym.commands._common import add_data_root_arg, fmt_num, seed_arg, table

NAME = "trace-info"
HELP = ("summarise a trace: rows, span, GPU-size histogram, duration quantiles, bad rows by reason "
        "(counts and first examples; never stops at the first)")


def add_arguments(p: argparse.ArgumentParser) -> None:
    # _trace_args imports pyarrow: only when a trace is read
    from aryl_gym.commands._trace_args import add_trace_arguments

    p.add_argument("path", help="trace file (relative to --data-root or absolute)")
    p.add_argument("--scenario", default=None,
                   help="check sizes against this scenario's training pool and use its mapping defaults")
    add_data_root_arg(p)
    p.add_argument("--seed", type=seed_arg, default=0, help="seed of the mapping draws")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    add_trace_arguments(p, cluster=True)


def run(args: argparse.Namespace) -> int:
    # _trace_args imports pyarrow: only when a trace is read
    from aryl_gym.commands._trace_args import (
        check_trace_file,
        scenario_from_args,
        trace_options_from_args,
    )

    # at run time: aryl-gym imports every command module to build its parser
    from aryl_gym.scenario import _seed_streams
    from aryl_gym.workload.formats import format_names, guess_format

    # traces imports pyarrow: only when a trace is read
    from aryl_gym.workload.traces import load_trace, trace_stats

    check_trace_file(args.path, args.data_root, "trace-info")
    fmt = args.trace_format or guess_format(args.path)
    if fmt is None:
        raise ValueError(f"{args.path}: pass --trace-format ({'|'.join(format_names())})")
    if not args.scenario:  # was: the --train-*/--inf-* overrides ignored without a word
        given = [f"--{k.replace('_', '-')}" for k in ("train_servers", "train_gpus_per_server", "train_gpu",
                                                      "inf_servers", "inf_gpus_per_server", "inf_gpu")
                 if getattr(args, k, None) is not None]
        if given:
            raise ValueError(f"{', '.join(given)} change the cluster of --scenario; add --scenario NAME "
                             "(e.g. --scenario testbed), or drop them")
    cfg = scenario_from_args(args) if args.scenario else None
    # An info command reports every bad row by reason (counts and first examples) instead of
    # stopping at the first: rows are always loaded with skip_bad_rows.
    opts = trace_options_from_args(args)
    opts.pop("skip_bad_rows", None)
    jobs, report = load_trace(args.path, fmt, map=args.map, cluster=cfg, rng=_seed_streams(args.seed)[0],
                              skip_bad_rows=True, data_root=args.data_root, **opts)
    st = trace_stats(jobs)
    if args.json:
        print(json.dumps({"report": report.to_dict(), "stats": {k: v for k, v in st.items()}}, default=str))
        return 0
    print(report.summary(examples=3))
    if report.skipped:
        print(f"{report.skipped_total} bad rows (by reason above, first examples with their lines): loading "
              "this trace for a run needs --skip-bad-rows (they are left out as here) or fixed rows"
              + ("; repeated jobs can also be kept with --trace-option duplicates=keep"
                 if report.skipped.get("duplicate") else ""))
    print(f"jobs {st['jobs']}  span {fmt_num(st['span_h'])} h  GPU-hours {fmt_num(st['gpu_hours'])}  "
          f"elastic {st['elastic']}  type-agnostic {st['type_agnostic']}")
    print("\nGPUs per job")
    print(table([[g, n, f"{100 * n / st['jobs']:.1f}%"] for g, n in st["gpu_hist"].items()], ["gpus", "jobs", "share"]))
    print("\nduration (s, at requested GPUs)")
    print(table([[f"p{q}", v] for q, v in st["duration_q"].items()], ["quantile", "seconds"]))
    print("\nfamilies: " + ", ".join(f"{f} {n}" for f, n in st["families"].items()))
    return 0
