"""AFS-style scheduler: AFS-L from Hwang et al., "Elastic Resource Sharing for Distributed Deep
Learning" (NSDI '21), section 3 ("Apathetic Future Share") and its AFS-L algorithm.

The rule (paper section 3.3, Algorithm "AFS-L"): GPUs are handed out one at a time. For each
GPU, a winner is found by comparing jobs pairwise (a running tournament over the job list).
For a pair, let ``a`` be the job with the shorter remaining time at its current tentative share
``x`` (``T = remaining work / P(x)``) and ``b`` the other one, at share ``y``. The GPU goes to
``a`` iff

    (P_a(x+1) - P_a(x)) / P_a(x)  >  (P_b(y+1) - P_b(y)) / P_b(y+1)

else to ``b``. ``P`` is the job's throughput. The left side is the short job's relative speed-up;
the right side is the long job's, measured against its *new* rate: AFS assumes the long job
keeps only the share it has now when the short one finishes (it is "apathetic" to the future
share it would inherit, which greedy rules over-count). With two jobs and that assumption the
rule is exactly "give the GPU to whichever choice minimises the sum of the two JCTs"
(``T_a' + T_b`` vs ``T_a + T_b'`` with ``b`` continuing at ``P_b(y+1)`` after ``a`` ends).
When both jobs have no share yet, the one that would finish sooner with the GPU wins (SRTF
between newcomers). Length thus enters through which job counts as ``a``, and resource
efficiency through the relative gains: this is the balance the paper argues SRTF lacks.

The tournament is the paper's: the incumbent is compared with each job of the list in turn and
replaced when the challenger wins. The pairwise rule is not transitive (three jobs can beat
each other in a cycle, even with linear throughput), so the winner depends on the list order;
ours is running jobs by id, then queued jobs by id, and we keep that scan exactly.

**The variants** (World v2; docs/baselines.md, "AFS"). The Aryl paper (section 7.4): "AFS
assumes unbounded elasticity and shows a higher resource usage ... unlimited elasticity and
greedy allocation implicitly favor jobs with better throughput at the cost of others."

* ``afs`` (``elasticity="elastic"``): the paper's unbounded AFS. Elastic jobs compete for
  workers from ``w_min`` up to the hard parallelism ceiling ``w_ceil``, valued with the *true*
  throughput (``view.rate``: linear up to ``w_max``, the goodput curve of
  :mod:`aryl_gym.sim.goodput` beyond it, at the job's progress now; AFS-L assumes known
  throughput). Inelastic jobs keep their request: the elastic families are the ones a
  framework can resize. The reproduction's headline row.
* ``afs-all`` (``elasticity="all"``): every job may run on 1 to ``w_ceil`` workers and be
  resized while it runs (the reading "unbounded elasticity" covers every job).
* ``afs-bounded`` (``elasticity="limited"``): each job inside its own ``[w_min, w_max]``; the
  World v1 ``afs``, decision for decision.
* ``afs-loan``: ``afs`` that accepts loaned inference servers (unbounded like ``afs``).

Adaptations to our job model [ours, documented]:

* **Workers, not GPUs.** A step gives one *worker* (``g`` GPUs on one server) and a job's first
  step gives its base demand (``w_min``; ``afs-all``: one worker; an inelastic job's only step
  is all of ``w_max`` except in ``afs-all``). The relative gains are divided by the GPUs the
  step costs, so the comparison is per GPU as in the paper (a 4-GPU worker must beat four 1-GPU
  steps). With linear throughput, ``P(x) = x * speed``, the rule reads: the shorter job wins iff
  its GPUs are fewer than the longer job's GPUs after the step.
* **Range.** A job stops competing at the top of the range the engine enforces for the
  policy's ``elasticity`` (``w_max``, or ``w_ceil``); a step that cannot be placed (trial
  best-fit on a copy of the free GPUs, fragmentation included) drops the job from this round.
* **Throughput peak** (unbounded variants only). Past ``w_max`` the true goodput can fall with
  more GPUs (cross-server all-reduce, larger global batch early in training). A job stops
  competing at the first step that would not raise its throughput (``P(x+1) <= P(x)``): such a
  step has a zero or negative gain, so under AFS-L it loses to every job that gains, and we do
  not hand out GPUs that make a job slower when nobody gains. ``afs-bounded`` has no such stop.
* **Preemption.** AFS re-shares every round. By default running jobs keep their base
  allocation (``w_min``; ``afs-all``: one worker; re-sharing happens through their other
  workers, which costs only a scale-in, not a relaunch); ``preempt=True`` lets AFS-L recompute
  every share from zero.
* **Throughput** ``P`` is the simulator's rate (``view.rate``) and remaining work is the
  *predicted* remaining work (AFS uses job-length estimates).
* **Pools.** ``afs``, ``afs-all`` and ``afs-bounded`` do not loan inference servers
  (``uses_loaning`` False), matching the Aryl paper's scheduling comparison in the Basic
  scenario without loaning (section 7.4). ``afs-loan`` accepts loans: type-agnostic jobs may
  then start on loaned servers (each job's workers stay in one pool).

**Speed** [ours]. The paper's AFS-L runs a tournament over every job for every GPU: O(GPUs x
jobs) comparisons a round, far too slow at 3,584 GPUs with a thousand queued jobs and unbounded
growth. :meth:`AfsPolicy.decide` computes the same decisions faster (``fast=False`` runs the
plain loop, kept as the reference; tests check they agree):

* the incumbents of the last scan are kept (the "chain"); after a step changes one job at list
  position ``q``, the scan restarts at ``q`` from the incumbent it had there, and each next
  incumbent is found by one vectorised comparison of the rest of the list (numpy);
* a job that keeps winning gets its consecutive steps in one placement (the engine's best fit
  places k workers exactly as k single workers);
* the trial placement is :class:`_FreeGpus`, the engine's best fit on servers kept in buckets by
  free GPUs (equal to ``Scratch.grow`` worker by worker);
* the round stops as soon as no remaining candidate's next step fits anywhere (free GPUs only
  shrink during a round, so every later step would fail and change nothing);
* throughputs are cached for the round.

Measured CPU per episode (docs/baselines.md): production seed 0, the World v1 loop 161 s,
``afs-bounded`` 21 s, ``afs`` 22 s, ``afs-all`` 65 s; production-ideal seed 0, ``afs`` 70 s.
"""

from __future__ import annotations

import math
from bisect import insort
from collections.abc import Callable

import numpy as np
from aryl_gym.agents._alloc import fit_targets
from aryl_gym.agents.base import BasePolicy, register

from aryl_gym.sim.jobs import JobState
from aryl_gym.sim.placement import Scratch, pool_order
from aryl_gym.sim.view import INFER, TRAIN, ClusterView, Decision, PlacementOptions

_EPS = 1e-12
_INF = math.inf
#: scans of at most this many list positions run in plain Python (numpy has a fixed cost)
_SHORT = 24
#: the ``elasticity`` modes (:meth:`aryl_gym.sim.engine.Simulator.set_elasticity`)
ELASTICITY = ("limited", "elastic", "all")

RateFn = Callable[[int, int, int], float]


class _FreeGpus:
    """The free GPUs of each pool's usable servers, for the fast tournament's trial placement.

    Places workers exactly as the engine's best fit (:func:`aryl_gym.sim.placement.best_fit`,
    :func:`~aryl_gym.sim.placement.fill`): on the non-empty server with the least free GPUs
    that fits (lowest id on ties), else on the lowest-id empty one; ``k`` workers of one job go
    onto a server as many as fit there. Servers are kept in buckets by free GPUs, so a worker
    costs a few list operations instead of numpy scans of every server. Only free GPUs are
    tracked (AFS's placement options: no flexible grouping, no heterogeneous spill).
    """

    __slots__ = ("free", "cap", "nonempty", "empty", "count", "_fits")

    def __init__(self, trial: Scratch):
        self.free: list[int] = trial.srv_free.tolist()
        self.cap: list[int] = trial.srv_cap.tolist()
        self.nonempty: dict[int, list[list[int]]] = {}  # pool -> free GPUs -> server ids
        self.empty: dict[int, list[int]] = {}  # pool -> ids of servers with nothing on them
        self.count: dict[int, list[int]] = {}  # pool -> free GPUs -> servers
        self._fits: dict[tuple[int, int], int] = {}
        for p in (TRAIN, INFER):
            ids = np.flatnonzero(trial.usable_mask(p)).tolist()
            top = max((self.cap[s] for s in ids), default=0)
            ne: list[list[int]] = [[] for _ in range(top + 1)]
            em: list[int] = []
            cnt = [0] * (top + 1)
            for s in ids:
                f = self.free[s]
                cnt[f] += 1
                (ne[f] if f < self.cap[s] else em).append(s)
            self.nonempty[p], self.empty[p], self.count[p] = ne, em, cnt

    def fits(self, p: int, g: int) -> int:
        """Workers of ``g`` GPUs that fit in pool ``p`` now (as ``Scratch.fits``)."""
        n = self._fits.get((p, g))
        if n is None:
            n = self._fits[(p, g)] = sum(c * (f // g) for f, c in enumerate(self.count[p]) if c)
        return n

    def _best_fit(self, p: int, g: int) -> int:
        ne = self.nonempty[p]
        for f in range(g, len(ne)):
            if ne[f]:
                return ne[f][0]
        for s in self.empty[p]:
            if self.cap[s] >= g:
                return s
        return -1

    def fill(self, p: int, g: int, need: int) -> int:
        """Place up to ``need`` workers of ``g`` GPUs in pool ``p``; how many were placed."""
        placed = 0
        ne, em, cnt = self.nonempty[p], self.empty[p], self.count[p]
        while need > 0:
            s = self._best_fit(p, g)
            if s < 0:
                break
            f = self.free[s]
            k = min(need, f // g)
            nf = f - k * g
            if f < self.cap[s]:
                ne[f].remove(s)
            else:
                em.remove(s)
            insort(ne[nf], s)  # nf < cap: the server is not empty any more
            cnt[f] -= 1
            cnt[nf] += 1
            self.free[s] = nf
            placed += k
            need -= k
        if placed:
            self._fits.clear()
        return placed

    def grow(self, p: int, g: int, k: int, whole: bool) -> int:
        """``Scratch.grow`` for a job of ``g`` GPUs per worker: ``k`` workers (``whole``: all or
        none, as a newcomer's base demand)."""
        if whole and self.fits(p, g) < k:
            return 0
        return self.fill(p, g, k)


class AfsPolicy(BasePolicy):
    """AFS-L over worker steps (see the module docstring).

    Args:
        uses_loaning: accept loaned inference servers.
        preempt: recompute every share from zero each round (default: running jobs keep their
            base demand).
        name: registry name.
        elasticity: ``"elastic"`` (the paper's unbounded AFS: elastic jobs up to ``w_ceil``),
            ``"all"`` (every job 1 to ``w_ceil``) or ``"limited"`` (each job's own range).
        stop_at_peak: a job stops competing at a step that does not raise its throughput
            (default: on for the unbounded modes, off for ``"limited"``).
        fast: the fast tournament (default) or the plain reference loop (same decisions).
    """

    event_driven = True

    def __init__(
        self,
        uses_loaning: bool = False,
        preempt: bool = False,
        name: str = "afs",
        elasticity: str = "elastic",
        stop_at_peak: bool | None = None,
        fast: bool = True,
    ):
        if elasticity not in ELASTICITY:
            raise ValueError(
                f"elasticity must be one of {', '.join(ELASTICITY)}, got {elasticity!r}"
            )
        self.uses_loaning = uses_loaning
        self.preempt = preempt
        self.name = name
        self.elasticity = elasticity
        self.stop_at_peak = elasticity != "limited" if stop_at_peak is None else bool(stop_at_peak)
        self.fast = fast
        self.placement = PlacementOptions(elastic_prefer_inference=True, group_flexible=False)

    # -- the pairwise rule ----------------------------------------------------------------------
    @staticmethod
    def prefer(
        rem_a: float,
        p_a: tuple[float, float],
        cost_a: int,
        rem_b: float,
        p_b: tuple[float, float],
        cost_b: int,
    ) -> bool:
        """True when the next step goes to job A rather than job B (AFS-L pairwise rule).

        ``p_* = (throughput now, throughput after the step)``, ``rem_*`` remaining work,
        ``cost_*`` GPUs the step takes. Ties go to B (the paper's strict ``>``).
        """
        t_a = rem_a / p_a[0] if p_a[0] > 0 else math.inf
        t_b = rem_b / p_b[0] if p_b[0] > 0 else math.inf
        if t_a > t_b or (t_a == t_b and math.isinf(t_a) and rem_a / p_a[1] > rem_b / p_b[1]):
            return not AfsPolicy.prefer(rem_b, p_b, cost_b, rem_a, p_a, cost_a)
        # A is the shorter job (a), B the longer (b).
        if p_a[0] <= 0:  # both have no share: the one that finishes sooner with the step
            return rem_a / p_a[1] < rem_b / p_b[1]
        gain_a = (p_a[1] - p_a[0]) / p_a[0] / cost_a
        gain_b = (p_b[1] - p_b[0]) / max(p_b[1], _EPS) / cost_b
        return gain_a > gain_b

    # -- a round ---------------------------------------------------------------------------------
    def decide(self, view: ClusterView) -> Decision:
        trial = Scratch(view, self.placement)
        lo, hi, res = trial.lim_lo_list, trial.lim_hi_list, trial.resizable_list
        peak = self.stop_at_peak
        cache: dict[tuple[int, int, int], float] = {}

        def rate(j: int, w: int, p: int) -> float:
            key = (j, w, p)
            r = cache.get(key)
            if r is None:
                r = cache[key] = view.rate(j, w, p)
            return r

        share: dict[int, int] = {}  # tentative workers
        pool: dict[int, int] = {}
        cands: list[int] = []
        # Running jobs: release what AFS may re-share, keep the rest.
        for j in view.running():
            cur = int(view.workers[j])
            keep = 0 if self.preempt else (lo[j] if res[j] else cur)
            if keep < cur:
                trial.release(j, cur - keep)
            share[j] = keep
            p = pool[j] = int(view.pool[j])
            if keep < hi[j] and not (
                peak and keep > 0 and not rate(j, keep + 1, p) > rate(j, keep, p)
            ):
                cands.append(j)
        for j in view.queued():
            share[j] = 0
            cands.append(j)
        rem = {j: max(float(view.pred_remaining[j]), _EPS) for j in share}
        order: list[int] = []
        if self.fast:
            self._allocate_fast(view, trial, share, pool, cands, rem, order, rate)
        else:
            self._allocate_reference(view, trial, share, pool, cands, rem, order, rate)
        targets = {j: w for j, w in share.items() if w != int(view.workers[j])}
        pools = {j: p for j, p in pool.items() if view.state[j] == JobState.QUEUED}
        seen = set(order)
        order += [j for j in targets if j not in seen]
        targets = fit_targets(view, targets, order, pools, self.placement)
        targets = {j: w for j, w in targets.items() if w != int(view.workers[j])}
        return Decision(targets=targets, pools=pools, order=order)

    def _start_pool(self, view: ClusterView, trial: Scratch, j: int) -> int:
        """First pool (engine preference order) where job ``j``'s base demand fits, else the
        first pool of that order."""
        g, k = view.jobs[j].g, trial.lim_lo_list[j]
        order = pool_order(view, j, None, self.placement)
        for p in order:
            if trial.fits(p, g) >= k:
                return p
        return order[0]

    # -- the reference: the paper's loop, one tournament per step ---------------------------------
    def _allocate_reference(
        self,
        view: ClusterView,
        trial: Scratch,
        share: dict[int, int],
        pool: dict[int, int],
        cands: list[int],
        rem: dict[int, float],
        order: list[int],
        rate: RateFn,
    ) -> None:
        """Hand out steps one at a time; each goes to the winner of a tournament over
        ``cands`` in list order (the incumbent is replaced when ``prefer`` says so)."""
        g, lo, hi, res = trial.g_list, trial.lim_lo_list, trial.lim_hi_list, trial.resizable_list
        peak = self.stop_at_peak
        cands = list(cands)

        def step_size(j: int) -> int:
            return lo[j] if share[j] == 0 else 1

        def rates(j: int) -> tuple[float, float]:
            p = pool.get(j)
            if p is None:  # queued: the pool it would start in
                p = self._start_pool(view, trial, j)
            return rate(j, share[j], p), rate(j, share[j] + step_size(j), p)

        while cands:
            best = cands[0]
            rb = rates(best)
            for j in cands[1:]:
                rj = rates(j)
                gj = step_size(j) * g[j]
                gb = step_size(best) * g[best]
                if self.prefer(rem[j], rj, gj, rem[best], rb, gb):
                    best, rb = j, rj
            k = step_size(best)
            if share[best] == 0 and best not in pool:
                p = self._start_pool(view, trial, best)
                placed = trial.grow(best, p, k, whole=True)
                if placed:
                    pool[best] = p
            else:
                placed = trial.grow(best, pool[best], k, whole=True)
            if not placed:
                cands.remove(best)  # does not fit now, and free space only shrinks
                continue
            share[best] += k
            if best not in order:
                order.append(best)
            x = share[best]
            if x >= hi[best] or not res[best] or (
                peak and not rate(best, x + 1, pool[best]) > rate(best, x, pool[best])
            ):
                cands.remove(best)

    # -- the fast tournament (same decisions) ----------------------------------------------------
    def _allocate_fast(
        self,
        view: ClusterView,
        trial: Scratch,
        share: dict[int, int],
        pool: dict[int, int],
        cands: list[int],
        rem: dict[int, float],
        order: list[int],
        rate: RateFn,
    ) -> None:
        """:meth:`_allocate_reference`'s result, computed with the scan kept between steps
        (module docstring, "Speed")."""
        n = len(cands)
        if n == 0:
            return
        g, lo, hi, res = trial.g_list, trial.lim_lo_list, trial.lim_hi_list, trial.resizable_list
        peak = self.stop_at_peak
        free = _FreeGpus(trial)  # the trial placement from here on (AFS's placement options)
        in_order: set[int] = set()
        # Each candidate's comparison figures, by list position: T remaining time at its share
        # (inf without a share), F its own relative gain (as the shorter job), H its gain over
        # the new rate (as the longer job), S remaining time after the step (newcomers' SRTF),
        # Z no share yet. Lists for scalar use, arrays for the vectorised scans.
        T = [0.0] * n
        F = [0.0] * n
        H = [0.0] * n
        S = [0.0] * n
        Z = [False] * n
        ta = np.zeros(n)
        fa = np.zeros(n)
        ha = np.zeros(n)
        sa = np.zeros(n)
        za = np.zeros(n, dtype=bool)
        alive = np.ones(n, dtype=bool)
        AL = [True] * n
        remp = [rem[j] for j in cands]

        # Queued jobs start in the first pool of their order where their base fits: the same
        # for every job of a (pool order, g, base) group, and it changes only as pools fill.
        gkey: list[tuple[tuple[int, ...], int, int] | None] = [None] * n
        groups: dict[tuple[tuple[int, ...], int, int], list[int]] = {}
        for i, j in enumerate(cands):
            if j not in pool:
                key = (tuple(pool_order(view, j, None, self.placement)), g[j], lo[j])
                gkey[i] = key
                groups.setdefault(key, []).append(i)

        def first_fit(key: tuple[tuple[int, ...], int, int]) -> int:
            pools, gg, k = key
            for p in pools:
                if free.fits(p, gg) >= k:
                    return p
            return pools[0]

        start = {key: first_fit(key) for key in groups}
        moving = [key for key in groups if len(key[0]) > 1]  # start pool may change

        # Candidates by what their next step needs: (pools it may use, g, workers) -> count.
        need: dict[tuple[tuple[int, ...], int, int], int] = {}
        needkey: list[tuple[tuple[int, ...], int, int] | None] = [None] * n

        def set_need(i: int, key: tuple[tuple[int, ...], int, int] | None) -> None:
            old = needkey[i]
            if old is not None:
                need[old] -= 1
            needkey[i] = key
            if key is not None:
                need[key] = need.get(key, 0) + 1

        def placeable() -> bool:
            """Whether some candidate's next step may still fit (free GPUs only shrink)."""
            for (pools, gg, k), c in need.items():
                if c > 0:
                    for p in pools:
                        if free.fits(p, gg) >= k:
                            return True
            return False

        def put(i: int, p0: float, p1: float, cost: int) -> None:
            r = remp[i]
            h = (p1 - p0) / max(p1, _EPS) / cost
            if p0 > 0:
                t, f, s, z = r / p0, (p1 - p0) / p0 / cost, 0.0, False
            else:
                t, f, s, z = _INF, 0.0, r / p1, True
            T[i], F[i], H[i], S[i], Z[i] = t, f, h, s, z
            ta[i], fa[i], ha[i], sa[i], za[i] = t, f, h, s, z

        def load(i: int) -> None:
            j = cands[i]
            x = share[j]
            p = pool.get(j)
            key = gkey[i]
            if p is None:
                p = start[key]  # type: ignore[index]
                nk = key
            else:
                nk = ((p,), g[j], lo[j] if x == 0 else 1)
            k = lo[j] if x == 0 else 1
            put(i, rate(j, x, p), rate(j, x + k, p), k * g[j])
            set_need(i, nk)

        def kill(i: int) -> None:
            alive[i] = AL[i] = False
            set_need(i, None)

        def first_beater(t: float, f: float, h: float, s: float, z: bool, r: int) -> int:
            """First live position ``>= r`` whose job beats an incumbent with these figures."""
            if n - r <= _SHORT:
                for i in range(r, n):
                    if AL[i] and (
                        ((S[i] < s) if Z[i] else (F[i] > h))
                        if z
                        else ((H[i] >= f) if T[i] > t else (F[i] > h))
                    ):
                        return i
                return -1
            if z:
                m = np.where(za[r:], sa[r:] < s, fa[r:] > h)
            else:
                m = np.where(ta[r:] > t, ha[r:] >= f, fa[r:] > h)
            m &= alive[r:]
            k = int(m.argmax())
            return r + k if m[k] else -1

        chain: list[int] = []  # the incumbents of the scan, by position

        def scan_from(b: int, r: int) -> int:
            """Go on with the scan from position ``r``, ``b`` the incumbent; the winner."""
            while True:
                i = first_beater(T[b], F[b], H[b], S[b], Z[b], r)
                if i < 0:
                    return b
                chain.append(i)
                b, r = i, i + 1

        def rescan(q: int) -> int:
            """Redo the scan from position ``q`` (nothing before it changed); the winner."""
            while chain and chain[-1] >= q:
                chain.pop()
            if chain:
                return scan_from(chain[-1], q)
            b = int(alive.argmax())
            if not alive[b]:
                return -1
            chain.append(b)
            return scan_from(b, b + 1)

        def pools_moved() -> int:
            """Refresh the start pools after a placement; the first position that changed."""
            q = n
            for key in moving:
                p = first_fit(key)
                if p != start[key]:
                    start[key] = p
                    for i in groups[key]:
                        if AL[i] and share[cands[i]] == 0 and cands[i] not in pool:
                            load(i)
                            q = min(q, i)
            return q

        for i in range(n):
            load(i)
        w = rescan(0)
        while w >= 0:
            j = cands[w]
            x = share[j]
            gj = g[j]
            if x == 0:  # a newcomer's base demand, all or nothing
                k = lo[j]
                p = pool.get(j)
                if p is None:
                    p = start[gkey[w]]  # type: ignore[index]
                if not free.grow(p, gj, k, True):
                    kill(w)
                    if not placeable():
                        break
                    w = rescan(w)
                    continue
                pool[j] = p
                share[j] = x = k
                if j not in in_order:
                    in_order.add(j)
                    order.append(j)
                q = pools_moved() if moving else n
                if x >= hi[j] or not res[j]:
                    kill(w)
                else:
                    p0, p1 = rate(j, x, p), rate(j, x + 1, p)
                    if peak and not p1 > p0:
                        kill(w)
                    else:
                        put(w, p0, p1, gj)
                        set_need(w, ((p,), gj, 1))
                w = rescan(min(w, q))
                continue
            # A job with a share: its consecutive wins, placed at once. It wins again while it
            # still takes over from the incumbent before it (c) and nothing after it beats it.
            p = pool[j]
            c = chain[-2] if len(chain) > 1 else -1
            want = 1
            y = x + 1
            p0 = rate(j, y, p)
            p1 = p0
            stop = "dead"  # after its last step: "dead", "lost" (to c) or "beaten" (by nxt)
            nxt = -1
            while y < hi[j]:
                p1 = rate(j, y + 1, p)
                if peak and not p1 > p0:
                    break
                if not p0 > 0 or moving:
                    stop = "load"  # figures and scan recomputed the plain way
                    break
                t, f, h = remp[w] / p0, (p1 - p0) / p0 / gj, (p1 - p0) / max(p1, _EPS) / gj
                if c >= 0 and not (
                    (f > H[c]) if Z[c] else ((h >= F[c]) if t > T[c] else (f > H[c]))
                ):
                    stop = "lost"
                    break
                nxt = first_beater(t, f, h, 0.0, False, w + 1)
                if nxt >= 0:
                    stop = "beaten"
                    break
                want += 1
                y += 1
                p0 = p1
            got = free.grow(p, gj, want, False)
            if got:
                share[j] = x + got
                if j not in in_order:
                    in_order.add(j)
                    order.append(j)
            if got < want or stop == "dead":  # its next step did not fit, or it is done
                kill(w)
                q = pools_moved() if moving and got else n
                if got < want and not placeable():
                    break
                w = rescan(min(w, q))
                continue
            put(w, p0, p1, gj)  # its figures at share y (the loop's last)
            if stop == "load":
                q = pools_moved() if moving else n
                w = rescan(min(w, q))
            elif stop == "lost":
                chain.pop()  # w: the scan goes on from c
                w = scan_from(c, w + 1)
            else:
                chain.append(nxt)
                w = scan_from(nxt, nxt + 1)


@register("afs")
def _afs() -> BasePolicy:
    return AfsPolicy(elasticity="elastic", name="afs")


@register("afs-all")
def _afs_all() -> BasePolicy:
    return AfsPolicy(elasticity="all", name="afs-all")


@register("afs-bounded")
def _afs_bounded() -> BasePolicy:
    return AfsPolicy(elasticity="limited", name="afs-bounded")


@register("afs-loan")
def _afs_loan() -> BasePolicy:
    return AfsPolicy(uses_loaning=True, elasticity="elastic", name="afs-loan")
