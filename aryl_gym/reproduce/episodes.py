"""Episodes: tasks, the JSON cache (resume, digests), local and Ray executors, ``run_tasks``."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from aryl_gym.agents import make_policy
from aryl_gym.config import (
    ConfigError,
    ScenarioConfig,
)
from aryl_gym.leaderboard.provenance import agent_files_digest, git_commit
from aryl_gym.leaderboard.runner import slug
from aryl_gym.metrics import METRICS_VERSION, EpisodeResult
from aryl_gym.parallel import local_map, ray_map
from aryl_gym.scenario import make_episode

# ----------------------------------------------------------------------------------------------
# Episodes: tasks, cache, executors
# ----------------------------------------------------------------------------------------------

AGENT_PREFIX = "agent:"


@dataclass(frozen=True, eq=False)  # hashed by identity (the config holds dicts)
class Task:
    """One episode: a scenario config, a policy (registry name or ``agent:SOURCE``), a seed."""

    role: str
    config: ScenarioConfig
    policy: str
    seed: int
    hash: str
    tag: str = ""  # which variant (sweep point, sigma) this config is, for progress lines

    @property
    def key(self) -> tuple[str, str, int, str]:
        return (self.config.name, self.policy, self.seed, self.hash)


@dataclass
class TaskOutput:
    task: Task
    status: str  # "ok" | "failed" | "skipped"
    result: dict[str, Any] | None = None
    message: str = ""


def cache_hash(task: Task) -> str:
    """The cache key's hash: the config hash, the metrics' definitions
    (:data:`aryl_gym.metrics.METRICS_VERSION`: a cached figure computed under another definition
    is another result), and for a learned agent (``agent:SOURCE``) the SHA-256 of the files it is
    loaded from (model, config, normalisation), so replacing a model file under the same path is
    another episode, never the old cached numbers."""
    files = (agent_files_digest(task.policy[len(AGENT_PREFIX):])
             if task.policy.startswith(AGENT_PREFIX) else None)
    text = json.dumps({"config": task.hash, "files": files, "metrics": METRICS_VERSION}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def cache_path(out: Path, task: Task) -> Path:
    return (
        out / "episodes" / slug(task.config.name) / slug(task.policy)
        / f"seed{task.seed}-{cache_hash(task)}.json"
    )


def run_task(task: Task) -> TaskOutput:
    """Run one episode; never raises. Module level and plain data, so it runs in any worker."""
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        ep = make_episode(task.config, task.seed)
        last_submit = max((j.submit for j in ep.jobs), default=0.0)
        if task.policy.startswith(AGENT_PREFIX):
            res = _run_learned(task)
        else:
            res = ep.simulator().run(make_policy(task.policy))
    except _Unavailable as exc:
        return TaskOutput(task, "skipped", message=str(exc))
    except Exception as exc:  # noqa: BLE001 - reported, the run goes on
        return TaskOutput(task, "failed", message=f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=5)}")
    d = res.to_dict(series=False)
    d["combined_usage_hourly"] = [float(x) for x in res.combined_usage_hourly]
    d["arrival_hours"] = last_submit / 3600.0
    d["episode_wall_s"] = time.perf_counter() - t0
    # CPU seconds of this process: the cost of the episode on a machine shared with other work
    d["episode_cpu_s"] = time.process_time() - c0
    return TaskOutput(task, "ok", result=d)


class _Unavailable(Exception):
    """A learned agent that cannot run here (no torch/SB3, or its env rejects the scenario)."""


def _run_learned(task: Task) -> EpisodeResult:
    source = task.policy[len(AGENT_PREFIX):]
    try:
        # learned agents: the train extra (torch, SB3), imported when one runs
        from aryl_gym.agents.learned import load_agent
    except ImportError as exc:
        raise _Unavailable(f"learned agents need the train extra, pip install 'aryl-gym[train]': {exc}") from None
    try:
        agent = load_agent(source)
    except (ImportError, ConfigError) as exc:
        raise _Unavailable(f"cannot load agent {source!r}: {exc}") from None
    from aryl_gym.train.evaluation import run_agent  # the train extra, as above

    env = agent.make_env(scenario=task.config)
    try:
        res, _ret, _steps = run_agent(agent, env, task.seed)
    finally:
        env.close()
    return res


def result_from_cache(d: Mapping[str, Any]) -> EpisodeResult:
    d = dict(d)
    for k, f in EpisodeResult.__dataclass_fields__.items():
        if d.get(k, 0) is None and f.type in ("float", float):
            d[k] = math.nan  # written as null (JSON has no NaN)
    res = EpisodeResult.from_dict(d)
    res.arrival_hours = float(d.get("arrival_hours") or 0.0)  # type: ignore[attr-defined]
    return res


class CacheError(ConfigError):
    """A cached episode file that cannot be trusted (damaged, edited, or another episode's)."""


def result_digest(result: Mapping[str, Any]) -> str:
    """16 hex digits of SHA-256 over a cached result (written beside it: edits are detected)."""
    text = json.dumps(result, sort_keys=True, default=_json_default)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


#: the metrics every cached result must carry (the fields of EpisodeResult without a default)
_REQUIRED = tuple(
    k for k, f in EpisodeResult.__dataclass_fields__.items()
    if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING  # type: ignore[misc]
)
#: figures that are NaN (null in JSON) only when no job finished
_JCT_FIELDS = ("avg_jct", "median_jct", "p95_jct", "makespan")


def check_cached_result(r: Any) -> str | None:
    """Why a cached result cannot be used, or ``None``."""
    if not isinstance(r, dict):
        return f'"result" is {type(r).__name__}, not an object'
    missing = [k for k in _REQUIRED if k not in r]
    if missing:
        more = f" (and {len(missing) - 5} more)" if len(missing) > 5 else ""
        return f"missing metric(s) {', '.join(missing[:5])}{more}"
    fields = EpisodeResult.__dataclass_fields__
    for k, v in r.items():
        f = fields.get(k)
        if f is None or f.type not in ("int", "float", "int | None", "bool", int, float, bool):
            continue
        if f.type in ("bool", bool):
            if not isinstance(v, bool):
                return f"{k} is {v!r}, not true/false"
            continue
        if v is None:
            if f.type in ("int", int):
                return f"{k} is null"
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return f"{k} is {v!r}, not a number"
        if not math.isfinite(v) or v < 0:
            return f"{k} is {v!r} (a metric is never negative)"
    done = r.get("jobs_completed")
    for k in _JCT_FIELDS:
        if r.get(k) is None and isinstance(done, int) and done > 0:
            return f"{k} is null although {done} job(s) completed"
    return None


def read_cached(path: Path, expect: Task | None = None) -> dict[str, Any] | None:
    """The cached episode at ``path``; ``None`` when there is none. A file that exists but is
    damaged, edited after writing or holds another episode is a :class:`CacheError` naming it."""
    hint = (f"delete it (rm {path}) to run that episode again, or rerun with --fresh to recompute "
            "every episode")
    try:
        with open(path, encoding="utf-8") as fh:
            d = json.load(fh)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CacheError(f"{path}: cannot read the cached episode: {exc.strerror or exc}; {hint}") from None
    except ValueError as exc:
        raise CacheError(f"{path}: damaged cached episode (not valid JSON: {exc}); {hint}") from None
    if not isinstance(d, dict) or "result" not in d:
        raise CacheError(f'{path}: damaged cached episode (no "result" object); {hint}')
    why = check_cached_result(d["result"])
    if why is None and "digest" in d and d["digest"] != result_digest(d["result"]):
        why = "its numbers were changed after it was written (digest mismatch)"
    if why is None and expect is not None:
        for k, want in (("policy", expect.policy), ("seed", expect.seed), ("config_hash", cache_hash(expect))):
            if k in d and d[k] != want:
                why = f"it holds another episode ({k} {d[k]!r}, expected {want!r})"
                break
    if why is not None:
        raise CacheError(f"{path}: damaged cached episode: {why}; {hint}")
    return d


def write_cached(path: Path, task: Task, result: Mapping[str, Any], commit: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    res = json.loads(json.dumps(dict(result), default=_json_default))
    payload = {
        "scenario": task.config.name,
        "policy": task.policy,
        "seed": task.seed,
        "config_hash": cache_hash(task),
        "commit": commit,
        "digest": result_digest(res),
        "result": res,
    }
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(payload, fh, default=_json_default)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _json_default(o: Any) -> Any:  # pragma: no cover - numpy scalars
    if isinstance(o, np.generic):
        return o.item()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


Executor = Callable[[Sequence[Task], int], Iterator[TaskOutput]]


def local_executor(tasks: Sequence[Task], workers: int) -> Iterator[TaskOutput]:
    """Run here (``workers <= 1``) or in ``spawn``-ed worker processes, yielding as they finish."""
    return local_map(run_task, tasks, workers)


def _failed(task: Task, exc: Exception) -> TaskOutput:
    return TaskOutput(task, "failed", message=f"ray task failed: {exc}")


def ray_executor(tasks: Sequence[Task], workers: int, address: str | None = None) -> Iterator[TaskOutput]:
    """Run ``tasks`` as Ray tasks (the leaderboard's Ray set-up: ``RAY_ADDRESS`` or a local Ray)."""
    return ray_map(run_task, tasks, workers, _failed, address)


#: rough relative cost of one episode by policy, to start the long ones first (measured on
#: production: afs ~4x aryl-noloan, afs-all ~13x)
_COST = {"pollux-250": 100.0, "pollux-250-elastic": 60.0, "pollux": 50.0, "afs": 4.0, "afs-all": 13.0, "aryl+tuned": 2.0}


def _cost(t: Task) -> float:
    scale = t.config.cluster.train_gpus + t.config.cluster.inf_gpus
    if t.policy.startswith(AGENT_PREFIX):
        return 50.0 * scale  # acts through the env, one sub-step per grant
    return _COST.get(t.policy, 1.0) * scale


@dataclass
class RunStats:
    new: int = 0
    cached: int = 0
    failed: list[tuple[Task, str]] = field(default_factory=list)
    skipped: list[tuple[Task, str]] = field(default_factory=list)
    other_commit: int = 0
    wall_by_policy: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    cpu_by_policy: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    missing: list[Task] = field(default_factory=list)  # not cached, not run (``cached_only``)
    wall_s: float = 0.0


def run_tasks(
    tasks: Sequence[Task],
    out: Path,
    *,
    workers: int = 1,
    backend: str = "local",
    fresh: bool = False,
    cached_only: bool = False,
    progress: str = "bar",
    executor: Executor | None = None,
    log: Callable[[str], None] | None = None,
) -> tuple[dict[Task, EpisodeResult], RunStats]:
    """Run the tasks not yet cached under ``out``; return every task's result.

    ``progress``: ``"bar"`` (a tqdm bar on stderr), ``"lines"`` (one stderr line per episode) or
    ``"none"``.
    """
    say = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    t0 = time.perf_counter()
    commit = git_commit()
    stats = RunStats()
    results: dict[Task, EpisodeResult] = {}
    todo: list[Task] = []
    seen: set[tuple[str, str, int, str]] = set()
    uniq: list[Task] = []
    for t in tasks:
        if t.key not in seen:
            seen.add(t.key)
            uniq.append(t)
    for t in uniq:
        c = None if fresh else read_cached(cache_path(out, t), t)
        if c is not None:
            results[t] = result_from_cache(c["result"])
            stats.cached += 1
            if c.get("commit") != commit:
                stats.other_commit += 1
            _note_wall(stats, t, c["result"])
        else:
            todo.append(t)
    if stats.other_commit:
        say(
            f"note: {stats.other_commit} cached episode(s) were made at another commit; pass "
            "--fresh (or another --out) to recompute them with this code"
        )
    if cached_only:
        stats.missing = todo
        if todo:
            say(f"--cached-only: {len(todo)} episode(s) not cached are left out")
        todo = []
    todo.sort(key=_cost, reverse=True)
    if todo:
        say(f"{len(todo)} episode(s) to run, {stats.cached} cached, {workers} worker(s), backend {backend}")
    run = executor
    if run is None:
        if backend == "ray":
            run = ray_executor
        elif backend == "local":
            run = local_executor
        else:
            raise ValueError(f"--backend: unknown backend {backend!r}; use local or ray")
    bar = None
    if progress == "bar" and todo:
        from tqdm import tqdm  # the progress bar, only when one is shown

        bar = tqdm(total=len(todo), unit="ep", desc="reproduce", dynamic_ncols=True, file=sys.stderr)
    try:
        for o in run(todo, workers):
            t = o.task
            if o.status == "ok" and o.result is not None:
                write_cached(cache_path(out, t), t, o.result, commit)
                results[t] = result_from_cache(o.result)
                stats.new += 1
                _note_wall(stats, t, o.result)
                line = f"{t.config.name} {t.policy} seed {t.seed}{' ' + t.tag if t.tag else ''}: {o.result['episode_wall_s']:.1f} s"
            elif o.status == "skipped":
                stats.skipped.append((t, o.message))
                line = f"{t.config.name} {t.policy} seed {t.seed}: skipped ({o.message})"
            else:
                stats.failed.append((t, o.message))
                line = f"{t.config.name} {t.policy} seed {t.seed}: FAILED {o.message.splitlines()[0]}"
            if bar is not None:
                bar.update(1)
                bar.set_postfix_str(line, refresh=True)
            elif progress == "lines":
                say(f"[{stats.new + len(stats.failed) + len(stats.skipped)}/{len(todo)}] {line}")
    except KeyboardInterrupt:
        say(f"\ninterrupted: {stats.new} new episode(s) are cached in {out}/episodes; rerun to resume")
        raise
    finally:
        if bar is not None:
            bar.close()
        stats.wall_s = time.perf_counter() - t0
    return results, stats


def _note_wall(stats: RunStats, t: Task, d: Mapping[str, Any]) -> None:
    w, c = d.get("episode_wall_s"), d.get("episode_cpu_s")
    if isinstance(w, (int, float)):
        stats.wall_by_policy.setdefault((t.config.name, t.policy), []).append(float(w))
    if isinstance(c, (int, float)):
        stats.cpu_by_policy.setdefault((t.config.name, t.policy), []).append(float(c))


