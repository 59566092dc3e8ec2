"""``aryl+tuned``: Aryl with the batch-size tuning Pollux has (Aryl paper 7.4 "Aryl+TunedJobs").

The paper: "Aryl+TunedJobs allows for a fair comparison of job scheduling against Pollux as both
have hyperparameter tuning now". We give Aryl exactly Pollux's tuning model
(:mod:`aryl_gym.agents.pollux_model`): every job runs at the goodput-maximising batch size for
its worker count, which the simulator sees as the rate-multiplier tables in
``Decision.speedup``; Aryl's knapsack values ``T(w_min) - T(w_min + k)`` use the tuned rates.
Section 7.4's results are "obtained without capacity loaning in Basic scenario", so
``aryl+tuned`` does not loan (as ``pollux``); ``aryl+tuned-loan`` does.
"""

from __future__ import annotations

import numpy as np
from aryl_gym.agents.aryl import ArylPolicy
from aryl_gym.agents.base import BasePolicy, register
from aryl_gym.agents.pollux_model import scaling_of, tuning_table

from aryl_gym.sim.view import ClusterView, Decision


class ArylTunedPolicy(ArylPolicy):
    """Aryl whose jobs run with tuned batch sizes (module docstring)."""

    def __init__(self, name: str = "aryl+tuned", loaning: bool = False, data_root: str | None = None):
        super().__init__(name, loaning=loaning)
        self.data_root = data_root
        self._tables: dict[int, np.ndarray] = {}
        self._sent: set[int] = set()
        self._tuned_items: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}

    def reset(self, seed: int | None = None) -> None:
        super().reset(seed)
        self._tables = {}
        self._sent = set()
        self._tuned_items = {}

    def table(self, view: ClusterView, j: int) -> np.ndarray:
        t = self._tables.get(j)
        if t is None:
            t = tuning_table(view.jobs[j], self.data_root)
            self._tables[j] = t
        return t

    def _items(self, view: ClusterView, j: int, p: int) -> tuple[np.ndarray, np.ndarray]:
        """Knapsack items with tuned rates ``w * speed * m[w]`` (see ``ArylPolicy._items``)."""
        key = (j, p)
        hit = self._tuned_items.get(key)
        if hit is None:
            spec = view.jobs[j]
            t = self.table(view, j)
            w = np.arange(spec.w_min, spec.w_max + 1)
            sc = scaling_of(spec)  # the job's own scaling curve (ones if linear)
            rate = w * view.speed(j, p) * sc[w] * t[np.minimum(w, len(t) - 1)]
            inv = 1.0 / rate
            hit = (np.arange(1, spec.w_max - spec.w_min + 1, dtype=np.int64) * spec.g, inv[0] - inv[1:])
            self._tuned_items[key] = hit
        return hit

    def decide(self, view: ClusterView) -> Decision:
        d = super().decide(view)
        for j in view.active():
            if j not in self._sent:
                d.speedup[j] = self.table(view, j)
                self._sent.add(j)
        return d


@register("aryl+tuned")
def _aryl_tuned() -> BasePolicy:
    return ArylTunedPolicy()


@register("aryl+tuned-loan")
def _aryl_tuned_loan() -> BasePolicy:
    return ArylTunedPolicy("aryl+tuned-loan", loaning=True)
