"""One leaderboard episode: the picklable :class:`EpisodeTask`, loading an agent, running a
reference policy natively or a learned agent through its env, and the CSV row it gives.

:func:`run_episode` is a module-level function of plain data, so it runs unchanged in this
process, in ``spawn``-ed worker processes and in Ray tasks (:mod:`.ray_backend`).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import json
import os
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import gymnasium as gym
import numpy as np

from aryl_gym import __version__
from aryl_gym.agents import make_policy
from aryl_gym.config import ConfigError, load_scenario
from aryl_gym.leaderboard.provenance import (
    config_hash,
    env_version,
    git_commit,
    source_kind,
)
from aryl_gym.leaderboard.results import (
    METRIC_TYPES,
    Key,
    make_series,
)
from aryl_gym.leaderboard.suites import Entrant, Suite
from aryl_gym.metrics import EpisodeResult
from aryl_gym.rollout import run_agent
from aryl_gym.scenario import make_episode
from aryl_gym.sim.engine import Simulator
from aryl_gym.workload.paths import resolve_data_path

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
        if learned is None:
            raise AgentUnavailable(
                f"agent {source!r} needs aryl_gym.agents.learned (the SB3 model loader), not installed here"
            )
        try:
            agent = learned.load_agent(source)
        except (FileNotFoundError, KeyError, LookupError, ConfigError) as exc:
            raise AgentUnavailable(f"could not load agent {source!r}: {exc}") from None
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

    base = getattr(env, "unwrapped", env)
    for name in ("sim", "simulator", "_sim"):
        v = getattr(base, name, None)
        if isinstance(v, Simulator):
            return v
    for v in vars(base).values():
        if isinstance(v, Simulator):
            return v
    return None


def _run_agent(
    task: EpisodeTask,
) -> tuple[EpisodeResult, list[Any] | None, str, tuple[str, dict[str, Any]]]:
    """One episode of a learned agent through the gym env. Returns (result, timeline, note)."""
    try:
        # an optional dependency: its absence is handled here
        import gymnasium as gym

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
            try:  # through the suite's env id: the world the reference policies play
                env = make_env(env_id=task.env_id, **kwargs)
            except TypeError:  # a plugin's make_env without env_id
                env = make_env(**kwargs)
        else:
            env = gym.make(task.env_id, **kwargs)
    try:
        if agent is None:
            agent = load_agent(task.entrant.source, env)
        notes: list[str] = []
        # run_agent resets with ``episode_seed``, so the env draws ``make_episode(scenario,
        # seed)``, the episode the reference policies play; _check_trace verifies it.
        res, _ret, _steps = run_agent(agent, env, int(task.seed),
                                      after_reset=lambda e: notes.append(_check_trace(e, task)))
        sim = _env_sim(env)
        timeline = list(sim.acc.timeline) if (sim is not None and task.keep_timeline) else None
        return res, timeline, notes[0], _env_identity(env, task)
    finally:
        env.close()


def _env_identity(env: Any, task: EpisodeTask) -> tuple[str, dict[str, Any]]:
    """(env id, kwargs other than scenario/data_root) of the env actually used."""
    spec = getattr(env, "spec", None)
    if spec is None:
        return task.env_id, dict(task.env_kwargs)
    kw = {k: v for k, v in (spec.kwargs or {}).items() if k not in ("scenario", "data_root")}
    return str(spec.id), kw


def _check_trace(env: Any, task: EpisodeTask) -> str:
    """A note when the env's episode is not ``make_episode(scenario, seed)``'s (unfair comparison)."""
    sim = _env_sim(env)
    if sim is None:
        return "env trace not checked (no simulator exposed)"

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

    row.update(
        wall_time_s=round(wall, 6),
        commit=task.commit,
        config_hash=task.config_hash,
        aryl_gym_version=__version__,
        finished_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        note=note,
    )
    return row
