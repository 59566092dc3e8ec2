"""Gandiva-style scheduler: opportunistic grow and shrink of elastic jobs (Xiao et al.,
"Gandiva: Introspective Cluster Scheduling for Deep Learning", OSDI '18, section 3.3 "Grow-Shrink").

Gandiva grows a job that can use more GPUs when the cluster has idle ones and shrinks it again
when other jobs need them, "without considering cluster-wide efficiency" (Aryl paper, section 2).
Each round [our concrete rules]:

1. **Admission**: queued jobs in submit order (FIFO) at their base demand (``w_min``; inelastic:
   ``w_max``); a job that does not fit is skipped and later ones may start (backfill). Space
   held by *grown* workers (beyond ``w_min``) counts as free here: that is the shrink.
2. **Keep**: running elastic jobs keep the flexible workers they have while space remains
   (oldest job first), so nothing shrinks unless an admission needed the room.
3. **Grow**: remaining idle GPUs go to elastic jobs one worker at a time, round-robin, oldest job
   first, up to ``w_max``.

Every target is checked with a trial best-fit placement (fragmentation included). Gandiva
predates capacity loaning: ``uses_loaning`` is False.
"""

from __future__ import annotations

from aryl_gym.agents._alloc import fit_targets
from aryl_gym.agents.base import BasePolicy, register

from aryl_gym.sim.placement import Scratch, pool_order
from aryl_gym.sim.view import ClusterView, Decision, PlacementOptions


class GandivaPolicy(BasePolicy):
    """Opportunistic grow/shrink (module docstring)."""

    name = "gandiva"
    uses_loaning = False
    event_driven = True
    placement = PlacementOptions(elastic_prefer_inference=True, group_flexible=False)

    def decide(self, view: ClusterView) -> Decision:
        trial = Scratch(view, self.placement)
        running = view.running()
        share: dict[int, int] = {}
        pool: dict[int, int] = {}
        for j in running:
            spec = view.jobs[j]
            cur = int(view.workers[j])
            base = spec.w_min if spec.elastic else cur
            if cur > base:
                trial.release(j, cur - base)  # grown workers may be reclaimed for admissions
            share[j] = base
            pool[j] = int(view.pool[j])
        admitted: list[int] = []
        for j in view.queued():  # FIFO (by id = submit order), with backfill
            spec = view.jobs[j]
            for p in pool_order(view, j, None, self.placement):
                if trial.grow(j, p, spec.w_min, whole=True):
                    share[j], pool[j] = spec.w_min, p
                    admitted.append(j)
                    break
        elastic = sorted(
            (j for j in share if view.jobs[j].elastic), key=lambda j: (view.jobs[j].submit, j)
        )
        # Keep what running jobs had, oldest first.
        for j in elastic:
            want = int(view.workers[j]) - share[j]
            if want > 0:
                share[j] += trial.grow(j, pool[j], want)
        # Grow into idle GPUs, one worker at a time, round-robin.
        active = [j for j in elastic if share[j] < view.jobs[j].w_max]
        while active:
            nxt = []
            for j in active:
                if trial.grow(j, pool[j], 1):
                    share[j] += 1
                    if share[j] < view.jobs[j].w_max:
                        nxt.append(j)
            active = nxt
        targets = {j: w for j, w in share.items() if w != int(view.workers[j])}
        pools = {j: pool[j] for j in admitted}
        order = admitted + [j for j in elastic if j not in admitted]
        targets = fit_targets(view, targets, order, pools, self.placement)
        targets = {j: w for j, w in targets.items() if w != int(view.workers[j])}
        return Decision(targets=targets, pools=pools, order=order)


@register("gandiva")
def _gandiva() -> BasePolicy:
    return GandivaPolicy()
