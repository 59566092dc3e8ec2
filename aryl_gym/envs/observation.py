"""Observation building for the allocation env (SPEC 6): the K-job window and cluster features.

The observation is a single-level ``Dict`` of float32 ``Box`` es, every value in ``[0, 1]``:

``jobs`` (K, F_JOB)
    one row per window slot, features in :data:`JOB_FEATURES` order; padding rows are all 0.
``cluster`` (F_CLUSTER,)
    cluster, loaning and queue features, :data:`CLUSTER_FEATURES`.
``outside`` (F_OUTSIDE,)
    a summary of the active jobs that are *not* in the window, :data:`OUTSIDE_FEATURES`.
``action_mask`` (mask size of the action mode,)
    1.0 where an action is allowed (see :mod:`aryl_gym.envs.actions`).

Unbounded quantities are squashed with ``x / (1 + x)`` after dividing by a documented scale
(times in hours, counts by 10), so they stay in ``[0, 1)`` and keep their order.

**Window order** (documented, fixed): the window holds up to K active jobs,

1. queued jobs. ``window_order="submit"`` (default): the head of the queue (oldest submissions
   first) and, when the queue does not fit, its tail (the newest quarter of the queued slots),
   both in submit order. ``window_order="pred_time"``: the queued jobs with the shortest
   predicted running time at base demand (``pred_remaining / rate(j, w_min, training pool)``,
   the job's scaling curve included), shortest first, ties by id; the longer ones are outside;
2. running jobs: elastic ones first (they are the ones that can be scaled), then the others,
   each by id.

Running jobs take at most half the window unless the queue is shorter than the other half; queued
jobs fill what the running ones leave. Slots past the active jobs are padding (``valid = 0``).

**Jobs that fit** (``window_fit = m``, off at 0): when the queue does not fit the window, up to
``m`` of its queued slots show queued jobs that fit the free capacity now (``w_min`` workers of
``g`` GPUs fit the training pool's free GPUs, or a type-agnostic job's the loaned servers';
fragmentation aware), so a window of long jobs cannot hide the ones that could start: if fewer
than ``m`` queued jobs of the window fit, the first fitting jobs outside it (in the window's
order) replace its last non-fitting queued jobs, and follow the other queued jobs.
"""

from __future__ import annotations

import math
import struct
from bisect import bisect_left, insort
from dataclasses import dataclass

import numpy as np

from aryl_gym.sim.engine import Simulator
from aryl_gym.sim.jobs import JobState
from aryl_gym.sim.view import INFER, TRAIN

_RUNNING = int(JobState.RUNNING)

JOB_FEATURES: tuple[str, ...] = (
    "valid",  # 1 for a real job
    "queued",  # 1 when queued (never started or preempted)
    "running",  # 1 when running
    "elastic",
    "type_agnostic",
    "gpus_per_worker",  # g / 8
    "w_min",  # / max_workers
    "w_max",  # / max_workers
    "workers",  # current workers / max_workers
    "on_inference",  # 1 when its workers are on loaned inference servers
    "pred_time_wmax",  # predicted remaining time at w_max on V100, hours, squashed
    "pred_time_now",  # predicted remaining time at current workers (w_min when queued), squashed
    "age",  # time since submission, hours, squashed
    "preemptions",  # squashed count
    "overhead",  # seconds of overhead still to pay / 300, clipped
    "target",  # tentative target (sequential mode) or current workers, / max_workers
    "fits_now",  # workers of g GPUs that fit in its best allowed pool now / max_workers, clipped
)
CLUSTER_FEATURES: tuple[str, ...] = (
    "train_share",  # training GPUs / all GPUs
    "train_free",  # free training GPUs / training GPUs
    "loaned_share",  # loaned GPUs / inference GPUs
    "loaned_free",  # free loaned GPUs / loaned GPUs (0 when none)
    "loanable",  # loanable servers / inference servers
    "inference_util",  # u(now)
    "inference_trend",  # 0.5 + (u(now) - u(now - 1 h)) / 2, clipped
    "tod_sin",  # (1 + sin(2 pi hour / 24)) / 2
    "tod_cos",  # (1 + cos(2 pi hour / 24)) / 2
    "queued",  # queued jobs / 10, squashed
    "running",  # running jobs / 10, squashed
    "queued_gpus_min",  # queued base GPU demand / all GPUs, squashed
    "queued_gpus_max",  # queued maximum GPU demand / all GPUs, squashed
    "done_fraction",  # finished jobs / jobs in the trace
    "tentative_free",  # free GPUs after tentative grants (sequential) / all GPUs
)
OUTSIDE_FEATURES: tuple[str, ...] = (
    "queued",  # queued jobs outside the window / 10, squashed
    "running",  # running jobs outside the window / 10, squashed
    "queued_gpus_min",  # their base GPU demand / all GPUs, squashed
    "running_gpus",  # GPUs held by running jobs outside / all GPUs
    "oldest_age",  # age of the oldest queued job outside, hours, squashed
    "min_pred_time",  # shortest predicted time at w_max among queued outside, hours, squashed
)
F_JOB = len(JOB_FEATURES)
F_CLUSTER = len(CLUSTER_FEATURES)
F_OUTSIDE = len(OUTSIDE_FEATURES)


def _sq(x: np.ndarray | float) -> np.ndarray | float:
    return x / (1.0 + x)


_PACKERS: dict[int, struct.Struct] = {}


def _f32(values: list[float], size: int) -> np.ndarray:
    """A new writable float32 array of ``size`` holding ``values`` then zeros.

    ``struct`` packs Python floats to float32 with the same C cast (round to nearest) numpy
    uses, about twice as fast as ``np.array(values, dtype=np.float32)`` for short lists.
    """
    buf = bytearray(4 * size)
    if values:
        st = _PACKERS.get(len(values))
        if st is None:
            st = _PACKERS[len(values)] = struct.Struct(f"={len(values)}f")
        st.pack_into(buf, 0, *values)
    return np.frombuffer(buf, dtype=np.float32)


def fits_now(sim: Simulator, j: int, fits: tuple[list[int], list[int]]) -> bool:
    """Whether queued job ``j`` could start now at ``w_min`` (``fits``: :func:`fit_lists`)."""
    g, w = int(sim.g[j]), int(sim.w_min[j])
    return fits[0][g] >= w or (bool(sim.type_agnostic[j]) and fits[1][g] >= w)


def reserve_fitting(q_in: list[int], q_out: list[int], fit, m: int, key) -> tuple[list[int], list[int]]:
    """The ``window_fit`` rule (module docstring) on plain lists: ``q_in`` the window's queued
    jobs and ``q_out`` the others, both in the window's order; ``fit(j)`` says whether ``j`` fits;
    ``key(j)`` is the queue order's key (``q_out`` is sorted by it). Returns the new
    ``(q_in, q_out)``."""
    have = sum(1 for j in q_in if fit(j))
    want = min(m, len(q_in)) - have
    if want <= 0 or not q_out:
        return q_in, q_out
    add = []
    for j in q_out:
        if fit(j):
            add.append(j)
            if len(add) == want:
                break
    drop = [j for j in reversed(q_in) if not fit(j)][: len(add)]
    if not add:
        return q_in, q_out
    gone = set(drop)
    new_in = [j for j in q_in if j not in gone] + add
    moved = set(add)
    new_out = sorted([j for j in q_out if j not in moved] + drop, key=key)
    return new_in, new_out


def window_lists(
    sim: Simulator, k: int, elastic, base_rates: list[float] | None = None, window_fit: int = 0
) -> tuple[list[int], list[int], list[int]]:
    """:func:`select_window` on plain lists (the env's hot path; K is small, so plain Python
    beats numpy here). ``elastic`` is indexable by job id (a list is fastest).

    ``base_rates`` (``window_order="pred_time"``): per job, the work rate at its base demand on
    the training pool (:func:`base_rates`); queued jobs are then ranked by predicted running time
    ``pred_remaining / rate`` (the same float division as ``ClusterView.pred_time``), shortest
    first, ties by id, and the window holds the shortest ones (no tail). ``window_fit``: the
    reserved slots for jobs that fit now (module docstring)."""
    R = sim.running_ids()
    nq, nr = sim.n_queued, len(R)
    n_r = min(nr, max(k // 2, k - nq))
    n_q = min(nq, k - n_r)
    if base_rates is not None:
        pr = sim.pred_remaining
        Q = sorted(sim.queued_ids(), key=lambda j: (pr[j] / base_rates[j], j))
        q_in, q_out = (Q[:n_q], Q[n_q:]) if nq > n_q else (Q, [])
    elif nq > n_q:
        Q = sim.queued_ids()
        tail = n_q // 4
        head = n_q - tail
        q_in = Q[:head] + Q[nq - tail :] if tail else Q[:head]
        q_out = Q[head : nq - tail]
    else:
        q_in, q_out = sim.queued_ids(), []
    if window_fit and q_out:
        fits = fit_lists(sim)
        pr = sim.pred_remaining
        q_in, q_out = reserve_fitting(
            q_in, q_out, lambda j: fits_now(sim, j, fits), window_fit,
            (lambda j: (pr[j] / base_rates[j], j)) if base_rates is not None else (lambda j: j))
    # elastic first, then by id (R is ascending)
    Rs = [j for j in R if elastic[j]] + [j for j in R if not elastic[j]] if nr else R
    return q_in + Rs[:n_r], q_out, Rs[n_r:]


def base_rates(sim: Simulator) -> list[float]:
    """Per job, the work rate at its base demand ``w_min`` on the training pool
    (``rate_for(j, w_min, TRAIN)``, V100 worker-seconds per second, the job's scaling curve
    included; a zero rate becomes the smallest float, so the job sorts last): the
    ``window_order="pred_time"`` key is ``pred_remaining / rate``."""
    out = []
    for j in range(sim.n_jobs):
        r = sim.rate_for(j, int(sim.w_min[j]), TRAIN)
        out.append(r if r > 0 else 5e-324)
    return out


def select_window(
    sim: Simulator, k: int, order: str = "submit", window_fit: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The window's job ids in the documented order, plus the queued and running ids outside it.

    Returns ``(window, queued_outside, running_outside)``, int64 arrays; ``window`` has at most
    ``k`` entries. ``order``: ``"submit"`` or ``"pred_time"``; ``window_fit``: the slots kept for
    jobs that fit now (see the module docstring).
    """
    rates = base_rates(sim) if order == "pred_time" else None
    w, qo, ro = window_lists(sim, k, sim.elastic, rates, window_fit)
    return (
        np.array(w, dtype=np.int64),
        np.array(qo, dtype=np.int64),
        np.array(ro, dtype=np.int64),
    )


_G = np.array([1, 2, 4, 8], dtype=np.int64)


def fit_lists(sim: Simulator) -> tuple[list[int], list[int]]:
    """:func:`fit_tables` as two lists of 9 ints (indexed by g), read from the simulator's
    free-capacity index (:class:`~aryl_gym.sim.index.FreeIndex`) in O(buckets)."""
    ix = sim.free_index
    return ix.fits(ix.train), (ix.fits(ix.loaned) if sim.n_loaned else [0] * 9)


def fit_tables(sim: Simulator) -> tuple[np.ndarray, np.ndarray]:
    """Workers of ``g`` GPUs (indexed by g, 0..8) that fit in the free GPUs of each pool now
    (fragmentation aware: a worker never spans servers)."""
    free = sim.srv_free
    ft = np.zeros(9, dtype=np.int64)
    fi = np.zeros(9, dtype=np.int64)
    ft[_G] = (free[sim.usable_mask(TRAIN)][:, None] // _G).sum(axis=0)
    fl = free[sim.srv_loaned]
    if len(fl):
        fi[_G] = (fl[:, None] // _G).sum(axis=0)
    return ft, fi


_QUEUED = int(JobState.QUEUED)


class WindowIndex:
    """The active jobs in the orders the window reads, kept up to date from the simulator's job
    events (:attr:`~aryl_gym.sim.engine.Simulator.job_events`), so that choosing the window and
    summarising the jobs outside it costs ``O(window)`` at a decision point instead of sorting
    and scanning the whole queue (:func:`window_lists` is the reference; tests compare them).

    Sorted lists (``bisect``): queued ids; queued jobs by ``(pred_remaining / base rate, id)``
    (``window_order="pred_time"``) and by ``(pred_remaining * inv_wmax, id)`` (the ``outside``
    feature ``min_pred_time``); running ids, elastic and the others apart. A queued job's
    predicted remaining work does not change while it waits, so its keys are fixed from the
    event that queued it until the next event of that job.
    """

    def __init__(self, sim: Simulator, elastic: list, base_rates: list[float] | None, inv_wmax: list[float],
                 window_fit: int = 0):
        self.elastic = elastic
        self.rates = base_rates
        self.inv_wmax = inv_wmax
        self.window_fit = int(window_fit)
        # window_fit: each queued job's (g, w_min, type-agnostic) shape, and the queued jobs by
        # shape in the window's order, so the jobs that fit are found in O(shapes)
        self.shape = (list(zip(sim.g.tolist(), sim.w_min.tolist(), sim.type_agnostic.tolist()))
                      if self.window_fit else [])
        # the last window's reserved swap: (jobs brought in, jobs sent out), or None
        self._swap: tuple[set[int], list[int]] | None = None
        self.rebuild(sim)

    def rebuild(self, sim: Simulator) -> None:
        """Index the simulator's active jobs from scratch (a new episode or future)."""
        self.q: list[int] = []
        self.q_pred: list[tuple[float, int]] | None = [] if self.rates is not None else None
        self.q_min: list[tuple[float, int]] = []
        self.keys: dict[int, tuple[float, float]] = {}
        self.r_el: list[int] = []
        self.r_in: list[int] = []
        self.state: dict[int, int] = {}
        self.by_shape: dict[tuple[int, int, bool], list[tuple[float, int]]] = {}
        self._swap = None
        for j in sim.queued_ids():
            self._add_queued(sim, j)
        for j in sim.running_ids():
            (self.r_el if self.elastic[j] else self.r_in).append(j)
            self.state[j] = _RUNNING

    def _add_queued(self, sim: Simulator, j: int) -> None:
        pr = sim.pred_remaining.item(j)
        k1 = pr / self.rates[j] if self.rates is not None else 0.0
        k2 = pr * self.inv_wmax[j]
        self.keys[j] = (k1, k2)
        insort(self.q, j)
        if self.q_pred is not None:
            insort(self.q_pred, (k1, j))
        insort(self.q_min, (k2, j))
        if self.window_fit:
            insort(self.by_shape.setdefault(self.shape[j], []), (k1, j))
        self.state[j] = _QUEUED

    @staticmethod
    def _remove(lst: list, x: object) -> None:
        i = bisect_left(lst, x)
        if i == len(lst) or lst[i] != x:  # pragma: no cover - an index out of step
            raise RuntimeError(f"window index: {x!r} not found")
        del lst[i]

    def update(self, sim: Simulator, events: list[int]) -> list[int]:
        """Apply the simulator's job events since the last call; returns the ids among them
        that are done now."""
        done: list[int] = []
        state = sim.state
        for j in dict.fromkeys(events):
            old = self.state.pop(j, None)
            if old == _QUEUED:
                k1, k2 = self.keys.pop(j)
                self._remove(self.q, j)
                if self.q_pred is not None:
                    self._remove(self.q_pred, (k1, j))
                self._remove(self.q_min, (k2, j))
                if self.window_fit:
                    self._remove(self.by_shape[self.shape[j]], (k1, j))
            elif old == _RUNNING:
                self._remove(self.r_el if self.elastic[j] else self.r_in, j)
            now = state.item(j)
            if now == _QUEUED:
                self._add_queued(sim, j)
            elif now == _RUNNING:
                insort(self.r_el if self.elastic[j] else self.r_in, j)
                self.state[j] = _RUNNING
            elif now == int(JobState.DONE):
                done.append(j)
        return done

    def window(self, k: int, fits: tuple[list[int], list[int]] | None = None) -> tuple[list[int], int, int]:
        """``(window ids, queued jobs in it, running jobs in it)``: :func:`window_lists`'s
        window (``fits``: :func:`fit_lists` now, for ``window_fit``)."""
        q = self.q
        nq = len(q)
        ne = len(self.r_el)
        nr = ne + len(self.r_in)
        n_r = min(nr, max(k // 2, k - nq))
        n_q = min(nq, k - n_r)
        if self.q_pred is not None:
            q_in = [j for _, j in self.q_pred[:n_q]]
        elif nq > n_q:
            tail = n_q // 4
            head = n_q - tail
            q_in = q[:head] + q[nq - tail :] if tail else q[:head]
        else:
            q_in = list(q)
        self._swap = None
        if self.window_fit and fits is not None and nq > n_q:
            q_in = self._reserve(q_in, fits)
        r_in = self.r_el[:n_r] if n_r <= ne else self.r_el + self.r_in[: n_r - ne]
        return q_in + r_in, n_q, n_r

    def _reserve(self, q_in: list[int], fits: tuple[list[int], list[int]]) -> list[int]:
        """:func:`reserve_fitting` from the shape index: the fitting queued jobs outside the
        window are the first entries, not in the window, of the shapes that fit."""
        ft, fl = fits
        shape = self.shape

        def fit(j: int) -> bool:
            g, w, ta = shape[j]
            return ft[g] >= w or (ta and fl[g] >= w)

        have = sum(1 for j in q_in if fit(j))
        want = min(self.window_fit, len(q_in)) - have
        if want <= 0:
            return q_in
        inside = set(q_in)
        cand: list[tuple[float, int]] = []
        for (g, w, ta), lst in self.by_shape.items():
            if not (ft[g] >= w or (ta and fl[g] >= w)):
                continue
            n = 0
            for kj in lst:
                if kj[1] not in inside:
                    cand.append(kj)
                    n += 1
                    if n == want:
                        break
        if not cand:
            return q_in
        cand.sort()
        add = [j for _, j in cand[:want]]
        drop = [j for j in reversed(q_in) if not fit(j)][: len(add)]
        gone = set(drop)
        self._swap = (set(add), drop)
        return [j for j in q_in if j not in gone] + add

    def queued_outside(self, n_q: int) -> list[int]:
        """The queued ids outside a window holding ``n_q`` queued jobs, in the window's order
        (:func:`window_lists`'s ``q_out``)."""
        if self.q_pred is not None:
            out = [j for _, j in self.q_pred[n_q:]]
        else:
            nq = len(self.q)
            if nq <= n_q:
                return []
            tail = n_q // 4
            out = self.q[n_q - tail : nq - tail]
        if self._swap is not None:  # window_fit brought some in and sent others out
            add, drop = self._swap
            key = (lambda j: (self.keys[j][0], j)) if self.q_pred is not None else (lambda j: j)
            out = sorted([j for j in out if j not in add] + drop, key=key)
        return out

    def outside(self, window: list[int], n_q: int, n_r: int) -> Outside:
        """The summary of the jobs outside the window that the observation needs."""
        nq = len(self.q)
        nr = len(self.r_el) + len(self.r_in)
        out = Outside(nq - n_q, nr - n_r, -1, math.inf)
        if nq > n_q:
            inside = set(window)
            if self.q_pred is None and self._swap is None:  # the queue's middle, in id order
                out.oldest = self.q[n_q - n_q // 4]
            else:
                for j in self.q:
                    if j not in inside:
                        out.oldest = j
                        break
            for key, j in self.q_min:
                if j not in inside:
                    out.min_key = key
                    break
        return out


@dataclass
class Outside:
    """What the ``outside`` features need of the jobs outside the window (:class:`WindowIndex`)."""

    n_queued: int
    n_running: int
    oldest: int  # the queued job outside with the earliest submit time, -1 when none
    min_key: float  # the least pred_remaining * inv_wmax among them (inf when none)


class ObservationBuilder:
    """Builds the observation arrays (plain Python over the window, numpy for big sets).

    Per-job constant features and inverse rates are per-episode lists (:meth:`begin`); a step
    gathers the window's dynamic state with a few fancy-indexing reads and fills the rows in
    plain Python, which beats a sequence of small numpy operations at window sizes of tens.
    The values are computed with the same float64 operations, in the same order, as the
    vectorised formulas in the comments of :data:`JOB_FEATURES`.
    """

    def __init__(self, sim_config, window: int, max_workers: int):
        c = sim_config.cluster
        self.k = int(window)
        self.max_workers = int(max_workers)
        self.total_gpus = float(c.train_gpus + c.inf_gpus)
        self.train_gpus = float(c.train_gpus)
        self.inf_gpus = float(max(c.inf_gpus, 1))
        self.n_inf = float(max(c.inf_servers, 1))
        self.inf_gpus_per_server = int(c.inf_gpus_per_server)
        self.static: list[list[float]] | None = None
        self._zero_row = [0.0] * F_JOB

    def begin(self, sim: Simulator) -> None:
        """Per-episode tables: constant job features and inverse rates (hours per work unit)."""
        W = float(self.max_workers)
        # constant columns 3..7 (elastic, type_agnostic, g / 8, w_min / W, w_max / W), clipped;
        # rows 0..7 as tuples for a queued job and for a running one (columns 1, 2 = state)
        st = np.zeros((sim.n_jobs, 5), dtype=np.float64)
        st[:, 0] = sim.elastic
        st[:, 1] = sim.type_agnostic
        st[:, 2] = sim.g / 8.0
        st[:, 3] = np.minimum(sim.w_min / W, 1.0)
        st[:, 4] = np.minimum(sim.w_max / W, 1.0)
        self.static = st.tolist()
        self.head_q = [(1.0, 1.0, 0.0, *r) for r in self.static]
        self.head_r = [(1.0, 0.0, 1.0, *r) for r in self.static]
        # hours per unit of predicted work: at w_max on V100, and per worker on each pool
        self.inv_wmax_a = 1.0 / (sim.w_max * sim.speeds[:, TRAIN] * 3600.0)
        self.inv_wmax = self.inv_wmax_a.tolist()
        inv_speed = 1.0 / (sim.speeds * 3600.0)  # (N, 2)
        self.inv_s0 = inv_speed[:, TRAIN].tolist()
        self.inv_s1 = inv_speed[:, INFER].tolist()
        self.w_min = sim.w_min.tolist()
        self.w_min_f = [float(x) for x in self.w_min]
        self.g = sim.g.tolist()
        self.ta = sim.type_agnostic.tolist()
        self.elastic = sim.elastic.tolist()
        self.submit = sim.submit.tolist()
        self.gw_min = (sim.g * sim.w_min).tolist()  # base GPU demand per job
        self.gw_max = (sim.g * sim.w_max).tolist()  # maximum GPU demand per job

    def build(
        self,
        sim: Simulator,
        window,
        q_out,
        r_out,
        fits,
        target=None,
        tentative_free: float | None = None,
        snapshot: tuple[list[int], list[int], list[int], list[int]] | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Return new (jobs, cluster, outside) arrays for the current state.

        ``window``, ``q_out``, ``r_out``: job ids (int arrays or lists); ``fits``: the two
        per-g fit tables of :func:`fit_lists` / :func:`fit_tables`; ``target``: per-slot
        tentative targets (sequential mode) or None for the current workers; ``snapshot``:
        the window's (ids, state, workers, pool) as lists when the caller already has them.
        """
        assert self.static is not None, "call begin(sim) first"
        J = self._jobs(sim, window, fits, target, snapshot)
        nq = sim.n_queued
        if nq:
            gw_min, gw_max = self.gw_min, self.gw_max
            queued = sim.queued_ids()
            qmin = sum([gw_min[j] for j in queued])
            qmax = sum([gw_max[j] for j in queued])
        else:
            qmin = qmax = 0
        C = self._cluster(sim, qmin, qmax, tentative_free)
        now = sim.now
        o = [_sq(len(q_out) / 10.0), _sq(len(r_out) / 10.0), 0.0, 0.0, 0.0, 0.0]
        if len(q_out):
            q = np.asarray(q_out, dtype=np.int64)
            o[2] = _sq(float(sim.g[q] @ sim.w_min[q]) / self.total_gpus)
            o[4] = _sq(max(now - float(sim.submit[q].min()), 0.0) / 3600.0)
            o[5] = _sq(float((sim.pred_remaining[q] * self.inv_wmax_a[q]).min()))
        if len(r_out):
            r = np.asarray(r_out, dtype=np.int64)
            o[3] = min(float(sim.g[r] @ sim.workers[r]) / self.total_gpus, 1.0)
        return J, C, np.array(o, dtype=np.float32)

    def build_indexed(
        self,
        sim: Simulator,
        snapshot: tuple[list[int], list[int], list[int], list[int]],
        out: Outside,
        fits,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`build` (current workers as targets, no tentative grants) from the simulator's
        running aggregates and a :class:`WindowIndex` summary: ``O(window)``, the same values.

        ``snapshot``: the window's (ids, state, workers, pool) lists; ``out``: the summary of
        the jobs outside it (:meth:`WindowIndex.outside`)."""
        assert self.static is not None, "call begin(sim) first"
        wl, stl, wkl, _ = snapshot
        J = self._jobs(sim, np.asarray(wl, dtype=np.int64), fits, None, snapshot)
        C = self._cluster(sim, sim.queued_gpus_min, sim.queued_gpus_max, None)
        now = sim.now
        o = [_sq(out.n_queued / 10.0), _sq(out.n_running / 10.0), 0.0, 0.0, 0.0, 0.0]
        if out.n_queued:
            # the queued base demand outside = all queued minus the window's queued jobs
            gw_min = self.gw_min
            inside = sum([gw_min[j] for j, st in zip(wl, stl) if st != _RUNNING])
            o[2] = _sq(float(sim.queued_gpus_min - inside) / self.total_gpus)
            o[4] = _sq(max(now - self.submit[out.oldest], 0.0) / 3600.0)
            o[5] = _sq(out.min_key)
        if out.n_running:
            g = self.g
            held = sum([g[j] * w for j, st, w in zip(wl, stl, wkl) if st == _RUNNING])
            o[3] = min(float(sim.busy_train_gpus + sim.busy_loan_gpus - held) / self.total_gpus, 1.0)
        return J, C, np.array(o, dtype=np.float32)

    def _jobs(self, sim: Simulator, window, fits, target, snapshot) -> np.ndarray:
        """The ``jobs`` array (:meth:`build`)."""
        n = len(window)
        now = sim.now
        W = float(self.max_workers)
        flat: list[float] = []
        if n:
            w = window if isinstance(window, np.ndarray) else np.asarray(window, dtype=np.int64)
            if snapshot is None:
                wl = w.tolist()
                stl = sim.state[w].tolist()
                wkl = sim.workers[w].tolist()
                pooll = sim.pool[w].tolist()
            else:
                wl, stl, wkl, pooll = snapshot
            prl = sim.pred_remaining[w].tolist()
            pcl = sim.preempt_count[w].tolist()
            ovl = sim.overhead_left[w].tolist()
            tgl = wkl if target is None else [int(x) for x in target[:n]]
            ft, fi = fits
            # fits_now by g, for type-specific and type-agnostic jobs: min(fit / W, 1)
            fit_s = [0.0] * 9
            fit_a = [0.0] * 9
            for gg in (1, 2, 4, 8):
                x = ft[gg] / W
                fit_s[gg] = x if x < 1.0 else 1.0
                x = max(ft[gg], fi[gg]) / W
                fit_a[gg] = x if x < 1.0 else 1.0
            head_q, head_r, inv_wmax, inv_s0, inv_s1 = (
                self.head_q, self.head_r, self.inv_wmax, self.inv_s0, self.inv_s1
            )
            g_l, ta_l, wmin_f, submit = self.g, self.ta, self.w_min_f, self.submit
            ext = flat.extend
            for j, s, wk, p, pr, d, ov, tg in zip(wl, stl, wkl, pooll, prl, pcl, ovl, tgl):
                on_inf = p == INFER
                # squashed x / (1 + x) with x >= 0 is <= 1 already: no clipping needed
                a = pr * inv_wmax[j]  # hours at w_max on V100
                b = pr * (inv_s1[j] if on_inf else inv_s0[j]) / (wk if wk > 0 else wmin_f[j])
                c = (now - submit[j]) / 3600.0  # age, hours
                e = ov / 300.0
                f8 = wk / W
                t15 = f8 if target is None else tg / W
                ext(head_r[j] if s == _RUNNING else head_q[j])
                ext((
                    f8 if f8 < 1.0 else 1.0,
                    1.0 if on_inf else 0.0,
                    a / (1.0 + a),
                    b / (1.0 + b),
                    c / (1.0 + c),
                    d / (1.0 + d) if d else 0.0,
                    e if e < 1.0 else 1.0,
                    t15 if t15 < 1.0 else 1.0,
                    fit_a[g_l[j]] if ta_l[j] else fit_s[g_l[j]],
                ))
        return _f32(flat, self.k * F_JOB).reshape(self.k, F_JOB)

    def _cluster(self, sim: Simulator, qmin: int, qmax: int, tentative_free: float | None) -> np.ndarray:
        """The ``cluster`` array (:meth:`build`); ``qmin``, ``qmax``: the queued GPU demand."""
        now = sim.now
        # cluster features (the kernel's incremental counters, GPUs)
        n_loaned = sim.n_loaned
        loaned_cap = float(n_loaned * self.inf_gpus_per_server)
        loaned_free = loaned_cap - float(sim.busy_loan_gpus)
        train_free = self.train_gpus - float(sim.busy_train_gpus)
        u = sim.loan.utilization(now)
        u_prev = sim.loan.utilization(max(now - 3600.0, 0.0))
        ang = 2.0 * math.pi * ((now / 3600.0) % 24.0) / 24.0
        nq = sim.n_queued
        nr = sim.n_running
        if nq:
            c11 = _sq(qmin / self.total_gpus)
            c12 = _sq(qmax / self.total_gpus)
        else:
            c11 = c12 = 0.0
        if tentative_free is None:
            tentative_free = train_free + loaned_free
        return np.array(
            [
                self.train_gpus / self.total_gpus,
                train_free / max(self.train_gpus, 1.0),
                loaned_cap / self.inf_gpus,
                loaned_free / loaned_cap if loaned_cap > 0 else 0.0,
                min(sim.loanable_now / self.n_inf, 1.0),
                u,
                min(max(0.5 + (u - u_prev) / 2.0, 0.0), 1.0),
                (1.0 + math.sin(ang)) / 2.0,
                (1.0 + math.cos(ang)) / 2.0,
                _sq(nq / 10.0),
                _sq(nr / 10.0),
                c11,
                c12,
                sim.done_count / max(sim.n_jobs, 1),
                min(tentative_free / self.total_gpus, 1.0),
            ],
            dtype=np.float32,
        )
