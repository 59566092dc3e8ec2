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
from aryl_gym.sim.view import INFER, TRAIN

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


class ObservationBuilder:
    """Builds the observation arrays in preallocated buffers (vectorised over the window)."""

    def __init__(self, sim_config, window: int, max_workers: int):  # noqa: ANN001
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

    def build(
        self,
        sim: Simulator,
        window: np.ndarray,
        q_out: np.ndarray,
        r_out: np.ndarray,
        target: np.ndarray | None = None,
        tentative_free: float | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Fill and return copies of (jobs, cluster, outside)."""
        J = self.jobs
        J.fill(0.0)
        n = len(window)
        now = sim.now
        W = float(self.max_workers)
        if n:
            w = window
            st = sim.state[w]
            workers = sim.workers[w].astype(np.float64)
            g = sim.g[w]
            J[:n, 0] = 1.0
            J[:n, 1] = st == 1
            J[:n, 2] = st == 2
            J[:n, 3] = sim.elastic[w]
            J[:n, 4] = sim.type_agnostic[w]
            J[:n, 5] = g / 8.0
            J[:n, 6] = np.minimum(sim.w_min[w] / W, 1.0)
            J[:n, 7] = np.minimum(sim.w_max[w] / W, 1.0)
            J[:n, 8] = np.minimum(workers / W, 1.0)
            J[:n, 9] = sim.pool[w] == INFER
            pr = sim.pred_remaining[w]
            sp_train = sim.speeds[w, TRAIN]
            t_wmax = pr / (sim.w_max[w] * sp_train) / 3600.0
            J[:n, 10] = _sq(t_wmax)
            p = np.where(sim.pool[w] == INFER, INFER, TRAIN)
            sp_now = sim.speeds[w, p]
            w_now = np.where(workers > 0, workers, sim.w_min[w])
            J[:n, 11] = _sq(pr / (w_now * sp_now) / 3600.0)
            J[:n, 12] = _sq(np.maximum(now - sim.submit[w], 0.0) / 3600.0)
            pc = sim.preempt_count[w].astype(np.float64)
            J[:n, 13] = _sq(pc)
            J[:n, 14] = np.minimum(sim.overhead_left[w] / 300.0, 1.0)
            tg = workers if target is None else target[:n]
            J[:n, 15] = np.minimum(tg / W, 1.0)
            # fits now: workers of g that fit in free space per pool (fragmentation aware)
            free = sim.srv_free
            tm = sim._train_mask
            lm = sim.srv_loaned
            fit = np.zeros(n)
            for gg in (1, 2, 4, 8):
                sel = g == gg
                if not sel.any():
                    continue
                ft = int((free[tm] // gg).sum())
                fi = int((free[lm] // gg).sum()) if lm.any() else 0
                fit[sel] = np.where(sim.type_agnostic[w[sel]], max(ft, fi), ft)
            J[:n, 16] = np.minimum(fit / W, 1.0)
        C = self.cluster
        tm = sim._train_mask
        lm = sim.srv_loaned
        C[0] = self.train_gpus / self.total_gpus
        C[1] = sim.srv_free[tm].sum() / max(self.train_gpus, 1.0)
        loaned_cap = float(sim.srv_cap[lm].sum())
        C[2] = loaned_cap / self.inf_gpus
        C[3] = sim.srv_free[lm].sum() / loaned_cap if loaned_cap > 0 else 0.0
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
            C[11] = _sq(float((gq * sim.w_min[Q]).sum()) / self.total_gpus)
            C[12] = _sq(float((gq * sim.w_max[Q]).sum()) / self.total_gpus)
        else:
            C[11] = C[12] = 0.0
        C[13] = sim.done_count / max(sim.n_jobs, 1)
        if tentative_free is None:
            tentative_free = float(sim.srv_free[tm].sum() + sim.srv_free[lm].sum())
        C[14] = min(tentative_free / self.total_gpus, 1.0)
        O = self.outside
        O[0] = _sq(len(q_out) / 10.0)
        O[1] = _sq(len(r_out) / 10.0)
        if len(q_out):
            O[2] = _sq(float((sim.g[q_out] * sim.w_min[q_out]).sum()) / self.total_gpus)
            O[4] = _sq(max(now - float(sim.submit[q_out].min()), 0.0) / 3600.0)
            t = sim.pred_remaining[q_out] / (sim.w_max[q_out] * sim.speeds[q_out, TRAIN])
            O[5] = _sq(float(t.min()) / 3600.0)
        else:
            O[2] = O[4] = O[5] = 0.0
        O[3] = (
            min(float((sim.g[r_out] * sim.workers[r_out]).sum()) / self.total_gpus, 1.0)
            if len(r_out)
            else 0.0
        )
        return J.copy(), C.copy(), O.copy()
