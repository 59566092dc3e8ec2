"""The paper's Baseline and its simple relatives.

* ``fifo`` -- the paper's Baseline: "a FIFO cluster scheduler with no capacity loaning or elastic
  scaling". Jobs start in submit order with their requested workers on training servers; the
  head of the queue blocks everything behind it (``backfill`` off).
* ``fifo-backfill`` -- the same, but a job that does not fit is skipped and later jobs may start.
* ``sjf`` -- shortest predicted running time (at the requested size) first, with backfill.

None of them loans servers or scales jobs: every job runs at ``w_req`` (its request; World v1:
an elastic job requests its base demand ``w_min``).
"""

from __future__ import annotations

import numpy as np
from aryl_gym.agents.base import BasePolicy, register

from aryl_gym.sim.placement import fill
from aryl_gym.sim.view import TRAIN, ClusterView, Decision


def _take(free: np.ndarray, cap: np.ndarray, g: int, w: int) -> bool:
    """Best-fit all ``w`` workers of ``g`` GPUs on ``free`` (in place), or change nothing."""
    trial = free.copy()
    if sum(k for _, k in fill(trial, cap, np.ones(len(free), dtype=bool), g, w)) < w:
        return False
    free[:] = trial
    return True


class FifoPolicy(BasePolicy):
    """FIFO over the training pool; ``backfill`` lets later jobs pass a blocked head."""

    uses_loaning = False

    #: queue orders: ``fifo`` (submit order) and ``sjf`` (shortest predicted running time)
    ORDERS = ("fifo", "sjf")

    def __init__(self, backfill: bool = False, order: str = "fifo", name: str | None = None):
        if order not in self.ORDERS:
            raise ValueError(f"unknown queue order {order!r}; known: {', '.join(self.ORDERS)}")
        self.backfill = backfill
        self.order = order
        # fifo without backfill is the paper's Baseline; every other order names itself
        default = ("fifo-backfill" if backfill else "fifo") if order == "fifo" else order
        self.name = name or default

    def _queue(self, view: ClusterView) -> list[int]:
        q = view.queued()
        if self.order == "sjf":
            q.sort(key=lambda j: (view.pred_time(j, int(view.jobs[j].w_req), TRAIN), j))
        return q

    def decide(self, view: ClusterView) -> Decision:
        mask = view.usable(TRAIN)
        free = np.asarray(view.srv_free[mask]).copy()
        cap = np.asarray(view.srv_cap[mask])
        targets: dict[int, int] = {}
        order: list[int] = []
        for j in self._queue(view):
            spec = view.jobs[j]
            if _take(free, cap, spec.g, spec.w_req):
                targets[j] = spec.w_req
                order.append(j)
            elif not self.backfill:
                break
        return Decision(targets=targets, pools={j: TRAIN for j in targets}, order=order)


@register("fifo")
def _fifo() -> BasePolicy:
    return FifoPolicy(backfill=False)


@register("fifo-backfill")
def _fifo_bf() -> BasePolicy:
    return FifoPolicy(backfill=True)


@register("sjf")
def _sjf() -> BasePolicy:
    return FifoPolicy(backfill=True, order="sjf")
