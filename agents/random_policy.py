"""``random``: uniformly random valid targets, a floor for learned agents.

Each round every active job draws a target uniformly from its valid set, with ``view.rng`` only
(seeded per episode, so a seed repeats exactly): a queued job from ``{0, w_min..w_max}``
(inelastic: ``{0, w_max}``), a running elastic job from ``w_min..w_max``, a running inelastic job
keeps its size (random preemptions would only add relaunch cost). The placement order is a
random permutation. Targets that do not fit are lowered by a trial placement, so every
decision is valid. Training servers only (``uses_loaning`` False).
"""

from __future__ import annotations

from aryl_gym.agents._alloc import fit_targets
from aryl_gym.agents.base import BasePolicy, register

from aryl_gym.sim.view import ClusterView, Decision, PlacementOptions


class RandomPolicy(BasePolicy):
    name = "random"
    uses_loaning = False
    event_driven = False  # draws every round
    placement = PlacementOptions(elastic_prefer_inference=True, group_flexible=False)

    def decide(self, view: ClusterView) -> Decision:
        rng = view.rng
        targets: dict[int, int] = {}
        for j in view.active():
            spec = view.jobs[j]
            cur = int(view.workers[j])
            if cur > 0:
                if spec.elastic:
                    targets[j] = int(rng.integers(spec.w_min, spec.w_max + 1))
                continue
            levels = [0] + list(range(spec.w_min, spec.w_max + 1))
            targets[j] = int(levels[int(rng.integers(len(levels)))])
        order = [int(x) for x in rng.permutation(sorted(targets))]
        targets = fit_targets(view, targets, order, None, self.placement)
        targets = {j: w for j, w in targets.items() if w != int(view.workers[j])}
        return Decision(targets=targets, order=order)


@register("random")
def _random() -> BasePolicy:
    return RandomPolicy()
