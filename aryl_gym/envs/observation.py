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

1. queued jobs: the head of the queue (oldest submissions first) and, when the queue does not fit,
   its tail (the newest quarter of the queued slots), both in submit order;
2. running jobs: elastic ones first (they are the ones that can be scaled), then the others,
   each by id.

Running jobs take at most half the window unless the queue is shorter than the other half; queued
jobs fill what the running ones leave. Slots past the active jobs are padding (``valid = 0``).
"""

from __future__ import annotations

import math

import numpy as np

from aryl_gym.sim.engine import Simulator
from aryl_gym.sim.view import INFER

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


def select_window(sim: Simulator, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The window's job ids in the documented order, plus the queued and running ids outside it.

    Returns ``(window, queued_outside, running_outside)``, int64 arrays; ``window`` has at most
    ``k`` entries.
    """
    Q = np.fromiter(sorted(sim._queued), dtype=np.int64, count=len(sim._queued))
    R = sim.running_array()
    nq, nr = len(Q), len(R)
    n_r = min(nr, max(k // 2, k - nq))
    n_q = min(nq, k - n_r)
    if nq > n_q:
        tail = n_q // 4
        head = n_q - tail
        q_in = np.concatenate([Q[:head], Q[nq - tail :]]) if tail else Q[:head]
        q_out = Q[head : nq - tail]
    else:
        q_in, q_out = Q, Q[:0]
    if nr:
        # elastic first, then by id (R is ascending already; stable sort keeps it)
        order = np.argsort(~sim.elastic[R], kind="stable")
        Rs = R[order]
    else:
        Rs = R
    r_in, r_out = Rs[:n_r], Rs[n_r:]
    return np.concatenate([q_in, r_in]), q_out, r_out


_G = np.array([1, 2, 4, 8], dtype=np.int64)


def fit_tables(sim: Simulator) -> tuple[np.ndarray, np.ndarray]:
    """Workers of ``g`` GPUs (indexed by g, 0..8) that fit in the free GPUs of each pool now
    (fragmentation aware: a worker never spans servers)."""
    free = sim.srv_free
    ft = np.zeros(9, dtype=np.int64)
    fi = np.zeros(9, dtype=np.int64)
    ft[_G] = (free[sim._train_mask][:, None] // _G).sum(axis=0)
    fl = free[sim.srv_loaned]
    if len(fl):
        fi[_G] = (fl[:, None] // _G).sum(axis=0)
    return ft, fi


class ObservationBuilder:
    """Builds the observation arrays in preallocated buffers (vectorised over the window).

    Per-job constant features are gathered from a per-episode table (:meth:`begin`), so a step
    costs a fixed, small number of numpy operations whatever the window size.
    """

    def __init__(self, sim_config, window: int, max_workers: int):
        c = sim_config.cluster
        self.k = int(window)
        self.max_workers = int(max_workers)
        self.total_gpus = float(c.train_gpus + c.inf_gpus)
        self.train_gpus = float(c.train_gpus)
        self.inf_gpus = float(max(c.inf_gpus, 1))
        self.n_inf = float(max(c.inf_servers, 1))
        self.jobs = np.zeros((self.k, F_JOB), dtype=np.float32)
        self.cluster = np.zeros(F_CLUSTER, dtype=np.float32)
        self.outside = np.zeros(F_OUTSIDE, dtype=np.float32)
        self.static: np.ndarray | None = None

    def begin(self, sim: Simulator) -> None:
        """Per-episode tables: constant job features and inverse rates (hours per work unit)."""
        W = float(self.max_workers)
        n = sim.n_jobs
        st = np.zeros((n, F_JOB), dtype=np.float64)
        st[:, 0] = 1.0
        st[:, 3] = sim.elastic
        st[:, 4] = sim.type_agnostic
        st[:, 5] = sim.g / 8.0
        st[:, 6] = np.minimum(sim.w_min / W, 1.0)
        st[:, 7] = np.minimum(sim.w_max / W, 1.0)
        self.static = st
        # hours per unit of predicted work: at w_max on V100, and per worker on each pool
        self.inv_wmax = 1.0 / (sim.w_max * sim.speeds[:, 0] * 3600.0)
        self.inv_speed = 1.0 / (sim.speeds * 3600.0)  # (N, 2)
        self.w_min_f = sim.w_min.astype(np.float64)

    def build(
        self,
        sim: Simulator,
        window: np.ndarray,
        q_out: np.ndarray,
        r_out: np.ndarray,
        fits: tuple[np.ndarray, np.ndarray],
        target: np.ndarray | None = None,
        tentative_free: float | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Fill and return copies of (jobs, cluster, outside)."""
        assert self.static is not None, "call begin(sim) first"
        J = self.jobs
        n = len(window)
        now = sim.now
        W = float(self.max_workers)
        if n:
            w = window
            X = self.static[w]  # (n, F) float64, constant columns filled
            st = sim.state[w]
            wk = sim.workers[w]
            pool = sim.pool[w]
            on_inf = pool == INFER
            X[:, 1] = st == 1
            X[:, 2] = st == 2
            X[:, 8] = wk / W
            X[:, 9] = on_inf
            pr = sim.pred_remaining[w]
            X[:, 10] = pr * self.inv_wmax[w]
            w_now = np.where(wk > 0, wk, self.w_min_f[w])
            X[:, 11] = pr * self.inv_speed[w, on_inf.view(np.int8)] / w_now
            X[:, 12] = (now - sim.submit[w]) / 3600.0
            X[:, 13] = sim.preempt_count[w]
            X[:, 14] = sim.overhead_left[w] / 300.0
            X[:, 15] = (wk if target is None else target[:n]) / W
            ft, fi = fits
            g = sim.g[w]
            X[:, 16] = np.where(sim.type_agnostic[w], np.maximum(ft[g], fi[g]), ft[g]) / W
            sq = X[:, 10:14]
            np.divide(sq, 1.0 + sq, out=sq)  # squash times (hours) and counts
            np.minimum(X, 1.0, out=X)  # all features are >= 0 by construction
            J[:n] = X
        J[n:] = 0.0
        C = self.cluster
        n_loaned = int(np.count_nonzero(sim.srv_loaned))
        if hasattr(sim, "busy_train_gpus"):  # the kernel's incremental counters (GPUs)
            loaned_cap = float(n_loaned * sim.config.cluster.inf_gpus_per_server)
            loaned_free = loaned_cap - float(sim.busy_loan_gpus)
            train_free = self.train_gpus - float(sim.busy_train_gpus)
        else:  # pragma: no cover - older kernels
            loaned_cap = float(sim.srv_cap[sim.srv_loaned].sum()) if n_loaned else 0.0
            loaned_free = float(sim.srv_free[sim.srv_loaned].sum()) if n_loaned else 0.0
            train_free = float(sim.srv_free[sim._train_mask].sum())
        C[0] = self.train_gpus / self.total_gpus
        C[1] = train_free / max(self.train_gpus, 1.0)
        C[2] = loaned_cap / self.inf_gpus
        C[3] = loaned_free / loaned_cap if loaned_cap > 0 else 0.0
        C[4] = min(sim.loanable_now / self.n_inf, 1.0)
        u = sim.loan.utilization(now)
        u_prev = sim.loan.utilization(max(now - 3600.0, 0.0))
        C[5] = u
        C[6] = min(max(0.5 + (u - u_prev) / 2.0, 0.0), 1.0)
        ang = 2.0 * math.pi * ((now / 3600.0) % 24.0) / 24.0
        C[7] = (1.0 + math.sin(ang)) / 2.0
        C[8] = (1.0 + math.cos(ang)) / 2.0
        nq = len(sim._queued)
        nr = len(sim._running)
        C[9] = _sq(nq / 10.0)
        C[10] = _sq(nr / 10.0)
        if nq:
            Q = np.fromiter(sim._queued, dtype=np.int64, count=nq)
            gq = sim.g[Q]
            C[11] = _sq(float(gq @ sim.w_min[Q]) / self.total_gpus)
            C[12] = _sq(float(gq @ sim.w_max[Q]) / self.total_gpus)
        else:
            C[11] = C[12] = 0.0
        C[13] = sim.done_count / max(sim.n_jobs, 1)
        if tentative_free is None:
            tentative_free = train_free + loaned_free
        C[14] = min(tentative_free / self.total_gpus, 1.0)
        O = self.outside
        O[0] = _sq(len(q_out) / 10.0)
        O[1] = _sq(len(r_out) / 10.0)
        if len(q_out):
            O[2] = _sq(float(sim.g[q_out] @ sim.w_min[q_out]) / self.total_gpus)
            O[4] = _sq(max(now - float(sim.submit[q_out].min()), 0.0) / 3600.0)
            O[5] = _sq(float((sim.pred_remaining[q_out] * self.inv_wmax[q_out]).min()))
        else:
            O[2] = O[4] = O[5] = 0.0
        O[3] = (
            min(float(sim.g[r_out] @ sim.workers[r_out]) / self.total_gpus, 1.0)
            if len(r_out)
            else 0.0
        )
        return J.copy(), C.copy(), O.copy()
