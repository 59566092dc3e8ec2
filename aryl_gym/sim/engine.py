"""The simulator kernel (SPEC 1-2).

A :class:`Simulator` holds one episode: the servers of both pools, the jobs of a trace, the loan
controller, and the clock. Each scheduling round at time ``t``:

1. jobs submitted by ``t`` join the queue (arrivals are seen at the next round);
2. the loan controller computes how many inference servers are loanable; a policy that uses
   loaning receives new ones, and when fewer are loanable than loaned the difference is
   reclaimed *this round* (the policy's reclaim rule or the default: fewest busy GPUs first);
3. the policy returns a :class:`~aryl_gym.sim.view.Decision` (worker targets);
4. the placement engine (:mod:`aryl_gym.sim.placement`) applies it;
5. time advances to the next round with exact progress: a job finishing inside the round gets
   its exact finish time, its GPUs are reusable from the next round.

Rounds in which nothing happened (no arrival, completion, loan change, and the previous decision
changed nothing) are fast-forwarded for policies that declare ``event_driven``: their decision
would be the same, so skipping them changes no result, only the wall time.

The simulator never imports gymnasium and never branches on which policy runs. Hot state is in
numpy arrays indexed by job id (position in the trace) or server id (training servers first).

Public API (docs/simulator.md): the queries ``queued_ids`` / ``running_ids`` / ``n_queued`` /
``n_running`` / ``arrivals_left`` / ``next_arrival_time`` / ``idle_with_queue`` /
``reclaims_due``; rounds with :meth:`Simulator.step`, or :meth:`Simulator.open_round` and
:meth:`Simulator.close_round` with a decision made outside; the stall rule
:meth:`Simulator.check_stall` (default :data:`STALL_HOURS`). The worker primitives
(``add_workers``, ``preempt``, ...) are for the placement engine only.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from aryl_gym.config import (
    SIZE_LIMITS,
    SIZE_OVERRIDE_ENV,
    ConfigError,
    ScenarioConfig,
    size_limits_lifted,
)
from aryl_gym.metrics import episode_result, lower_bounds, min_time_factor_of
from aryl_gym.progress import progress_bar
from aryl_gym.sim.goodput import JobCurve, job_curve_of, observe
from aryl_gym.sim.index import FreeIndex
from aryl_gym.sim.jobs import JobSpec, JobState
from aryl_gym.sim.loaning import LoanController
from aryl_gym.sim.overhead import OverheadWindow
from aryl_gym.sim.placement import apply_decision, rebalance, release_all
from aryl_gym.sim.view import (
    INFER,
    TRAIN,
    ClusterView,
    Decision,
    Measurement,
    PlacementOptions,
    PlacementReport,
    Policy,
)

if TYPE_CHECKING:  # pragma: no cover
    from aryl_gym.metrics import EpisodeResult

_EPS = 1e-9
# Plain ints for the hot paths (enum attribute access is slow in tight loops).
_PENDING = int(JobState.PENDING)
_QUEUED = int(JobState.QUEUED)
_RUNNING = int(JobState.RUNNING)
_DONE = int(JobState.DONE)
#: The stall rule's default (:meth:`Simulator.check_stall`): an episode ends, marked stalled,
#: after this many simulated hours with nothing running, nothing left to arrive and jobs queued.
STALL_HOURS = 6.0
#: The thrash rule (:meth:`Simulator.check_thrash`): an episode ends, marked thrashing, once more
#: than this share of the GPU time allocated over the last ``stall_hours`` went to relaunch and
#: scaling overheads (a policy that preempts and restarts jobs faster than they pay their
#: overheads, so the episode might never end).
THRASH_SHARE = 0.5
#: Up to this many running jobs, the common case of ``advance`` runs in plain Python (faster
#: than a dozen small numpy calls); above it, vectorised. Both give bit-identical results.
_PY_JOBS = 32


def check_stall_hours(stall_hours: object, where: str = "stall_hours") -> float:
    """``stall_hours`` as a float: a number > 0 (``math.inf`` switches the stall rule off);
    anything else (a bool, a string, NaN, 0, a negative number) is a ValueError naming it."""
    if isinstance(stall_hours, (bool, np.bool_)) or not isinstance(
        stall_hours, (int, float, np.integer, np.floating)
    ) or not stall_hours > 0:
        raise ValueError(
            f"{where} must be a number of hours > 0 (math.inf: never end an episode as stalled), "
            f"got {stall_hours!r}"
        )
    return float(stall_hours)


def default_reclaim(view: ClusterView, n: int) -> list[int]:
    """The simple default reclaim rule: loaned servers with the fewest busy GPUs first, ties by id."""
    loaned = np.flatnonzero(view.srv_loaned)
    busy = view.srv_cap[loaned] - view.srv_free[loaned]
    order = np.lexsort((loaned, busy))
    return [int(s) for s in loaned[order[:n]]]


@dataclass
class RoundInfo:
    """What happened in one decision round (returned by :meth:`Simulator.step`)."""

    t_start: float
    t_end: float
    completed: list[int]
    report: PlacementReport
    reclaimed: list[int]
    preempted_by_reclaim: list[int]
    decision_s: float


class Simulator:
    """One episode of the cluster.

    Args:
        config: the scenario (cluster, inference, sim sections are used here).
        jobs: the trace, sorted by submit time; ``jobs[i].id == i``.
        utilization: inference utilization samples every ``config.inference.sample_seconds``
            (a non-empty 1-D series of fractions in [0, 1]; anything else is a ValueError).
        seed: seeds ``policy_rng`` (offered to policies through the view).
    """

    # dynamic per-job state (set by _fresh_job_state; N = n_jobs)
    state: np.ndarray  # (N,) int8 JobState
    workers: np.ndarray  # (N,) current workers
    pool: np.ndarray  # (N,) int8 pool of the workers, -1 when not running
    remaining: np.ndarray  # (N,) true remaining work, V100 worker-seconds
    pred_remaining: np.ndarray  # (N,) predicted remaining work
    rate: np.ndarray  # (N,) work per second now
    overhead_left: np.ndarray  # (N,) seconds of overhead still to pay
    first_start: np.ndarray  # (N,) nan until the first start
    finish: np.ndarray  # (N,) nan until done
    running_time: np.ndarray  # (N,) seconds spent with workers
    preempt_count: np.ndarray
    requeue_time: np.ndarray  # (N,) seconds queued again after preemptions
    preempted_at: np.ndarray  # (N,) time of the last preemption, nan when none pending
    scale_out_count: np.ndarray
    scale_in_count: np.ndarray
    inf_workers: np.ndarray
    mixed: np.ndarray
    ever_mixed: np.ndarray
    base: list[dict[int, int]]
    flex: list[dict[int, int]]

    def __init__(
        self,
        config: ScenarioConfig,
        jobs: Sequence[JobSpec],
        utilization: np.ndarray,
        seed: int | None = None,
    ):
        self.config = config
        self.jobs: list[JobSpec] = list(jobs)
        self.interval = float(config.sim.interval)
        self._check_jobs()
        c = config.cluster
        self.train_type = config.gpu_types[c.train_gpu]
        self.inf_type = config.gpu_types[c.inf_gpu]
        self.loan = LoanController(
            utilization, c.inf_servers, config.inference.headroom, config.inference.sample_seconds
        )
        self.seed = seed
        self.policy_rng = np.random.default_rng(seed)
        #: the worker ranges the placement engine enforces (:meth:`set_elasticity`)
        self.elasticity = "limited"

        self._build_static()
        self._check_lengths()
        self._build_servers()
        self._reset_dynamic()
        self._begun = False  # begin() has run: the view and the policy's options are set

    # ------------------------------------------------------------------------------------------
    # set-up
    # ------------------------------------------------------------------------------------------
    def _check_jobs(self) -> None:
        c = self.config.cluster
        if not self.jobs:
            raise ConfigError(
                "the trace is empty: no jobs to simulate; check the trace file, its filters "
                "(virtual cluster, time window) or the scenario's workload section"
            )
        prev = -math.inf
        for i, j in enumerate(self.jobs):
            if j.id != i:
                raise ConfigError(f"job at position {i} has id {j.id}; ids must be 0..n-1 in order")
            j.validate()
            if j.submit < prev:
                raise ConfigError(f"job {i}: submit times must be non-decreasing (sort the trace)")
            prev = j.submit
            if j.g > c.train_gpus_per_server:
                raise ConfigError(
                    f"job {i}: a worker of {j.g} GPUs does not fit a training server of "
                    f"{c.train_gpus_per_server} GPUs; drop the job or use bigger servers"
                )
            if j.g * j.w_min > c.train_gpus:
                raise ConfigError(
                    f"job {i}: needs {j.g * j.w_min} GPUs at minimum but the training pool has "
                    f"{c.train_gpus}; drop the job (--skip-bad-rows) or enlarge the cluster"
                )
            # A worker never spans servers, so the training servers hold servers x (gpus // g)
            # workers of g GPUs: fewer than gpus // g when g does not divide a server's GPUs.
            # Was: only the GPUs were counted, and a job such as 3 workers of 4 GPUs on two
            # 6-GPU servers (12 GPUs, room for 2 such workers) was accepted and never started:
            # the episode stalled. (Where g divides the server, as on 4- and 8-GPU servers, the
            # two counts agree: this refuses nothing more.)
            room = c.train_servers * (c.train_gpus_per_server // j.g)
            if j.w_min > room:
                raise ConfigError(
                    f"job {i}: needs {j.w_min} workers of {j.g} GPUs at minimum but the training "
                    f"servers ({c.train_servers} of {c.train_gpus_per_server} GPUs) hold {room} such "
                    f"workers (a worker never spans servers); drop the job, give it workers whose GPU "
                    f"count divides {c.train_gpus_per_server}, or add training servers"
                )
            # The request too: the policies without elastic scaling (baseline, fifo, sjf,
            # aryl-noelastic) start a job at w_req on the training pool. Was: an elastic job whose
            # w_min fits but whose request does not was accepted, never started by them, and the
            # episode ended stalled hours later (fifo's blocked head held up every job behind it).
            # The trace readers refuse such a request already ("too-big"); so does YARN.
            if j.w_req > room:
                raise ConfigError(
                    f"job {i}: requests {j.w_req} workers of {j.g} GPUs ({j.g * j.w_req} GPUs) but the "
                    f"training servers ({c.train_servers} of {c.train_gpus_per_server} GPUs) hold {room} "
                    f"such workers, so a policy that runs jobs at their request never starts it; lower "
                    f"its request (w_req, between w_min {j.w_min} and {room}) or add training servers"
                )

    def _check_lengths(self) -> None:
        """A ConfigError when a job cannot end within the round limit of an episode that has no
        other end (no ``sim.horizon_hours``, no ``sim.max_rounds``): submitted at ``submit`` and
        running at least its shortest possible time (:func:`aryl_gym.metrics.lower_bounds`), it
        ends after ``SIZE_LIMITS["rounds"]`` rounds. Was: accepted, and a job of 1e13 s of work
        hung the episode (the hourly accounting of one fast-forward grew by a row per simulated
        hour; the loan controller's look-ahead stepped round by round). ``ARYL_GYM_ALLOW_HUGE=1``
        lifts the limit, as it lifts :func:`aryl_gym.config.check_size`'s."""
        s = self.config.sim
        if s.horizon_hours is not None or s.max_rounds is not None or size_limits_lifted():
            return
        limit = SIZE_LIMITS["rounds"] * self.interval
        # the paper-regime bound first (vectorised); the exact one (batch tuning, more workers:
        # shorter) only for the jobs past the limit by it
        rough = self.submit + lower_bounds(self, limited=True)
        for j in np.flatnonzero(rough > limit).tolist():
            t = float(rough[j] - self.submit[j]) * min_time_factor_of(self.config, self.jobs[j])
            end = float(self.submit[j]) + t
            if end > limit:
                raise ConfigError(
                    f"job {j}: submitted at {float(self.submit[j]) / 86400.0:,.1f} days and running at "
                    f"least {t / 86400.0:,.1f} days, it cannot end within {SIZE_LIMITS['rounds']:,} rounds "
                    f"of {self.interval:g} s ({limit / 86400.0 / 365.0:,.1f} years), the limit of an episode "
                    "without an end; check its work and submit time, cut the episode with "
                    f"sim.horizon_hours or sim.max_rounds, or set {SIZE_OVERRIDE_ENV}=1"
                )

    def _build_static(self) -> None:
        """The static per-job arrays, from ``self.jobs`` (checked by :meth:`_check_jobs`)."""
        config = self.config
        c = config.cluster
        n = len(self.jobs)
        self.n_jobs = n
        self.submit = np.array([j.submit for j in self.jobs], dtype=np.float64)
        self.g = np.array([j.g for j in self.jobs], dtype=np.int64)
        self.w_min = np.array([j.w_min for j in self.jobs], dtype=np.int64)
        self.w_max = np.array([j.w_max for j in self.jobs], dtype=np.int64)
        self.elastic = np.array([j.elastic for j in self.jobs], dtype=bool)
        self.type_agnostic = np.array([j.type_agnostic for j in self.jobs], dtype=bool)
        self.work = np.array([j.work for j in self.jobs], dtype=np.float64)
        self.pred_work = np.array([j.pred_work for j in self.jobs], dtype=np.float64)
        # plain-list copies of the static per-job arrays, for scalar look-ups on hot paths
        self.g_list: list[int] = self.g.tolist()
        self.w_min_list: list[int] = self.w_min.tolist()
        self.w_max_list: list[int] = self.w_max.tolist()
        self.elastic_list: list[bool] = self.elastic.tolist()
        # heterogeneous training (paper 7.2): jobs that may run on both GPU types at once
        self.hetero = np.array([j.hetero for j in self.jobs], dtype=bool)
        self.hetero_list: list[bool] = self.hetero.tolist()
        self.has_hetero = bool(self.hetero.any())
        self.hetero_penalty = float(config.sim.hetero_penalty)
        self.hetero_sum = config.sim.hetero_rate == "sum"
        # speed per pool: (N, 2)
        self.speeds = np.array(
            [
                [
                    self.train_type.speed_for(j.family),
                    self.inf_type.speed_for(j.family) * c.inf_speed_scale,
                ]
                for j in self.jobs
            ],
            dtype=np.float64,
        ).reshape(n, 2)
        # Per-job scaling-efficiency curves (JobSpec.scaling; None = linear), as float arrays.
        self.scaling: list[np.ndarray | None] = [
            None if j.scaling is None else np.asarray(j.scaling, dtype=np.float64)
            for j in self.jobs
        ]
        self.relaunch = np.array(
            [config.sim.relaunch_for(j.family) for j in self.jobs], dtype=np.float64
        )
        # World v2: the hard parallelism ceiling (aryl_gym.sim.goodput) and the true goodput
        # curves beyond the limited range, built when a job first needs one
        self.w_ceil = np.maximum(self.w_max, int(config.sim.ceiling_gpus) // self.g)
        self._curves: dict[int, JobCurve] = {}
        self.set_elasticity(self.elasticity)

    #: the worker ranges a policy may ask for (:meth:`set_elasticity`)
    ELASTICITY = ("limited", "elastic", "all")

    def set_elasticity(self, mode: str) -> None:
        """Set the worker ranges the placement engine enforces (``lim_lo``, ``lim_hi``,
        ``resizable``), from a policy's ``elasticity``:

        * ``"limited"`` (default; Aryl, Baseline and every v1 policy): each job's own range,
          ``[w_min, w_max]``, and only elastic jobs change size while running (paper: "limited
          elasticity");
        * ``"elastic"``: elastic jobs may grow past ``w_max`` up to the ceiling ``w_ceil`` (AFS's
          "unbounded elasticity"); inelastic jobs keep their request;
        * ``"all"``: every job may run on 1 to ``w_ceil`` workers and change size while running
          (Pollux: every job is written for an elastic framework, AdaptDL).

        Outside ``[1, w_max]`` at the reference batch a job runs the true goodput curve
        (:mod:`aryl_gym.sim.goodput`).
        """
        if mode not in self.ELASTICITY:
            raise ValueError(
                f"elasticity must be one of {', '.join(self.ELASTICITY)}, got {mode!r}"
            )
        self.elasticity = mode
        if mode == "limited":  # the specs themselves (same objects: nothing to keep in step)
            self.lim_lo_list, self.lim_hi_list = self.w_min_list, self.w_max_list
            self.resizable_list, self.resizable = self.elastic_list, self.elastic
            return
        if mode == "elastic":
            lo = self.w_min
            hi = np.where(self.elastic, self.w_ceil, self.w_max)
            res = self.elastic
        else:
            lo = np.ones(self.n_jobs, dtype=np.int64)
            hi = self.w_ceil
            res = np.ones(self.n_jobs, dtype=bool)
        self.lim_lo_list = lo.tolist()
        self.lim_hi_list = hi.tolist()
        self.resizable = res
        self.resizable_list = res.tolist()

    def job_curve(self, j: int) -> JobCurve:
        """Job ``j``'s true goodput curve outside the paper's regime (built once)."""
        c = self._curves.get(j)
        if c is None:
            spec = self.jobs[j]
            c = self._curves[j] = job_curve_of(
                spec.family, spec.app, spec.g, spec.w_req, spec.w_max, spec.batch_size
            )
        return c

    def measure(self, j: int) -> Measurement | None:
        """What running job ``j`` reports about itself now (:class:`~aryl_gym.sim.view.
        Measurement`; None when it does not run or makes no progress)."""
        if self.state.item(j) != _RUNNING:
            return None
        r = float(self.rate[j])
        if not r > 0:
            return None
        w = int(self.workers.item(j))
        lam = float(self.batch_lam.get(j, 1.0))
        p = self.progress(j)
        o = observe(self.job_curve(j), w, lam, p, r)
        return Measurement(workers=w, batch=lam, rate=r, progress=p, **o)

    def progress(self, j: int) -> float:
        """Share of job ``j``'s true work done, in [0, 1]."""
        w = self.work.item(j)
        p = 1.0 - self.remaining.item(j) / w
        return 0.0 if p < 0.0 else (1.0 if p > 1.0 else p)

    def _build_servers(self) -> None:
        c = self.config.cluster
        self.n_train = c.train_servers
        self.n_inf = c.inf_servers
        S = self.n_train + self.n_inf
        self.n_servers = S
        self.srv_pool = np.array([TRAIN] * self.n_train + [INFER] * self.n_inf, dtype=np.int8)
        self.srv_cap = np.array(
            [c.train_gpus_per_server] * self.n_train + [c.inf_gpus_per_server] * self.n_inf,
            dtype=np.int64,
        )
        self.srv_free = self.srv_cap.copy()
        self.srv_loaned = np.zeros(S, dtype=bool)
        self.srv_base_gpus = np.zeros(S, dtype=np.int64)
        self.srv_flex_gpus = np.zeros(S, dtype=np.int64)
        self._train_mask = self.srv_pool == TRAIN
        self.train_ids: list[int] = list(range(self.n_train))  # training servers come first

    def _fresh_job_state(self, start: int) -> dict[str, np.ndarray | list]:
        """The dynamic per-job state of jobs ``start..n-1`` before they arrive, by attribute.

        The one list of the per-job dynamic arrays: :meth:`_reset_dynamic` sets them all and
        :meth:`replace_future` appends them for the new jobs.
        """
        n = self.n_jobs - start
        return {
            "state": np.full(n, _PENDING, dtype=np.int8),
            "workers": np.zeros(n, dtype=np.int64),
            "pool": np.full(n, -1, dtype=np.int8),
            "remaining": self.work[start:].copy(),
            "pred_remaining": self.pred_work[start:].copy(),
            "rate": np.zeros(n, dtype=np.float64),
            "overhead_left": np.zeros(n, dtype=np.float64),
            "first_start": np.full(n, np.nan),
            "finish": np.full(n, np.nan),
            "running_time": np.zeros(n, dtype=np.float64),
            "preempt_count": np.zeros(n, dtype=np.int64),
            "requeue_time": np.zeros(n, dtype=np.float64),  # queued after a preemption (s)
            "preempted_at": np.full(n, np.nan),  # when the job was last preempted
            "scale_out_count": np.zeros(n, dtype=np.int64),
            "scale_in_count": np.zeros(n, dtype=np.int64),
            "inf_workers": np.zeros(n, dtype=np.int64),  # workers on inference servers
            "mixed": np.zeros(n, dtype=bool),  # running on both GPU types now
            "ever_mixed": np.zeros(n, dtype=bool),  # ran on both GPU types at some point
            "base": [dict() for _ in range(n)],  # server -> base workers there
            "flex": [dict() for _ in range(n)],  # server -> flexible workers there
        }

    def _reset_dynamic(self) -> None:
        self.now = 0.0
        self.round_index = 0
        for name, value in self._fresh_job_state(0).items():
            setattr(self, name, value)
        self.preemptions_total = 0  # == preempt_count.sum(), kept by _preempt
        self.srv_jobs: list[dict[int, int]] = [dict() for _ in range(self.n_servers)]
        # Running totals kept up to date by the worker primitives (GPUs).
        self.busy_train_gpus = 0
        self.busy_loan_gpus = 0
        self.loaned_gpus = 0
        self.n_loaned = 0
        self.srv_loaned[:] = False
        self.srv_free[:] = self.srv_cap
        self.srv_base_gpus[:] = 0
        self.srv_flex_gpus[:] = 0
        # servers bucketed by free GPUs (best fit, fit tables), kept by the primitives below
        self.free_index = FreeIndex(
            self.srv_free.tolist(), self.srv_cap.tolist(), self._train_mask.tolist(), self.srv_loaned.tolist()
        )
        self._queued: set[int] = set()
        # queued GPU demand (sum of g * w_min and of g * w_max over queued jobs), kept on events
        self.queued_gpus_min = 0
        self.queued_gpus_max = 0
        # ids of jobs whose state changed (arrived, started, preempted, finished), in order, for
        # an observer that keeps its own indexes (the allocation env); None: not recorded
        self.job_events: list[int] | None = None
        self._running: set[int] = set()
        self._running_arr = np.zeros(0, dtype=np.int64)
        self._running_dirty = False
        self._next_arrival = 0
        self.done_count = 0
        self.loanable_now = 0
        # job id -> rate-multiplier table by worker count (Decision.speedup); absent = 1.0
        self.rate_mult: dict[int, np.ndarray] = {}
        # job id -> local batch factor (Decision.batch; absent = the reference batch)
        self.batch_lam: dict[int, float] = {}
        # running jobs whose rate follows their progress (beyond w_max or a tuned batch): their
        # rate is re-evaluated at the start of every round, and no round is fast-forwarded
        self._prog_jobs: set[int] = set()
        # jobs that ever ran on the curve beyond w_max or tuned (the lower bound does not hold)
        self.curve_jobs: set[int] = set()
        self._last_loanable = -1
        self._event = True
        self._changed_last = False
        self.uses_loaning = False
        # accounting
        self.acc = Accounting(self)
        self.decision_times: list[float] = []
        self.rounds_total = 0
        self.invalid_total = 0
        self.unplaced_total = 0
        self.reclaims_total = 0
        self.stalled = False
        self._idle_since: float | None = None
        # the thrash rule: GPU-seconds spent in overheads, and marks of it and of alloc_gs
        self.overhead_gs = 0.0
        self.thrashing = False
        self._thrash_window: OverheadWindow | None = None  # made on the first check_thrash
        self._round_t0 = 0.0
        self._round_loans: tuple[list[int], list[int]] = ([], [])
        self._round_open = False  # between open_round() and close_round()
        self._loans_pending = False  # the open round's loan phase raised (close_round ends it)

    # ------------------------------------------------------------------------------------------
    # public queries (the env, metrics and the view use these, never the private state)
    # ------------------------------------------------------------------------------------------
    def queued_ids(self) -> list[int]:
        """Queued job ids (submitted, not running, not done), ascending."""
        return sorted(self._queued)

    def running_ids(self) -> list[int]:
        """Running job ids, ascending."""
        return sorted(self._running)

    @property
    def n_queued(self) -> int:
        """Number of queued jobs."""
        return len(self._queued)

    @property
    def n_running(self) -> int:
        """Number of running jobs."""
        return len(self._running)

    @property
    def arrivals_left(self) -> int:
        """Jobs of the trace not yet submitted (they arrive in id order)."""
        return self.n_jobs - self._next_arrival

    @property
    def next_arrival_time(self) -> float | None:
        """Submit time of the next job to arrive; ``None`` when every job has arrived."""
        i = self._next_arrival
        return float(self.submit[i]) if i < self.n_jobs else None

    @property
    def idle_with_queue(self) -> bool:
        """The stall condition: nothing running, nothing left to arrive, jobs queued."""
        return not self._running and self._next_arrival >= self.n_jobs and bool(self._queued)

    def check_stall(self, stall_hours: float = STALL_HOURS) -> bool:
        """The stall rule, called after each round: once :attr:`idle_with_queue` has held for
        more than ``stall_hours`` of simulated time, :attr:`stalled` is set and True returned
        (the episode should end: no policy decision can change anything any more).
        ``stall_hours``: a number > 0 (:func:`check_stall_hours`; ``math.inf`` never stalls)."""
        if type(stall_hours) is not float or not stall_hours > 0.0:
            stall_hours = check_stall_hours(stall_hours)
        if self.idle_with_queue:
            if self._idle_since is None:
                self._idle_since = self.now
            if self.now - self._idle_since > stall_hours * 3600.0:
                self.stalled = True
                return True
        else:
            self._idle_since = None
        return False


    @property
    def alloc_gs(self) -> float:
        """GPU-seconds allocated to training so far (training pool plus loaned servers)."""
        return self.acc.train_busy_gs + self.acc.loan_used_gs

    def check_thrash(self, hours: float = STALL_HOURS, sustained: bool = False) -> bool:
        """The thrash rule, called after each round: once more than :data:`THRASH_SHARE` of
        the GPU time allocated over the last ``hours`` of simulated time (at least ``hours``,
        at most an eighth more) went to relaunch and scaling overheads, :attr:`thrashing` is set
        and True returned (the episode should end: the policy restarts jobs faster than they
        can pay their overheads, so it might never end). Sane policies spend a few per cent
        of their GPU time in overheads; the rule only bounds episodes (``math.inf``: never).

        ``sustained=True`` (the env's ``thrash_sustained``) asks the share to pass in each half
        of the window too (split at the newest mark at least half a window old), so the waste
        must have lasted the whole window: after a quiet stretch, the little GPU time allocated
        makes a few minutes of restarts most of the window, which the share alone reads as
        thrashing before a shield such as flap damping has stopped them. A policy that keeps
        restarting jobs before they pay their overheads passes in both halves, so such an
        episode still ends: when the window is full if it thrashes from the start, about half a
        window later than without the option if it starts thrashing mid-episode."""
        if self.thrashing:
            return True
        if not hours < math.inf:
            return False
        span = hours * 3600.0
        win = self._thrash_window
        if win is None or win.span != span:
            win = self._thrash_window = OverheadWindow(span, span / 8.0)
        d = win.push(self.now, self.overhead_gs, self.alloc_gs)
        if d is not None:
            overhead, alloc = d
            if alloc > 0.0 and overhead > THRASH_SHARE * alloc:
                if sustained:
                    halves = win.halves(self.now, self.overhead_gs, self.alloc_gs)
                    if not all(a > 0.0 and o > THRASH_SHARE * a for o, a in halves):
                        return False
                self.thrashing = True
                return True
        return False

    def reclaims_due(self) -> int:
        """Servers the loan phase of the round at :attr:`now` will take back (0 when loaning
        is off for the current policy)."""
        loanable = self.loan.loanable(self.now) if self.uses_loaning else 0
        return max(self.n_loaned - loanable, 0)

    def running_array(self) -> np.ndarray:
        if self._running_dirty:
            self._running_arr = np.fromiter(sorted(self._running), dtype=np.int64)
            self._running_dirty = False
        return self._running_arr

    def usable_mask(self, pool: int) -> np.ndarray:
        if pool == TRAIN:
            return self._train_mask
        return self.srv_loaned

    def allowed_pools(self, j: int) -> tuple[int, ...]:
        if self.type_agnostic[j] and self.n_loaned:  # n_loaned == srv_loaned.sum()
            return (TRAIN, INFER)
        return (TRAIN,)

    def speed(self, j: int, pool: int) -> float:
        return float(self.speeds[j, pool])

    def rate_for(self, j: int, w: int, pool: int) -> float:
        """Work per second with ``w`` workers: ``w x speed x scaling[w] x m[w]``.

        ``scaling`` is the job's own curve (``JobSpec.scaling``, None = linear); ``m`` the
        policy's rate-multiplier table from ``Decision.speedup`` (None = 1).
        """
        if w > self.w_max_list[j] or (self.batch_lam and j in self.batch_lam):
            return self._true_rate(j, w, pool)
        return self._curve(j, w, float(w) * float(self.speeds[j, pool]))

    def _true_rate(self, j: int, w: int, pool: int) -> float:
        """The rate outside the paper's regime: beyond ``w_max`` (``rate(w_max)`` times the
        goodput curve's ratio) and/or at a tuned local batch, at the job's progress now."""
        c = self.job_curve(j)
        p = self.progress(j)
        wl = min(w, self.w_max_list[j])
        r = self._curve(j, wl, float(wl) * float(self.speeds[j, pool]))
        if w > wl:
            r *= c.beyond(w, p)
        lam = self.batch_lam.get(j)
        if lam is not None:
            r *= c.tuned(w, lam, p)
        return r

    def _curve(self, j: int, w: int, r: float) -> float:
        """``r`` times job ``j``'s scaling curve and policy rate table at ``w`` workers."""
        sc = self.scaling[j]
        if sc is not None and w > 0:
            r *= float(sc[min(int(w), len(sc) - 1)])
        tab = self.rate_mult.get(j)
        if tab is not None and w > 0:
            r *= float(tab[min(int(w), len(tab) - 1)])
        return r

    def rate_mixed(self, j: int, w: int, w_inf: int) -> float:
        """Work per second of a job whose ``w`` workers, ``w_inf`` of them on inference GPUs,
        span both GPU types (heterogeneous training, paper 7.2).

        ``sim.hetero_rate = "slowest"`` (default): synchronous data parallelism with equal local
        batches waits for the slowest worker at every step, so every worker advances at the
        slower type's pace: ``w x min(speed_V100, speed_T4)``. ``"sum"``: local batches balanced
        to each GPU's speed (the SPEC's model): ``(w - w_inf) x speed_V100 + w_inf x speed_T4``.
        Either is then multiplied by the job's scaling curve and policy table at ``w``
        (``scaling[w] x m[w]``) and by ``sim.hetero_penalty`` (the cost of mixing: different
        hyper-parameters per type, cross-type communication, imperfect balance).
        """
        if self.hetero_sum:
            r = float(w - w_inf) * float(self.speeds[j, TRAIN]) + float(w_inf) * float(
                self.speeds[j, INFER]
            )
        else:
            r = float(w) * float(min(self.speeds[j, TRAIN], self.speeds[j, INFER]))
        return self._curve(j, w, r) * self.hetero_penalty

    def is_mixed(self, j: int) -> bool:
        """Whether job ``j`` has workers on both GPU types now."""
        return 0 < self.inf_workers.item(j) < self.workers.item(j)

    def _set_speedup(self, speedup: dict, report: PlacementReport) -> None:
        """Store ``Decision.speedup`` tables (validated); bad entries are reported and ignored."""
        for j, tab in speedup.items():
            if isinstance(j, (bool, np.bool_)) or not isinstance(j, (int, np.integer)):
                # was: 2.5 or "2" read as job 2 (a target's key of that kind is refused)
                report.invalid[-1 - len(report.invalid)] = f"speedup for {j!r}: a job id must be an integer"
                continue
            try:
                jj = int(j)
                raw = np.asarray(tab)
                if raw.dtype.kind not in "iuf" and (raw.dtype.kind != "O" or any(
                        isinstance(x, (str, bytes, bool, np.bool_)) for x in raw.flat)):
                    raise TypeError  # (was: "2" and True read as 2.0 and 1.0)
                # a copy (was: the policy's own array, whose later changes moved the job's rate
                # without the simulator knowing)
                arr = np.array(tab, dtype=np.float64)
            except (TypeError, ValueError, OverflowError):  # (was: an OverflowError after placing)
                report.invalid[-1 - len(report.invalid)] = f"speedup for {j!r} is not numeric"
                continue
            if not 0 <= jj < self.n_jobs:
                report.invalid[-1 - len(report.invalid)] = f"speedup: job {jj} not in the trace"
                continue
            if arr.ndim > 1:  # (was: flattened, a 2-D table read row after row)
                report.invalid[jj if jj not in report.invalid else -1 - len(report.invalid)] = (
                    f"speedup table for job {jj} must be 1-D (one entry per worker count), got "
                    f"shape {arr.shape}; ignored")
                continue
            arr = arr.reshape(-1)
            if len(arr) == 0 or not np.all(np.isfinite(arr)) or np.any(arr <= 0):
                # (a reason already given for jj, e.g. a clamped target, is kept: was overwritten)
                report.invalid[jj if jj not in report.invalid else -1 - len(report.invalid)] = (
                    "speedup table must be non-empty, finite and > 0; ignored")
                continue
            self.rate_mult[jj] = arr
            if self.state[jj] == _RUNNING:
                self._update_rate(jj)

    def _set_batch(self, batch: dict, report: PlacementReport) -> None:
        """Store ``Decision.batch`` local-batch factors (validated; 1 = the reference batch).
        Bad entries are reported and ignored."""
        for j, lam in batch.items():
            if isinstance(j, (bool, np.bool_)) or not isinstance(j, (int, np.integer)):
                report.invalid[-1 - len(report.invalid)] = f"batch for {j!r}: a job id must be an integer"
                continue
            try:
                jj = int(j)
                if isinstance(lam, (str, bytes, bool, np.bool_)):
                    raise TypeError  # (was: "2" and True read as 2.0 and 1.0)
                x = float(lam)
            except (TypeError, ValueError, OverflowError):  # (was: an OverflowError after placing)
                report.invalid[-1 - len(report.invalid)] = f"batch for {j!r} is not a number"
                continue
            if not 0 <= jj < self.n_jobs:
                report.invalid[-1 - len(report.invalid)] = f"batch: job {jj} not in the trace"
                continue
            if not (math.isfinite(x) and x > 0):
                report.invalid[jj if jj not in report.invalid else -1 - len(report.invalid)] = (
                    f"batch factor {lam!r} must be finite and > 0; ignored")
                continue
            if x == 1.0:
                self.batch_lam.pop(jj, None)
            else:
                self.batch_lam[jj] = x
            if self.state[jj] == _RUNNING:
                self._update_rate(jj)

    @property
    def done(self) -> bool:
        return self.done_count == self.n_jobs

    # ------------------------------------------------------------------------------------------
    # worker bookkeeping primitives
    # ------------------------------------------------------------------------------------------
    def add_workers(self, j: int, s: int, k: int, flex: bool) -> None:
        gpus = k * self.g_list[j]
        free = self.srv_free.item(s) - gpus
        if free < 0:  # pragma: no cover - guarded by placement
            raise AssertionError(f"server {s} over-committed by job {j}")
        self.srv_free[s] = free
        self.free_index.move(s, free + gpus, free)
        d = self.flex[j] if flex else self.base[j]
        d[s] = d.get(s, 0) + k
        if flex:
            self.srv_flex_gpus[s] += gpus
        else:
            self.srv_base_gpus[s] += gpus
        self.srv_jobs[s][j] = self.srv_jobs[s].get(j, 0) + k
        self.workers[j] += k
        if self.srv_pool.item(s) == TRAIN:
            self.busy_train_gpus += gpus
        else:
            self.busy_loan_gpus += gpus
            self.inf_workers[j] += k

    def remove_workers(self, j: int, s: int, k: int, flex: bool) -> None:
        gpus = k * self.g_list[j]
        d = self.flex[j] if flex else self.base[j]
        left = d[s] - k
        if left < 0:  # pragma: no cover
            raise AssertionError("removing more workers than placed")
        if left:
            d[s] = left
        else:
            del d[s]
        self.srv_free[s] += gpus
        free = self.srv_free.item(s)
        self.free_index.move(s, free - gpus, free)
        if flex:
            self.srv_flex_gpus[s] -= gpus
        else:
            self.srv_base_gpus[s] -= gpus
        on = self.srv_jobs[s][j] - k
        if on:
            self.srv_jobs[s][j] = on
        else:
            del self.srv_jobs[s][j]
        self.workers[j] -= k
        if self.srv_pool.item(s) == TRAIN:
            self.busy_train_gpus -= gpus
        else:
            self.busy_loan_gpus -= gpus
            self.inf_workers[j] -= k

    def _update_rate(self, j: int) -> None:
        p = self.pool.item(j)
        if self.has_hetero and p >= 0 and self.hetero_list[j] and self.is_mixed(j):
            self.rate[j] = self.rate_mixed(j, self.workers.item(j), self.inf_workers.item(j))
            self.mixed[j] = True
            self.ever_mixed[j] = True
            return
        self.mixed[j] = False
        if p < 0:
            self.rate[j] = 0.0
            self._prog_jobs.discard(j)
            return
        w = self.workers.item(j)
        self.rate[j] = self.rate_for(j, w, p)
        if w > self.w_max_list[j] or (self.batch_lam and j in self.batch_lam):
            self._prog_jobs.add(j)
            self.curve_jobs.add(j)
        elif self._prog_jobs:
            self._prog_jobs.discard(j)

    def refresh_progress_rates(self) -> None:
        """Re-evaluate the rates that follow progress (start of a round; see ``_prog_jobs``)."""
        for j in sorted(self._prog_jobs):
            if self.state.item(j) == _RUNNING:
                self._update_rate(j)
            else:
                self._prog_jobs.discard(j)

    def mark_started(self, j: int, pool: int) -> None:
        """Book-keeping for a queued job whose workers were just placed."""
        self._queued.discard(j)
        self._running.add(j)
        g = self.g_list[j]
        self.queued_gpus_min -= g * self.w_min_list[j]
        self.queued_gpus_max -= g * self.w_max_list[j]
        if self.job_events is not None:
            self.job_events.append(j)
        self._running_dirty = True
        self.state[j] = _RUNNING
        self.pool[j] = pool
        if np.isnan(self.first_start[j]):
            self.first_start[j] = self.now
            self.overhead_left[j] = self.config.sim.first_start_overhead_s
        else:
            self.overhead_left[j] = self.relaunch[j]
            t = self.preempted_at.item(j)
            if t == t:  # not nan: back from a preemption
                self.requeue_time[j] += self.now - t
                self.preempted_at[j] = np.nan
        self._update_rate(j)

    def preempt(self, j: int) -> None:
        """Release every worker; progress is kept (checkpoint); back to the queue."""
        release_all(self, j)
        self._running.discard(j)
        self._running_dirty = True
        self._queued.add(j)
        g = self.g_list[j]
        self.queued_gpus_min += g * self.w_min_list[j]
        self.queued_gpus_max += g * self.w_max_list[j]
        if self.job_events is not None:
            self.job_events.append(j)
        self.state[j] = _QUEUED
        self.pool[j] = -1
        self.rate[j] = 0.0
        self.mixed[j] = False
        self.overhead_left[j] = 0.0
        self.preempt_count[j] += 1
        self.preemptions_total += 1
        self.preempted_at[j] = self.now
        self._prog_jobs.discard(j)

    def charge_scale(self, j: int, out: bool) -> None:
        if out:
            self.scale_out_count[j] += 1
        else:
            self.scale_in_count[j] += 1
        self.overhead_left[j] = max(self.overhead_left[j], self.config.sim.scale_overhead_s)
        self._update_rate(j)

    # ------------------------------------------------------------------------------------------
    # the round
    # ------------------------------------------------------------------------------------------
    def begin(self, policy: Policy) -> None:
        """Start an episode for ``policy`` (resets dynamic state, keeps the trace)."""
        self._reset_dynamic()
        self.policy_rng = np.random.default_rng(self.seed)
        self.uses_loaning = bool(policy.uses_loaning)
        self.placement_options: PlacementOptions = policy.placement
        self.set_elasticity(str(getattr(policy, "elasticity", "limited")))
        # a policy may decide on its own clock (Pollux: every 60 s at every scale)
        own = getattr(policy, "decision_interval_s", None)
        self.interval = float(own) if own else float(self.config.sim.interval)
        if not (self.interval > 0 and math.isfinite(self.interval)):
            raise ValueError(
                f"policy {getattr(policy, 'name', policy)!r}: decision_interval_s must be a "
                f"number of seconds > 0, got {own!r}"
            )
        self.view = ClusterView(self)
        self._begun = True
        self._arrivals()

    def replace_future(
        self, future: Sequence[JobSpec], utilization: np.ndarray | None = None
    ) -> int:
        """Swap the jobs submitted after ``now`` (and the inference series after ``now``).

        The simulator goes on as if it had been built with the trace ``jobs[:k] + future``
        (``k`` = the jobs submitted by ``now``, returned; ``future`` renumbered ``k, k+1, ...``;
        between rounds the last of those may not have arrived yet) and with ``utilization``
        spliced in after the sample that holds ``now``: every job that has arrived keeps its
        state, and nothing that happened so far depended on the jobs swapped out. This is what
        lets a copy of a state be played on a fresh future (several futures per state give an
        action's expected effect rather than its effect on one future).

        Args:
            future: the new jobs still to arrive, sorted by submit time, each submitted after
                ``now`` (their ``id`` is reassigned); may be empty.
            utilization: a whole inference series (one sample per ``sample_seconds`` from time
                0) whose samples after the current one replace the present series'; None keeps
                the present series.

        Raises:
            ValueError: a job submitted at or before ``now``, an unsorted or invalid job, or a
                bad series; nothing is changed then.
        """
        if isinstance(future, (JobSpec, str, bytes, Mapping)) or not hasattr(future, "__iter__"):
            # (was: "'NoneType' object is not iterable")
            raise ValueError(f"future must be a list of JobSpecs (possibly empty), got {future!r}")
        now = self.now
        k = int(np.searchsorted(self.submit, now + _EPS, side="right"))
        new: list[JobSpec] = []
        for i, j in enumerate(future):
            if not isinstance(j, JobSpec):
                raise ValueError(f"future[{i}] must be a JobSpec, got {type(j).__name__}")
            if not j.submit > now + _EPS:
                raise ValueError(
                    f"future[{i}] is submitted at {j.submit} s, not after now ({now} s); only "
                    "jobs still to arrive can be replaced"
                )
            new.append(dataclasses.replace(j, id=k + i))
        loan = self.loan
        if utilization is not None:
            ss = loan.sample_seconds
            i0 = int(now // ss) + 1  # the samples up to the one holding now are kept
            if i0 <= len(loan.util):
                past = loan.util[:i0]
            else:  # past the series' end the controller repeats its last day
                past = np.array([loan.utilization(i * ss) for i in range(i0)], dtype=np.float64)
            fresh = np.asarray(utilization, dtype=np.float64)
            if fresh.ndim != 1 or fresh.size <= i0:
                raise ValueError(
                    f"utilization must be a 1-D series longer than the {i0} samples up to now "
                    f"({now} s); got shape {fresh.shape}"
                )
            loan = LoanController(
                np.concatenate([past, fresh[i0:]]), loan.n_inf, loan.headroom, ss
            )
        old_jobs = self.jobs
        old = {name: getattr(self, name) for name in self._fresh_job_state(self.n_jobs)}  # (its names)
        self.jobs = old_jobs[:k] + new
        try:
            self._check_jobs()
        except (ConfigError, ValueError) as exc:
            self.jobs = old_jobs
            raise ValueError(f"the new future is not a valid trace: {exc}") from None
        self._build_static()
        for name, tail in self._fresh_job_state(k).items():
            head = old[name][:k]
            if isinstance(tail, list):
                setattr(self, name, head + tail)
            else:
                setattr(self, name, np.concatenate([head, tail]))
        self.rate_mult = {j: m for j, m in self.rate_mult.items() if j < k}
        self.batch_lam = {j: x for j, x in self.batch_lam.items() if j < k}
        self._curves = {j: c for j, c in self._curves.items() if j < k}
        self.loan = loan
        if self._begun:
            self.view = ClusterView(self)
        return k

    def _arrivals(self) -> bool:
        i = self._next_arrival
        n = self.n_jobs
        new = False
        while i < n and self.submit[i] <= self.now + _EPS:
            self.state[i] = _QUEUED
            self._queued.add(i)
            g = self.g_list[i]
            self.queued_gpus_min += g * self.w_min_list[i]
            self.queued_gpus_max += g * self.w_max_list[i]
            if self.job_events is not None:
                self.job_events.append(i)
            i += 1
            new = True
        self._next_arrival = i
        return new

    def loan_phase(self, reclaim: Callable[[ClusterView, int], Sequence[int] | None] | None):
        """Update loans for this round. Returns (reclaimed server ids, jobs preempted by it)."""
        loanable = self.loan.loanable(self.now) if self.uses_loaning else 0
        self.loanable_now = loanable
        if loanable != self._last_loanable:
            self._event = True
            self._last_loanable = loanable
        reclaimed: list[int] = []
        preempted: list[int] = []
        n_loaned = self.n_loaned
        if n_loaned > loanable:
            k = n_loaned - loanable
            picked = reclaim(self.view, k) if reclaim is not None else None
            picked = self._validate_reclaim(picked, k)
            reclaimed, preempted = self.reclaim_servers(picked)
        elif n_loaned < loanable:
            idle = np.flatnonzero((self.srv_pool == INFER) & ~self.srv_loaned)
            for s in idle[: loanable - n_loaned]:
                self.srv_loaned[s] = True
                self.free_index.move(int(s), self.srv_free.item(s), self.srv_cap.item(s))
                self.free_index.set_loaned(int(s), True)
                self.srv_free[s] = self.srv_cap[s]
                self.n_loaned += 1
                self.loaned_gpus += int(self.srv_cap[s])
        return reclaimed, preempted

    def _validate_reclaim(self, picked: Sequence[int] | None, k: int) -> list[int]:
        if picked is None:
            return default_reclaim(self.view, k)
        if isinstance(picked, (str, bytes, Mapping)) or not hasattr(picked, "__iter__"):
            raise TypeError(f"a policy's reclaim() must return a list of server ids (or None for the "
                            f"default rule), got {picked!r}")  # was: "'int' object is not iterable"
        out: list[int] = []
        for s in picked:
            if isinstance(s, (bool, np.bool_)) or not (isinstance(s, (int, np.integer)) or (
                    isinstance(s, (float, np.floating)) and float(s).is_integer())):
                # was: a raw ValueError from int() ('abc', nan), or 1.7 read as server 1
                raise TypeError(f"a policy's reclaim() returned {s!r} among its servers; give integer "
                                "server ids")
            s = int(s)
            if 0 <= s < self.n_servers and self.srv_loaned[s] and s not in out:
                out.append(s)
        if len(out) != k:
            # Invalid or short answer: complete it with the default rule, counted.
            self.invalid_total += 1
            rest = [s for s in default_reclaim(self.view, self.n_servers) if s not in out]
            out = (out + rest)[:k]
        return out

    def reclaim_servers(self, servers: Sequence[int]) -> tuple[list[int], list[int]]:
        """Return ``servers`` to inference now. Elastic jobs that keep ``>= w_min`` workers
        elsewhere scale in; every other job with a worker there is preempted."""
        preempted: list[int] = []
        for s in servers:
            if not self.srv_loaned[s]:
                raise ValueError(f"server {s} is not on loan")
            for j, k in sorted(self.srv_jobs[s].items()):
                if self.state[j] != _RUNNING:
                    continue
                remaining = int(self.workers[j]) - k
                if self.resizable_list[j] and remaining >= self.lim_lo_list[j]:
                    fk = min(k, self.flex[j].get(s, 0))
                    if fk:
                        self.remove_workers(j, s, fk, True)
                    if k - fk:
                        self.remove_workers(j, s, k - fk, False)
                    rebalance(self, j)
                    self.charge_scale(j, out=False)
                else:
                    self.preempt(j)
                    preempted.append(j)
            self.srv_loaned[s] = False
            self.free_index.move(int(s), self.srv_free.item(s), self.srv_cap.item(s))
            self.free_index.set_loaned(int(s), False)
            self.srv_free[s] = self.srv_cap[s]
            self.n_loaned -= 1
            self.loaned_gpus -= int(self.srv_cap[s])
        if servers:
            self._event = True
            self.reclaims_total += len(servers)
        return list(servers), preempted

    def apply(self, decision: Decision) -> PlacementReport:
        report = apply_decision(self, decision, self.placement_options)
        speedup = getattr(decision, "speedup", None)
        if speedup:
            self._set_speedup(speedup, report)
        batch = getattr(decision, "batch", None)
        if batch:
            self._set_batch(batch, report)
        self.invalid_total += len(report.invalid)
        self.unplaced_total += len(report.unplaced)
        self._changed_last = report.changed
        return report

    def _advance_small(self, R: np.ndarray, t0: float, dt: float) -> bool:
        """The common case of :meth:`advance` in plain Python, for a few running jobs.

        When no job of ``R`` finishes within ``dt`` it applies the interval (same float64
        operations, in the same order, as the vectorised code) and returns True; otherwise it
        changes nothing and returns False (the vectorised code handles finishing rounds).
        """
        ovl = self.overhead_left[R].tolist()
        ratel = self.rate[R].tolist()
        reml = self.remaining[R].tolist()
        predl = self.pred_remaining[R].tolist()
        has_ov = any(ovl)
        lim = dt + _EPS
        eff = dt
        waste = 0.0
        gpul = (self.workers[R] * self.g[R]).tolist() if has_ov else None
        for i in range(len(reml)):
            rate = ratel[i]
            if has_ov:
                ov = ovl[i]
                eff = dt - ov
                if not eff > 0.0:  # np.maximum(dt - ov, 0.0)
                    eff = 0.0
                lim = eff + _EPS
                waste += (dt - eff) * gpul[i]  # type: ignore[index]
                ov -= dt
                ovl[i] = ov if ov > 0.0 else 0.0  # np.maximum(ov - dt, 0.0)
            r = reml[i]
            if not rate > 0.0 or r / rate <= lim:
                return False  # someone finishes: the vectorised path does it (nothing changed)
            prog = rate * eff
            reml[i] = r - prog
            x = predl[i] - prog
            predl[i] = x if x > 0.0 else 0.0  # np.maximum(pred - prog, 0.0)
        self.remaining[R] = reml
        self.pred_remaining[R] = predl
        if has_ov:
            self.overhead_left[R] = ovl
            self.overhead_gs += waste
        self.running_time[R] += dt
        self.acc.add_busy(t0, dt, self.busy_train_gpus * dt, self.busy_loan_gpus * dt)
        if self.has_hetero:
            self.acc.add_hetero(R, dt)
        return True

    def advance(self, dt: float | None = None) -> list[int]:
        """Advance the clock by ``dt`` (default one interval) with exact progress.

        Returns the ids of jobs that finished inside the interval.
        """
        dt = self.interval if dt is None else dt
        t0 = self.now
        R = self.running_array()
        completed: list[int] = []
        if len(R) and not (len(R) <= _PY_JOBS and self._advance_small(R, t0, dt)):
            ov = self.overhead_left[R]
            rate = self.rate[R]
            rem = self.remaining[R]
            need = rem / rate
            has_ov = bool(ov.any())
            eff = np.maximum(dt - ov, 0.0) if has_ov else dt
            fin = need <= eff + _EPS
            prog = rate * eff
            if has_ov:
                self.overhead_gs += float(((dt - eff) * (self.workers[R] * self.g[R])).sum())
            if not fin.any():
                # Common case: nobody finishes; every allocated GPU is busy the whole interval.
                self.remaining[R] = rem - prog
                self.pred_remaining[R] = np.maximum(self.pred_remaining[R] - prog, 0.0)
                if has_ov:
                    self.overhead_left[R] = np.maximum(ov - dt, 0.0)
                self.running_time[R] += dt
                self.acc.add_busy(t0, dt, self.busy_train_gpus * dt, self.busy_loan_gpus * dt)
                if self.has_hetero:
                    self.acc.add_hetero(R, dt)
            else:
                alloc_time = np.where(fin, np.minimum(ov + need, dt), dt)
                self.remaining[R] = np.where(fin, 0.0, rem - prog)
                self.pred_remaining[R] = np.maximum(
                    np.where(fin, 0.0, self.pred_remaining[R] - prog), 0.0
                )
                if has_ov:
                    self.overhead_left[R] = np.maximum(ov - dt, 0.0)
                self.running_time[R] += alloc_time
                self.acc.add_interval(t0, dt, R, alloc_time)
                if self.has_hetero:
                    self.acc.add_hetero(R, alloc_time)
                done_ids = R[fin]
                self.finish[done_ids] = t0 + alloc_time[fin]
                completed = [int(j) for j in done_ids]
        elif not len(R):
            self.acc.add_busy(t0, dt, 0.0, 0.0)
        for j in completed:
            release_all(self, j)
            self._running.discard(j)
            if self.job_events is not None:
                self.job_events.append(j)
            self.state[j] = _DONE
            self.pool[j] = -1
            self.rate[j] = 0.0
            self.mixed[j] = False
            self.done_count += 1
        if completed:
            self._running_dirty = True
            self._event = True
        self.now = t0 + dt
        self.round_index += 1
        return completed

    # ------------------------------------------------------------------------------------------
    # fast-forward
    # ------------------------------------------------------------------------------------------
    def skippable_rounds(self, limit: int) -> int:
        """How many upcoming whole rounds contain no event (and so no decision is needed).

        A round at time ``t`` is eventful when a job arrives in ``(t - interval, t]``, a job
        finishes inside the previous interval, or the loanable count differs from the last
        round's. The count stops before the first eventful round, and at ``limit``.
        """
        if limit <= 0:
            return 0
        dt = self.interval
        k_max = limit
        # next arrival: it is seen at round ceil((submit - now) / dt) from now
        if self._next_arrival < self.n_jobs:
            # the arrival is seen at the round `ka` intervals from now
            ka = math.ceil((self.submit[self._next_arrival] - self.now) / dt - _EPS)
            k_max = min(k_max, max(ka, 0))
        R = self.running_array()
        if len(R):
            t_fin = self.overhead_left[R] + self.remaining[R] / self.rate[R]
            # skip k rounds only while k * dt < the earliest finish (strictly)
            kf = int(math.ceil(float(t_fin.min()) / dt - _EPS)) - 1
            # the round that contains the finish must run normally
            k_max = min(k_max, max(kf, 0))
        if self.uses_loaning and k_max > 0:
            k_max = self.loan.steady_rounds(self.now, dt, k_max, self.loanable_now)
        return max(k_max, 0)

    def fast_forward(self, k: int) -> None:
        """Advance ``k`` eventless rounds in one step (no decision, no arrival, no completion)."""
        if k <= 0:
            return
        t0 = self.now
        dt = k * self.interval
        R = self.running_array()
        if len(R):
            ov = self.overhead_left[R]
            eff = np.maximum(dt - ov, 0.0)
            prog = self.rate[R] * eff
            self.overhead_gs += float(((dt - eff) * (self.workers[R] * self.g[R])).sum())
            self.remaining[R] = np.maximum(self.remaining[R] - prog, 0.0)
            self.pred_remaining[R] = np.maximum(self.pred_remaining[R] - prog, 0.0)
            self.overhead_left[R] = np.maximum(ov - dt, 0.0)
            self.running_time[R] += dt
            if self.has_hetero:
                self.acc.add_hetero(R, dt)
        self.acc.add_busy(t0, dt, self.busy_train_gpus * dt, self.busy_loan_gpus * dt)
        self.now = t0 + dt
        self.round_index += k

    # ------------------------------------------------------------------------------------------
    # a whole episode
    # ------------------------------------------------------------------------------------------
    def horizon_reached(self) -> bool:
        s = self.config.sim
        if s.horizon_hours is not None and self.now >= s.horizon_hours * 3600.0 - _EPS:
            return True
        if s.max_rounds is not None and self.round_index >= s.max_rounds:
            return True
        return False

    def pre_decision(self, policy: Policy) -> tuple[list[int], list[int]]:
        """Arrivals and the loan phase of the round at ``self.now``."""
        if self._arrivals():
            self._event = True
        if self._prog_jobs:
            self.refresh_progress_rates()
        reclaim = getattr(policy, "reclaim", None)
        return self.loan_phase(reclaim)

    def decision_needed(self, policy: Policy) -> bool:
        return self._event or not (self.config.sim.fast_forward and policy.event_driven)

    def post_decision(self, policy: Policy) -> list[int]:
        """Advance past this round; fast-forward eventless rounds for event-driven policies."""
        # Only a decision that changed allocations carries an event into the next round;
        # completions inside the interval set it again in advance().
        self._event = self._changed_last
        self._changed_last = False
        completed = self.advance()
        self.rounds_total += 1
        # No fast-forward while idle with a queue (a stall in the making): the stall rule must
        # see every round, and with no horizon the skip would be ~10**12 rounds (a hang).
        if not self.done and self.config.sim.fast_forward and policy.event_driven:
            if not self._event and not self.idle_with_queue and not self._prog_jobs:
                limit = self._rounds_left()
                k = self.skippable_rounds(limit)
                if k > 0:
                    self.fast_forward(k)
                    self.rounds_total += k
        return completed

    def _rounds_left(self) -> int:
        s = self.config.sim
        lim = 10**12
        if s.horizon_hours is not None:
            lim = min(lim, int(math.ceil((s.horizon_hours * 3600.0 - self.now) / self.interval)) - 1)
        if s.max_rounds is not None:
            lim = min(lim, s.max_rounds - self.round_index - 1)
        return max(lim, 0)

    def open_round(self, policy: Policy) -> bool:
        """First half of a round: arrivals and the loan phase at :attr:`now`. Returns whether
        ``policy`` must decide this round (else pass ``None`` to :meth:`close_round`).

        Raises ``RuntimeError`` before :meth:`begin`, while a round is open (close it first) and
        once every job is done (nothing can happen any more)."""
        if not self._begun:
            raise RuntimeError("call Simulator.begin(policy) before open_round()")
        if self._round_open:
            raise RuntimeError(
                "open_round() called twice: this round is already open (did the policy's "
                "decide() raise?); finish it with close_round(policy, decision_or_None) first"
            )
        if self.done:
            raise RuntimeError(
                "the episode is over (every job is done); call begin(policy) to start again"
            )
        self._round_open = True
        self._round_t0 = self.now
        self._loans_pending = True
        self._round_loans = self.pre_decision(policy)
        self._loans_pending = False
        return self.decision_needed(policy)

    def close_round(
        self, policy: Policy, decision: Decision | None, decision_s: float = 0.0
    ) -> RoundInfo:
        """Second half of a round: place ``decision`` (``None``: no decision this round), then
        advance past the round (fast-forwarding eventless rounds for event-driven policies).
        ``decision_s``: the wall time the decision took, for the result's timing figures.

        Raises ``RuntimeError`` when no round is open (call :meth:`open_round` first) and
        ``TypeError`` when ``decision`` is not a :class:`~aryl_gym.sim.view.Decision` (the round
        then stays open)."""
        if not self._round_open:
            raise RuntimeError(
                "close_round() without an open round: call open_round(policy) first (it runs the "
                "round's arrivals and loan phase)"
            )
        if decision is not None and not isinstance(decision, Decision):
            raise TypeError(
                f"the decision must be an aryl_gym.sim.view.Decision or None, got "
                f"{type(decision).__name__} (policy {getattr(policy, 'name', policy)!r})"
            )
        if type(decision_s) is not float and (isinstance(decision_s, (bool, np.bool_)) or not isinstance(
                decision_s, (int, np.integer, np.floating))):
            raise TypeError(f"decision_s must be the decision's wall time in seconds, got {decision_s!r}")
        if not 0.0 <= decision_s < math.inf:  # (was: kept, and the result's timings failed or were nan)
            raise ValueError(f"decision_s must be a finite number of seconds >= 0, got {decision_s!r}")
        if self._loans_pending:
            # the loan phase raised in open_round (a malformed reclaim() answer, a reclaim()
            # that failed): end it with the default rule, counted as an invalid answer as a short
            # one is (was: the servers due back stayed on loan, more than loanable, and the
            # round reported the last loan phase's reclaims)
            self.invalid_total += 1
            self._round_loans = self.loan_phase(None)
            self._loans_pending = False
        report = PlacementReport()
        if decision is not None:
            report = self.apply(decision)  # a malformed decision raises before any change
            self.decision_times.append(decision_s)
        self._round_open = False
        self.acc.sample(self)
        completed = self.post_decision(policy)
        reclaimed, pre = self._round_loans
        return RoundInfo(self._round_t0, self.now, completed, report, reclaimed, pre, decision_s)

    def step(self, policy: Policy) -> RoundInfo:
        """One decision round: arrivals, loans, the policy's decision, placement, advance."""
        if not self.open_round(policy):
            return self.close_round(policy, None)
        tic = time.perf_counter()
        decision = policy.decide(self.view)
        return self.close_round(policy, decision, time.perf_counter() - tic)

    def run(
        self,
        policy: Policy,
        progress: bool = False,
        stall_hours: float = STALL_HOURS,
        on_round: Callable[[Simulator], None] | None = None,
    ) -> EpisodeResult:
        """Run a whole episode and return its :class:`~aryl_gym.metrics.EpisodeResult`.

        ``progress`` shows a bar (a terminal) or a line every few seconds (a log); the episode
        ends early, marked stalled, by the stall rule (:meth:`check_stall`, ``stall_hours``),
        or marked thrashing, by the thrash rule (:meth:`check_thrash`, the same span);
        ``on_round(sim)`` is called after every round (e.g. :func:`aryl_gym.sim.invariants.check`).
        """
        stall_hours = check_stall_hours(stall_hours)

        wall0 = time.perf_counter()
        policy.reset(self.seed)
        self.begin(policy)
        bar = progress_bar(self.n_jobs, f"{policy.name}", unit="jobs", enabled=progress)
        last_done = 0
        while not self.done and not self.horizon_reached():
            self.step(policy)
            if on_round is not None:
                on_round(self)
            if bar is not None and self.done_count != last_done:
                bar.update(self.done_count - last_done)
                last_done = self.done_count
            if self.check_stall(stall_hours) or self.check_thrash(stall_hours):
                break
        if bar is not None:
            bar.close()
        return episode_result(self, policy_name=policy.name, wall_s=time.perf_counter() - wall0)


class Accounting:
    """Time-integrated usage figures (GPU-seconds) and hourly series (SPEC 5)."""

    def __init__(self, sim: Simulator):
        self.sim = sim
        self.train_busy_gs = 0.0  # training-pool GPU-seconds used by training
        self.loan_used_gs = 0.0  # loaned-GPU-seconds used by training
        self.loan_offered_gs = 0.0  # loaned GPU-seconds offered
        self.total_s = 0.0
        self.hetero_gs = 0.0  # GPU-seconds held by jobs while they ran on both GPU types
        # hour -> [train_busy, loan_used, dt]; inference's own usage is integrated from its
        # series once, at the end (aryl_gym.metrics.inference_gs): a fast-forwarded span cannot
        # be charged at one instant's utilisation
        self.hourly: dict[int, list[float]] = {}
        self.timeline: list[tuple[float, int, int, int, int, int, float]] = []
        self.n_inf_gpus = sim.n_inf * sim.config.cluster.inf_gpus_per_server

    def add_interval(self, t0: float, dt: float, R: np.ndarray, alloc_time: np.ndarray) -> None:
        """Account an interval where job ``R[i]`` held its GPUs for ``alloc_time[i]`` seconds."""
        sim = self.sim
        if len(R) and sim.has_hetero:
            # split by where the workers are (a mixed job holds GPUs of both pools)
            g = sim.g[R].astype(np.float64) * alloc_time
            loan_gs = float((sim.inf_workers[R] * g).sum())
            train_gs = float(((sim.workers[R] - sim.inf_workers[R]) * g).sum())
        elif len(R):
            gpus = (sim.workers[R] * sim.g[R]).astype(np.float64) * alloc_time
            on_inf = sim.pool[R] == INFER
            train_gs = float(gpus[~on_inf].sum())
            loan_gs = float(gpus[on_inf].sum())
        else:
            train_gs = loan_gs = 0.0
        self.add_busy(t0, dt, train_gs, loan_gs)

    def add_hetero(self, R: np.ndarray, alloc_time: float | np.ndarray) -> None:
        """Add the GPU-seconds of the mixed jobs of ``R`` (held for ``alloc_time`` seconds)."""
        sim = self.sim
        m = sim.mixed[R]
        if m.any():
            t = alloc_time[m] if isinstance(alloc_time, np.ndarray) else alloc_time
            self.hetero_gs += float((sim.workers[R][m] * sim.g[R][m] * t).sum())

    def add_busy(self, t0: float, dt: float, train_gs: float, loan_gs: float) -> None:
        """Account an interval with the given GPU-seconds used on each pool."""
        offered = float(self.sim.loaned_gpus) * dt
        self.train_busy_gs += train_gs
        self.loan_used_gs += loan_gs
        self.loan_offered_gs += offered
        self.total_s += dt
        # Hourly bins: split the interval by hour boundaries, usage constant inside.
        h0 = int(t0 // 3600.0)
        if t0 + dt <= (h0 + 1) * 3600.0 + _EPS:  # common case: inside one hour
            row = self.hourly.get(h0)
            if row is None:
                row = self.hourly[h0] = [0.0, 0.0, 0.0]
            row[0] += train_gs
            row[1] += loan_gs
            row[2] += dt
            return
        t = t0
        end = t0 + dt
        while t < end - _EPS:
            h = int(t // 3600.0)
            seg = min(end, (h + 1) * 3600.0) - t
            frac = seg / dt
            row = self.hourly.setdefault(h, [0.0, 0.0, 0.0])
            row[0] += train_gs * frac
            row[1] += loan_gs * frac
            row[2] += seg
            t += seg

    def sample(self, sim: Simulator) -> None:
        self.timeline.append(
            (
                sim.now,
                sim.busy_train_gpus,
                sim.busy_loan_gpus,
                sim.n_loaned,
                sim.n_queued,
                sim.n_running,
                sim.loan.utilization(sim.now),
            )
        )
