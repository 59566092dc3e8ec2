"""A reclaim event as dense arrays, its state after some picks, and the servers' features.

:class:`ReclaimState` holds one reclaim event (a :class:`~aryl_gym.reclaim_snapshots.Snapshot`)
as a servers x jobs matrix of workers and keeps, pick after pick, the workers each job has lost
and the jobs already preempted. From them it computes, vectorised, what the reclaim env's
snapshot mode observes:

* :meth:`ReclaimState.features_v0` -- the env's ``servers`` rows
  (:data:`aryl_gym.envs.reclaim.SERVER_FEATURES`, the same values the env always gave);
* :meth:`ReclaimState.features_v1` -- ``servers_v1`` (:data:`SERVER_FEATURES_V1`): what taking
  each server now would do, one and two steps ahead (jobs it preempts, servers it frees, GPUs
  lost, ...) and a *lookahead*: the jobs preempted by taking it and then the cheapest other
  servers, counting those it frees as free (:meth:`ReclaimState.lookahead`); and :meth:`ReclaimState.context_v1` -- ``reclaim_v1`` (:data:`CONTEXT_FEATURES_V1`),
  the event's state as a whole. Every value lies in [0, 1] and none depends on the padding width
  of the env's action space, so a policy reading them serves any number of servers.

The rule of preemption is the simulator's (:func:`aryl_gym.agents.reclaim.reclaim_preemptions`):
a job with workers on the returned servers is preempted unless it is elastic and keeps at least
``w_min`` workers. With ``slack_j = workers_j - w_min_j`` for an elastic job (0 otherwise) and
``R_j`` its workers on the servers picked so far, taking server ``s`` newly preempts the live jobs
``j`` on it with ``R_j + k_sj > slack_j``.

No torch here: the env and the learned reclaim agent's inference use it as it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

#: ``servers_v1`` columns (observation ``"v1"`` of ``ArylReclaim``); each in [0, 1]
SERVER_FEATURES_V1: tuple[str, ...] = (
    "cost",  # jobs newly preempted if this server were taken now / 8, clipped
    "cost_zero",  # 1 when taking it now preempts nothing
    "cost_one",  # 1 when taking it now preempts exactly one job
    "freed",  # other servers that would then preempt nothing more (they preempt 1 now) / 8, clipped
    "freed_rel",  # the same / picks still to make, clipped
    "ratio",  # cost / (1 + freed) / 8, clipped: preemptions per server it opens up
    "shared",  # other candidate servers on which the jobs it preempts would also be preempted / 16
    "span",  # mean over the jobs it preempts of the candidate servers they sit on / 8
    "lost",  # GPUs training would lose (scale-in + preempted jobs' loaned GPUs) / 64, clipped
    "dead",  # GPUs of already-preempted jobs on it / capacity
    "killed",  # GPUs of the jobs it would newly preempt, on it / capacity
    "fragile",  # surviving elastic jobs on it left with no slack after taking it / 8
    "cost_rank",  # share of candidate servers with a lower cost
    "ratio_rank",  # share of candidate servers with a lower ratio
    "freed_rank",  # share of candidate servers with more servers freed
    "look",  # lookahead: jobs preempted by taking it and then the cheapest other picks / (8 x picks to make)
    "look_gap",  # its lookahead minus the best candidate's / 8, clipped
    "look_rank",  # share of candidate servers with a lower lookahead
)
F_SERVER_V1 = len(SERVER_FEATURES_V1)

#: ``reclaim_v1`` entries (observation ``"v1"``); each in [0, 1]
CONTEXT_FEATURES_V1: tuple[str, ...] = (
    "to_pick",  # picks still to make / loaned servers of the event
    "picked",  # picks made / loaned servers
    "size",  # loaned servers / 256, clipped
    "zero_cover",  # candidate servers preempting nothing now / picks still to make, clipped
    "zero_share",  # candidate servers preempting nothing now / candidates
    "one_share",  # candidate servers preempting one job now / candidates
    "cost_mean",  # mean cost of the candidates / 8, clipped
    "need_share",  # picks still to make / candidates
    "dead_share",  # jobs already preempted / jobs on the loaned servers
    "elastic_share",  # elastic jobs / jobs on the loaned servers
    "look_min",  # the best candidate's lookahead / (8 x picks to make)
)
F_CONTEXT_V1 = len(CONTEXT_FEATURES_V1)


class ReclaimState:
    """One reclaim event and the picks made so far, as arrays (module docstring).

    Args:
        inst: the event's :class:`~aryl_gym.agents.reclaim.ReclaimInstance`.
        n: servers to return.
        caps: GPUs per loaned server in ``sorted(inst.loaned)`` order (default 8 each).

    Slots are the loaned servers sorted by id (the env's action slots ``0..L-1``). The
    server-job incidence is kept as an edge list (one entry per job with workers on a server),
    so every feature costs O(edges): about 0.1 ms at 200 servers.
    """

    def __init__(self, inst: Any, n: int, caps: Sequence[int] | None = None):
        self.inst = inst
        self.n = int(n)
        self.servers: list[int] = sorted(int(s) for s in inst.loaned)
        L = self.L = len(self.servers)
        if not 0 <= self.n <= L:
            raise ValueError(f"cannot reclaim {self.n} of {L} loaned servers")
        self.jobs: list[int] = inst.jobs()
        col = {j: c for c, j in enumerate(self.jobs)}
        self.J = len(self.jobs)
        es: list[int] = []
        ej: list[int] = []
        ek: list[int] = []
        ef: list[int] = []
        off = [0]
        for r, s in enumerate(self.servers):
            fl = inst.srv_flex.get(s, {})
            for j, k in sorted(inst.srv_jobs.get(s, {}).items()):
                if k <= 0:
                    continue
                es.append(r)
                ej.append(col[j])
                ek.append(int(k))
                ef.append(int(fl.get(j, 0)))
            off.append(len(es))
        #: edges: server slot, job column, workers, flexible workers (sorted by slot)
        self.e_s = np.array(es, dtype=np.int64)
        self.e_j = np.array(ej, dtype=np.int64)
        self.e_k = np.array(ek, dtype=np.int64)
        self.off = np.array(off, dtype=np.int64)
        g = np.array([inst.g.get(j, 1) for j in self.jobs], dtype=np.int64)
        self.g = g
        el = np.array([bool(inst.elastic.get(j, False)) for j in self.jobs], dtype=bool)
        self.elastic = el
        wk = np.array([inst.workers[j] for j in self.jobs], dtype=np.int64)
        wmin = np.array([inst.w_min[j] for j in self.jobs], dtype=np.int64)
        #: workers a job can lose and live (0 for inelastic jobs: any loss preempts them)
        self.slack = np.where(el, np.maximum(wk - wmin, 0), 0)
        #: workers of each job on loaned servers
        self.a = np.bincount(self.e_j, weights=self.e_k, minlength=self.J).astype(np.int64)
        caps_ = list(caps) if caps is not None and len(caps) == L else [8] * L
        self.cap = np.maximum(np.array(caps_, dtype=np.float64), 1.0)
        e_g = g[self.e_j] * self.e_k if len(es) else np.zeros(0, dtype=np.int64)
        self.e_gpus = e_g.astype(np.float64)  # GPUs of each edge
        self.busy_gpus = np.bincount(self.e_s, weights=self.e_gpus, minlength=L)
        self.flex_gpus = np.bincount(
            self.e_s, weights=(g[self.e_j] * np.array(ef, dtype=np.int64)).astype(np.float64), minlength=L
        ) if len(es) else np.zeros(L)
        self.njobs = np.bincount(self.e_s, minlength=L)
        self.e_slack = self.slack[self.e_j]
        self.e_elastic = self.elastic[self.e_j]
        self.e_loaned_gpus = (g * self.a).astype(np.float64)[self.e_j]  # whole loaned GPUs of the job
        self.picked = np.zeros(L, dtype=bool)
        self.removed = np.zeros(self.J, dtype=np.int64)
        self.dead = np.zeros(self.J, dtype=bool)
        self.picks: list[int] = []  # slots, in order
        self.preempted = 0
        self._kills: np.ndarray | None = None
        # the static part of features_v0 (columns 1 and 6 change with the picks)
        S0 = np.zeros((L, 8), dtype=np.float32)
        if L:
            S0[:, 0] = 1.0
            S0[:, 2] = self.busy_gpus / self.cap
            S0[:, 3] = (self.busy_gpus - self.flex_gpus) / self.cap
            S0[:, 4] = self.flex_gpus / self.cap
            S0[:, 5] = np.minimum(self.njobs / 8.0, 1.0)
            S0[:, 7] = self.busy_gpus == self.flex_gpus
        self._v0 = np.clip(S0, 0.0, 1.0)
        self._elastic_share = float(el.mean()) if self.J else 0.0

    @classmethod
    def from_snapshot(cls, snap: Any) -> ReclaimState:
        return cls(snap.inst, snap.n, snap.cap)

    # ------------------------------------------------------------------------------------------
    @property
    def to_pick(self) -> int:
        return max(self.n - len(self.picks), 0)

    @property
    def done(self) -> bool:
        return len(self.picks) >= self.n

    def mask(self) -> np.ndarray:
        """Slots that may be picked now: loaned and not picked yet."""
        return ~self.picked

    def edge_kills(self) -> np.ndarray:
        """(edges,) bool: the edge's job would be newly preempted if its server were taken now
        (False on picked servers)."""
        if self._kills is None:
            self._kills = (
                ~self.dead[self.e_j]
                & (self.removed[self.e_j] + self.e_k > self.e_slack)
                & ~self.picked[self.e_s]
            )
        return self._kills

    def costs(self) -> np.ndarray:
        """(L,) jobs each slot would newly preempt if taken now (0 for picked slots)."""
        return np.bincount(self.e_s, weights=self.edge_kills(), minlength=self.L)

    def pick(self, slot: int) -> int:
        """Take slot ``slot``; returns the jobs it newly preempts. ValueError when not allowed."""
        slot = int(slot)
        if not 0 <= slot < self.L or self.picked[slot]:
            raise ValueError(f"slot {slot} cannot be picked (out of range or already picked)")
        a, b = self.off[slot], self.off[slot + 1]
        js = self.e_j[a:b]
        self.removed[js] += self.e_k[a:b]
        newly = ~self.dead[js] & (self.removed[js] > self.slack[js])
        self.dead[js[newly]] = True
        self.picked[slot] = True
        self.picks.append(slot)
        self._kills = None
        k = int(newly.sum())
        self.preempted += k
        return k

    def picked_servers(self) -> list[int]:
        return [self.servers[i] for i in self.picks]

    # ------------------------------------------------------------------------------------------
    def features_v0(self) -> np.ndarray:
        """(L, 8) float32: the env's ``servers`` rows (:data:`~aryl_gym.envs.reclaim.SERVER_FEATURES`)."""
        S = self._v0.copy()
        S[:, 1] = self.picked
        S[:, 6] = np.minimum(self.costs() * 0.125, 1.0)
        return S

    def features_v1(self) -> tuple[np.ndarray, np.ndarray]:
        """``(servers_v1 (L, F_SERVER_V1), reclaim_v1 (F_CONTEXT_V1,))``, float32 in [0, 1]
        (:data:`SERVER_FEATURES_V1`, :data:`CONTEXT_FEATURES_V1`); rows of picked slots are 0."""
        L, J = self.L, self.J
        C = np.zeros(F_CONTEXT_V1, dtype=np.float32)
        if L == 0:
            return np.zeros((0, F_SERVER_V1), dtype=np.float32), C
        es, ej = self.e_s, self.e_j
        cand = ~self.picked
        nc = L - len(self.picks)
        m = self.to_pick
        kill = self.edge_kills()
        kf = kill.astype(np.float64)
        cost = np.bincount(es, weights=kf, minlength=L)
        one = cand & (cost == 1)
        cand_e = cand[es]
        # per job: candidates that would preempt it (col), candidates that would preempt only it
        # (single: freed once it is preempted), candidates holding it (on_cand)
        col = np.bincount(ej, weights=kf, minlength=J)
        single = np.bincount(ej, weights=kf * one[es], minlength=J)
        on_cand = np.bincount(ej, weights=cand_e, minlength=J)
        freed = np.bincount(es, weights=kf * single[ej], minlength=L) - one
        shared = np.bincount(es, weights=kf * col[ej], minlength=L) - cost
        span = np.bincount(es, weights=kf * on_cand[ej], minlength=L) / np.maximum(cost, 1.0)
        dead_e = self.dead[ej]
        surv = cand_e & ~dead_e & ~kill
        lost = np.bincount(es, weights=np.where(kill, self.e_loaned_gpus, surv * self.e_gpus), minlength=L)
        dead_g = np.bincount(es, weights=dead_e * self.e_gpus, minlength=L)
        killed_g = np.bincount(es, weights=kf * self.e_gpus, minlength=L)
        fr = surv & self.e_elastic & (self.removed[ej] + self.e_k == self.e_slack)
        fragile = np.bincount(es, weights=fr, minlength=L)
        ratio = cost / (1.0 + freed)
        look = self.lookahead(cost, freed, cand, m)
        look_min = float(look[cand].min()) if nc else 0.0
        X = np.empty((F_SERVER_V1, L), dtype=np.float64)
        X[0] = cost
        X[1] = cost == 0
        X[2] = cost == 1
        X[3] = freed
        X[4] = freed / max(m, 1)
        X[5] = ratio
        X[6] = shared
        X[7] = span
        X[8] = lost
        X[9] = dead_g / self.cap * 8.0
        X[10] = killed_g / self.cap * 8.0
        X[11] = fragile
        X[12] = _int_rank_below(cost, cand, nc)
        X[13] = _rank_below_cand(ratio, cand, nc)
        X[14] = _int_rank_below(freed.max() - freed, cand, nc)  # more freed ranks lower
        X[15] = look / max(m, 1)
        X[16] = look - look_min
        X[17] = _int_rank_below(look, cand, nc)
        X *= _SCALE_V1[:, None]
        np.minimum(X, 1.0, out=X)
        X[:, self.picked] = 0.0
        S = X.T.astype(np.float32)
        c_cand = cost[cand]
        zero = int(np.count_nonzero(c_cand == 0))
        C[0] = m / L
        C[1] = len(self.picks) / L
        C[2] = min(L / 256.0, 1.0)
        C[3] = min(zero / max(m, 1), 1.0)
        if nc:
            C[4] = zero / nc
            C[5] = int(np.count_nonzero(c_cand == 1)) / nc
            C[6] = min(float(c_cand.sum()) / nc / 8.0, 1.0)
            C[7] = min(m / nc, 1.0)
        if J:
            C[8] = np.count_nonzero(self.dead) / J
            C[9] = self._elastic_share
        C[10] = min(look_min / max(m, 1) / 8.0, 1.0)
        return S, C

    def lookahead(self, cost: np.ndarray, freed: np.ndarray, cand: np.ndarray, m: int) -> np.ndarray:
        """(L,) for each candidate ``s``: its cost plus the ``m - 1`` smallest costs of the
        other candidates, where the ``freed[s]`` candidates that preempt only jobs ``s``
        preempts count 0 (an estimate of the event's remaining preemptions if ``s`` goes
        first; interactions beyond that are ignored). Vectorised over ``s`` with the sorted
        costs of the candidates."""
        k = m - 1
        if k <= 0:
            return cost.copy()
        c_cand = cost[cand]
        z0 = int(np.count_nonzero(c_cand == 0))
        o0 = int(np.count_nonzero(c_cand == 1))
        high = np.sort(c_cand[c_cand >= 2])
        ph = np.concatenate([[0.0], np.cumsum(high)])
        nh = len(high)
        z = z0 + freed - (cost == 0)  # zero-cost others once s is taken
        o = o0 - freed - (cost == 1)  # one-cost others left
        take1 = np.minimum(o, np.maximum(k - z, 0))
        r = np.maximum(k - z - o, 0).astype(np.int64)  # picks among the costs >= 2
        is_high = cost >= 2
        pos = np.searchsorted(high, cost, side="left")
        without_s = is_high & (pos < r)
        rest = np.where(without_s, ph[np.minimum(r + 1, nh)] - cost, ph[np.minimum(r, nh)])
        return cost + take1 + rest



#: the 1/scale of each ``servers_v1`` column (rows of X before the clip to 1)
_SCALE_V1 = np.array(
    [1 / 8, 1, 1, 1 / 8, 1, 1 / 8, 1 / 16, 1 / 8, 1 / 64, 1 / 8, 1 / 8, 1 / 8, 1, 1, 1, 1 / 8, 1 / 8, 1],
    dtype=np.float64,
)


def _int_rank_below(x: np.ndarray, cand: np.ndarray, nc: int) -> np.ndarray:
    """For each entry of the non-negative integer-valued ``x``: the share of the ``nc``
    candidates (``cand``) strictly below it (0 when there is at most one candidate)."""
    if nc <= 1:
        return np.zeros(len(x))
    xi = x.astype(np.int64)
    cnt = np.bincount(xi[cand], minlength=int(xi.max()) + 1)
    below = cnt.cumsum()
    below -= cnt
    return below[xi] * (1.0 / (nc - 1))


def _rank_below_cand(x: np.ndarray, cand: np.ndarray, nc: int) -> np.ndarray:
    """As :func:`_int_rank_below` for any real ``x``."""
    if nc <= 1:
        return np.zeros(len(x))
    srt = x[cand]
    srt.sort()
    return srt.searchsorted(x, side="left") * (1.0 / (nc - 1))


__all__ = [
    "CONTEXT_FEATURES_V1",
    "F_CONTEXT_V1",
    "F_SERVER_V1",
    "ReclaimState",
    "SERVER_FEATURES_V1",
]
