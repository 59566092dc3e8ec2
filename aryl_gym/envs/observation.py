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
"""

from __future__ import annotations

import math
import struct

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


def window_lists(
    sim: Simulator, k: int, elastic, base_rates: list[float] | None = None
) -> tuple[list[int], list[int], list[int]]:
    """:func:`select_window` on plain lists (the env's hot path; K is small, so plain Python
    beats numpy here). ``elastic`` is indexable by job id (a list is fastest).

    ``base_rates`` (``window_order="pred_time"``): per job, the work rate at its base demand on
    the training pool (:func:`base_rates`); queued jobs are then ranked by predicted running time
    ``pred_remaining / rate`` (the same float division as ``ClusterView.pred_time``), shortest
    first, ties by id, and the window holds the shortest ones (no tail)."""
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
    sim: Simulator, k: int, order: str = "submit"
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The window's job ids in the documented order, plus the queued and running ids outside it.

    Returns ``(window, queued_outside, running_outside)``, int64 arrays; ``window`` has at most
    ``k`` entries. ``order``: ``"submit"`` or ``"pred_time"`` (see the module docstring).
    """
    rates = base_rates(sim) if order == "pred_time" else None
    w, qo, ro = window_lists(sim, k, sim.elastic, rates)
    return (
        np.array(w, dtype=np.int64),
        np.array(qo, dtype=np.int64),
        np.array(ro, dtype=np.int64),
    )


_G = np.array([1, 2, 4, 8], dtype=np.int64)
#: Above this many servers :func:`fit_lists` uses numpy instead of a Python loop.
_PY_SERVERS = 64


def fit_lists(sim: Simulator) -> tuple[list[int], list[int]]:
    """:func:`fit_tables` as two lists of 9 ints (indexed by g); plain Python on small clusters.

    Training servers come first in the server arrays (ids ``0 .. n_train - 1``)."""
    S = sim.n_servers
    if S > _PY_SERVERS:
        ft_np, fi_np = fit_tables(sim)
        return ft_np.tolist(), fi_np.tolist()
    free = sim.srv_free.tolist()
    pool = sim.srv_pool.tolist()
    a1 = a2 = a4 = a8 = 0
    for s in range(S):
        if pool[s] == TRAIN:
            f = free[s]
            a1 += f
            a2 += f >> 1
            a4 += f >> 2
            a8 += f >> 3
    ft = [0, a1, a2, 0, a4, 0, 0, 0, a8]
    if sim.n_loaned:
        loaned = sim.srv_loaned.tolist()
        a1 = a2 = a4 = a8 = 0
        for s in range(S):
            if loaned[s]:
                f = free[s]
                a1 += f
                a2 += f >> 1
                a4 += f >> 2
                a8 += f >> 3
        fi = [0, a1, a2, 0, a4, 0, 0, 0, a8]
    else:
        fi = [0] * 9
    return ft, fi


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
        J = _f32(flat, self.k * F_JOB).reshape(self.k, F_JOB)
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
            gw_min, gw_max = self.gw_min, self.gw_max
            queued = sim.queued_ids()
            c11 = _sq(sum([gw_min[j] for j in queued]) / self.total_gpus)
            c12 = _sq(sum([gw_max[j] for j in queued]) / self.total_gpus)
        else:
            c11 = c12 = 0.0
        if tentative_free is None:
            tentative_free = train_free + loaned_free
        C = np.array(
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
