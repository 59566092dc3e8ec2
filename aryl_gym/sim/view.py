"""What policies see and what they return (SPEC 2).

Policies receive a read-only :class:`ClusterView` of the simulator each round and return a
:class:`Decision`. The simulator never branches on which policy runs: a policy's behaviour enters
only through its decision, its reclaim choice, and the :class:`PlacementOptions` it declares.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import NamedTuple, Protocol, runtime_checkable

import numpy as np

from aryl_gym.config import ScenarioConfig
from aryl_gym.sim.jobs import JobSpec
from aryl_gym.sim.state import SimState


class Pool(IntEnum):
    """The two server pools: training servers (V100) and inference servers (T4, usable by
    training only while on loan). Server and job pool arrays hold these values (-1 = none)."""

    TRAIN = 0
    INFER = 1


#: :class:`Pool` values as plain ints (fast in hot loops and array indexing)
TRAIN: int = int(Pool.TRAIN)
INFER: int = int(Pool.INFER)


@dataclass(frozen=True)
class PlacementOptions:
    """How the shared placement engine treats a policy's jobs (paper 5.3).

    Attributes:
        elastic_prefer_inference: elastic type-agnostic jobs go to loaned inference servers
            first (paper); when off they prefer training servers like inelastic jobs.
        group_flexible: an elastic job's workers beyond ``w_min`` go on loaned servers that hold
            none of its base workers, so a reclaim can take them without preemption (paper 5.3).
        hetero: heterogeneous training (paper 7.2): a job marked ``JobSpec.hetero`` whose base is
            on training servers may put flexible workers that do not fit there on loaned
            inference servers (then running at the mixed rate,
            :meth:`~aryl_gym.sim.engine.Simulator.rate_mixed`). Off: all of a job's workers
            share one pool.
    """

    elastic_prefer_inference: bool = True
    group_flexible: bool = False
    hetero: bool = False


@dataclass
class Decision:
    """A scheduling decision for one round.

    Attributes:
        targets: job id -> target worker count (0 = not running). Jobs not listed keep what they
            have (running jobs keep their workers, queued jobs stay queued).
        pools: job id -> preferred pool (``TRAIN`` or ``INFER``) for a job that is started now;
            overrides the default preference order.
        order: priority order for placing new workers when capacity is short (earlier first,
            after best-fit-decreasing's per-worker size); jobs not listed follow by id.
        speedup: optional job id -> rate-multiplier table ``m`` indexed by worker count
            (``m[w]`` for ``w`` workers; counts past the end use the last entry). The job's rate
            becomes ``w * speed * m[w]`` from this round on, until another table replaces it.
            It models what a policy changes *inside* a job, e.g. batch-size tuning (Pollux;
            Aryl paper 7.4 "Aryl+TunedJobs"), relative to the job's reference configuration
            in which its work is defined. Entries must be finite and > 0. Empty (the default)
            leaves every rate as it is.
    """

    targets: dict[int, int] = field(default_factory=dict)
    pools: dict[int, int] = field(default_factory=dict)
    order: list[int] | None = None
    speedup: dict[int, Sequence[float] | np.ndarray] = field(default_factory=dict)
    #: optional job id -> local batch factor (World v2): the job trains at ``factor`` times its
    #: reference local batch from this round on (1 = the reference); the simulator runs the
    #: true goodput of that batch at the job's progress (aryl_gym.sim.goodput). Batch-size
    #: tuning (Pollux, Aryl+TunedJobs) chooses it; the simulator, not the policy, decides
    #: what it is worth.
    batch: dict[int, float] | None = None


class Measurement(NamedTuple):
    """What a running job reports about itself (:meth:`ClusterView.measure`), as AdaptDL's
    training loop reports to Pollux: its configuration, the time of an optimizer step there,
    and its gradient noise scale. Nothing else about its goodput curve is visible.

    Attributes:
        workers: workers now; ``gpus`` = workers x GPUs per worker (replicas).
        batch: the local batch factor in force (``Decision.batch``; 1 = the reference batch).
        local_batch: local batch in samples (the factor times the reference local batch, cut
            to the job's limits); ``atomic_batch`` and ``accum_steps``: how it is computed
            (gradient accumulation above the largest batch that fits a GPU).
        step_time: seconds of one atomic step with the all-reduce; ``compute_time``: its
            forward and backward pass (an accumulation step takes that long); ``sync_time``: its
            all-reduce (0 on one GPU; overlapped with compute, so the step is shorter than
            their sum).
        pgns: gradient noise scale in samples at the job's progress now (grows with progress).
        efficiency: statistical efficiency of the global batch relative to the initial batch.
        rate: true progress rate (work units per second); ``progress``: share of work done.
    """

    workers: int
    batch: float
    rate: float
    progress: float
    gpus: float
    local_batch: float
    atomic_batch: float
    accum_steps: float
    step_time: float
    compute_time: float
    sync_time: float
    pgns: float
    efficiency: float


@dataclass
class PlacementReport:
    """What the placement engine did with a decision (nothing is dropped silently)."""

    started: list[int] = field(default_factory=list)
    preempted: list[int] = field(default_factory=list)
    scaled_out: list[int] = field(default_factory=list)
    scaled_in: list[int] = field(default_factory=list)
    #: job id -> (asked workers, placed workers) where fewer than asked were placed.
    unplaced: dict[int, tuple[int, int]] = field(default_factory=dict)
    #: job id -> reason, for targets that were not valid and were ignored or clamped.
    invalid: dict[int, str] = field(default_factory=dict)

    @property
    def changed(self) -> bool:
        return bool(self.started or self.preempted or self.scaled_out or self.scaled_in)


@runtime_checkable
class Policy(Protocol):
    """A scheduling policy. See ``agents/`` for the reference ones.

    Attributes:
        name: registry name.
        uses_loaning: whether loanable inference servers are accepted for this policy.
        placement: options for the shared placement engine.
        event_driven: the policy's decision depends only on events (arrivals, completions,
            loan changes, its own last decision), so rounds without events may be skipped.
    """

    name: str
    uses_loaning: bool
    placement: PlacementOptions

    @property
    def event_driven(self) -> bool: ...

    def reset(self, seed: int | None = None) -> None: ...

    def decide(self, view: ClusterView) -> Decision: ...

    def reclaim(self, view: ClusterView, n: int) -> Sequence[int] | None:
        """Pick ``n`` loaned server ids to return; ``None`` uses the default rule."""
        ...


#: ClusterView's array attributes (read-only views of the simulator's arrays)
_VIEW_ARRAYS = frozenset((
    "srv_pool", "srv_cap", "srv_free", "srv_loaned", "srv_base_gpus", "srv_flex_gpus", "state",
    "workers", "pool", "remaining", "pred_remaining", "overhead_left", "preemptions",
    "first_start", "attained",
))


class ClusterView:
    """A read-only window on the simulator's state for policies.

    Arrays are numpy views with the write flag off: reading is free, writing raises.
    Server ids are positions in the server arrays: training servers first, then inference.
    """

    def __init__(self, sim: SimState):
        self._sim = sim
        self._bind()

    def _bind(self) -> None:
        """(Re)create the read-only array views on the simulator's arrays."""
        sim = self._sim

        def ro(a: np.ndarray) -> np.ndarray:
            v = a.view()
            v.flags.writeable = False
            return v

        # Servers
        self.srv_pool = ro(sim.srv_pool)  # (S,) int8: TRAIN or INFER
        self.srv_cap = ro(sim.srv_cap)  # (S,) GPUs per server
        self.srv_free = ro(sim.srv_free)  # (S,) free GPUs (meaningful where usable)
        self.srv_loaned = ro(sim.srv_loaned)  # (S,) bool: inference server on loan now
        self.srv_base_gpus = ro(sim.srv_base_gpus)  # (S,) GPUs held by base workers
        self.srv_flex_gpus = ro(sim.srv_flex_gpus)  # (S,) GPUs held by flexible workers
        # Jobs (indexed by job id)
        self.state = ro(sim.state)  # (N,) JobState
        self.workers = ro(sim.workers)  # (N,) current workers
        self.pool = ro(sim.pool)  # (N,) pool of current workers, -1 when not running
        self.remaining = ro(sim.remaining)  # (N,) true remaining work, V100 worker-seconds
        self.pred_remaining = ro(sim.pred_remaining)  # (N,) predicted remaining work
        self.overhead_left = ro(sim.overhead_left)  # (N,) seconds of overhead still to pay
        self.preemptions = ro(sim.preempt_count)  # (N,) times preempted
        self.first_start = ro(sim.first_start)  # (N,) nan until first start
        self.attained = ro(sim.running_time)  # (N,) seconds spent running (with workers)

    # -- pickling and copying -------------------------------------------------------------------
    # The array attributes are views of the simulator's arrays; pickle and deepcopy would turn
    # them into frozen copies that no longer follow the (copied) simulator, and a policy would
    # read stale state. Only the simulator is kept; the views are rebuilt on first use (not in
    # __setstate__: inside a pickled simulator the view is restored before the simulator's own
    # arrays are).
    def __getstate__(self) -> dict[str, object]:
        return {"_sim": self._sim}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__["_sim"] = state["_sim"]

    def __getattr__(self, name: str) -> object:
        # only reached for attributes not set: the array views after unpickling or copying
        d = self.__dict__
        if name in _VIEW_ARRAYS and "_sim" in d and name not in d:
            self._bind()
            return d[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    # -- scalars ------------------------------------------------------------------------------
    @property
    def now(self) -> float:
        return self._sim.now

    @property
    def interval(self) -> float:
        return self._sim.interval

    @property
    def jobs(self) -> Sequence[JobSpec]:
        return self._sim.jobs

    @property
    def config(self) -> ScenarioConfig:
        return self._sim.config

    @property
    def rng(self) -> np.random.Generator:
        """The simulator's generator for policies that need randomness (seeded per episode)."""
        return self._sim.policy_rng

    @property
    def loanable(self) -> int:
        return self._sim.loanable_now

    @property
    def loaned(self) -> int:
        return int(self._sim.srv_loaned.sum())

    @property
    def inference_utilization(self) -> float:
        return self._sim.loan.utilization(self._sim.now)

    # -- job sets ------------------------------------------------------------------------------
    def queued(self) -> list[int]:
        """Queued job ids (never started or preempted), by submit order (id)."""
        return self._sim.queued_ids()

    def running(self) -> list[int]:
        """Running job ids, ascending."""
        return self._sim.running_ids()

    def active(self) -> list[int]:
        return sorted(self._sim.queued_ids() + self._sim.running_ids())

    def placement(self, j: int) -> tuple[dict[int, int], dict[int, int]]:
        """(base workers per server, flexible workers per server) of job ``j``; copies."""
        return dict(self._sim.base[j]), dict(self._sim.flex[j])

    def jobs_on(self, s: int) -> dict[int, int]:
        """job id -> workers on server ``s``; a copy."""
        return dict(self._sim.srv_jobs[s])

    # -- capacity ------------------------------------------------------------------------------
    def usable(self, pool: int) -> np.ndarray:
        """Boolean mask of servers of ``pool`` that training may use now (read-only: it is the
        simulator's own mask, which an in-place ``&=`` changed)."""
        m = self._sim.usable_mask(pool).view()
        m.flags.writeable = False
        return m

    def free_gpus(self, pool: int) -> int:
        m = self._sim.usable_mask(pool)
        return int(self._sim.srv_free[m].sum())

    def capacity(self, pool: int) -> int:
        m = self._sim.usable_mask(pool)
        return int(self._sim.srv_cap[m].sum())

    def fits(self, pool: int, g: int) -> int:
        """How many workers of ``g`` GPUs fit in the free space of ``pool`` (fragmentation aware)."""
        m = self._sim.usable_mask(pool)
        return int((self._sim.srv_free[m] // g).sum())

    def limits(self, j: int) -> tuple[int, int, bool]:
        """``(lo, hi, resizable)``: the worker range the placement engine enforces for job ``j``
        under the running policy's ``elasticity`` (``[w_min, w_max]``, or up to the ceiling
        ``w_ceil``; :meth:`~aryl_gym.sim.engine.Simulator.set_elasticity`) and whether the job may
        change size while it runs."""
        s = self._sim
        return int(s.lim_lo_list[j]), int(s.lim_hi_list[j]), bool(s.resizable_list[j])

    def allowed_pools(self, j: int) -> tuple[int, ...]:
        """Pools job ``j`` may run in (inference only when type-agnostic and servers are loaned)."""
        return self._sim.allowed_pools(j)

    # -- speed model ---------------------------------------------------------------------------
    def speed(self, j: int, pool: int) -> float:
        """Per-worker speed of job ``j`` on ``pool``'s GPU type relative to a V100."""
        return self._sim.speed(j, pool)

    def rate(self, j: int, w: int, pool: int) -> float:
        """Work per second of job ``j`` with ``w`` workers on ``pool`` (V100 worker-seconds/s)."""
        return self._sim.rate_for(j, w, pool)

    def rate_mixed(self, j: int, w: int, w_inf: int) -> float:
        """Work per second of job ``j`` with ``w`` workers, ``w_inf`` on inference GPUs, spanning
        both GPU types (heterogeneous training; :meth:`~aryl_gym.sim.engine.Simulator.rate_mixed`)."""
        return self._sim.rate_mixed(j, w, w_inf)

    def is_mixed(self, j: int) -> bool:
        """Whether job ``j`` runs on both GPU types now."""
        return self._sim.is_mixed(j)

    def measure(self, j: int) -> Measurement | None:
        """What running job ``j`` reports about itself now (:class:`Measurement`: its
        configuration, step time, gradient noise scale, true rate); None when it does not run.
        Read-only; the simulator's own goodput curve stays hidden."""
        return self._sim.measure(j)

    def pred_time(self, j: int, w: int, pool: int) -> float:
        """Predicted remaining running time (s) of job ``j`` at ``w`` workers on ``pool``."""
        r = self._sim.rate_for(j, w, pool)
        return float(self._sim.pred_remaining[j]) / r if r > 0 else float("inf")
