"""Episodes of a suite -> one CSV row each, written as each finishes; ``--resume`` (SPEC 7).

The protocol follows CompilerGym's leaderboards: a fixed set of episodes (scenario x seed x
entrant), one CSV row per episode that records enough to replay it (scenario, seed, policy or
agent source, env id and kwargs, the hash of the resolved scenario config, the commit), rows
appended and flushed as episodes finish so an interrupted run loses nothing.

* Reference policies run natively: ``make_episode(scenario, seed).simulator().run(policy)``.
* Learned agents act through the gym env (``suite.env_id``) from
  ``reset(seed=seed, options={"episode_seed": seed})``, which draws the same episode as
  ``make_episode(scenario, seed)``; the runner checks that the env's trace is the native one when
  it can see the env's simulator and writes a warning in the row's ``note`` if not.

Both give the same row schema (:data:`COLUMNS`). Each episode also writes its series (hourly
combined usage, JCTs, queuing times and the simulator's per-round timeline) to
``OUT/episodes/SCENARIO/ENTRANT/seedN.json.gz`` *before* its row, so plots and TensorBoard logs
can be rebuilt from a resumed run.

:func:`run_episode` is a module-level function of a picklable :class:`EpisodeTask`, so it runs
unchanged in this process, in ``spawn``-ed worker processes and in Ray tasks.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aryl_gym.config import ConfigError
from aryl_gym.fileio import DirLock, unique_backup
from aryl_gym.leaderboard.episodes import (  # noqa: F401  (re-exported)
    AgentUnavailable,
    EpisodeOutput,
    EpisodeTask,
    build_tasks,
    check_entrant,
    check_scenario,
    load_agent,
    make_row,
    run_episode,
)
from aryl_gym.leaderboard.provenance import (  # noqa: F401  (re-exported)
    config_hash,
    env_version,
    git_commit,
    scenario_fingerprint,
    slug,
    source_kind,
)
from aryl_gym.leaderboard.ray_backend import ray_executor
from aryl_gym.leaderboard.results import (  # noqa: F401  (re-exported)
    COLUMNS,
    CSV_NAME,
    METRIC_TYPES,
    TIMELINE_COLUMNS,
    VOLATILE_COLUMNS,
    WALL_METRICS,
    CsvAppender,
    Key,
    RowScan,
    digest_path,
    make_series,
    move_aside,
    read_rows,
    read_series,
    rewrite_rows,
    row_key,
    scan_rows,
    series_for,
    series_path,
    write_series,
)
from aryl_gym.leaderboard.suites import Suite
from aryl_gym.parallel import die_with_parent, local_map  # noqa: F401  (die_with_parent re-exported)
from aryl_gym.progress import progress_bar

# ----------------------------------------------------------------------------------------------
# Running a suite
# ----------------------------------------------------------------------------------------------


class StaleResultsError(ConfigError):
    """A resumed results file holds rows made with another configuration of the same entrant
    (other weights, env settings or suite settings): they cannot be reused."""


@dataclass
class RunSummary:
    """The outcome of :func:`run_suite`."""

    out_dir: Path
    csv_path: Path
    rows: list[dict[str, Any]]  # every finished row of the suite (resumed and new), typed
    new: int = 0
    resumed: int = 0
    skipped: dict[str, str] = field(default_factory=dict)  # entrant -> why
    failed: list[tuple[Key, str]] = field(default_factory=list)
    dropped_bad_rows: int = 0
    stale_commit_rows: int = 0
    scan: RowScan | None = None  # what --resume found in the existing CSV
    wall_s: float = 0.0
    interrupted: bool = False


Executor = Callable[[Sequence[EpisodeTask], int], Iterator[EpisodeOutput]]


def local_executor(tasks: Sequence[EpisodeTask], workers: int) -> Iterator[EpisodeOutput]:
    """Run ``tasks`` here (``workers <= 1``) or in ``spawn``-ed processes, yielding as they finish."""
    return local_map(run_episode, tasks, workers)


@dataclass(frozen=True)
class RunOptions:
    """How :func:`run_suite` runs a suite (every field is also a keyword of :func:`run_suite`
    and :func:`~aryl_gym.leaderboard.run_leaderboard`)."""

    workers: int = 1
    backend: str = "local"  # local | ray
    ray_address: str | None = None
    resume: bool = False
    overwrite: bool = False
    data_root: str | None = None
    progress: bool = True
    keep_timeline: bool = True
    executor: Executor | None = None


def run_options(options: RunOptions | None = None, **changes: Any) -> RunOptions:
    """``options`` (default: the defaults) with keyword ``changes``; an unknown keyword is a
    TypeError naming it."""

    base = options or RunOptions()
    known = {f.name for f in dataclasses.fields(RunOptions)}
    bad = sorted(set(changes) - known)
    if bad:
        raise TypeError(f"unknown run option {bad[0]!r}; options: {', '.join(sorted(known))}")
    return dataclasses.replace(base, **changes)


def run_suite(
    suite: Suite,
    out_dir: str | os.PathLike[str],
    options: RunOptions | None = None,
    *,
    log: Callable[[str], None] | None = None,
    **changes: Any,
) -> RunSummary:
    """Run every unfinished episode of ``suite``; rows go to ``OUT/results.csv`` as they finish.

    ``options`` / keyword ``changes``: :class:`RunOptions` (``workers``, ``backend``, ``resume``,
    ...). Without ``resume`` an existing CSV is an error (``overwrite`` moves it aside to a
    unique ``results.csv.bak-TIME`` first, so nothing computed is ever deleted). ``resume``
    keeps the good rows; damaged, duplicated, conflicting and hand-edited rows are reported one
    kind per line, the file as it was is copied to a backup, and their episodes are rerun. The
    folder is locked (:class:`~aryl_gym.fileio.DirLock`) for the whole run: a second run on the
    same ``out_dir`` fails at once with a message naming the holder.
    """
    opts = run_options(options, **changes)
    say = log or (lambda m: print(m, file=sys.stderr))
    wall0 = time.perf_counter()
    out = prepare_out_dir(out_dir)
    with DirLock(out):
        return _run_suite_locked(suite, out, say, wall0, opts)


def prepare_out_dir(out_dir: str | os.PathLike[str]) -> Path:
    """``out_dir`` created if needed; an existing file or an uncreatable folder is a ConfigError."""
    out = Path(out_dir)
    try:
        if out.exists() and not out.is_dir():
            raise ConfigError(f"--out {out}: is an existing file; give a folder (it is created if needed)")
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"--out {out}: cannot create the folder: {exc.strerror or exc}") from None
    if not os.access(out, os.W_OK):
        raise ConfigError(f"--out {out}: the folder is not writable; choose another --out")
    return out


def _resume_rows(csv_path: Path, say: Callable[[str], None], summary: RunSummary) -> list[dict[str, Any]]:
    """The trustworthy rows of an existing CSV; anything else is backed up, reported and rerun."""

    scan = scan_rows(csv_path)
    summary.scan = scan
    summary.dropped_bad_rows = len(scan.damaged)
    rows = [r for r in scan.rows if row_key(r) not in scan.edited_keys]
    if scan.problems:
        bak = unique_backup(csv_path)

        shutil.copy2(csv_path, bak)
        for line in scan.describe():
            say(f"{csv_path}: {line}")
        say(
            f"kept {len(rows)} good row(s); the rows above are left out (their episodes are rerun "
            f"when missing). The file as it was is saved as {bak}"
        )
        rewrite_rows(csv_path, rows)
    elif scan.edited is None and scan.rows:
        say(
            f"note: {csv_path} has no {digest_path(csv_path).name} (written by an older version): "
            "hand edits cannot be detected; validate with --validate"
        )
    return rows


def _run_suite_locked(
    suite: Suite, out: Path, say: Callable[[str], None], wall0: float, opts: RunOptions
) -> RunSummary:
    csv_path = out / CSV_NAME
    tasks = build_tasks(suite, data_root=opts.data_root, keep_timeline=opts.keep_timeline)
    by_key = {t.key: t for t in tasks}
    done: dict[Key, dict[str, Any]] = {}
    summary = RunSummary(out, csv_path, rows=[])
    if csv_path.exists() and csv_path.stat().st_size > 0:
        if opts.overwrite:
            move_aside(csv_path, say)
        elif not opts.resume:
            raise ConfigError(
                f"{csv_path} already exists; pass --resume to continue it (finished episodes are "
                "kept), --overwrite to move it aside, or choose another --out"
            )
        else:
            rows = _resume_rows(csv_path, say, summary)
            for r in rows:
                k = row_key(r)
                t = by_key.get(k)
                if t is None:
                    continue  # a row of another suite or an entrant no longer listed: kept, unused
                if r["config_hash"] != t.config_hash:
                    raise StaleResultsError(
                        f"{csv_path}: the row for {k} was made with another configuration (hash "
                        f"{r['config_hash']}, now {t.config_hash}); its numbers would not be "
                        "comparable. Use a fresh --out (or move the old rows aside: leaderboard "
                        "--overwrite, seed-study --fresh)"
                    )
                if r["commit"] != t.commit:
                    summary.stale_commit_rows += 1
                done[k] = r
            if summary.stale_commit_rows:
                say(
                    f"note: {summary.stale_commit_rows} resumed row(s) were made at another commit; "
                    "use a fresh --out to recompute them with this code"
                )
    summary.resumed = len(done)
    # Entrants that cannot run here are skipped once, with a note (not written to the CSV, so a
    # later --resume runs them when they become available).
    pending = {t.entrant.name for t in tasks if t.key not in done}
    for e in suite.entrants:
        why = check_entrant(e, suite.env_id) if e.name in pending else None
        if why:
            summary.skipped[e.name] = why
    for name in suite.missing:
        summary.skipped[name] = "policy not registered in this checkout"
    for scen in suite.missing_scenarios:
        summary.skipped[f"scenario {scen}"] = "scenario not defined in this checkout"
    for scen in suite.scenarios:
        why = check_scenario(scen, opts.data_root)
        if why:
            summary.skipped[f"scenario {scen}"] = why
    todo = [
        t
        for t in tasks
        if t.key not in done
        and t.entrant.name not in summary.skipped
        and f"scenario {t.scenario}" not in summary.skipped
    ]
    # Learned agents (env-acting, slower) first so they do not end up alone at the tail.
    todo.sort(key=lambda t: 0 if t.entrant.kind == "agent" else 1)
    run = opts.executor
    if run is None:
        if opts.backend == "ray":
            def run(ts: Sequence[EpisodeTask], n: int) -> Iterator[EpisodeOutput]:
                return ray_executor(ts, n, address=opts.ray_address)

        elif opts.backend == "local":
            run = local_executor
        else:
            raise ValueError(f"unknown backend {opts.backend!r}; use local or ray")

    bar = progress_bar(len(todo), f"{suite.name}", unit="ep", enabled=opts.progress and bool(todo), leave=True)
    appender = CsvAppender(csv_path) if todo else None
    try:
        for outp in run(todo, opts.workers):
            t = outp.task
            if outp.status == "ok" and outp.row is not None:
                if outp.series is not None:
                    write_series(series_path(out, t.scenario, t.entrant.name, t.seed), outp.series)
                assert appender is not None
                appender.append(outp.row)
                done[t.key] = outp.row
                summary.new += 1
            elif outp.status == "skipped":
                summary.skipped.setdefault(t.entrant.name, outp.message)
            else:
                summary.failed.append((t.key, outp.message))
                say(f"episode {t.key} failed: {outp.message.splitlines()[0]}")
            if bar is not None:
                bar.update(1)
                bar.set_postfix_str(f"{t.entrant.name} {t.scenario} s{t.seed}", refresh=False)
    except KeyboardInterrupt:
        summary.interrupted = True
        say(
            f"\ninterrupted: {len(done)} finished row(s) are safe in {csv_path}; "
            "rerun with --resume to finish the rest"
        )
        raise
    finally:
        if bar is not None:
            bar.close()
        if appender is not None:
            appender.close()
        summary.wall_s = time.perf_counter() - wall0
    order = {t.key: i for i, t in enumerate(tasks)}
    summary.rows = sorted(done.values(), key=lambda r: order[row_key(r)])
    return summary

