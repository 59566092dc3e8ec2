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

import importlib
import importlib.util
import inspect
import json
import os
import re
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from aryl_gym.config import ConfigError, load_scenario
from aryl_gym.fileio import DirLock
from aryl_gym.leaderboard.provenance import (  # noqa: F401  (re-exported)
    config_hash,
    env_version,
    git_commit,
    scenario_fingerprint,
    slug,
)
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
    read_rows,
    read_series,
    rewrite_rows,
    row_key,
    scan_rows,
    series_for,
    series_path,
    write_series,
)
from aryl_gym.leaderboard.suites import Entrant, Suite
from aryl_gym.metrics import EpisodeResult
from aryl_gym.train.evaluation import env_action_masks

# ----------------------------------------------------------------------------------------------
# Tasks
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EpisodeTask:
    """One episode to run; picklable (plain data only)."""

    suite: str
    scenario: str
    seed: int
    entrant: Entrant
    env_id: str
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    data_root: str | None = None
    config_hash: str = ""
    commit: str = "unknown"
    keep_timeline: bool = True

    @property
    def key(self) -> Key:
        return (self.suite, self.scenario, self.seed, self.entrant.name)


@dataclass
class EpisodeOutput:
    """What a worker returns: the row, the series, or why it was skipped or failed."""

    task: EpisodeTask
    status: str  # "ok" | "skipped" | "failed"
    row: dict[str, Any] | None = None
    series: dict[str, Any] | None = None
    message: str = ""


class AgentUnavailable(Exception):
    """The agent (or the env it acts through) is not available here: skip it with a note."""


def build_tasks(
    suite: Suite,
    data_root: str | None = None,
    keep_timeline: bool = True,
) -> list[EpisodeTask]:
    """All episodes of ``suite`` in a fixed order: scenario, seed, then entrant as listed."""
    tasks = []
    commit = git_commit()
    for scen in suite.scenarios:
        cfg = load_scenario(scen)
        for seed in suite.seeds:
            for e in suite.entrants:
                kw = {**suite.env_kwargs, **e.env_kwargs} if e.kind == "agent" else {}
                tasks.append(
                    EpisodeTask(
                        suite=suite.name,
                        scenario=scen,
                        seed=int(seed),
                        entrant=e,
                        env_id=suite.env_id,
                        env_kwargs=kw,
                        data_root=data_root,
                        config_hash=config_hash(cfg, e, suite.env_id, kw),
                        commit=commit,
                        keep_timeline=keep_timeline,
                    )
                )
    return tasks


# ----------------------------------------------------------------------------------------------
# Agents
# ----------------------------------------------------------------------------------------------

_IMPORT_RE = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


def source_kind(source: str) -> str:
    """``"path"`` (an SB3 model file), ``"import"`` (``module:factory``) or ``"name"`` (shipped)."""
    if os.path.exists(source):
        return "path"
    if _IMPORT_RE.match(source):
        return "import"
    if source.endswith(".zip") or os.sep in source or source.startswith("."):
        return "path"
    return "name"


def _learned_module() -> Any | None:
    try:
        return importlib.import_module("aryl_gym.agents.learned")
    except ModuleNotFoundError as exc:
        if exc.name in ("aryl_gym.agents.learned",):
            return None
        raise


def check_entrant(entrant: Entrant, env_id: str) -> str | None:
    """Why ``entrant`` cannot run here (a skip note), or ``None``. Cheap; no model is loaded."""
    if entrant.kind != "agent":
        return None
    import gymnasium as gym

    import aryl_gym  # noqa: F401  (registers the envs)

    if env_id not in gym.envs.registry:
        return f"env {env_id} is not registered (aryl_gym.envs not installed in this checkout yet)"
    src = entrant.source
    kind = source_kind(src)
    if kind == "path":
        if not os.path.exists(src):
            return f"model file {src} not found"
    elif kind == "import":
        mod = src.split(":", 1)[0]
        try:
            found = importlib.util.find_spec(mod)
        except (ImportError, ValueError):
            found = None
        if found is None:
            return f"module {mod!r} of {src} is not importable"
    else:
        learned = _learned_module()
        if learned is None:
            return (
                f"shipped agent {src!r} needs aryl_gym.agents.learned (the learned-agent loader), "
                "not installed in this checkout"
            )
        shipped = getattr(learned, "shipped_agents", None)
        if callable(shipped) and src not in shipped():
            return (
                f"shipped agent {src!r} not found (agents/pretrained/{src}.zip); shipped: "
                f"{', '.join(shipped()) or 'none yet'}"
            )
    return None


def check_scenario(scenario: str, data_root: str | None = None) -> str | None:
    """Why ``scenario``'s episodes cannot be drawn here (its trace or series file is missing)."""
    from aryl_gym.workload.paths import resolve_data_path

    cfg = load_scenario(scenario)
    for what, rel in (("trace", cfg.workload.trace), ("inference series", cfg.inference.csv if cfg.inference.mode == "csv" else None)):
        if not rel:
            continue
        try:
            resolve_data_path(rel, data_root)
        except ConfigError as exc:
            return f"its {what} is not available here: {exc}"
    return None


def _load_sb3(path: str) -> Any:
    """Load an SB3 model file, trying MaskablePPO first, then the discrete-action SB3 algorithms."""
    errors = []
    loaders: list[Callable[[], Any]] = []
    try:
        from sb3_contrib import MaskablePPO

        loaders.append(lambda: MaskablePPO.load(path, device="cpu"))
    except ImportError:
        pass
    try:
        from stable_baselines3 import A2C, DQN, PPO

        for cls in (PPO, A2C, DQN):
            loaders.append(lambda cls=cls: cls.load(path, device="cpu"))
    except ImportError:
        raise AgentUnavailable(
            "loading an SB3 model needs stable-baselines3 (pip install 'aryl-gym[train]')"
        ) from None
    for load in loaders:
        try:
            return load()
        except Exception as exc:  # noqa: BLE001 - try the next algorithm
            errors.append(f"{type(exc).__name__}: {exc}")
    raise AgentUnavailable(f"could not load {path} as an SB3 model ({'; '.join(errors[:2])})")


def load_agent(source: str, env: Any = None) -> Any:
    """An object with SB3-style ``predict`` for ``source``, bound to ``env``.

    * shipped name (``ppo-testbed``) or path: ``aryl_gym.agents.learned.load_agent`` when it
      exists (it knows the shipped agents and their normalisation), else SB3's ``load``;
    * ``module:factory``: the factory is called with the env when it takes a parameter, else
      with no argument, and must return an object with
      ``predict(obs, state, episode_start, deterministic)``.
    """
    kind = source_kind(source)
    if kind == "import":
        mod_name, attr = source.split(":", 1)
        try:
            obj: Any = importlib.import_module(mod_name)
        except ImportError as exc:
            raise AgentUnavailable(f"cannot import {mod_name!r}: {exc}") from None
        for part in attr.split("."):
            if not hasattr(obj, part):
                raise AgentUnavailable(f"{mod_name!r} has no attribute {attr!r}")
            obj = getattr(obj, part)
        if not callable(obj):
            raise AgentUnavailable(f"{source} is not callable")
        if env is None:
            raise ValueError("a module:factory agent is built with its env; pass env")
        try:
            n_params = len(inspect.signature(obj).parameters)
        except (TypeError, ValueError):
            n_params = 1
        agent = obj(env) if n_params >= 1 else obj()
    else:
        learned = _learned_module()
        if learned is not None and hasattr(learned, "load_agent"):
            try:
                agent = learned.load_agent(source)
            except (FileNotFoundError, KeyError, LookupError, ConfigError) as exc:
                raise AgentUnavailable(f"could not load agent {source!r}: {exc}") from None
        elif kind == "path":
            agent = _load_sb3(source)
        else:
            raise AgentUnavailable(
                f"shipped agent {source!r} needs aryl_gym.agents.learned, not installed here"
            )
    if not callable(getattr(agent, "predict", None)):
        raise AgentUnavailable(f"the agent from {source} has no predict(obs, state, episode_start, deterministic)")
    return agent


#: saved models loaded in this process, by source (a worker loads each model once, not per
#: episode; their ``predict`` keeps no state between calls other than the ``state`` passed in)
_AGENT_CACHE: dict[tuple[str, float], Any] = {}


def _cached_agent(source: str) -> Any:
    key = (source, os.path.getmtime(source) if os.path.exists(source) else 0.0)
    if key not in _AGENT_CACHE:
        _AGENT_CACHE[key] = load_agent(source)
    return _AGENT_CACHE[key]


def _env_sim(env: Any) -> Any | None:
    """The :class:`~aryl_gym.sim.engine.Simulator` inside an env, if it exposes one."""
    from aryl_gym.sim.engine import Simulator

    base = getattr(env, "unwrapped", env)
    for name in ("sim", "simulator", "_sim"):
        v = getattr(base, name, None)
        if isinstance(v, Simulator):
            return v
    for v in vars(base).values():
        if isinstance(v, Simulator):
            return v
    return None


#: keys of the final ``info`` that may carry the :class:`EpisodeResult` (env's choice first)
RESULT_KEYS = ("episode_result", "result", "final_result")


def _result_from_info(info: Mapping[str, Any]) -> EpisodeResult | None:
    for k in RESULT_KEYS:
        v = info.get(k)
        if isinstance(v, EpisodeResult):
            return v
        if isinstance(v, Mapping):
            return EpisodeResult.from_dict(dict(v))
    return None


def _run_agent(
    task: EpisodeTask,
) -> tuple[EpisodeResult, list[Any] | None, str, tuple[str, dict[str, Any]]]:
    """One episode of a learned agent through the gym env. Returns (result, timeline, note)."""
    try:
        import gymnasium as gym

        import aryl_gym  # noqa: F401  (registers the envs)
    except ImportError as exc:  # pragma: no cover - gymnasium is a core dependency
        raise AgentUnavailable(str(exc)) from None
    if task.env_id not in gym.envs.registry:
        raise AgentUnavailable(f"env {task.env_id} is not registered")
    kwargs: dict[str, Any] = {**task.env_kwargs, "scenario": task.scenario}
    if task.data_root:
        kwargs["data_root"] = task.data_root
    if source_kind(task.entrant.source) == "import":
        env = gym.make(task.env_id, **kwargs)
        agent = None
    else:
        # A saved model knows the env it was trained on (id and kwargs): build that env, on the
        # suite's scenario, with the suite's kwargs on top.
        agent = _cached_agent(task.entrant.source)
        make_env = getattr(agent, "make_env", None)
        if callable(make_env):
            env = make_env(**kwargs)
        else:
            env = gym.make(task.env_id, **kwargs)
    try:
        if agent is None:
            agent = load_agent(task.entrant.source, env)
        use_masks = "action_masks" in _signature_params(agent.predict)
        # ``episode_seed`` makes the env draw ``make_episode(scenario, seed)``, the episode the
        # reference policies play (``reset(seed=s)`` alone derives the trace seed from the env's
        # own generator); _check_trace verifies it.
        obs, info = env.reset(seed=int(task.seed), options={"episode_seed": int(task.seed)})
        note = _check_trace(env, task)
        state = None
        start = np.ones((1,), dtype=bool)
        while True:
            kw: dict[str, Any] = {"state": state, "episode_start": start, "deterministic": True}
            if use_masks:
                kw["action_masks"] = env_action_masks(env)
            action, state = agent.predict(obs, **kw)
            start = np.zeros((1,), dtype=bool)
            obs, _reward, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                break
        res = _result_from_info(info)
        if res is None:
            raise RuntimeError(
                f"the final info of {task.env_id} carries no EpisodeResult (looked for "
                f"{', '.join(RESULT_KEYS)})"
            )
        sim = _env_sim(env)
        timeline = list(sim.acc.timeline) if (sim is not None and task.keep_timeline) else None
        return res, timeline, note, _env_identity(env, task)
    finally:
        env.close()


def _env_identity(env: Any, task: EpisodeTask) -> tuple[str, dict[str, Any]]:
    """(env id, kwargs other than scenario/data_root) of the env actually used."""
    spec = getattr(env, "spec", None)
    if spec is None:
        return task.env_id, dict(task.env_kwargs)
    kw = {k: v for k, v in (spec.kwargs or {}).items() if k not in ("scenario", "data_root")}
    return str(spec.id), kw


def _signature_params(fn: Callable[..., Any]) -> set[str]:
    try:
        return set(inspect.signature(fn).parameters)
    except (TypeError, ValueError):  # pragma: no cover
        return set()


def _check_trace(env: Any, task: EpisodeTask) -> str:
    """A note when the env's episode is not ``make_episode(scenario, seed)``'s (unfair comparison)."""
    sim = _env_sim(env)
    if sim is None:
        return "env trace not checked (no simulator exposed)"
    from aryl_gym.scenario import make_episode

    ref = make_episode(task.scenario, task.seed, data_root=task.data_root)
    sub = np.array([j.submit for j in ref.jobs])
    work = np.array([j.work for j in ref.jobs])
    if sim.n_jobs != len(ref.jobs) or not (
        np.array_equal(sim.submit, sub) and np.array_equal(sim.work, work)
    ):
        return "WARNING: the env's trace differs from the native trace of this seed"
    return ""


def _run_policy(
    task: EpisodeTask,
) -> tuple[EpisodeResult, list[Any] | None, str, tuple[str, dict[str, Any]]]:
    from aryl_gym.agents import make_policy
    from aryl_gym.scenario import make_episode

    sim = make_episode(task.scenario, task.seed, data_root=task.data_root).simulator()
    res = sim.run(make_policy(task.entrant.name))
    return res, (list(sim.acc.timeline) if task.keep_timeline else None), "", (task.env_id, {})


def run_episode(task: EpisodeTask) -> EpisodeOutput:
    """Run one episode; never raises (failures come back as ``status="failed"``)."""
    wall0 = time.perf_counter()
    try:
        if task.entrant.kind == "agent":
            res, timeline, note, env_used = _run_agent(task)
        else:
            res, timeline, note, env_used = _run_policy(task)
    except AgentUnavailable as exc:
        return EpisodeOutput(task, "skipped", message=str(exc))
    except Exception as exc:  # noqa: BLE001 - reported in the summary, the run goes on
        tb = traceback.format_exc(limit=6)
        return EpisodeOutput(task, "failed", message=f"{type(exc).__name__}: {exc}\n{tb}")
    wall = time.perf_counter() - wall0
    row = make_row(task, res, wall, note, env_used)
    return EpisodeOutput(task, "ok", row=row, series=make_series(res, timeline))


def make_row(
    task: EpisodeTask,
    res: EpisodeResult,
    wall: float,
    note: str = "",
    env_used: tuple[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    d = res.to_dict()
    env_id, env_kwargs = env_used or (task.env_id, task.env_kwargs)
    agent = task.entrant.kind == "agent"
    cfg_name = res.scenario
    row: dict[str, Any] = {
        "suite": task.suite,
        "scenario": task.scenario,
        "scenario_name": cfg_name,
        "env_id": env_id,
        "env_version": env_version(env_id),
        "seed": task.seed,
        "policy": task.entrant.name,
        "kind": task.entrant.kind,
        "source": task.entrant.source if agent else "",
        "env_kwargs": json.dumps(dict(env_kwargs), sort_keys=True, default=str) if agent else "",
    }
    for k, t in METRIC_TYPES.items():
        v = d.get(k)
        if v is not None and t is float:
            v = float(v)
        row[k] = v
    from aryl_gym import __version__

    row.update(
        wall_time_s=round(wall, 6),
        commit=task.commit,
        config_hash=task.config_hash,
        aryl_gym_version=__version__,
        finished_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        note=note,
    )
    return row


# ----------------------------------------------------------------------------------------------
# Running a suite
# ----------------------------------------------------------------------------------------------


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


def die_with_parent(parent_pid: int, poll_s: float = 0.5) -> None:
    """Worker initializer: end this process when ``parent_pid`` is gone.

    On Linux the kernel sends SIGKILL at once (``prctl(PR_SET_PDEATHSIG)``); everywhere a daemon
    thread also polls the parent id, so a SIGKILL-ed leaderboard run leaves no worker behind.
    """
    if sys.platform.startswith("linux"):
        try:
            import ctypes
            import signal

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
        except (OSError, AttributeError):  # pragma: no cover - no libc prctl
            pass
    if os.getppid() != parent_pid:  # the parent died before the watch started
        os._exit(1)
    import threading

    def watch() -> None:
        while True:
            time.sleep(poll_s)
            if os.getppid() != parent_pid:
                os._exit(1)

    threading.Thread(target=watch, name="aryl-gym-parent-watch", daemon=True).start()


def local_executor(tasks: Sequence[EpisodeTask], workers: int) -> Iterator[EpisodeOutput]:
    """Run ``tasks`` here (``workers <= 1``) or in ``spawn``-ed processes, yielding as they finish."""
    if workers <= 1 or len(tasks) <= 1:
        for t in tasks:
            yield run_episode(t)
        return
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed

    ctx = mp.get_context("spawn")
    pool = ProcessPoolExecutor(
        max_workers=min(workers, len(tasks)),
        mp_context=ctx,
        initializer=die_with_parent,
        initargs=(os.getpid(),),
    )
    try:
        futures = [pool.submit(run_episode, t) for t in tasks]
        for fut in as_completed(futures):
            yield fut.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def run_suite(
    suite: Suite,
    out_dir: str | os.PathLike[str],
    *,
    workers: int = 1,
    backend: str = "local",
    ray_address: str | None = None,
    resume: bool = False,
    overwrite: bool = False,
    data_root: str | None = None,
    progress: bool = True,
    keep_timeline: bool = True,
    executor: Executor | None = None,
    log: Callable[[str], None] | None = None,
) -> RunSummary:
    """Run every unfinished episode of ``suite``; rows go to ``OUT/results.csv`` as they finish.

    Without ``resume`` an existing CSV is an error (``overwrite`` moves it aside to a unique
    ``results.csv.bak-TIME`` first, so nothing computed is ever deleted). ``resume`` keeps the
    good rows; damaged, duplicated, conflicting and hand-edited rows are reported one kind per
    line, the file as it was is copied to a backup, and their episodes are rerun. The folder is
    locked (:class:`~aryl_gym.fileio.DirLock`) for the whole run: a second run on the same
    ``out_dir`` fails at once with a message naming the holder.
    """
    say = log or (lambda m: print(m, file=sys.stderr))
    wall0 = time.perf_counter()
    out = prepare_out_dir(out_dir)
    with DirLock(out):
        return _run_suite_locked(
            suite, out, say, wall0, workers=workers, backend=backend, ray_address=ray_address,
            resume=resume, overwrite=overwrite, data_root=data_root, progress=progress,
            keep_timeline=keep_timeline, executor=executor,
        )


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
    from aryl_gym.fileio import unique_backup

    scan = scan_rows(csv_path)
    summary.scan = scan
    summary.dropped_bad_rows = len(scan.damaged)
    rows = [r for r in scan.rows if row_key(r) not in scan.edited_keys]
    if scan.problems:
        bak = unique_backup(csv_path)
        import shutil

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
    suite: Suite,
    out: Path,
    say: Callable[[str], None],
    wall0: float,
    *,
    workers: int,
    backend: str,
    ray_address: str | None,
    resume: bool,
    overwrite: bool,
    data_root: str | None,
    progress: bool,
    keep_timeline: bool,
    executor: Executor | None,
) -> RunSummary:
    from aryl_gym.fileio import unique_backup

    csv_path = out / CSV_NAME
    tasks = build_tasks(suite, data_root=data_root, keep_timeline=keep_timeline)
    by_key = {t.key: t for t in tasks}
    done: dict[Key, dict[str, Any]] = {}
    summary = RunSummary(out, csv_path, rows=[])
    if csv_path.exists() and csv_path.stat().st_size > 0:
        if overwrite:
            bak = unique_backup(csv_path)
            os.replace(csv_path, bak)
            dig = digest_path(csv_path)
            if dig.exists():
                os.replace(dig, bak.with_name(bak.name + ".digests"))
            say(f"moved the previous results to {bak}")
        elif not resume:
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
                    raise ConfigError(
                        f"{csv_path}: the row for {k} was made with another configuration (hash "
                        f"{r['config_hash']}, now {t.config_hash}); its numbers would not be "
                        "comparable. Use a fresh --out (or --overwrite)"
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
        why = check_scenario(scen, data_root)
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
    run = executor
    if run is None:
        if backend == "ray":
            from aryl_gym.leaderboard.ray_backend import ray_executor

            def run(ts: Sequence[EpisodeTask], n: int) -> Iterator[EpisodeOutput]:
                return ray_executor(ts, n, address=ray_address)

        elif backend == "local":
            run = local_executor
        else:
            raise ValueError(f"unknown backend {backend!r}; use local or ray")
    from aryl_gym.progress import progress_bar

    bar = progress_bar(len(todo), f"{suite.name}", unit="ep", enabled=progress and bool(todo), leave=True)
    appender = CsvAppender(csv_path) if todo else None
    try:
        for outp in run(todo, workers):
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

