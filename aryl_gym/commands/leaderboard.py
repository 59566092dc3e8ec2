"""``aryl-gym leaderboard``: run a suite, write the table, plots and TensorBoard logs; or validate.

Examples::

    aryl-gym leaderboard --suite quick                      # -> results/quick/
    aryl-gym leaderboard --suite standard --workers 8 --resume
    aryl-gym leaderboard --suite quick --agent mine=runs/x/model.zip --agent h=my_pkg:make
    aryl-gym leaderboard --suite full --backend ray --ray-address auto
    aryl-gym leaderboard --validate results/quick/results.csv --validate-sample 10
    aryl-gym leaderboard --suite reclaim                    # reclaim rules vs the exact optimum
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from aryl_gym.commands._common import (
    add_data_root_arg,
    add_json_arg,
    nonneg_int,
    out_arg,
    positive_int,
    seed_arg,
    strict_json,
)

NAME = "leaderboard"
HELP = "rank policies and learned agents on a fixed suite (CSV rows, table, plots, TensorBoard)"


def _agent_arg(text: str) -> tuple[str, str]:
    if "=" not in text:
        raise argparse.ArgumentTypeError(
            f"--agent takes NAME=SOURCE (SOURCE: path to an SB3 model, a shipped agent name, or "
            f"module:factory), got {text!r}"
        )
    name, src = text.split("=", 1)
    if not name or not src:
        raise argparse.ArgumentTypeError(f"--agent NAME=SOURCE: both parts are needed, got {text!r}")
    return name, src


def add_run_arguments(p: argparse.ArgumentParser, default_workers: int | None = None) -> None:
    """Options shared by ``leaderboard`` and ``main``."""
    p.add_argument(
        "--workers",
        type=positive_int,
        default=default_workers,
        help="parallel episodes (processes locally, CPUs of a local Ray instance); default: CPU count",
    )
    add_data_root_arg(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--no-plots", action="store_true",
                   help="skip the PNG plots (the leaderboard's plots of an earlier run in OUT/plots are "
                        "removed: they would not match the new table)")
    p.add_argument("--no-tensorboard", action="store_true", help="skip the TensorBoard logs")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--suite", help="suite name (configs/suites/NAME.yaml) or path to a suite YAML")
    p.add_argument("--out", type=out_arg, default=None, help="output folder (default results/SUITE)")
    p.add_argument(
        "--agent",
        action="append",
        type=_agent_arg,
        default=[],
        metavar="NAME=SOURCE",
        help="add a learned agent: a path to an SB3 model (.zip), a shipped agent name, or "
        "module:factory returning an object with predict(obs, state, episode_start, deterministic); "
        "repeatable; one that cannot be loaded is an error (a suite's own agents are skipped with a note)",
    )
    p.add_argument("--backend", choices=("local", "ray"), default="local")
    p.add_argument(
        "--ray-address",
        default=None,
        help="Ray cluster to use (default $RAY_ADDRESS, else a local Ray instance)",
    )
    p.add_argument("--resume", action="store_true", help="keep finished rows of OUT/results.csv, run the rest")
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="start afresh: move an existing OUT/results.csv aside (results.csv.bak-TIME)",
    )
    p.add_argument(
        "--allow-missing",
        action="store_true",
        help="skip (with a note) suite policies that are not registered instead of failing",
    )
    p.add_argument("--validate", metavar="CSV", default=None,
                   help="replay the rows of CSV (a results.csv or its folder) and compare")
    p.add_argument("--validate-sample", type=nonneg_int, default=None,
                   help="rows to replay (0 = all; default: all rows of files of up to 100 rows, "
                        "else a sample of 100)")
    p.add_argument("--validate-seed", type=seed_arg, default=None, help="seed of the row sample (default 0)")
    p.add_argument("--list", action="store_true", help="list the suites and exit")
    add_json_arg(p)
    add_run_arguments(p)


def _first_sentence(text: str) -> str:
    text = " ".join(text.split())
    head = text.split(". ")[0].rstrip(".")
    return head if len(head) <= 90 else head[:87] + "..."


def default_workers() -> int:
    return max(1, os.cpu_count() or 1)


def print_outputs(res, stream=None) -> None:  # type: ignore[no-untyped-def]
    """The table and where everything is."""
    stream = stream or sys.stdout
    print(res.table, file=stream)
    print(file=stream)
    s = res.summary
    print(
        f"{len(s.rows)} episodes ({s.new} run now, {s.resumed} resumed) in {s.wall_s:.1f} s",
        file=stream,
    )
    print(f"  table        {res.markdown}  (and {res.json.name})", file=stream)
    print(f"  rows         {res.csv}", file=stream)
    if res.plots:
        print(f"  plots        {res.plots[0].parent}/ ({', '.join(p.name for p in res.plots)})", file=stream)
    if res.tensorboard is not None:
        print(f"  TensorBoard  tensorboard --logdir {res.tensorboard}", file=stream)
    for n in res.notes:
        print(f"  note: {n}", file=stream)


#: options of a leaderboard run: (attribute, flag); --list and --validate take none of them
RUN_OPTIONS = (
    ("suite", "--suite"), ("out", "--out"), ("agent", "--agent"), ("resume", "--resume"),
    ("overwrite", "--overwrite"), ("allow_missing", "--allow-missing"), ("workers", "--workers"),
    ("ray_address", "--ray-address"), ("no_plots", "--no-plots"), ("no_tensorboard", "--no-tensorboard"),
)


def check_unused_options(args: argparse.Namespace) -> None:
    """Refuse an option the mode given would ignore (was: ignored without a word, so
    ``--validate-sample 5`` without ``--validate`` ran the whole suite)."""
    if args.suite and not args.validate:  # with neither, run() asks for --suite or --validate
        given = [f for a, f in (("validate_sample", "--validate-sample"), ("validate_seed", "--validate-seed"))
                 if getattr(args, a) is not None]
        if given:
            raise ValueError(f"{', '.join(given)} {'apply' if len(given) > 1 else 'applies'} to --validate CSV "
                             f"only: add --validate CSV, or drop {', '.join(given)}")
    if args.list or args.validate:
        mode = "--list" if args.list else "--validate"
        given = [f for a, f in RUN_OPTIONS if getattr(args, a)]
        if args.backend != "local":
            given.append("--backend")
        if args.list and args.validate:
            given.append("--validate")
        if args.list:
            given += [f for a, f in (("validate_sample", "--validate-sample"), ("validate_seed", "--validate-seed"))
                      if getattr(args, a) is not None]
        if given:
            raise ValueError(f"{mode} runs no suite and takes no {', '.join(given)}; drop "
                             f"{'it' if len(given) == 1 else 'them'} (a suite is run without {mode})")
    if args.ray_address and args.backend != "ray":  # was: ignored; the run used local processes
        raise ValueError("--ray-address names the cluster of --backend ray; add --backend ray, or drop "
                         "--ray-address")


def run(args: argparse.Namespace) -> int:
    # leaderboard imports pydantic: only when a config is validated
    from aryl_gym.leaderboard import list_suites, load_suite, run_leaderboard

    # reclaim_suite imports pydantic: only when a config is validated
    from aryl_gym.leaderboard import reclaim_suite as rs

    if args.resume and args.overwrite:  # was: --overwrite won and every episode was rerun
        raise ValueError("--resume keeps the finished rows and --overwrite moves them aside; give one of them")
    check_unused_options(args)
    if args.list:
        if args.json:
            out: dict[str, dict[str, object]] = {}
            for name in list_suites():
                if rs.is_reclaim_suite(name):  # was: loaded as an episode suite, exit 2
                    r = rs.load_reclaim_suite(name)
                    out[name] = {"kind": "reclaim",
                                 "scenarios": sorted({str(i["scenario"]) for i in r.instances if "scenario" in i}),
                                 "seeds": [], "entrants": list(r.policies) + list(r.agents),
                                 "description": r.description, "instances": [dict(i) for i in r.instances]}
                    continue
                s = load_suite(name, allow_missing=True)
                out[name] = {"kind": "episodes", "scenarios": list(s.scenarios), "seeds": list(s.seeds),
                             "entrants": [e.name for e in s.entrants] + list(s.missing),
                             "description": s.description}
            print(strict_json(out))
            return 0
        for name in list_suites():
            if rs.is_reclaim_suite(name):
                r = rs.load_reclaim_suite(name)
                print(f"{name:10s} reclaim: {len(r.instances)} instance source(s) x "
                      f"{len(r.policies) + len(r.agents)} entrants  {_first_sentence(r.description)}")
                continue
            s = load_suite(name, allow_missing=True)
            print(f"{name:10s} {len(s.scenarios)} scenario(s) x {len(s.seeds)} seeds x "
                  f"{len(s.entrants) + len(s.missing)} entrants  {_first_sentence(s.description)}")
        return 0
    if args.validate:
        # validate imports pydantic: only when a config is validated
        from aryl_gym.leaderboard.validate import validate_csv

        # at run time: aryl-gym imports every command module to build its parser
        from aryl_gym.progress import progress_bar

        bar = progress_bar(None, "validate", unit="rows", enabled=not args.no_progress)
        try:
            rep = validate_csv(
                args.validate, sample=args.validate_sample,
                seed=args.validate_seed if args.validate_seed is not None else 0,
                data_root=args.data_root, progress=(lambda c: bar.update(1)) if bar is not None else None,
            )
        finally:
            if bar is not None:
                bar.close()
        if args.json:
            print(json.dumps(validation_json(rep)))
        else:
            print(rep.render())
        return 0 if rep.ok else 1
    if not args.suite:
        raise ValueError("give --suite NAME (see --list) or --validate CSV")
    if rs.is_reclaim_suite(args.suite):
        if args.workers is not None and args.workers > 1:  # was: ignored without a word
            raise ValueError(f"--workers {args.workers}: the reclaim suite {args.suite!r} runs its decisions in "
                             "this one process; drop --workers")
        # at run time: aryl-gym imports every command module to build its parser
        from aryl_gym.episodes import run_interruptible

        # SIGTERM ends it as Ctrl-C does, with one line and exit 143 (was: killed without a word)
        rs_out = str(args.out or Path("results") / rs.load_reclaim_suite(args.suite).name)
        return run_interruptible(lambda: rs.run_cli(args), f"aryl-gym leaderboard --suite {args.suite} "
                                 f"--out {rs_out} --resume",
                                 f"finished rows are kept in {rs_out}/results.csv; rerun with --resume "
                                 "to finish the rest")
    suite = load_suite(args.suite, allow_missing=args.allow_missing)
    if args.agent:
        names = [n for n, _ in args.agent]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"--agent {dup[0]}=...: the name is given twice; names must be unique")
        suite = suite.with_agents(dict(args.agent))
    out_dir = Path(args.out) if args.out else Path("results") / suite.name

    def body() -> int:
        res = run_leaderboard(
            suite,
            out_dir,
            workers=args.workers or default_workers(),
            backend=args.backend,
            ray_address=args.ray_address,
            resume=args.resume,
            overwrite=args.overwrite,
            data_root=args.data_root,
            progress=not args.no_progress,
            plots=not args.no_plots,
            tensorboard=not args.no_tensorboard,
        )
        if args.json:
            print(json.dumps(outputs_json(res), default=str))
        else:
            print_outputs(res)
        return 1 if res.summary.failed else 0

    # at run time: aryl-gym imports every command module to build its parser
    from aryl_gym.episodes import run_interruptible

    # SIGTERM (a batch scheduler's stop, kill) ends the run as Ctrl-C does: one line saying how
    # many episodes are done and how to resume, exit 143 (was: killed without a word; Ctrl-C
    # said it twice, the second time a bare "interrupted")
    return run_interruptible(body, f"aryl-gym leaderboard --suite {args.suite} --out {out_dir} --resume",
                             f"finished rows are kept in {out_dir / 'results.csv'}; rerun with --resume "
                             "to finish the rest")


def outputs_json(res) -> dict:  # type: ignore[no-untyped-def]
    """The ``--json`` form of a leaderboard run: the table data and where the files are."""
    s = res.summary
    return {
        "table": res.data,
        "episodes": len(s.rows),
        "new": s.new,
        "resumed": s.resumed,
        "failed": [{"key": list(k), "message": m.splitlines()[0] if m else ""} for k, m in s.failed],
        "skipped": dict(s.skipped),
        "wall_s": s.wall_s,
        "files": {
            "csv": str(res.csv),
            "markdown": str(res.markdown),
            "json": str(res.json),
            "plots": [str(p) for p in res.plots],
            "tensorboard": str(res.tensorboard) if res.tensorboard is not None else None,
        },
        "notes": list(res.notes),
    }


def validation_json(rep) -> dict:  # type: ignore[no-untyped-def]
    return {
        "path": str(rep.path),
        "rows_total": rep.rows_total,
        "ok": rep.ok,
        "file_problems": list(rep.file_problems),
        "checks": [
            {"key": list(c.key), "status": c.status, "message": c.message,
             "diffs": [[k, a, b] for k, a, b in c.diffs]}
            for c in rep.checks
        ],
    }
