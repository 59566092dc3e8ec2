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

Adaptations to our job model [ours, documented]:

* **Workers, not GPUs.** A step gives one *worker* (``g`` GPUs on one server) and a job's first
  step gives its ``w_min`` workers (its base demand; an inelastic job's only step is all of
  ``w_max``). The relative gains are divided by the GPUs the step costs, so the comparison is per
  GPU as in the paper (a 4-GPU worker must beat four 1-GPU steps). With the simulator's linear
  throughput, ``P(x) = x * speed``, the rule reads: the shorter job wins iff its GPUs are fewer
  than the longer job's GPUs after the step.
* **Range.** A job stops competing at ``w_max``; a step that cannot be placed (trial best-fit on
  a copy of the free GPUs, fragmentation included) drops the job from this round.
* **Preemption.** AFS re-shares every round. By default running jobs keep their base
  allocation (``w_min``; re-sharing happens through their flexible workers, which costs only a
  scale-in, not a relaunch); ``preempt=True`` lets AFS-L recompute every share from zero.
* **Throughput** ``P`` is the simulator's rate (``view.rate``) and remaining work is the
  *predicted* remaining work (AFS uses job-length estimates).
* **Pools.** ``afs`` does not loan inference servers (``uses_loaning`` False), matching the
  Aryl paper's scheduling comparison in the Basic scenario without loaning (section 7.4).
  ``afs-loan`` accepts loans: type-agnostic jobs may then start on loaned servers (each job's
  workers stay in one pool).
"""

from __future__ import annotations

import math

from aryl_gym.agents._alloc import fit_targets
from aryl_gym.agents.base import BasePolicy, register

from aryl_gym.sim.jobs import JobState
from aryl_gym.sim.placement import Scratch, pool_order
from aryl_gym.sim.view import ClusterView, Decision, PlacementOptions

_EPS = 1e-12


class AfsPolicy(BasePolicy):
    """AFS-L over worker steps (see the module docstring)."""

    event_driven = True

    def __init__(self, uses_loaning: bool = False, preempt: bool = False, name: str = "afs"):
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


@register("afs")
def _afs() -> BasePolicy:
    return AfsPolicy()


@register("afs-loan")
def _afs_loan() -> BasePolicy:
    return AfsPolicy(uses_loaning=True, name="afs-loan")
