"""A frozen copy of ``agents/afs.py`` as of World v1 (commit e2414dd): AFS-L inside each job's
``[w_min, w_max]``. Kept only so that tests can check that ``afs-bounded`` decides exactly as it
did (tests/test_afs.py); never registered, never changed.
"""

from __future__ import annotations

import math

from aryl_gym.agents._alloc import fit_targets
from aryl_gym.agents.base import BasePolicy

from aryl_gym.sim.jobs import JobState
from aryl_gym.sim.placement import Scratch, pool_order
from aryl_gym.sim.view import ClusterView, Decision, PlacementOptions

_EPS = 1e-12


class FrozenAfsV1(BasePolicy):
    """AFS-L over worker steps (see the module docstring)."""

    event_driven = True

    def __init__(self, uses_loaning: bool = False, preempt: bool = False, name: str = "afs-v1-frozen"):
        self.uses_loaning = uses_loaning
        self.preempt = preempt
        self.name = name
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
            return not FrozenAfsV1.prefer(rem_b, p_b, cost_b, rem_a, p_a, cost_a)
        # A is the shorter job (a), B the longer (b).
        if p_a[0] <= 0:  # both have no share: the one that finishes sooner with the step
            return rem_a / p_a[1] < rem_b / p_b[1]
        gain_a = (p_a[1] - p_a[0]) / p_a[0] / cost_a
        gain_b = (p_b[1] - p_b[0]) / max(p_b[1], _EPS) / cost_b
        return gain_a > gain_b

    # -- a round ---------------------------------------------------------------------------------
    def decide(self, view: ClusterView) -> Decision:
        trial = Scratch(view, self.placement)
        share: dict[int, int] = {}  # tentative workers
        pool: dict[int, int] = {}
        cands: list[int] = []
        # Running jobs: release what AFS may re-share, keep the rest.
        for j in view.running():
            spec = view.jobs[j]
            cur = int(view.workers[j])
            keep = 0 if self.preempt else (spec.w_min if spec.elastic else cur)
            if keep < cur:
                trial.release(j, cur - keep)
            share[j] = keep
            pool[j] = int(view.pool[j])
            if share[j] < spec.w_max:
                cands.append(j)
        for j in view.queued():
            share[j] = 0
            cands.append(j)
        order: list[int] = []

        def step_size(j: int) -> int:
            spec = view.jobs[j]
            return spec.w_min if share[j] == 0 else 1

        rate_cache: dict[tuple[int, int, int], tuple[float, float]] = {}

        def rates(j: int) -> tuple[float, float]:
            p = pool.get(j)
            if p is None:  # queued: the pool it would start in
                p = self._start_pool(view, trial, j)
            key = (j, share[j], p)
            r = rate_cache.get(key)
            if r is None:
                r = rate_cache[key] = (
                    view.rate(j, share[j], p), view.rate(j, share[j] + step_size(j), p)
                )
            return r

        rem = {j: max(float(view.pred_remaining[j]), _EPS) for j in share}
        while cands:
            best = cands[0]
            rb = rates(best)
            for j in cands[1:]:
                rj = rates(j)
                gj = step_size(j) * view.jobs[j].g
                gb = step_size(best) * view.jobs[best].g
                if self.prefer(rem[j], rj, gj, rem[best], rb, gb):
                    best, rb = j, rj
            spec = view.jobs[best]
            k = step_size(best)
            if share[best] == 0 and best not in pool:
                p = self._start_pool(view, trial, best)
                placed = trial.grow(best, p, k, whole=True) if p >= 0 else 0
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
            if share[best] >= spec.w_max or not spec.elastic:
                cands.remove(best)
        targets = {j: w for j, w in share.items() if w != int(view.workers[j])}
        pools = {j: p for j, p in pool.items() if view.state[j] == JobState.QUEUED}
        order += [j for j in targets if j not in order]
        targets = fit_targets(view, targets, order, pools, self.placement)
        targets = {j: w for j, w in targets.items() if w != int(view.workers[j])}
        return Decision(targets=targets, pools=pools, order=order)

    def _start_pool(self, view: ClusterView, trial: Scratch, j: int) -> int:
        """First pool (engine preference order) where job ``j``'s base demand fits, else -1."""
        spec = view.jobs[j]
        for p in pool_order(view, j, None, self.placement):
            if trial.fits(p, spec.g) >= spec.w_min:
                return p
        return pool_order(view, j, None, self.placement)[0]
