"""The job model (SPEC 1.3).

A :class:`JobSpec` is what a trace or generator says about one training job; it never changes
during an episode. The simulator keeps the changing part (remaining work, workers, state) in
numpy arrays of :class:`aryl_gym.sim.engine.Simulator`, indexed by the job's position in the trace.

Units: seconds for times; *work* is in V100 worker-seconds, i.e. the running time at ``w_max``
workers on V100 times ``w_max`` (paper: "workload is the product of maximum demand and minimum
running time"), so with linear scaling ``T(w) = W / w`` inside ``[w_min, w_max]``.

World v1 (SPEC "World v1"): an elastic job *requests* its base demand, ``w_req = w_min``, and may
grow to ``w_max = r x w_min``; policies without elastic scaling (Baseline, SJF) run every job at
``w_req``. An inelastic job has ``w_min = w_req = w_max``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import IntEnum

import numpy as np

from aryl_gym.families import ELASTIC_FAMILIES  # noqa: F401  (its public home stays here)


class JobState(IntEnum):
    """Lifecycle: PENDING (not yet submitted) -> QUEUED -> RUNNING <-> QUEUED (preempted) -> DONE."""

    PENDING = 0
    QUEUED = 1
    RUNNING = 2
    DONE = 3


@dataclass(frozen=True, slots=True)
class JobSpec:
    """One training job as submitted.

    Attributes:
        id: position in the trace (0..n-1); ties everywhere are broken by it.
        submit: submission time in seconds from the start of the episode.
        family: model family (``resnet50``, ``bert``, ...); selects speed factors and overheads.
        g: GPUs per worker (1, 2, 4 or 8); a worker never spans servers.
        w_min: fewest workers the job can run with (its base demand; ``== w_max`` when inelastic).
        w_max: most workers the job can use (its base demand times its elastic range).
        elastic: may change its worker count while running, inside ``[w_min, w_max]``.
        type_agnostic: may run on inference GPUs (T4) as well as training GPUs (V100).
        work: true work in V100 worker-seconds.
        pred_work: the work a scheduler believes (``work`` times a prediction error).
        name: the trace's name for the job, if any.
        app: application profile name for Pollux-workload jobs (``None`` for synthetic jobs).
        batch_size: initial global batch size for Pollux-workload jobs.
        scaling: optional scaling-efficiency curve, the rate multiplier relative to linear
            scaling indexed by worker count (``scaling[w]``; index 0 unused, counts beyond the
            end use the last entry). The rate with ``w`` workers is ``w x speed x scaling[w]``.
            ``None`` = linear (SPEC 1.3). Pollux-workload jobs get it from the application's
            profiles at the job's fixed global batch, normalised to 1 at ``w_max``
            (docs/traces.md), so ``work`` still means running time at ``w_max`` times ``w_max``.
        w_req: the workers the job requests, what a policy without elastic scaling gives it;
            ``w_min <= w_req <= w_max``. ``0`` (the default) means ``w_min`` (World v1: an elastic
            job requests its base demand).
        hetero: may run on both GPU types at once (heterogeneous training, paper 7.2): its base
            workers share one pool and its flexible workers may go on loaned inference servers
            while its base is on training servers. Only elastic type-agnostic jobs may be marked.
    """

    id: int
    submit: float
    family: str
    g: int
    w_min: int
    w_max: int
    elastic: bool
    type_agnostic: bool
    work: float
    pred_work: float
    name: str = ""
    app: str | None = None
    batch_size: int | None = None
    scaling: tuple[float, ...] | None = None
    extra: dict = field(default_factory=dict, compare=False, hash=False)
    w_req: int = 0
    hetero: bool = False

    def __post_init__(self) -> None:
        if self.w_req == 0:
            object.__setattr__(self, "w_req", self.w_min)

    @property
    def gpus_max(self) -> int:
        return self.g * self.w_max

    def validate(self) -> None:
        """Raise ``ValueError`` naming the field when the spec is inconsistent."""
        # the common case in one expression (the simulator validates every job of a trace);
        # any doubt goes to the checks below, which name the field
        g, a, b, r = self.g, self.w_min, self.w_max, self.w_req
        if (
            type(g) is int and type(a) is int and type(b) is int and type(r) is int
            and type(self.elastic) is bool and type(self.type_agnostic) is bool
            and type(self.hetero) is bool and type(self.family) is str
            and type(self.work) is float and type(self.pred_work) is float
            and type(self.submit) is float
            and (g == 1 or g == 2 or g == 4 or g == 8) and 1 <= a <= r <= b
            and (self.elastic or a == b) and (not self.hetero or (self.elastic and self.type_agnostic))
            and 0 < self.work < math.inf and 0 < self.pred_work < math.inf
            and 0 <= self.submit < math.inf and self.scaling is None
        ):
            return
        self._check()

    def _check(self) -> None:
        where = f"job {self.id} ({self.name or self.family})"
        # types first: the simulator copies these into int64 / bool / float64 arrays, where a
        # 1.5 would become 1, a "no" True and an inf never finish
        for name in ("g", "w_min", "w_max", "w_req"):
            v = getattr(self, name)
            if type(v) is not int and (
                not isinstance(v, (int, np.integer)) or isinstance(v, (bool, np.bool_))
            ):
                raise ValueError(f"{where}: {name}={v!r} must be an integer")
        for name in ("elastic", "type_agnostic", "hetero"):
            v = getattr(self, name)
            if type(v) is not bool and not isinstance(v, np.bool_):
                raise ValueError(f"{where}: {name}={v!r} must be True or False")
        if type(self.family) is not str:
            raise ValueError(f"{where}: family={self.family!r} must be a string")
        for name in ("submit", "work", "pred_work"):
            v = getattr(self, name)
            if not isinstance(v, (int, float, np.integer, np.floating)) or isinstance(v, (bool, np.bool_)):
                raise ValueError(f"{where}: {name}={v!r} must be a number")
        sc = self.scaling
        if sc is not None and (
            isinstance(sc, (str, bytes)) or not hasattr(sc, "__len__")
            or not all(isinstance(x, (int, float, np.integer, np.floating)) for x in sc)
        ):
            raise ValueError(f"{where}: scaling={sc!r} must be a tuple of numbers or None")
        if self.g not in (1, 2, 4, 8):
            raise ValueError(f"{where}: GPUs per worker g={self.g}; must be 1, 2, 4 or 8")
        if self.w_min < 1 or self.w_max < self.w_min:
            raise ValueError(
                f"{where}: worker range [{self.w_min}, {self.w_max}] is empty or below 1"
            )
        if not (self.w_min <= self.w_req <= self.w_max):
            raise ValueError(
                f"{where}: requested workers w_req={self.w_req} outside [{self.w_min}, {self.w_max}]"
            )
        if self.hetero and not (self.elastic and self.type_agnostic):
            raise ValueError(
                f"{where}: hetero (heterogeneous training) needs an elastic type-agnostic job"
            )
        if not self.elastic and self.w_min != self.w_max:
            raise ValueError(f"{where}: inelastic job needs w_min == w_max")
        if not (0 < self.work < math.inf) or not (0 < self.pred_work < math.inf):
            raise ValueError(
                f"{where}: work and pred_work must be finite and positive, got {self.work} / "
                f"{self.pred_work}"
            )
        if self.scaling is not None:
            sc = self.scaling
            if len(sc) < 2 or not all(math.isfinite(x) and x > 0 for x in sc[1:]):
                raise ValueError(
                    f"{where}: scaling curve must have an entry for w >= 1 and all entries from "
                    f"index 1 finite and > 0, got {sc!r}"
                )
        if not (0 <= self.submit < math.inf):
            raise ValueError(f"{where}: submit time must be finite and >= 0, got {self.submit}")


class JobSpecBuilder:
    """The bulk construction path for loaders that build up to millions of specs.

    ``JobSpecBuilder(...)`` takes every field of :class:`JobSpec` positionally, in field order,
    with no defaults (``w_req`` already resolved, ``extra`` a mapping), and returns a
    :class:`JobSpec`: it fills an instance of this class, which has the same slots, with ordinary
    attribute stores and then gives it the frozen class. That skips the frozen ``__init__``'s
    per-field ``object.__setattr__`` calls and ``__post_init__`` (loading a million-row trace is
    dominated by building its specs). The result equals the spec built the normal way, field by
    field (tested). Callers validate the values themselves, as
    :func:`aryl_gym.workload.traces.load_trace` does, vectorised.
    """

    __slots__ = JobSpec.__slots__

    def __init__(self, id: int, submit: float, family: str, g: int, w_min: int, w_max: int,
                 elastic: bool, type_agnostic: bool, work: float, pred_work: float, name: str,
                 app: str | None, batch_size: int | None, scaling: tuple[float, ...] | None,
                 extra: dict, w_req: int, hetero: bool) -> None:
        self.id = id
        self.submit = submit
        self.family = family
        self.g = g
        self.w_min = w_min
        self.w_max = w_max
        self.elastic = elastic
        self.type_agnostic = type_agnostic
        self.work = work
        self.pred_work = pred_work
        self.name = name
        self.app = app
        self.batch_size = batch_size
        self.scaling = scaling
        self.extra = extra
        self.w_req = w_req
        self.hetero = hetero
        self.__class__ = JobSpec  # type: ignore[assignment]
