"""Episodes, for every command that runs many of them (the leaderboard, ``aryl-gym reproduce``):
one task type, one function that runs a task, one executor, one driver loop and the episode
cache.

* :class:`EpisodeTask` -- one episode as plain, picklable data: a scenario (a name or path, or a
  resolved config with overrides), a policy name, a seed; for a learned agent its source, the env
  it acts through and that env's kwargs; the hash of the resolved configuration
  (:func:`aryl_gym.provenance.config_hash`).
* :func:`run_episode` -- runs one task and never raises: a reference policy natively
  (``make_episode(scenario, seed).simulator().run(policy)``), a learned agent through its gym env
  from ``reset(seed=seed, options={"episode_seed": seed})``, which draws the same episode; when
  the env exposes its simulator the trace is checked against the native one and a difference is
  noted. It returns the :class:`~aryl_gym.metrics.EpisodeResult` with the wall and CPU seconds.
* :func:`executor_for` -- ``local`` (this process, or ``spawn``-ed workers that die with their
  parent) or ``ray`` (``--ray-address``, else ``RAY_ADDRESS``, else a local Ray), both through
  :mod:`aryl_gym.parallel`; results are yielded as episodes finish.
* :func:`run_episodes` -- the driver: an episode already in the caller's :class:`Store` is not
  run again (resume), the others run longest first, each is saved as soon as it ends, with a
  progress bar (or one line per episode) and an interruption message that says how to resume;
  :func:`run_interruptible` runs a command so that SIGTERM interrupts it as Ctrl-C does, an
  episode being saved is saved first, and one line says what was done and how to resume.
* the episode cache (:class:`EpisodeCache`, :func:`run_tasks`): one JSON file per episode,
  ``OUT/episodes/SCENARIO/POLICY/seedN-HASH.json``, keyed by :func:`cache_hash` (the
  configuration hash and the metrics' version), written atomically, with a digest of its numbers;
  a damaged, edited or misplaced file, or one whose digest was removed, is a :class:`CacheError`
  naming it. Temporary files left by a killed writer are removed when the cache is opened
  (:func:`remove_stale_temporaries`). ``aryl-gym reproduce`` keeps its episodes there; the
  leaderboard's store is its results CSV (:mod:`aryl_gym.leaderboard.runner`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import importlib.util
import inspect
import json
import math
import os
import re
import signal
import stat
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import gymnasium as gym
import numpy as np

from aryl_gym.agents import make_policy
from aryl_gym.config import ConfigError, ScenarioConfig, load_scenario
from aryl_gym.fileio import atomic_write_bytes, pid_alive
from aryl_gym.metrics import METRICS_VERSION, EpisodeResult
from aryl_gym.parallel import local_map, ray_map
from aryl_gym.progress import progress_bar
from aryl_gym.provenance import config_hash, git_commit, slug, source_kind
from aryl_gym.rollout import run_agent
from aryl_gym.scenario import Episode, make_episode
from aryl_gym.sim.engine import Simulator

# ----------------------------------------------------------------------------------------------
# Tasks
# ----------------------------------------------------------------------------------------------

#: the prefix of a learned agent in a policy list (``agent:ppo-testbed``, ``agent:PATH.zip``)
AGENT_PREFIX = "agent:"


@dataclass(frozen=True, eq=False)  # hashed by identity (the config and kwargs hold dicts)
class EpisodeTask:
    """One episode to run; picklable (plain data only).

    ``policy`` is the name the episode is reported under (a registered policy, or the name of a
    learned agent); ``agent`` is the agent's source when it is one (``None``: ``policy`` runs
    natively). ``env_id`` ``None`` lets an agent act through its own env (the one it was trained
    on). ``suite``, ``role``, ``tag`` and ``commit`` label the run the episode belongs to.
    """

    scenario: str | ScenarioConfig
    policy: str
    seed: int
    agent: str | None = None
    env_id: str | None = None
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    data_root: str | None = None
    config_hash: str = ""
    keep_timeline: bool = False
    suite: str = ""
    role: str = ""
    tag: str = ""
    commit: str = "unknown"

    @property
    def scenario_name(self) -> str:
        return self.scenario if isinstance(self.scenario, str) else self.scenario.name

    @property
    def key(self) -> tuple[str, str, int, str]:
        """(suite, scenario, seed, policy): the episode within its run (a leaderboard row's key)."""
        return (self.suite, self.scenario_name, self.seed, self.policy)

    @property
    def episode_key(self) -> tuple[str, str, int, str, str]:
        """:attr:`key` and the configuration hash: one episode, whatever list it is in."""
        return (*self.key, self.config_hash)

    @property
    def label(self) -> str:
        return f"{self.scenario_name} {self.policy} seed {self.seed}{' ' + self.tag if self.tag else ''}"


def policy_task(cfg: ScenarioConfig, policy: str, seed: int, role: str = "", tag: str = "",
                data_root: str | None = None) -> EpisodeTask:
    """The task of ``policy`` (a registered name, or ``agent:SOURCE`` acting through its own env)
    on the resolved ``cfg`` (traces under ``data_root``, if it names any)."""
    agent = policy[len(AGENT_PREFIX):] if policy.startswith(AGENT_PREFIX) else None
    return EpisodeTask(cfg, policy, int(seed), agent=agent, data_root=data_root,
                       config_hash=config_hash(cfg, agent), role=role, tag=tag, commit=git_commit())


@dataclass
class EpisodeOutput:
    """What a worker returns: the result (with its wall and CPU seconds), or why it was skipped
    (the agent cannot run here) or failed. ``note``: a warning on a finished episode."""

    task: EpisodeTask
    status: str  # "ok" | "skipped" | "failed"
    result: EpisodeResult | None = None
    message: str = ""
    note: str = ""
    timeline: list[Any] | None = None
    env_used: tuple[str, dict[str, Any]] = ("", {})
    arrival_hours: float = 0.0
    wall_s: float = 0.0
    cpu_s: float = 0.0


# ----------------------------------------------------------------------------------------------
# Agents
# ----------------------------------------------------------------------------------------------


class AgentUnavailable(Exception):
    """The agent (or the env it acts through) is not available here: skip it with a note."""


def _learned_module() -> Any | None:
    try:
        return importlib.import_module("aryl_gym.agents.learned")
    except ModuleNotFoundError as exc:
        if exc.name in ("aryl_gym.agents.learned",):
            return None
        raise


def check_entrant(entrant: Any, env_id: str) -> str | None:
    """Why ``entrant`` (with ``kind`` and ``source``) cannot run here (a skip note), or ``None``.
    Cheap; no model is loaded."""
    if entrant.kind != "agent":
        return None

    if env_id not in gym.envs.registry:
        return f"env {env_id} is not registered (aryl_gym.envs not installed in this checkout yet)"
    src = entrant.source
    kind = source_kind(src)
    learned = _learned_module() if kind == "path" else None
    rllib = learned is not None and learned.is_rllib_source(src)
    if rllib:  # an RLlib run or checkpoint: the rllib extra
        # extras: imports ray only to check that it loads
        from aryl_gym.extras import rllib_unavailable

        why = rllib_unavailable()
        if why:
            return why
    elif kind != "import":  # a saved stable-baselines3 model: the train extra
        # extras imports nothing heavy: only find_spec
        from aryl_gym.extras import learned_agents_unavailable

        why = learned_agents_unavailable()
        if why:
            return why
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


def load_agent(source: str, env: Any = None) -> Any:
    """An object with SB3-style ``predict`` for ``source``, bound to ``env``.

    * shipped name (``ppo-testbed``) or path: ``aryl_gym.agents.learned.load_agent`` (the one
      SB3 loader: it knows the shipped agents, their algorithm and their normalisation);
    * ``module:factory``: the factory is called with the env when it takes a parameter, else
      with no argument, and must return an object with
      ``predict(obs, state, episode_start, deterministic)``.
    """
    kind = source_kind(source)
    if kind == "import":
        obj = _factory(source)
        if env is None:
            raise ValueError("a module:factory agent is built with its env; pass env")
        try:
            n_params = len(inspect.signature(obj).parameters)
        except (TypeError, ValueError):
            n_params = 1
        agent = obj(env) if n_params >= 1 else obj()
    else:
        learned = _learned_module()
        if learned is None:
            raise AgentUnavailable(
                f"agent {source!r} needs aryl_gym.agents.learned (the SB3 model loader), not installed here"
            )
        try:
            agent = learned.load_agent(source)
        except ImportError as exc:  # no torch / SB3
            raise AgentUnavailable(
                f"learned agents need the train extra, pip install 'aryl-gym[train]': {exc}") from None
        except (FileNotFoundError, KeyError, LookupError, ConfigError) as exc:
            raise AgentUnavailable(f"could not load agent {source!r}: {exc}") from None
    if not callable(getattr(agent, "predict", None)):
        raise AgentUnavailable(f"the agent from {source} has no predict(obs, state, episode_start, deterministic)")
    return agent


def _factory(source: str) -> Any:
    """The callable a ``module:factory`` source names; AgentUnavailable when it is not there."""
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
    return obj


def preload_agent(source: str) -> None:
    """Load ``source`` in this process as an episode would, to learn early that it cannot be: a
    saved model (a path, a shipped name) is loaded (and kept in this process's cache); a
    ``module:factory`` is imported and its factory found, not called (it is built with each
    episode's env). Raises :class:`AgentUnavailable`, or the loader's own error."""
    if source_kind(source) == "import":
        _factory(source)
    else:
        _cached_agent(source)


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

    base = getattr(env, "unwrapped", env)
    for name in ("sim", "simulator", "_sim"):
        v = getattr(base, name, None)
        if isinstance(v, Simulator):
            return v
    for v in vars(base).values():
        if isinstance(v, Simulator):
            return v
    return None


def _check_trace(env: Any, ep: Episode) -> str:
    """A note when the env's episode is not ``ep`` (the native one: an unfair comparison)."""
    sim = _env_sim(env)
    if sim is None:
        return "env trace not checked (no simulator exposed)"
    sub = np.array([j.submit for j in ep.jobs])
    work = np.array([j.work for j in ep.jobs])
    if sim.n_jobs != len(ep.jobs) or not (np.array_equal(sim.submit, sub) and np.array_equal(sim.work, work)):
        return "WARNING: the env's trace differs from the native trace of this seed"
    return ""


def _env_identity(env: Any, task: EpisodeTask) -> tuple[str, dict[str, Any]]:
    """(env id, kwargs other than scenario/data_root) of the env actually used."""
    spec = getattr(env, "spec", None)
    if spec is None:
        return task.env_id or "", dict(task.env_kwargs)
    kw = {k: v for k, v in (spec.kwargs or {}).items() if k not in ("scenario", "data_root")}
    return str(spec.id), kw


def _run_agent(task: EpisodeTask, ep: Episode, out: EpisodeOutput) -> EpisodeResult:
    """One episode of a learned agent through its gym env (``task.env_id``, else the agent's own)."""
    assert task.agent is not None
    if task.env_id is not None and task.env_id not in gym.envs.registry:
        raise AgentUnavailable(f"env {task.env_id} is not registered")
    kwargs: dict[str, Any] = {**task.env_kwargs, "scenario": task.scenario}
    if task.data_root:
        kwargs["data_root"] = task.data_root
    agent = None
    if source_kind(task.agent) == "import":
        env = gym.make(task.env_id or "", **kwargs)
    else:
        # A saved model knows the env it was trained on (id and kwargs): build that env, on the
        # task's scenario, with the task's kwargs on top (and through the task's env id, the world
        # the reference policies play, when it names one).
        agent = _cached_agent(task.agent)
        make_env = getattr(agent, "make_env", None)
        if not callable(make_env):
            env = gym.make(task.env_id or "", **kwargs)
        elif task.env_id is None:
            env = make_env(**kwargs)
        else:
            try:
                env = make_env(env_id=task.env_id, **kwargs)
            except TypeError:  # a plugin's make_env without env_id
                env = make_env(**kwargs)
    try:
        if agent is None:
            agent = load_agent(task.agent, env)
        notes: list[str] = []
        # run_agent resets with ``episode_seed``, so the env draws ``make_episode(scenario,
        # seed)``, the episode the reference policies play; _check_trace verifies it.
        res, _ret, _steps = run_agent(agent, env, int(task.seed), after_reset=lambda e: notes.append(_check_trace(e, ep)))
        sim = _env_sim(env)
        out.timeline = list(sim.acc.timeline) if (sim is not None and task.keep_timeline) else None
        out.note = notes[0] if notes else ""
        out.env_used = _env_identity(env, task)
        return res
    finally:
        env.close()


def run_episode(task: EpisodeTask) -> EpisodeOutput:
    """Run one episode; never raises (failures come back as ``status="failed"``). A module-level
    function of plain data, so it runs unchanged here, in worker processes and in Ray tasks."""
    wall0, cpu0 = time.perf_counter(), time.process_time()
    out = EpisodeOutput(task, "ok", env_used=(task.env_id or "", {}))
    try:
        ep = make_episode(task.scenario, task.seed, data_root=task.data_root)
        out.arrival_hours = max((j.submit for j in ep.jobs), default=0.0) / 3600.0
        if task.agent is not None:
            out.result = _run_agent(task, ep, out)
        else:
            sim = ep.simulator()
            out.result = sim.run(make_policy(task.policy))
            out.timeline = list(sim.acc.timeline) if task.keep_timeline else None
    except AgentUnavailable as exc:
        return EpisodeOutput(task, "skipped", message=str(exc))
    except Exception as exc:  # noqa: BLE001 - reported in the summary, the run goes on
        tb = traceback.format_exc(limit=6)
        return EpisodeOutput(task, "failed", message=f"{type(exc).__name__}: {exc}\n{tb}")
    out.wall_s = time.perf_counter() - wall0
    # CPU seconds of this process: the cost of the episode on a machine shared with other work
    out.cpu_s = time.process_time() - cpu0
    return out


# ----------------------------------------------------------------------------------------------
# Executors
# ----------------------------------------------------------------------------------------------

Executor = Callable[[Sequence[EpisodeTask], int], Iterator[EpisodeOutput]]


def local_executor(tasks: Sequence[EpisodeTask], workers: int) -> Iterator[EpisodeOutput]:
    """Run here (``workers <= 1``) or in ``spawn``-ed worker processes, yielding as they finish;
    an episode whose worker died (or that was waiting in the pool it broke) is a failed one."""
    return local_map(run_episode, tasks, workers, on_error=_worker_died)


def _worker_died(task: EpisodeTask, exc: Exception) -> EpisodeOutput:
    """A failed episode for a task lost with its worker process (was: a BrokenProcessPool
    traceback that ended the run)."""
    return EpisodeOutput(task, "failed", message=(
        "a worker process died before this episode finished (killed by a signal or by the "
        f"out-of-memory killer?): {type(exc).__name__}; rerun (leaderboard: --resume) to run it again"))


def _ray_failed(task: EpisodeTask, exc: Exception) -> EpisodeOutput:
    return EpisodeOutput(task, "failed", message=f"ray task failed: {exc}")


def ray_executor(tasks: Sequence[EpisodeTask], workers: int, address: str | None = None) -> Iterator[EpisodeOutput]:
    """Run ``tasks`` as Ray tasks, yielding each output as it finishes (``ray.wait``). On a
    multi-machine cluster every node needs ``aryl-gym`` installed (``pip install
    'aryl-gym[ray]'``, or a Ray ``runtime_env``); results come back to the driver, which alone
    writes files."""
    return ray_map(run_episode, tasks, workers, _ray_failed, address)


def executor_for(backend: str, ray_address: str | None = None) -> Executor:
    """The executor of ``--backend`` (``local`` or ``ray``); another name is a ValueError."""
    if backend == "local":
        return local_executor
    if backend == "ray":
        return lambda ts, n: ray_executor(ts, n, address=ray_address)
    raise ValueError(f"--backend: unknown backend {backend!r}; use local or ray")


# ----------------------------------------------------------------------------------------------
# Interruptions
# ----------------------------------------------------------------------------------------------


@dataclass
class _Interruption:
    """What :func:`run_interruptible` knows while its command runs."""

    command: str  # the command line that resumes the run (named by the episode cache's hint)
    signum: int = int(signal.SIGINT)  # the signal that interrupted the run (Ctrl-C unless SIGTERM)
    message: str = ""  # what run_episodes had to say about the interruption (said once, at the end)
    saving: bool = False  # an episode is being saved: a signal waits until it is
    pending: bool = False  # a signal came while saving


#: the command running under :func:`run_interruptible`, if any (signals go to the main thread)
_ACTIVE: _Interruption | None = None


def _on_signal(signum: int, frame: Any) -> None:
    state = _ACTIVE
    if signum == signal.SIGTERM:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM kills at once
    if state is None:  # pragma: no cover - a signal while the handler is being taken down
        raise KeyboardInterrupt(signal.Signals(signum).name)
    state.signum = int(signum)
    if state.saving:  # let the episode being written reach the cache, then stop
        state.pending = True
        return
    raise KeyboardInterrupt(signal.Signals(signum).name)


class _Saving:
    """While an episode is saved, an interrupting signal waits (:func:`run_interruptible`);
    it takes effect when the episode is saved and counted."""

    def __enter__(self) -> None:
        if _ACTIVE is not None:
            _ACTIVE.saving = True

    def __exit__(self, exc_type: object, *rest: object) -> None:
        state = _ACTIVE
        if state is None:
            return
        state.saving = False
        if state.pending and exc_type is None:
            state.pending = False
            raise KeyboardInterrupt(signal.Signals(state.signum).name)


def run_interruptible(body: Callable[[], int], command: str, hint: str) -> int:
    """Run a command's ``body`` (which returns its exit status) so that an interruption ends it
    with one line on stderr and a non-zero status, losing no finished episode.

    SIGTERM (a batch scheduler's stop, ``kill``) interrupts it as Ctrl-C does (was: the process
    died without a word); a signal that comes while an episode is being saved takes effect once
    it is saved. The line is :func:`run_episodes`' when the episodes were running (how many of
    them are done, and the store's :attr:`~Store.resume_hint`: the episode cache names
    ``command``, the command line that resumes the run), else ``interrupted: {hint}``. Returns
    128 + the signal's number: 130 for Ctrl-C, 143 for SIGTERM. A second SIGTERM kills at once.
    Outside the main thread (where handlers cannot be set) ``body`` runs as it is.

    ``ray.init`` (``--backend ray``) replaces the SIGTERM handler with its own, which exits with
    status 15 (``sys.exit(15)``): that exit is taken for the SIGTERM it is, said with ``hint``
    (without the count of episodes done)."""
    global _ACTIVE
    if threading.current_thread() is not threading.main_thread():
        return body()
    state = _Interruption(command)
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    outer, _ACTIVE = _ACTIVE, state
    for s in previous:
        signal.signal(s, _on_signal)
    try:
        return body()
    except KeyboardInterrupt:
        print(state.message or f"interrupted: {hint}", file=sys.stderr, flush=True)
        return 128 + state.signum
    except SystemExit as exc:
        if exc.code != signal.SIGTERM or signal.getsignal(signal.SIGTERM) is _on_signal:
            raise
        print(f"interrupted: {hint}", file=sys.stderr, flush=True)  # Ray's SIGTERM handler
        return 128 + int(signal.SIGTERM)
    finally:
        for s, h in previous.items():
            signal.signal(s, h if h is not None else signal.SIG_DFL)
        _ACTIVE = outer


# ----------------------------------------------------------------------------------------------
# The driver
# ----------------------------------------------------------------------------------------------


class Store(Protocol):
    """Where finished episodes are kept: the episode cache, or the leaderboard's results CSV."""

    @property
    def resume_hint(self) -> str:
        """How to pick up an interrupted run (said on an interruption)."""

    def get(self, task: EpisodeTask) -> Mapping[str, Any] | None:
        """The saved record of ``task``'s episode (with its ``commit``), or ``None``."""

    def put(self, task: EpisodeTask, out: EpisodeOutput) -> Mapping[str, Any]:
        """Save a finished episode; return its record (as :meth:`get` would)."""

    def seconds(self, record: Mapping[str, Any]) -> tuple[float | None, float | None]:
        """(wall, CPU) seconds of a saved episode, where recorded."""


@dataclass
class RunStats:
    """What :func:`run_episodes` did: episodes run now, found saved, failed, skipped, left out."""

    new: int = 0
    cached: int = 0
    failed: list[tuple[EpisodeTask, str]] = field(default_factory=list)
    skipped: list[tuple[EpisodeTask, str]] = field(default_factory=list)
    other_commit: int = 0
    #: episodes used, by the commit that made them (saved ones by their record's, new by this one's)
    commits: dict[str, int] = field(default_factory=dict)
    wall_by_policy: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    cpu_by_policy: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    missing: list[EpisodeTask] = field(default_factory=list)  # not saved, not run (``cached_only``)
    wall_s: float = 0.0


#: rough relative cost of one episode by policy (1: Aryl), to start the long ones first: CPU
#: seconds per production episode in the paper-scale table on free cores (docs/reproduction.md:
#: aryl 8.1, pollux-250 515, pollux-250-elastic 1,031, afs 23, afs-all 56, aryl+tuned 64); a
#: learned agent acts through the env, one sub-step per grant
_COST = {"pollux-250": 64.0, "pollux-250-elastic": 127.0, "pollux": 40.0, "afs": 3.0, "afs-all": 7.0,
         "aryl+tuned": 8.0, "aryl+pretuned": 2.0}
_AGENT_COST = 50.0


def _cost_key() -> Callable[[EpisodeTask], float]:
    sizes: dict[str, int] = {}  # GPUs of a scenario given by name (loaded once)

    def gpus(t: EpisodeTask) -> int:
        if not isinstance(t.scenario, str):
            return t.scenario.cluster.train_gpus + t.scenario.cluster.inf_gpus
        if t.scenario not in sizes:
            c = load_scenario(t.scenario).cluster
            sizes[t.scenario] = c.train_gpus + c.inf_gpus
        return sizes[t.scenario]

    return lambda t: (_AGENT_COST if t.agent is not None else _COST.get(t.policy, 1.0)) * gpus(t)


def _note_seconds(stats: RunStats, t: EpisodeTask, wall: float | None, cpu: float | None) -> None:
    for v, into in ((wall, stats.wall_by_policy), (cpu, stats.cpu_by_policy)):
        if isinstance(v, (int, float)):
            into.setdefault((t.scenario_name, t.policy), []).append(float(v))


def run_episodes(
    tasks: Sequence[EpisodeTask],
    store: Store,
    *,
    workers: int = 1,
    backend: str = "local",
    ray_address: str | None = None,
    executor: Executor | None = None,
    cached_only: bool = False,
    progress: str = "bar",
    desc: str = "episodes",
    log: Callable[[str], None] | None = None,
) -> tuple[dict[EpisodeTask, Mapping[str, Any]], RunStats]:
    """Run the tasks whose episode ``store`` does not hold yet (an episode listed twice runs
    once), longest first, saving each as it ends; return every task's record and what was done.

    ``progress``: ``"bar"`` (a bar on a terminal, periodic lines in a log), ``"lines"`` (one
    stderr line per episode) or ``"none"``. ``cached_only`` runs nothing (``stats.missing``).
    """
    say = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    run = executor or executor_for(backend, ray_address)
    t0 = time.perf_counter()
    commit = git_commit()
    stats = RunStats()
    records: dict[EpisodeTask, Mapping[str, Any]] = {}
    todo: list[EpisodeTask] = []
    seen: set[tuple[str, str, int, str, str]] = set()
    for t in tasks:
        if t.episode_key in seen:
            continue
        seen.add(t.episode_key)
        rec = store.get(t)
        if rec is None:
            todo.append(t)
            continue
        records[t] = rec
        stats.cached += 1
        stats.other_commit += rec.get("commit") != commit
        made = str(rec.get("commit") or "unknown")
        stats.commits[made] = stats.commits.get(made, 0) + 1
        _note_seconds(stats, t, *store.seconds(rec))
    if stats.other_commit:
        say(f"note: {stats.other_commit} saved episode(s) were made at another commit; use a fresh "
            "--out (reproduce: or --fresh) to recompute them with this code")
    if cached_only:
        stats.missing = todo
        if todo:
            say(f"--cached-only: {len(todo)} episode(s) not cached are left out")
        todo = []
    todo.sort(key=_cost_key(), reverse=True)
    if todo:
        say(f"{len(todo)} episode(s) to run, {stats.cached} saved, {workers} worker(s), backend {backend}")
    bar = progress_bar(len(todo), desc, unit="ep", enabled=progress == "bar" and bool(todo), leave=True)
    try:
        for o in run(todo, workers):
            t = o.task
            if o.status == "ok" and o.result is not None:
                with _Saving():  # an interruption waits until the episode is saved and counted
                    records[t] = store.put(t, o)
                    stats.new += 1
                    stats.commits[commit] = stats.commits.get(commit, 0) + 1
                    _note_seconds(stats, t, o.wall_s, o.cpu_s)
                line = f"{t.label}: {o.wall_s:.1f} s"
            elif o.status == "skipped":
                stats.skipped.append((t, o.message))
                line = f"{t.label}: skipped ({o.message})"
            else:
                stats.failed.append((t, o.message))
                line = f"{t.label}: FAILED {o.message.splitlines()[0]}"
                if progress != "lines":
                    say(f"episode {t.label} failed: {o.message.splitlines()[0]}")
            if bar is not None:
                bar.update(1)
                bar.set_postfix_str(line, refresh=False)
            elif progress == "lines":
                say(f"[{stats.new + len(stats.failed) + len(stats.skipped)}/{len(todo)}] {line}")
    except KeyboardInterrupt:
        msg = (f"interrupted: {stats.new + stats.cached} of {len(seen)} episode(s) done ({stats.new} "
               f"run now, {stats.cached} saved before); {store.resume_hint}")
        if _ACTIVE is not None:
            _ACTIVE.message = msg  # said by run_interruptible, once the progress bar is closed
        else:
            say("\n" + msg)
        raise
    finally:
        if bar is not None:
            bar.close()
        stats.wall_s = time.perf_counter() - t0
    return records, stats


# ----------------------------------------------------------------------------------------------
# The episode cache
# ----------------------------------------------------------------------------------------------


class CacheError(ConfigError):
    """A cached episode file that cannot be trusted (damaged, edited, or another episode's)."""


def cache_hash(task: EpisodeTask) -> str:
    """The cache key's hash: the task's configuration hash (for a learned agent it covers the
    bytes of the files it is loaded from, so replacing a model file under the same path is
    another episode) and the metrics' definitions (:data:`aryl_gym.metrics.METRICS_VERSION`: a
    cached figure computed under another definition is another result)."""
    text = json.dumps({"config": task.config_hash, "metrics": METRICS_VERSION}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def cache_path(out: Path, task: EpisodeTask) -> Path:
    return out / "episodes" / slug(task.scenario_name) / slug(task.policy) / f"seed{task.seed}-{cache_hash(task)}.json"


def result_record(o: EpisodeOutput) -> dict[str, Any]:
    """The cached form of a finished episode: its scalar metrics, hourly combined usage, the
    hour of its last arrival and its wall and CPU seconds."""
    assert o.result is not None
    d = o.result.to_dict(series=False)
    d["combined_usage_hourly"] = [float(x) for x in o.result.combined_usage_hourly]
    d["arrival_hours"] = o.arrival_hours
    d["episode_wall_s"] = o.wall_s
    d["episode_cpu_s"] = o.cpu_s
    return d


def result_from_cache(d: Mapping[str, Any]) -> EpisodeResult:
    d = dict(d)
    for k, f in EpisodeResult.__dataclass_fields__.items():
        if d.get(k, 0) is None and f.type in ("float", float):
            d[k] = math.nan  # written as null (JSON has no NaN)
    res = EpisodeResult.from_dict(d)
    res.arrival_hours = float(d.get("arrival_hours") or 0.0)  # type: ignore[attr-defined]
    return res


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


def read_cached(path: Path, expect: EpisodeTask | None = None) -> dict[str, Any] | None:
    """The cached episode at ``path``; ``None`` when there is none. A file that exists but is
    damaged, edited after writing (its digest does not match, or was removed) or holds another
    episode is a :class:`CacheError` naming it.

    Every file this cache can find was written with its digest (digests came with the cache's
    checks on 2026-12-02; the file names' hash changed on 2026-12-05 and again with metrics
    version 3, so no older file is ever read): a file without one was edited, and is refused as
    a digest mismatch is (was: trusted unchecked)."""
    hint = (f"delete it (rm {path}) to run that episode again, or recompute every episode "
            "(reproduce: --fresh; calibrate and relevance: a new --out)")
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
    if why is None and "digest" not in d:
        why = 'its "digest" was removed, so its numbers cannot be checked (edited after it was written)'
    if why is None and d["digest"] != result_digest(d["result"]):
        why = "its numbers were changed after it was written (digest mismatch)"
    if why is None and expect is not None:
        for k, want in (("policy", expect.policy), ("seed", expect.seed), ("config_hash", cache_hash(expect))):
            if k not in d:  # written with every one of them: removed by hand (was: not checked)
                why = f'its "{k}" was removed, so which episode it holds cannot be checked'
                break
            if d[k] != want:
                why = f"it holds another episode ({k} {d[k]!r}, expected {want!r})"
                break
    if why is not None:
        raise CacheError(f"{path}: damaged cached episode: {why}; {hint}")
    return d


def write_cached(path: Path, task: EpisodeTask, result: Mapping[str, Any], commit: str) -> dict[str, Any]:
    """Write one cached episode atomically (a temporary file ``NAME.json.PID.tmp``, fsync-ed,
    then renamed); return its payload. An error or interruption while writing removes the
    temporary; one left by a killed writer is removed by :func:`remove_stale_temporaries`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # this process's own temporary name: two runs sharing a cache may write the same episode
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    res = json.loads(json.dumps(dict(result), default=_json_default))
    payload = {
        "scenario": task.scenario_name,
        "policy": task.policy,
        "seed": task.seed,
        "config_hash": cache_hash(task),
        "commit": commit,
        "digest": result_digest(res),
        "result": res,
    }
    atomic_write_bytes(path, json.dumps(payload, default=_json_default).encode("utf-8"), temporary=tmp)
    return payload


#: a cache temporary this young is never removed: a write takes milliseconds, and a writer on
#: another machine sharing the folder cannot be asked whether it is alive
TMP_GRACE_S = 60.0
#: a cache temporary this old is removed even when a process with its pid runs (the pid was
#: reused by another process, or the writer is on another machine)
TMP_MAX_AGE_S = 3600.0
#: the name :func:`write_cached` gives its temporaries (the writer's pid in the middle)
_TMP_NAME = re.compile(r"seed\d+-[0-9a-f]+\.json\.(\d+)\.tmp")


def remove_stale_temporaries(out: Path, now: float | None = None) -> list[Path]:
    """Remove the temporary files a killed writer left in the episode cache under ``out``
    (``OUT/episodes/SCENARIO/POLICY/seedN-HASH.json.PID.tmp``: SIGKILL, a power cut); return them.

    The rule: a temporary is stale when it was last modified more than :data:`TMP_GRACE_S`
    (60 s) ago and either no process with its ``PID`` is alive on this machine, or it is older
    than :data:`TMP_MAX_AGE_S` (an hour). So a temporary that a running writer (this run, or
    another run sharing the cache) is writing is never removed: its writer is alive, and a
    write lasts milliseconds, not an hour. Only names of that form are touched; files that
    cannot be removed (or that another run removed first) are left to the next opening."""
    root = Path(out) / "episodes"
    if not root.is_dir():
        return []
    now = time.time() if now is None else now
    removed = []
    for p in root.glob("*/*/seed*.tmp"):
        m = _TMP_NAME.fullmatch(p.name)
        if m is None:
            continue
        try:
            st = p.lstat()
        except OSError:
            continue
        age = now - st.st_mtime
        if not stat.S_ISREG(st.st_mode) or age < TMP_GRACE_S:
            continue
        if age < TMP_MAX_AGE_S and pid_alive(int(m.group(1))):
            continue
        try:
            p.unlink()
        except OSError:
            continue
        removed.append(p)
    return removed


def _json_default(o: Any) -> Any:  # pragma: no cover - numpy scalars
    if isinstance(o, np.generic):
        return o.item()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


class EpisodeCache:
    """The episode cache under ``out`` as a :class:`Store` (``fresh``: every episode is missing).
    Opening it removes the temporaries killed writers left there
    (:func:`remove_stale_temporaries`, listed in ``removed_temporaries``)."""

    def __init__(self, out: Path, fresh: bool = False):
        self.out = Path(out)
        self.fresh = fresh
        self.commit = git_commit()
        self.removed_temporaries = remove_stale_temporaries(self.out)

    @property
    def resume_hint(self) -> str:
        """They are kept; rerun (the command :func:`run_interruptible` names, if any)."""
        how = ("rerun without --fresh (episodes saved before this run are then used too) to resume "
               "from the cache" if self.fresh else "rerun the same command to resume from the cache")
        cmd = _ACTIVE.command if _ACTIVE is not None else ""
        return f"they are kept in {self.out}/episodes; {how}" + (f": {cmd}" if cmd else "")

    def get(self, task: EpisodeTask) -> dict[str, Any] | None:
        return None if self.fresh else read_cached(cache_path(self.out, task), task)

    def put(self, task: EpisodeTask, out: EpisodeOutput) -> dict[str, Any]:
        return write_cached(cache_path(self.out, task), task, result_record(out), self.commit)

    def seconds(self, record: Mapping[str, Any]) -> tuple[float | None, float | None]:
        r = record["result"]
        return r.get("episode_wall_s"), r.get("episode_cpu_s")


class MemoryStore:
    """A :class:`Store` that keeps nothing on disk: every episode runs (the load grid and the
    relevance figures, whose episodes are cheap and whose runs are not resumed)."""

    resume_hint = "nothing was saved: rerun the command"

    def get(self, task: EpisodeTask) -> None:
        return None

    def put(self, task: EpisodeTask, out: EpisodeOutput) -> dict[str, Any]:
        return {"result": out.result, "wall_s": out.wall_s, "cpu_s": out.cpu_s}

    def seconds(self, record: Mapping[str, Any]) -> tuple[float | None, float | None]:
        return record["wall_s"], record["cpu_s"]


class EpisodesFailed(RuntimeError):
    """:func:`run_results`: an episode failed or could not run; the message names the first and
    its error in one line (commands report it without a traceback)."""


def run_results(tasks: Sequence[EpisodeTask], *, workers: int = 1, desc: str = "episodes",
                progress: bool = True, out: Path | None = None) -> dict[EpisodeTask, EpisodeResult]:
    """Run every task and return each of ``tasks``' results (an episode listed twice runs
    once); a failed episode is a RuntimeError naming it and why. Without ``out`` nothing is
    kept (:class:`MemoryStore`); with it, episodes go to the episode cache under ``out`` (the
    one ``reproduce`` uses), so a rerun finds the finished ones and runs only the rest."""
    store: Store = MemoryStore() if out is None else EpisodeCache(Path(out))
    records, stats = run_episodes(tasks, store, workers=workers, desc=desc,
                                  progress="bar" if progress else "none",
                                  log=None if progress else (lambda msg: None))
    bad = stats.failed + stats.skipped
    if bad:
        t, msg = bad[0]
        # was: a RuntimeError carrying the worker's traceback, printed as a traceback by the CLI
        first = msg.splitlines()[0] if msg else "no message"
        raise EpisodesFailed(f"episode {t.label} failed ({len(bad)} of {len(records) + len(bad)} in all): "
                             f"{first}")
    # a worker returns its own copy of the task: match by the episode's key
    by_key = {t.episode_key: r["result"] for t, r in records.items()}
    if out is not None:  # cached records hold the result's JSON form
        by_key = {k: result_from_cache(r) for k, r in by_key.items()}
    return {t: by_key[t.episode_key] for t in tasks}


def run_tasks(
    tasks: Sequence[EpisodeTask],
    out: Path,
    *,
    fresh: bool = False,
    **options: Any,
) -> tuple[dict[EpisodeTask, EpisodeResult], RunStats]:
    """Run the tasks not yet cached under ``out`` (:func:`run_episodes` with the
    :class:`EpisodeCache`; ``options``: its keywords); return every task's result."""
    records, stats = run_episodes(tasks, EpisodeCache(out, fresh), desc="episodes", **options)
    return {t: result_from_cache(r["result"]) for t, r in records.items()}, stats
