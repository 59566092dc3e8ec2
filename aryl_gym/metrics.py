"""Episode metrics (SPEC 5): pure functions from a finished simulator to numbers.

Definitions (times in seconds):

* JCT = finish - submit. ``avg_jct``, ``median_jct``, ``p95_jct`` and ``mean_slowdown`` count
  every job submitted by the episode's end: a job still queued or running at the end (an episode
  ended by the thrash or stall rule, or truncated) counts with its JCT censored at the end
  (end - submit), so a policy that leaves the hard jobs unfinished is never flattered; when every
  job finished (every ordinary episode) they are the plain figures over completed jobs.
  ``avg_jct_finished`` averages the completed jobs only; ``jobs_unfinished`` counts the others
  and ``failed`` marks an episode that left any (the failure count of every table). Percentiles
  (``median_jct``, ``p95_jct``, ``p95_queue_time``, ``p95_queue_time_total``) are per episode,
  NumPy's default ``np.percentile``: linear interpolation between order statistics (Hyndman &
  Fan type 7); every table over seeds (compare, leaderboard, reproduce) starts from these
  per-episode figures, never from jobs pooled across seeds. Queuing time = first start - submit (jobs that never
  started are not in it); waiting time = JCT - time spent running (includes re-queuing after a
  preemption and overheads are counted as running).
* ``avg_queue_time_total`` / ``p95_queue_time_total`` (World v2): queuing time *including* the
  time spent back in the queue after each preemption (first start - submit + re-queued time),
  over the jobs that started; a job back in the queue at the episode's end counts its re-queued
  time up to the end (censored, as the JCTs); the paper ties its queuing figures to preemptions (Table 6), so
  both readings are reported. ``avg_run_time``: mean time a completed job held GPUs
  (relaunch and scaling overheads included), so that ``avg_jct`` = queuing (total) + running
  for an episode where every job finished. ``elastic_run_share``: the elastic jobs' share of the
  completed jobs' summed running time. If only elastic jobs can run faster (Aryl's limited
  elasticity), no scheduler can run the average job more than ``1 / (1 - share)`` times faster
  than this episode did.
* ``train_util``: GPU-seconds used on the training pool / (training GPUs x time), over the arrival
  window (hour 0 to the hour of the last submission, or of the episode's end if it came first); ``train_util_makespan`` over the whole
  episode, drain included.
* ``combined_usage``: (training-pool GPUs used + loaned GPUs used by training + inference GPUs used
  by inference, u(t) x inference GPUs) / all GPUs, time-averaged; ``combined_usage_hourly`` the
  same per simulated hour (paper Figure 9).
* ``loaned_gpu_hours_offered``: GPU-hours of inference servers on loan to training;
  ``loaned_gpu_hours_used``: GPU-hours training workers used on them. ``loaned_gpu_hours`` is
  the same figure as ``loaned_gpu_hours_offered``, kept under its first name for compatibility:
  saved results, leaderboard CSVs and the CLI's JSON carry it (new code should read
  ``loaned_gpu_hours_offered``).
* ``preemption_ratio`` = jobs preempted at least once / jobs submitted by the episode's end
  (every job, in an episode where every job finished).
* ``scaling_events`` = scale-outs + scale-ins of running jobs (reclaim scale-ins included).
* ``max_hourly_queued_share``: the largest, over the hours of the arrival window, of the
  time-averaged share of the jobs in the system that wait for their first start (paper Figure 2,
  "as high as 100%"); ``queued_share_hourly`` the series. The window ends at the episode's end
  too: an episode cut short (truncated, stalled) counts neither the hours after it nor the jobs
  it never submitted.
* ``hetero_jobs``: jobs that ran on both GPU types at some point (heterogeneous training, paper
  7.2; ``workload.hetero_fraction``); ``hetero_gpu_hours``: GPU-hours (both types) those jobs held
  while they ran on both.
* ``jct_lower_bound``: mean over the submitted jobs (as ``avg_jct``) of each job's shortest possible running time alone on the
  cluster (:func:`lower_bounds`: its fastest allowed GPU, the fastest worker count up to the
  ceiling and the best batch at each point of its training; World v1 and v2 alike), a true
  lower bound for every policy;
  ``mean_slowdown``: mean of JCT (censored as above) / that bound over the submitted jobs.
* ``declared_rate_jobs``: jobs whose rate the policy declared itself (``Decision.speedup``
  tables the simulator accepted; no shipped policy sends them). The lower bound does not cover
  a declared rate: an episode with any such job can score above 1 against it, and says so here.

How each figure is titled, in what unit, whether higher is better, how it is printed and which
tables show it is the metric table :data:`METRICS` at the end of this module: the CLI
(``simulate``, ``compare``, ``evaluate``), the leaderboard report, the training callbacks and
evaluation read their columns from it (:func:`view`), so a new figure is one row there.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import numpy as np

from aryl_gym.config import ScenarioConfig
from aryl_gym.sim.goodput import job_min_time_factor
from aryl_gym.sim.jobs import JobSpec, JobState

#: the version of the metrics' definitions; raised when a stored figure would change meaning
#: (2: ``avg_jct``, ``median_jct``, ``p95_jct`` and ``mean_slowdown`` count unfinished jobs,
#: censored at the episode's end; ``avg_jct_finished`` and ``failed`` added; 3: in an episode that
#: ended with jobs unfinished, ``preemption_ratio`` and ``jct_lower_bound`` count the submitted
#: jobs only and the queued share stops at the episode's end; 4: ``combined_usage`` and
#: ``combined_usage_hourly`` integrate inference's own usage exactly, :func:`inference_gs`, instead
#: of charging a fast-forwarded span at its first instant's utilisation; the queuing totals count
#: the re-queued time of a job still back in the queue at the end). Caches of episode results
#: key on it.
METRICS_VERSION = 4


class UsageTotals(Protocol):
    """The simulator's time-integrated usage (:class:`aryl_gym.sim.engine.Accounting`)."""

    train_busy_gs: float
    loan_used_gs: float
    loan_offered_gs: float
    n_inf_gpus: int
    total_s: float
    hetero_gs: float
    hourly: dict[int, list[float]]  # hour -> [train_busy, loan_used, seconds]


class InferenceSeries(Protocol):
    """The inference cluster's utilisation series (:class:`aryl_gym.sim.loaning.LoanController`)."""

    @property
    def util(self) -> np.ndarray: ...

    @property
    def sample_seconds(self) -> float: ...

    def utilization(self, t: float) -> float: ...


class FinishedEpisode(Protocol):
    """What the metrics read from a simulator (:class:`aryl_gym.sim.engine.Simulator`); typed
    structurally so this module does not import the simulator, which imports it."""

    config: ScenarioConfig
    jobs: list[JobSpec]
    seed: int | None
    n_jobs: int
    now: float
    stalled: bool
    thrashing: bool
    state: np.ndarray
    submit: np.ndarray
    first_start: np.ndarray
    finish: np.ndarray
    running_time: np.ndarray
    work: np.ndarray
    w_max: np.ndarray
    speeds: np.ndarray
    type_agnostic: np.ndarray
    preempt_count: np.ndarray
    scale_out_count: np.ndarray
    scale_in_count: np.ndarray
    ever_mixed: np.ndarray
    decision_times: list[float]
    rounds_total: int
    invalid_total: int
    unplaced_total: int
    reclaims_total: int

    @property
    def loan(self) -> InferenceSeries: ...

    @property
    def acc(self) -> UsageTotals: ...

    @property
    def done(self) -> bool: ...


@dataclass
class EpisodeResult:
    """Every figure of SPEC 5 for one episode. ``to_dict()`` is JSON-ready."""

    scenario: str
    policy: str
    seed: int | None
    jobs_total: int
    jobs_completed: int
    jobs_unfinished: int
    avg_jct: float
    median_jct: float
    p95_jct: float
    avg_queue_time: float
    p95_queue_time: float
    total_wait_time: float
    avg_wait_time: float
    makespan: float
    train_util: float
    train_util_makespan: float
    combined_usage: float
    loaned_gpu_hours: float  # == loaned_gpu_hours_offered (compatibility name; see the module docstring)
    loaned_gpu_hours_offered: float
    loaned_gpu_hours_used: float
    preemptions: int
    preempted_jobs: int
    preemption_ratio: float
    scaling_events: int
    scale_outs: int
    scale_ins: int
    jct_lower_bound: float
    mean_slowdown: float
    decision_ms_mean: float
    decision_ms_max: float
    rounds: int
    decision_rounds: int
    invalid_decisions: int
    unplaced_targets: int
    reclaimed_servers: int
    sim_seconds: float
    wall_s: float
    truncated: bool
    stalled: bool
    #: ended by the thrash rule (:meth:`aryl_gym.sim.engine.Simulator.check_thrash`)
    thrashing: bool = False
    max_hourly_queued_share: float = float("nan")
    #: mean JCT of the completed jobs only (``avg_jct`` counts the unfinished ones too, censored
    #: at the episode's end); equal to ``avg_jct`` when every job finished
    avg_jct_finished: float = float("nan")
    #: the episode left jobs unfinished (thrash or stall rule, or truncation): 1, else 0
    failed: int = 0
    #: jobs that ran on both GPU types at some point (heterogeneous training, paper 7.2)
    hetero_jobs: int = 0
    #: GPU-hours held by jobs while they ran on both GPU types
    hetero_gpu_hours: float = 0.0
    #: queuing time including re-queuing after preemptions (module docstring; World v2)
    avg_queue_time_total: float = float("nan")
    p95_queue_time_total: float = float("nan")
    #: mean time a completed job held GPUs (module docstring; World v2)
    avg_run_time: float = float("nan")
    #: the elastic jobs' share of the completed jobs' summed running time (module docstring)
    elastic_run_share: float = float("nan")
    #: jobs that ran at a rate the policy declared (``Decision.speedup``; module docstring)
    declared_rate_jobs: int = 0
    combined_usage_hourly: list[float] = field(default_factory=list)
    queued_share_hourly: list[float] = field(default_factory=list, repr=False)
    jcts: list[float] = field(default_factory=list, repr=False)
    queue_times: list[float] = field(default_factory=list, repr=False)

    #: keys left out of the compact JSON by default (long series)
    SERIES = ("combined_usage_hourly", "jcts", "queue_times", "queued_share_hourly")

    def to_dict(self, series: bool = False) -> dict[str, Any]:
        d = asdict(self)
        if not series:
            for k in self.SERIES:
                d.pop(k, None)
        return {k: _clean(v) for k, v in d.items()}

    def to_json(self, series: bool = False) -> str:
        return json.dumps(self.to_dict(series=series), sort_keys=False)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EpisodeResult:
        names = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in d.items() if k in names})


def _clean(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, (np.floating,)):
        return _clean(float(v))
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, list):
        return [_clean(x) for x in v]
    return v


def _pct(a: np.ndarray, q: float) -> float:
    return float(np.percentile(a, q)) if len(a) else float("nan")


def _mean(a: np.ndarray) -> float:
    return float(a.mean()) if len(a) else float("nan")


def _elastic_run_share(sim: Any, done: np.ndarray) -> float:
    rt = np.asarray(sim.running_time, dtype=float)[done]
    total = float(rt.sum())
    if total <= 0:
        return float("nan")
    elastic = np.fromiter((bool(j.elastic) for j in sim.jobs), dtype=bool, count=len(sim.jobs))[done]
    return float(rt[elastic].sum()) / total


def censored_jcts(sim: FinishedEpisode) -> tuple[np.ndarray, np.ndarray]:
    """(JCT, job index) of every job submitted by the episode's end: finish - submit for a
    completed job, the episode's end - submit for one still queued or running."""
    end = float(sim.now)
    done = sim.state == JobState.DONE
    seen = done | (sim.submit <= end)
    fin = np.where(done, sim.finish, end)
    idx = np.flatnonzero(seen)
    return (fin - sim.submit)[idx], idx


def lower_bounds(sim: FinishedEpisode, limited: bool = False) -> np.ndarray:
    """Each job's shortest possible running time, alone on the cluster (seconds): on its
    fastest allowed GPU type, at the fastest configuration the world runs at each point of its
    training (any worker count up to the ceiling ``w_ceil``, any batch a tuner may choose;
    :func:`aryl_gym.sim.goodput.job_min_time_factor`), with no overhead. No policy's job can
    finish sooner, so ``jct_lower_bound / avg_jct`` (the leaderboard's score) is at most 1 for
    every policy, Pollux and unbounded AFS included. A policy's own ``Decision.speedup`` tables
    (rates declared by the policy, no shipped policy sends them) are outside it.

    ``limited=True``: the paper's regime instead, each job alone at ``w_max`` at its reference
    batch (the bound of every metric before version 2; ``aryl-gym calibrate --relevance`` measures
    headroom against it). A policy that uses more workers or tunes batches can beat it."""
    fastest = np.where(sim.type_agnostic, sim.speeds.max(axis=1), sim.speeds[:, 0])
    # scaling efficiency at w_max (JobSpec.scaling; 1 for linear jobs)
    eff = np.array(
        [1.0 if sc is None else float(sc[min(int(w), len(sc) - 1)])
         for sc, w in zip(getattr(sim, "scaling", [None] * sim.n_jobs), sim.w_max)]
    )
    factor = np.array([1.0 if limited else min_time_factor_of(sim.config, j) for j in sim.jobs])
    return sim.work * factor.reshape(-1) / (sim.w_max * fastest * eff)


def min_time_factor_of(config: ScenarioConfig, j: JobSpec) -> float:
    """Job ``j``'s shortest running time alone on ``config``'s cluster, in units of its running
    time at ``w_max`` and its reference batch (:func:`aryl_gym.sim.goodput.job_min_time_factor`)."""
    c = config.cluster
    # the most workers the job could hold alone: the ceiling (Simulator.w_ceil), and the whole
    # cluster it may run on (both pools only for a heterogeneous job)
    w_train = c.train_servers * (c.train_gpus_per_server // j.g)
    w_inf = c.inf_servers * (c.inf_gpus_per_server // j.g)
    room = (w_train + w_inf if j.hetero else max(w_train, w_inf)) if j.type_agnostic else w_train
    w_cap = max(min(max(j.w_max, int(config.sim.ceiling_gpus) // j.g), room), 1)
    return job_min_time_factor(j.family, j.app, j.g, j.w_req, j.w_max, j.batch_size, j.scaling, w_cap)


def _hourly_integral(starts: np.ndarray, ends: np.ndarray, hours: int) -> np.ndarray:
    """Per hour ``0..hours-1``: the integral (seconds) of the number of open intervals."""
    edges = np.arange(hours + 1, dtype=np.float64) * 3600.0
    s = np.clip(starts, 0.0, edges[-1])
    e = np.clip(ends, 0.0, edges[-1])
    keep = e > s
    s, e = s[keep], e[keep]
    # integral of the count up to each edge = sum over intervals of overlap with [0, edge]
    cum = np.array([float(np.clip(x - s, 0.0, e - s).sum()) for x in edges])
    return np.diff(cum)


def hourly_queued_share(
    submit: np.ndarray, first_start: np.ndarray, finish: np.ndarray, hours: int,
    end: float = math.inf,
) -> list[float]:
    """Time-averaged share of in-system jobs waiting for their first start, per hour, up to
    ``end`` (the episode's end: a job still waiting or running there counts up to it, not
    after; the last hour is the part of it before ``end``)."""
    if hours <= 0 or len(submit) == 0:
        return []
    end_q = np.minimum(np.where(np.isnan(first_start), np.inf, first_start), end)
    end_s = np.minimum(np.where(np.isnan(finish), np.inf, finish), end)
    queued = _hourly_integral(submit, end_q, hours)
    system = _hourly_integral(submit, end_s, hours)
    return [float(q / t) if t > 0 else 0.0 for q, t in zip(queued, system)]


def inference_gs(loan: InferenceSeries, n_inf: int, end: float) -> tuple[float, dict[int, float]]:
    """GPU-seconds inference used on its own ``n_inf`` GPUs over ``[0, end]``: the integral of
    ``u(t) x n_inf`` (``loan``'s series, piecewise constant over its samples), in total and per
    simulated hour.

    Integrated once here rather than summed round by round in the simulator, which charged a
    whole fast-forwarded span (many eventless rounds advanced at once) at the utilisation of its
    first instant: that made ``combined_usage`` and its hourly series depend on the
    fast-forward optimisation (testbed ``sjf`` seed 0: 0.6120 with it, 0.6098 without, for the
    same episode; hourly figures off by up to about 0.02)."""
    ss = float(loan.sample_seconds)
    if not end > 0:
        return 0.0, {}
    n_samples = int(math.ceil(end / ss))
    series = np.asarray(loan.util, dtype=np.float64)[:n_samples]
    # past the series' end the controller repeats its last day: ask it for those samples
    tail = [loan.utilization(k * ss) for k in range(len(series), n_samples)]
    u = np.concatenate([series, np.asarray(tail, dtype=np.float64)])
    # pieces: the series' samples split at hour boundaries (u is constant on each)
    starts = np.arange(n_samples, dtype=np.float64) * ss
    edges = np.union1d(starts, np.arange(int(math.ceil(end / 3600.0)), dtype=np.float64) * 3600.0)
    edges = np.append(edges[edges < end], end)
    left, width = edges[:-1], np.diff(edges)
    sample = np.clip(np.searchsorted(starts, left, side="right") - 1, 0, n_samples - 1)
    gs = u[sample] * float(n_inf) * width
    hours = (left // 3600.0).astype(np.int64)
    per_hour = np.bincount(hours, weights=gs)
    return float(gs.sum()), {int(h): float(per_hour[h]) for h in np.unique(hours)}


def episode_result(sim: FinishedEpisode, policy_name: str, wall_s: float) -> EpisodeResult:
    done = sim.state == JobState.DONE
    jct = (sim.finish - sim.submit)[done]
    # every submitted job, the unfinished ones censored at the end (module docstring)
    jct_all, seen = (jct, np.flatnonzero(done)) if done.all() else censored_jcts(sim)
    started = ~np.isnan(sim.first_start)
    qt = (sim.first_start - sim.submit)[started]
    requeue = getattr(sim, "requeue_time", None)
    if requeue is not None:
        requeue = np.array(requeue, dtype=float)
        # a job preempted and still back in the queue at the end: its re-queued time so far
        # (was: counted only once it restarted, so an episode cut short dropped it)
        pre_at = getattr(sim, "preempted_at", None)
        if pre_at is not None:
            waiting = ~np.isnan(pre_at)
            requeue[waiting] += float(sim.now) - pre_at[waiting]
    qt_total = qt + requeue[started] if requeue is not None else qt
    wait = jct - sim.running_time[done]
    lb = lower_bounds(sim)
    acc = sim.acc
    span = max(acc.total_s, 1e-9)
    c = sim.config.cluster
    total_gpus = c.train_gpus + c.inf_gpus
    # inference's own usage, integrated exactly from its series (inference_gs)
    inf_gs, inf_hourly = inference_gs(sim.loan, acc.n_inf_gpus, float(acc.total_s))
    hourly = []
    for h in sorted(acc.hourly):
        tb, lu, dt = acc.hourly[h]
        hourly.append((tb + lu + inf_hourly.get(h, 0.0)) / (total_gpus * dt) if dt > 0 else 0.0)
    makespan = float(np.nanmax(sim.finish)) if done.any() else float("nan")
    # Utilization over the arrival window (0 .. last submit, whole hours): the steady state the
    # paper's 82% refers to, not the drain after the last arrival. An episode cut short ends the
    # window at its end (was: the hours after it, with the jobs it never submitted counted as
    # queued, a share of 1.0)
    end = float(sim.now)
    sub = seen if len(seen) < sim.n_jobs else slice(None)  # the submitted jobs (all, usually)
    arrived = sim.submit[sub]
    last_hour = int(np.ceil(min(float(arrived.max()), end) / 3600.0)) if len(arrived) else 0
    win = [acc.hourly[h] for h in sorted(acc.hourly) if h < max(last_hour, 1)]
    win_s = sum(r[2] for r in win)
    train_util_window = (
        sum(r[0] for r in win) / (c.train_gpus * win_s) if win_s > 0 else float("nan")
    )
    qshare = hourly_queued_share(
        arrived, sim.first_start[sub], sim.finish[sub], min(max(last_hour, 1), 24 * 400),
        end=math.inf if done.all() else end,
    )
    dts = np.asarray(sim.decision_times) * 1000.0
    scale_outs = int(sim.scale_out_count.sum())
    scale_ins = int(sim.scale_in_count.sum())
    return EpisodeResult(
        scenario=sim.config.name,
        policy=policy_name,
        seed=sim.seed,
        jobs_total=sim.n_jobs,
        jobs_completed=int(done.sum()),
        jobs_unfinished=int(sim.n_jobs - done.sum()),
        avg_jct=_mean(jct_all),
        median_jct=_pct(jct_all, 50),
        p95_jct=_pct(jct_all, 95),
        avg_queue_time=_mean(qt),
        p95_queue_time=_pct(qt, 95),
        total_wait_time=float(wait.sum()),
        avg_wait_time=_mean(wait),
        makespan=makespan,
        train_util=train_util_window,
        train_util_makespan=acc.train_busy_gs / (c.train_gpus * span),
        combined_usage=(acc.train_busy_gs + acc.loan_used_gs + inf_gs) / (total_gpus * span),
        loaned_gpu_hours=acc.loan_offered_gs / 3600.0,
        loaned_gpu_hours_offered=acc.loan_offered_gs / 3600.0,
        loaned_gpu_hours_used=acc.loan_used_gs / 3600.0,
        preemptions=int(sim.preempt_count.sum()),
        preempted_jobs=int((sim.preempt_count > 0).sum()),
        # over the submitted jobs (was: over every job, those an episode cut short never
        # submitted included, which diluted it)
        preemption_ratio=float((sim.preempt_count[seen] > 0).mean()) if len(seen) else 0.0,
        scaling_events=scale_outs + scale_ins,
        scale_outs=scale_outs,
        scale_ins=scale_ins,
        jct_lower_bound=_mean(lb[seen]),  # the jobs avg_jct counts (was: every job)
        mean_slowdown=_mean(jct_all / lb[seen]),
        decision_ms_mean=_mean(dts),
        decision_ms_max=float(dts.max()) if len(dts) else 0.0,
        rounds=sim.rounds_total,
        decision_rounds=len(sim.decision_times),
        invalid_decisions=sim.invalid_total,
        unplaced_targets=sim.unplaced_total,
        reclaimed_servers=sim.reclaims_total,
        sim_seconds=sim.now,
        wall_s=wall_s,
        truncated=not sim.done,
        stalled=sim.stalled,
        thrashing=sim.thrashing,
        max_hourly_queued_share=max(qshare) if qshare else float("nan"),
        avg_jct_finished=_mean(jct),
        failed=int(not done.all()),
        hetero_jobs=int(sim.ever_mixed.sum()),
        hetero_gpu_hours=acc.hetero_gs / 3600.0,
        avg_queue_time_total=_mean(qt_total),
        p95_queue_time_total=_pct(qt_total, 95),
        avg_run_time=_mean(sim.running_time[done]),
        elastic_run_share=_elastic_run_share(sim, done),
        declared_rate_jobs=len(getattr(sim, "rate_mult", ())),
        combined_usage_hourly=hourly,
        queued_share_hourly=qshare,
        jcts=[float(x) for x in jct],
        queue_times=[float(x) for x in qt],
    )


# ----------------------------------------------------------------------------------------------
# The metric table: how each figure is named, shown and compared
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Metric:
    """One scalar figure of :class:`EpisodeResult` as tables, logs and rankings show it.

    ``unit`` is the unit of the stored value (``"s"``, ``"share"`` in [0, 1], ``"GPU-h"``,
    ``"ms"``, ``""`` for a count or a plain number); ``fmt`` how tables print it (``"s"``
    seconds, ``"h"`` seconds printed as hours, ``"%"`` a share printed as a percentage, ``"n"``
    a number, ``"c"`` a 0/1 flag whose summary over episodes is printed as a count, ``3/16``); ``higher_is_better`` is None for a figure that is not a measure of quality (sizes,
    bookkeeping, flags). ``views`` name the tables that show it (:data:`VIEWS`); ``tag`` is its
    TensorBoard tag when that is not ``name``."""

    name: str
    title: str
    unit: str
    higher_is_better: bool | None
    fmt: str
    views: frozenset[str] = frozenset()
    tag: str = ""

    @property
    def header(self) -> str:
        """The column title with the printed unit: ``avg JCT (s)``, ``makespan (h)``."""
        return f"{self.title} ({self.fmt})" if self.fmt in ("s", "h") else self.title


#: the views of :data:`METRICS`: who reads which rows (each in the table's order)
VIEWS: dict[str, str] = {
    "simulate": "aryl-gym simulate's summary",
    "compare": "the rows of aryl-gym compare and evaluate (JSON), with ratios to the first policy",
    "compare-table": "the text table of aryl-gym compare",
    "report": "the columns of leaderboard.md",
    "console": "the console leaderboard, evaluate --table, ratios of evaluations",
    "train": "training: the figures averaged over evaluation episodes (mean_metrics)",
    "tensorboard": "training: the TensorBoard cluster/ and eval/ figures and eval.csv columns",
}


def _table(*rows: tuple[str, str, str, bool | None, str, str]) -> dict[str, Metric]:
    out = {}
    for name, title, unit, higher, fmt, views in rows:
        tag = ""
        if "@" in name:  # "name@tag"
            name, tag = name.split("@")
        out[name] = Metric(name, title, unit, higher, fmt, frozenset(views.split()), tag)
    return out


_ALL = "simulate compare"
_TRAIN = "train tensorboard"
#: every scalar figure of :class:`EpisodeResult` (a test keeps the two in step), in the order
#: every view prints them: (name[@tensorboard tag], title, unit, higher is better, format, views)
METRICS: dict[str, Metric] = _table(
    ("avg_jct", "avg JCT", "s", False, "s", f"{_ALL} compare-table report console {_TRAIN}"),
    ("median_jct", "median JCT", "s", False, "s", f"{_ALL} compare-table train"),
    ("p95_jct", "p95 JCT", "s", False, "s", f"{_ALL} compare-table report console {_TRAIN}"),
    ("avg_jct_finished", "avg JCT (finished jobs)", "s", False, "s", ""),
    ("avg_queue_time", "avg queue", "s", False, "s", f"{_ALL} compare-table report console {_TRAIN}"),
    ("p95_queue_time", "p95 queue", "s", False, "s", f"{_ALL} compare-table {_TRAIN}"),
    ("avg_queue_time_total", "avg queue (total)", "s", False, "s", ""),
    ("p95_queue_time_total", "p95 queue (total)", "s", False, "s", ""),
    ("avg_run_time", "avg run", "s", False, "s", ""),
    ("elastic_run_share", "elastic share of run time", "share", None, "%", ""),
    ("total_wait_time", "total wait", "s", False, "s", "compare"),
    ("avg_wait_time", "avg wait", "s", False, "s", ""),
    ("makespan", "makespan", "s", False, "h", f"{_ALL} report"),
    ("train_util", "train util", "share", True, "%", f"{_ALL} compare-table report {_TRAIN}"),
    ("train_util_makespan", "train util (makespan)", "share", True, "%", ""),
    ("combined_usage@usage", "combined usage", "share", True, "%", f"{_ALL} compare-table report console {_TRAIN}"),
    ("max_hourly_queued_share", "max hourly queued", "share", False, "%", ""),
    ("loaned_gpu_hours", "loaned GPU-h", "GPU-h", None, "n", ""),
    ("loaned_gpu_hours_offered", "loaned GPU-h offered", "GPU-h", None, "n", _ALL),
    ("loaned_gpu_hours_used", "loaned GPU-h used", "GPU-h", True, "n", f"{_ALL} compare-table report"),
    ("preemptions", "preemptions", "", False, "n", f"{_ALL} {_TRAIN}"),
    ("preempted_jobs", "preempted jobs", "", False, "n", ""),
    ("preemption_ratio", "preempt. ratio", "share", False, "%", f"{_ALL} compare-table report console {_TRAIN}"),
    ("scaling_events", "scaling events", "", None, "n", f"{_ALL} compare-table report"),
    ("scale_outs", "scale-outs", "", None, "n", ""),
    ("scale_ins", "scale-ins", "", None, "n", ""),
    ("hetero_jobs", "mixed jobs", "", None, "n", ""),
    ("hetero_gpu_hours", "mixed GPU-h", "GPU-h", None, "n", ""),
    ("declared_rate_jobs", "declared-rate jobs", "", None, "n", ""),
    ("jct_lower_bound", "JCT lower bound", "s", None, "s", _ALL),
    ("mean_slowdown", "slowdown", "", False, "n", f"{_ALL} report {_TRAIN}"),
    ("jobs_total", "jobs", "", None, "n", "simulate"),
    ("jobs_completed", "completed", "", True, "n", f"{_ALL} train"),
    ("jobs_unfinished", "unfinished", "", False, "n", f"compare compare-table {_TRAIN}"),
    ("failed", "failed episodes", "", False, "c", f"{_ALL} compare-table report console {_TRAIN}"),
    ("decision_ms_mean", "decision ms", "ms", False, "n", f"{_ALL} compare-table report"),
    ("decision_ms_max", "decision ms max", "ms", False, "n", "compare"),
    ("rounds", "rounds", "", None, "n", "simulate"),
    ("decision_rounds", "decision rounds", "", None, "n", "simulate"),
    ("invalid_decisions", "invalid decisions", "", None, "n", ""),
    ("unplaced_targets", "unplaced targets", "", None, "n", ""),
    ("reclaimed_servers", "reclaimed servers", "", None, "n", ""),
    ("sim_seconds", "simulated time", "s", None, "h", ""),
    ("wall_s", "wall s", "s", None, "n", _ALL),
    ("truncated", "truncated", "", None, "n", ""),
    ("stalled", "stalled", "", None, "n", ""),
    ("thrashing", "thrashing", "", None, "n", ""),
)


def view(name: str) -> tuple[Metric, ...]:
    """The metrics of one view (:data:`VIEWS`), in table order."""
    if name not in VIEWS:
        raise KeyError(f"unknown metric view {name!r}; views: {', '.join(VIEWS)}")
    return tuple(m for m in METRICS.values() if name in m.views)


def names(view_name: str) -> tuple[str, ...]:
    """The names of the metrics of one view, in table order."""
    return tuple(m.name for m in view(view_name))


def metric(name: str) -> Metric:
    """The table's row for ``name``; a name outside the table (a figure added to a results
    row elsewhere) gets a plain row: lower is not assumed better, printed as a number."""
    return METRICS.get(name) or Metric(name, name, "", None, "n")


def higher_is_better(name: str) -> bool:
    """True when a larger value of ``name`` is better (ranking direction; unknown: False)."""
    return bool(metric(name).higher_is_better)
