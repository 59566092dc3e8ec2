"""The options of the allocation env (:class:`aryl_gym.envs.allocation.ArylEnv`, ids
``aryl_gym/Aryl-v2`` and ``aryl_gym/Aryl-v1``): one validated, documented dataclass.

``gym.make("aryl_gym/Aryl-v2", window=32, ...)`` and ``ArylEnv(window=32, ...)`` build an
:class:`EnvOptions` from their keyword arguments (:meth:`EnvOptions.from_kwargs`);
``ArylEnv(EnvOptions(...))`` takes a prepared one, and ``env.options`` is what an env runs with.
An unknown name is a TypeError naming it and listing the valid ones; a bad value is a ValueError
naming the option and what it accepts. Each field's documentation is in its ``metadata["doc"]``
(:func:`describe`); docs/env.md ("Arguments") holds the same list (a test keeps them in step).

A scenario is checked when the env loads it (a name, a YAML path or a ``ScenarioConfig``), and
the default of ``max_workers`` comes from it; every other option is checked here.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from aryl_gym.agents import make_policy, policy_names
from aryl_gym.config import ScenarioConfig
from aryl_gym.envs.actions import MODES
from aryl_gym.envs.damping import parse_flap_damping
from aryl_gym.envs.obs_v1 import OBSERVATION_VERSIONS
from aryl_gym.envs.reward import parse_weights
from aryl_gym.sim.engine import STALL_HOURS, check_stall_hours
from aryl_gym.sim.jobs import JobSpec
from aryl_gym.sim.view import ClusterView, PlacementOptions
from aryl_gym.world_versions import CURRENT as CURRENT_WORLD
from aryl_gym.world_versions import check_world

ReclaimFn = Callable[[ClusterView, int], "Sequence[int] | None"]

#: Orders of the queued part of the window (:mod:`aryl_gym.envs.observation`).
WINDOW_ORDERS: tuple[str, ...] = ("submit", "pred_time")
#: the largest window the env accepts (the observation is K x 17 floats, the masks K x levels)
MAX_WINDOW = 4096
#: the most worker levels ``max_workers`` may ask for (the ``targets`` mask is K x (levels + 1))
MAX_WORKERS = 4096
#: ways an episode ended by the stall or thrash rule ends
EARLY_ENDS = ("truncate", "charge")
#: render modes of the env
RENDER_MODES = ("ansi", "rgb_array")


def check_flag(name: str, value: object) -> bool:
    """``value`` as a bool: True/False (or 1/0); anything else (e.g. the string "no", which
    ``bool()`` would take for True) is a ValueError."""
    if isinstance(value, (bool, np.bool_)) or (isinstance(value, (int, np.integer)) and value in (0, 1)):
        return bool(value)
    raise ValueError(f"{name} must be True or False, got {value!r}")


def check_early_end(early_end: object, end_fallback: object) -> tuple[str, str]:
    """``early_end`` (``"truncate"`` or ``"charge"``) and ``end_fallback`` (a reference policy
    name that can finish an episode: not ``random``, not a learned agent). The default fallback
    is ``fifo`` (the Baseline): the weakest reference, so that handing the rest of an episode
    to it is never a bargain for an agent that schedules better than it."""
    if early_end not in EARLY_ENDS:
        raise ValueError(f"early_end must be one of {', '.join(EARLY_ENDS)}, got {early_end!r} "
                         "(charge: an episode ended by the stall or thrash rule pays for its unfinished jobs)")

    if not isinstance(end_fallback, str) or end_fallback == "random":
        raise ValueError(f"end_fallback must be a reference policy name such as 'fifo', got {end_fallback!r}")
    try:
        make_policy(end_fallback)
    except (KeyError, ValueError) as exc:
        raise ValueError(f"end_fallback {end_fallback!r}: {exc}") from None
    return str(early_end), end_fallback


def is_int(value: object) -> bool:
    """A Python or numpy integer, not a bool."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def check_seed(value: object, what: str = "seed") -> int:
    """A seed: a Python or numpy integer >= 0, as an int (a float or a string is never rounded
    or parsed)."""
    if not is_int(value) or value < 0:  # type: ignore[operator]
        raise ValueError(f"{what} must be an integer >= 0 (Python or numpy), got {value!r}; "
                         "pass e.g. int(seed)")
    return int(value)  # type: ignore[call-overload]


def check_max_steps(value: object) -> int | None:
    """``max_steps``: None or an integer >= 1."""
    if value is None:
        return None
    if not is_int(value) or value < 1:  # type: ignore[operator]
        raise ValueError(f"max_steps must be an integer >= 1 or None, got {value!r}")
    return int(value)  # type: ignore[call-overload]


def check_reward_scale(value: object) -> float:
    """``reward_scale``: a finite number > 0 (seconds), Python or numpy."""
    if (
        isinstance(value, (bool, np.bool_))
        or not isinstance(value, (int, float, np.integer, np.floating))
        or not math.isfinite(float(value))
        or not value > 0
    ):
        raise ValueError(f"reward_scale must be a finite number > 0 (seconds), got {value!r}")
    return float(value)


def check_jobs(jobs: object, where: str = "jobs") -> list[JobSpec] | None:
    """A fixed trace argument: None or a non-empty list of JobSpec."""
    if jobs is None:
        return None
    if isinstance(jobs, (str, bytes)) or not isinstance(jobs, Sequence):
        raise ValueError(f"{where} must be a list of JobSpec (aryl_gym.sim.jobs.JobSpec), got {type(jobs).__name__}")
    bad = [i for i, j in enumerate(jobs) if not isinstance(j, JobSpec)]
    if bad:
        raise ValueError(
            f"{where}: item {bad[0]} is a {type(jobs[bad[0]]).__name__}, not a JobSpec "
            "(aryl_gym.sim.jobs.JobSpec)"
        )
    if not jobs:
        raise ValueError(f"{where} is empty: give at least one JobSpec")
    return list(jobs)


def placement_from_mapping(value: Mapping[str, Any]) -> PlacementOptions:
    """``PlacementOptions`` from a dict of its fields (their JSON form); an unknown field or a
    value that is not a bool is a ValueError naming it."""
    names = [f.name for f in dataclasses.fields(PlacementOptions)]
    unknown = [k for k in value if k not in names]
    if unknown:
        raise ValueError(f"unknown placement option {unknown[0]!r}; options: {', '.join(names)}")
    bad = [k for k, v in value.items() if not isinstance(v, (bool, np.bool_))]
    if bad:
        raise ValueError(f"placement option {bad[0]!r} must be true or false, got {value[bad[0]]!r}")
    return PlacementOptions(**{k: bool(v) for k, v in value.items()})


def resolve_reclaim(reclaim: str | ReclaimFn | None) -> ReclaimFn | None:
    """``"aryl"`` (Aryl's reclaim when ``agents/reclaim.py`` or the ``aryl`` policy provides it,
    else the simulator's default), ``"default"``/``None`` (the simulator's default rule: fewest
    busy GPUs first), another policy name (that policy's ``reclaim``), or a callable
    ``(view, n) -> server ids``."""
    if reclaim is None or reclaim == "default":
        return None
    if callable(reclaim):
        return reclaim
    if not isinstance(reclaim, str):
        raise ValueError(f"reclaim must be a policy name, 'default' or a callable, got {reclaim!r}")
    if reclaim in ("aryl", "aryl-optimal"):
        try:
            # an optional dependency: its absence is handled here
            from aryl_gym.agents import reclaim as _rc
        except ModuleNotFoundError:  # agents/reclaim.py not present: the default rule
            return None
        return _rc.aryl_reclaim_view if reclaim == "aryl" else _rc.optimal_reclaim_view

    if reclaim not in policy_names():
        raise ValueError(
            f"unknown reclaim {reclaim!r}; use 'aryl', 'aryl-optimal', 'default', a policy name "
            "or a callable (view, n) -> server ids"
        )
    return make_policy(reclaim).reclaim


def _doc(text: str, default: Any) -> Any:
    return field(default=default, metadata={"doc": text})


#: ``end_fallback``'s default (another value without ``early_end="charge"`` is an inert option)
_DEFAULT_FALLBACK = "fifo"


@dataclass(frozen=True)
class EnvOptions:
    """Every option of the allocation env, with its default. Built and checked once; the env
    reads it (``env.options``). Flags hold bools, ``window`` an int, ``reward_scale`` and
    ``stall_hours`` floats, whatever numeric type they were given as."""

    scenario: str | Path | ScenarioConfig = _doc(
        "scenario name, YAML path or ScenarioConfig (on a shipped scenario the id's world applies)", "tiny")
    action_mode: str = _doc("'targets', 'sequential' or 'priority' (aryl_gym.envs.actions)", "targets")
    window: int = _doc("K, the jobs the agent sees and sets per decision point (1..4096)", 16)
    reward: str | dict[str, float] | None = _doc(
        "reward component name, 'a+b', or a dict of weights (aryl_gym.envs.reward)", "jct")
    reward_scale: float = _doc("seconds per reward unit (> 0)", 3600.0)
    invalid_penalty: float = _doc("weight of the 'invalid' reward component", 0.0)
    max_steps: int | None = _doc("truncate after this many env steps (None: no limit)", None)
    max_workers: int | None = _doc(
        "worker levels of 'targets' (None: the scenario's max_job_gpus, at most the training GPUs)", None)
    allow_preempt: bool = _doc("actions may preempt running jobs", False)
    release: bool = _doc("'sequential' has release actions", True)
    uses_loaning: bool = _doc("accept loanable inference servers", True)
    placement: PlacementOptions | Mapping[str, bool] | None = _doc(
        "placement options, or a dict of their fields (None: Aryl's, elastic jobs prefer loaned "
        "servers, flexible grouping)", None)
    reclaim: str | ReclaimFn | None = _doc(
        "which loaned servers go back: 'aryl', 'aryl-optimal', 'default', a policy name or a callable",
        "aryl")
    jobs: Sequence[JobSpec] | None = _doc("a fixed trace: a list of JobSpec", None)
    trace: str | None = _doc("a trace file, loaded with aryl_gym.workload.traces.load_trace", None)
    trace_format: str | None = _doc("the trace file's format", None)
    trace_map: str | None = _doc("the trace file's column mapping", None)
    trace_options: dict[str, Any] | None = _doc("further load_trace options (a dict)", None)
    data_root: str | None = _doc("folder holding traces/ (or $ARYL_GYM_DATA)", None)
    stall_hours: float = _doc("the stall rule's hours (math.inf: off; aryl_gym.sim.engine.STALL_HOURS)",
                              STALL_HOURS)
    thrash_sustained: bool = _doc(
        "the thrash rule also needs the overhead share in each half of its window (the waste lasted "
        "the whole window; aryl_gym.sim.engine.Simulator.check_thrash)", False)
    render_mode: str | None = _doc("'ansi', 'rgb_array' or None", None)
    window_order: str = _doc("queued part of the window: 'submit' or 'pred_time'", "submit")
    window_fit: int = _doc("queued slots kept for jobs that fit the free GPUs now (0: off; "
                           "aryl_gym.envs.observation)", 0)
    observation: str = _doc("'v0', or 'v1' (adds jobs_v1 and cluster_v1)", "v0")
    flap_damping: bool | Mapping[str, float] | None = _doc(
        "refuse releases of flapping jobs: None/False (off), True, or a dict of DampingParams", None)
    early_end: str = _doc("an end by the stall or thrash rule: 'truncate' or 'charge'", "truncate")
    end_fallback: str = _doc("the reference policy whose finish 'charge' bills", _DEFAULT_FALLBACK)
    backfill: bool = _doc("at a commit, start queued jobs outside the window where they fit", False)
    stall_guard: bool = _doc(
        "sequential mode: while nothing runs, nothing is left to arrive and a queued window job can "
        "start, the commit is refused until the agent grants one", False)
    preempt_guard: bool = _doc(
        "sequential mode with allow_preempt: a preemption is allowed only while a queued window job "
        "cannot start", False)
    world_version: str = _doc("'v1' or 'v2' (set by the id)", CURRENT_WORLD)

    def __post_init__(self) -> None:
        def put(name: str, value: Any) -> None:
            object.__setattr__(self, name, value)

        put("world_version", check_world(self.world_version, "world_version"))
        if not isinstance(self.scenario, (str, os.PathLike, ScenarioConfig)):
            # was: loaded as str(scenario), so 5 or None was "unknown scenario '5'" / "'None'"
            raise ValueError(f"scenario must be a scenario name, a YAML path (str or pathlib.Path) or a "
                             f"ScenarioConfig, got {self.scenario!r} ({type(self.scenario).__name__})")
        if self.action_mode not in MODES:
            raise ValueError(f"unknown action_mode {self.action_mode!r}; choose one of {', '.join(MODES)}")
        window = self.window
        if isinstance(window, bool) or not (isinstance(window, (int, np.integer)) and window >= 1):
            raise ValueError(f"window must be an integer >= 1, got {window!r}")
        if window > MAX_WINDOW:
            raise ValueError(
                f"window={window} is too large (at most {MAX_WINDOW}: the observation and the mask "
                "grow with it); jobs outside the window are summarised in obs['outside']"
            )
        put("window", int(window))
        wf = self.window_fit
        if isinstance(wf, bool) or not (isinstance(wf, (int, np.integer)) and 0 <= wf <= window):
            raise ValueError(f"window_fit must be an integer from 0 to the window ({window}), got {wf!r}")
        put("window_fit", int(wf))
        mw = self.max_workers
        if mw is not None and (isinstance(mw, bool) or not isinstance(mw, (int, np.integer)) or mw < 1):
            raise ValueError(f"max_workers must be an integer >= 1 or None, got {mw!r}")
        if isinstance(self.placement, Mapping):  # JSON form, e.g. in a Minari dataset's env spec
            put("placement", placement_from_mapping(self.placement))
        if self.placement is not None and not isinstance(self.placement, PlacementOptions):
            raise ValueError(
                f"placement must be an aryl_gym.sim.view.PlacementOptions or None (Aryl's), "
                f"got {self.placement!r}"
            )
        put("reward_scale", check_reward_scale(self.reward_scale))
        put("max_steps", check_max_steps(self.max_steps))
        if mw is not None and mw > MAX_WORKERS:
            raise ValueError(
                f"max_workers={mw} is too large (at most {MAX_WORKERS}: the targets "
                "mask has window x (max_workers + 1) entries); the level max_workers means "
                "w_max for bigger jobs"
            )
        if mw is not None:
            put("max_workers", int(mw))
        for flag in ("allow_preempt", "backfill", "release", "uses_loaning", "stall_guard", "preempt_guard",
                     "thrash_sustained"):
            put(flag, check_flag(flag, getattr(self, flag)))
        for guard, acts_on in (("stall_guard", "commit"), ("preempt_guard", "preemptions")):
            if getattr(self, guard) and self.action_mode != "sequential":
                raise ValueError(
                    f"{guard} acts on the sequential mode's {acts_on}; action_mode is {self.action_mode!r} "
                    f"(use action_mode='sequential' or {guard}=False)"
                )
        # options another option makes inert (was: accepted and ignored)
        if not self.release and self.action_mode != "sequential":
            raise ValueError(f"release=False removes the sequential mode's release actions; action_mode is "
                             f"{self.action_mode!r}, which has none (drop release)")
        if self.allow_preempt and self.action_mode == "priority":
            raise ValueError("allow_preempt: the priority mode only orders queued jobs and never preempts "
                             "(use action_mode='sequential' or 'targets', or drop allow_preempt)")
        if self.preempt_guard and not self.allow_preempt:
            raise ValueError("preempt_guard limits preemptions, and allow_preempt=False allows none "
                             "(set allow_preempt=True, or drop preempt_guard)")
        # the values first (was: end_fallback='nope' or None was reported as "the policy
        # early_end='charge' bills", and setting early_end='charge' then refused its value)
        check_early_end(self.early_end, self.end_fallback)
        if self.end_fallback != _DEFAULT_FALLBACK and self.early_end != "charge":
            raise ValueError(f"end_fallback={self.end_fallback!r} is the policy early_end='charge' bills; "
                             f"early_end is {self.early_end!r} (set early_end='charge', or drop end_fallback)")
        if self.trace is not None and (not isinstance(self.trace, (str, Path)) or not str(self.trace)):
            # was: accepted; "" played the scenario's generated workload without a word (as
            # reset(options={'trace': ''}) did before it was refused), 5 failed at reset as a file
            raise ValueError(f"trace must be a trace file path (str or pathlib.Path) or None, got {self.trace!r}")
        if self.data_root is not None and not isinstance(self.data_root, (str, Path)):
            # was: accepted, and failed (or not) deep inside a trace or series load at reset
            raise ValueError(f"data_root must be a folder path (str or pathlib.Path) or None, got {self.data_root!r}")
        if self.trace is None:
            given = [k for k in ("trace_format", "trace_map", "trace_options") if getattr(self, k)]
            if given:
                raise ValueError(f"{given[0]} applies to a trace file, and trace is not set "
                                 "(give trace=PATH, or drop it)")
        put("jobs", check_jobs(self.jobs))
        if self.trace_options is not None and not isinstance(self.trace_options, dict):
            raise ValueError(f"trace_options must be a dict of load_trace options, got {self.trace_options!r}")
        if self.window_order not in WINDOW_ORDERS:
            raise ValueError(
                f"unknown window_order {self.window_order!r}; choose one of {', '.join(WINDOW_ORDERS)}"
            )
        put("stall_hours", check_stall_hours(self.stall_hours))
        damping = parse_flap_damping(self.flap_damping)
        # options stall_hours=math.inf or the priority mode make inert (was: accepted and ignored)
        if math.isinf(self.stall_hours):
            for name, on, what in (("early_end", self.early_end == "charge", "charges episodes the stall or thrash rule ends"),
                                   ("thrash_sustained", self.thrash_sustained, "changes the thrash rule")):
                if on:
                    raise ValueError(
                        f"{name}={getattr(self, name)!r} {what}, and stall_hours=math.inf switches the stall and "
                        f"thrash rules off (give a finite stall_hours, or drop {name})")
        if damping is not None and self.action_mode == "priority":
            raise ValueError("flap_damping refuses releases, and the priority mode never releases a job "
                             "(use action_mode='sequential' or 'targets', or drop flap_damping)")
        if self.render_mode is not None and self.render_mode not in RENDER_MODES:
            raise ValueError(f"render_mode must be one of {list(RENDER_MODES)} or None, got {self.render_mode!r}")
        if self.observation not in OBSERVATION_VERSIONS:
            raise ValueError(
                f"unknown observation {self.observation!r}; choose one of {', '.join(OBSERVATION_VERSIONS)}"
            )
        parse_weights(self.reward, self.invalid_penalty)
        resolve_reclaim(self.reclaim)

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """Every option's name, in order."""
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def from_kwargs(cls, base: EnvOptions | None = None, /, **kwargs: Any) -> EnvOptions:
        """``base`` (or the defaults) with ``kwargs`` set; an unknown name is a TypeError that
        names it and lists the valid ones."""
        unknown = [k for k in kwargs if k not in cls.names()]
        if unknown:
            raise TypeError(
                f"unknown env option {unknown[0]!r}; options: {', '.join(cls.names())} "
                "(docs/env.md, 'Arguments of Aryl-v2')"
            )
        return dataclasses.replace(base, **kwargs) if base is not None else cls(**kwargs)


def describe() -> str:
    """One line per option: name, default, what it does."""
    return "\n".join(
        f"{f.name} (default {f.default!r}): {f.metadata['doc']}" for f in dataclasses.fields(EnvOptions)
    )


__all__ = [
    "EARLY_ENDS",
    "MAX_WINDOW",
    "MAX_WORKERS",
    "RENDER_MODES",
    "WINDOW_ORDERS",
    "EnvOptions",
    "ReclaimFn",
    "check_early_end",
    "check_flag",
    "check_jobs",
    "check_max_steps",
    "check_reward_scale",
    "describe",
    "resolve_reclaim",
]
