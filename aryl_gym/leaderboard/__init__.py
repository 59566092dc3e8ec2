"""Leaderboards: fixed suites of episodes, one replayable CSV row each, tables, plots, TensorBoard.

Modules:

* :mod:`~aryl_gym.leaderboard.suites` -- suite YAML (scenarios x seeds x entrants), validated;
* :mod:`~aryl_gym.leaderboard.runner` -- a suite's episodes (through :mod:`aryl_gym.episodes`,
  locally or on Ray) -> CSV rows as they finish, ``--resume``;
* :mod:`~aryl_gym.leaderboard.report` -- ``leaderboard.md`` / ``leaderboard.json``;
* :mod:`~aryl_gym.leaderboard.seed_study` -- how many seeds separate a given difference
  (``scripts/seed_study.py``);
* :mod:`~aryl_gym.leaderboard.plots` -- usage over time (paper Figure 9), JCT CDF, queuing bars,
  performance profile;
* :mod:`~aryl_gym.leaderboard.tb` -- TensorBoard runs per entrant under the same tags;
* :mod:`~aryl_gym.leaderboard.validate` -- replay a sample of rows and compare.

The intervals, tied ranks and performance profiles come from :mod:`aryl_gym.stats`.

:func:`run_leaderboard` is the whole pipeline (what ``aryl-gym leaderboard`` runs). Nothing here
imports matplotlib, TensorBoard, rliable, Ray or torch at import time.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aryl_gym.fileio import DirLock, check_out_folder, claim_folder
from aryl_gym.leaderboard.report import render_console, write_report
from aryl_gym.leaderboard.results import series_for
from aryl_gym.leaderboard.runner import (
    NothingToRunError,
    RunOptions,
    RunSummary,
    _run_suite_checked,
    check_named_agents,
    prepare_out_dir,
    run_options,
    run_suite,
)
from aryl_gym.leaderboard.suites import Entrant, Suite, list_suites, load_suite, suite_from_dict

__all__ = [
    "Entrant",
    "LeaderboardOutputs",
    "RunOptions",
    "RunSummary",
    "Suite",
    "list_suites",
    "load_suite",
    "run_leaderboard",
    "run_suite",
    "suite_from_dict",
]


@dataclass
class LeaderboardOutputs:
    """Where a leaderboard run put things, and what it found."""

    out_dir: Path
    csv: Path
    markdown: Path
    json: Path
    summary: RunSummary
    table: str
    data: dict[str, Any]
    plots: list[Path] = field(default_factory=list)
    tensorboard: Path | None = None
    notes: list[str] = field(default_factory=list)


def run_leaderboard(
    suite: Suite,
    out_dir: str | os.PathLike[str],
    options: RunOptions | None = None,
    *,
    plots: bool = True,
    tensorboard: bool = True,
    log: Callable[[str], None] | None = None,
    **changes: Any,
) -> LeaderboardOutputs:
    """Run ``suite`` (:func:`run_suite`; ``options`` / keyword ``changes`` are its
    :class:`RunOptions`), then write the tables, plots and TensorBoard logs."""

    opts = run_options(options, **changes)
    say = log or (lambda m: print(m, file=sys.stderr))
    # an agent given with --agent that cannot be loaded stops the run before the folder is
    # created or claimed (was: an empty folder with its marker was left behind)
    check_named_agents(suite)
    # a non-empty folder of the user's (--out ~) is refused before the lock file is made in it
    check_out_folder(out_dir, "leaderboard")
    created = not Path(out_dir).exists()
    try:
        # the folder stays locked while the tables, plots and logs are written too
        with DirLock(prepare_out_dir(out_dir)):
            claim_folder(Path(out_dir), "leaderboard")
            return _run_leaderboard_locked(suite, out_dir, opts, plots, tensorboard, say)
    except NothingToRunError:
        # nothing was computed: a folder made by this run goes again (was: left behind, empty
        # but for its owner marker, so the next run needed --overwrite or another --out)
        if created:
            shutil.rmtree(out_dir, ignore_errors=True)
        raise


def _run_leaderboard_locked(
    suite: Suite,
    out_dir: str | os.PathLike[str],
    opts: RunOptions,
    plots: bool,
    tensorboard: bool,
    say: Callable[[str], None],
) -> LeaderboardOutputs:
    # the --agent agents were checked and loaded by run_leaderboard (was: a second time here)
    summary = _run_suite_checked(suite, out_dir, opts, say, time.perf_counter())
    out = Path(out_dir)
    md, js, data = write_report(out, suite, summary.rows, summary)
    res = LeaderboardOutputs(out, summary.csv_path, md, js, summary, render_console(data), data)
    series = series_for(out, summary.rows) if (plots or tensorboard) and summary.rows else {}
    if plots and summary.rows:
        try:
            # an optional dependency: its absence is handled here
            from aryl_gym.leaderboard.plots import make_plots

            res.plots = make_plots(out, suite, summary.rows, series, data)
        except ImportError as exc:
            res.notes.append(f"no plots: {exc}")
    # plots of an earlier run in this folder that this run did not redraw (--no-plots, no
    # matplotlib, a scenario or interval plot not drawn this time) would sit beside a table they
    # do not match (was: left in place): the leaderboard's own plot files go
    from aryl_gym.leaderboard.plots import remove_stale_plots

    stale = remove_stale_plots(out, res.plots)
    if stale:
        res.notes.append(
            f"removed {len(stale)} plot(s) of an earlier run from {out / 'plots'} "
            f"({', '.join(p.name for p in stale)}): they did not match this table"
        )
    if tensorboard and summary.rows:
        try:
            # an optional dependency: its absence is handled here
            from aryl_gym.leaderboard.tb import write_tensorboard

            res.tensorboard = write_tensorboard(out, suite, summary.rows, series)
        except ImportError as exc:
            res.notes.append(f"no TensorBoard logs: {exc}")
    if res.tensorboard is None:
        # the same for TensorBoard logs of an earlier run (--no-tensorboard, no tensorboardX):
        # TensorBoard would show them as this run's (was: left in place)
        from aryl_gym.leaderboard.tb import remove_stale_logs

        old = remove_stale_logs(out)
        if old:
            res.notes.append(f"removed {len(old)} TensorBoard log file(s) of an earlier run from "
                             f"{out / 'tensorboard'}: they did not match this table")
    return res
