"""Episodes of a suite -> one CSV row each, written as each finishes; ``--resume`` (SPEC 7).

The protocol follows CompilerGym's leaderboards: a fixed set of episodes (scenario x seed x
entrant), one CSV row per episode that records enough to replay it (scenario, seed, policy or
agent source, env id and kwargs, the hash of the resolved scenario config, the commit), rows
appended and flushed as episodes finish so an interrupted run loses nothing.

Episodes run through :func:`aryl_gym.episodes.run_episodes`, the runner ``aryl-gym reproduce``
uses too: reference policies natively, learned agents through the gym env (``suite.env_id``),
with the env's trace checked against the native one (a difference is written in the row's
``note``). The results CSV is this runner's store: an episode with a row is not run again.

Both kinds give the same row schema (:data:`COLUMNS`). Each episode also writes its series (hourly
combined usage, JCTs, queuing times and the simulator's per-round timeline) to
``OUT/episodes/SCENARIO/ENTRANT/seedN.json.gz`` *before* its row, so plots and TensorBoard logs
can be rebuilt from a resumed run.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aryl_gym.config import ConfigError, load_scenario
from aryl_gym.episodes import (
    EpisodeOutput,
    EpisodeTask,
    Executor,
    check_entrant,
    preload_agent,
    run_episodes,
)
from aryl_gym.fileio import DirLock, unique_backup
from aryl_gym.leaderboard.results import (
    CSV_NAME,
    CsvAppender,
    Key,
    RowScan,
    digest_path,
    make_row,
    make_series,
    move_aside,
    rewrite_rows,
    row_key,
    scan_rows,
    series_path,
    write_series,
)
from aryl_gym.leaderboard.suites import Suite
from aryl_gym.provenance import config_hash, git_commit
from aryl_gym.workload.paths import resolve_data_path

# ----------------------------------------------------------------------------------------------
# Running a suite
# ----------------------------------------------------------------------------------------------


class StaleResultsError(ConfigError):
    """A resumed results file holds rows made with another configuration of the same entrant
    (other weights, env settings or suite settings): they cannot be reused."""


class AgentLoadError(ConfigError):
    """An agent the user named on the command line (``--agent NAME=SOURCE``) cannot be loaded:
    the run stops instead of skipping it (a suite's own agents are skipped with a note)."""


class NothingToRunError(ConfigError):
    """No episode of the suite can run here (every scenario or entrant skipped): nothing was
    computed, so a folder this run created is removed again."""


def _agent_load_error(name: str, source: str, why: str) -> AgentLoadError:
    why = " ".join(why.split())  # one line
    return AgentLoadError(
        f"--agent {name}={source}: cannot load this agent: {why}. Fix or replace {source}, "
        "or leave this --agent out"
    )


def _preload_named_agent(e: Any) -> None:
    """Load an agent given with ``--agent`` here, before any episode runs; AgentLoadError says
    why it cannot be (was: skipped with a note, exit 0, as if it were a suite's optional agent)."""
    try:
        preload_agent(e.source)
    except Exception as exc:  # noqa: BLE001 - whatever the loader raises, in one line
        msg = str(exc) or type(exc).__name__
        if type(exc).__name__ != "AgentUnavailable":
            msg = f"{type(exc).__name__}: {msg}"
        raise _agent_load_error(e.name, e.source, msg) from None


def check_named_agents(suite: Suite) -> None:
    """AgentLoadError for the first agent given with ``--agent`` that cannot be loaded."""
    for e in suite.entrants:
        if e.explicit:
            why = check_entrant(e, suite.env_id)
            if why:
                raise _agent_load_error(e.name, e.source, why)
            _preload_named_agent(e)


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


def build_tasks(suite: Suite, data_root: str | None = None, keep_timeline: bool = True) -> list[EpisodeTask]:
    """All episodes of ``suite`` in a fixed order: scenario, seed, then entrant as listed."""
    tasks = []
    commit = git_commit()
    for scen in suite.scenarios:
        cfg = load_scenario(scen)
        for seed in suite.seeds:
            for e in suite.entrants:
                agent = e.source if e.kind == "agent" else None
                kw = {**suite.env_kwargs, **e.env_kwargs} if agent else {}
                tasks.append(EpisodeTask(
                    scen, e.name, int(seed), agent=agent, env_id=suite.env_id, env_kwargs=kw,
                    data_root=data_root, config_hash=config_hash(cfg, agent, suite.env_id, kw),
                    keep_timeline=keep_timeline, suite=suite.name, commit=commit,
                ))
    return tasks


def check_scenario(scenario: str, data_root: str | None = None) -> str | None:
    """Why ``scenario``'s episodes cannot be drawn here (its trace or series file is missing)."""

    cfg = load_scenario(scenario)
    for what, rel in (("trace", cfg.workload.trace), ("inference series", cfg.inference.csv if cfg.inference.mode == "csv" else None)):
        if not rel:
            continue
        try:
            resolve_data_path(rel, data_root)
        except ConfigError as exc:
            return f"its {what} is not available here: {exc}"
    return None


class _Rows:
    """The results CSV as the runner's store: the finished rows by key; a new episode writes its
    series file, then appends its row (the file is opened at the first new row)."""

    def __init__(self, out: Path, done: dict[Key, dict[str, Any]]):
        self.out = out
        self.done = done
        self.appender: CsvAppender | None = None

    @property
    def resume_hint(self) -> str:
        """What an interrupted run says (was: "finished rows are safe" also when none was written)."""
        if not self.done and self.appender is None:
            return "no episode had finished, so nothing was written; rerun to start again"
        return f"finished rows are safe in {self.out / CSV_NAME}; rerun with --resume to finish the rest"

    def get(self, task: EpisodeTask) -> dict[str, Any] | None:
        return self.done.get(task.key)

    def put(self, task: EpisodeTask, out: EpisodeOutput) -> dict[str, Any]:
        assert out.result is not None
        write_series(series_path(self.out, task.scenario_name, task.policy, task.seed),
                     make_series(out.result, out.timeline))
        row = make_row(out)
        if self.appender is None:
            self.appender = CsvAppender(self.out / CSV_NAME)
        self.appender.append(row)
        self.done[task.key] = row
        return row

    def seconds(self, row: Mapping[str, Any]) -> tuple[float | None, float | None]:
        return row.get("wall_time_s"), None


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
    # agents named on the command line are loaded first, before the output folder is created
    # or anything in it is moved: one that cannot be loaded stops the run and leaves no trace
    # (a suite's own agents are skipped with a note later)
    check_named_agents(suite)
    return _run_suite_checked(suite, out_dir, opts, say, wall0)


def _run_suite_checked(
    suite: Suite, out_dir: str | os.PathLike[str], opts: RunOptions, say: Callable[[str], None], wall0: float
) -> RunSummary:
    """:func:`run_suite` once its ``--agent`` agents are checked and loaded
    (:func:`check_named_agents`; ``run_leaderboard`` checks them before it claims the folder,
    and was: checked them twice)."""
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
            f"note: {csv_path} has no {digest_path(csv_path).name} (deleted, or written by a version before digests): "
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
            others = sorted({str(r["suite"]) for r in rows} - {suite.name})
            if others:  # was: mixed into results.csv, the table and plots replaced by this suite's
                raise ConfigError(
                    f"{csv_path} holds results of suite {others[0]!r}, not {suite.name!r}; give this "
                    f"suite its own --out (or --overwrite to move the old results aside)"
                )
            for r in rows:
                k = row_key(r)
                t = by_key.get(k)
                if t is None:
                    continue  # an entrant (or seed) no longer listed: kept, unused
                if r["config_hash"] != t.config_hash:
                    raise StaleResultsError(
                        f"{csv_path}: the row for {k} was made with another configuration (hash "
                        f"{r['config_hash']}, now {t.config_hash}); its numbers would not be "
                        "comparable. Use a fresh --out (or move the old rows aside: leaderboard "
                        "--overwrite, seed-study --fresh)"
                    )
                done[k] = r
    summary.resumed = len(done)
    # Entrants that cannot run here are skipped once, with a note (not written to the CSV, so a
    # later --resume runs them when they become available).
    pending = {t.policy for t in tasks if t.key not in done}
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
    runnable = [t for t in tasks if t.key in done or (
        t.policy not in summary.skipped and f"scenario {t.scenario_name}" not in summary.skipped)]
    if not runnable:
        # was: 0 episodes, an empty table and exit 0 (e.g. every scenario's trace missing)
        why = "; ".join(f"{k}: {v}" for k, v in summary.skipped.items())
        raise NothingToRunError(f"no episode of suite {suite.name!r} can run here ({why}); fix that (e.g. "
                          "--data-root DIR for the traces) and rerun")
    store = _Rows(out, done)
    try:
        _, stats = run_episodes(
            runnable, store, workers=opts.workers, backend=opts.backend, ray_address=opts.ray_address,
            executor=opts.executor, progress="bar" if opts.progress else "none", desc=suite.name, log=say,
        )
    except KeyboardInterrupt:
        summary.interrupted = True
        raise
    finally:
        if store.appender is not None:
            store.appender.close()
        summary.wall_s = time.perf_counter() - wall0
    summary.new = stats.new
    summary.stale_commit_rows = stats.other_commit
    named = {e.name: e for e in suite.entrants if e.explicit}
    failed = [(t.key, msg) for t, msg in stats.failed]
    for t, msg in stats.skipped:
        if t.policy in named:  # loaded here, but not in the episode's worker: a failure
            failed.append((t.key, str(_agent_load_error(t.policy, named[t.policy].source, msg))))
        else:
            summary.skipped.setdefault(t.policy, msg)
    summary.failed = failed
    order = {t.key: i for i, t in enumerate(tasks)}
    summary.rows = sorted(done.values(), key=lambda r: order[row_key(r)])
    return summary
