"""Dry runs of the shared placement engine, for exact action masks (SPEC 6).

:func:`dry_run` applies a :class:`~aryl_gym.sim.view.Decision` with the engine's own code
(:func:`aryl_gym.sim.placement.apply_decision`) on a *scratch* copy of the simulator's placement
state and returns the :class:`~aryl_gym.sim.view.PlacementReport`. Only what placement touches is
copied (server arrays, per-job state arrays; per-job and per-server dictionaries lazily, on first
write), so a dry run costs about as much as the real placement and never changes the simulator.

Because the same function places the real decision, "the dry run placed every target" is exactly
"the real placement will place every target" -- the property the ``sequential`` masks rely on.
"""

from __future__ import annotations

import numpy as np

from aryl_gym.sim.engine import Simulator
from aryl_gym.sim.jobs import JobState
from aryl_gym.sim.placement import apply_decision
from aryl_gym.sim.view import Decision, PlacementOptions, PlacementReport


class _LazyDicts:
    """A list of dicts that copies an entry the first time it is read (copy on access)."""

    __slots__ = ("_own", "_src")

    def __init__(self, src: list[dict[int, int]]):
        self._src = src
        self._own: dict[int, dict[int, int]] = {}

    def __getitem__(self, i: int) -> dict[int, int]:
        d = self._own.get(i)
        if d is None:
            d = dict(self._src[i])
            self._own[i] = d
        return d


class _Scratch:
    """Just enough of :class:`Simulator` for :func:`apply_decision` to run on copies."""

    # Borrow the simulator's own bookkeeping primitives (they only touch attributes we copy).
    _add_workers = Simulator._add_workers
    _remove_workers = Simulator._remove_workers
    _release_all = Simulator._release_all
    _rebalance = Simulator._rebalance
    allowed_pools = Simulator.allowed_pools
    usable_mask = Simulator.usable_mask

    def __init__(self, sim: Simulator):
        self.n_jobs = sim.n_jobs
        self.n_servers = sim.n_servers
        self.g = sim.g
        self.g_list = sim.g_list
        self.w_min_list = sim.w_min_list
        self.w_max_list = sim.w_max_list
        self.elastic_list = sim.elastic_list
        self.w_min = sim.w_min
        self.w_max = sim.w_max
        self.elastic = sim.elastic
        self.type_agnostic = sim.type_agnostic
        self.srv_cap = sim.srv_cap
        self.srv_pool = sim.srv_pool
        # scalar counters the borrowed primitives may keep up to date (copied by value)
        for name in ("busy_train_gpus", "busy_loan_gpus"):
            if hasattr(sim, name):
                setattr(self, name, getattr(sim, name))
        self.srv_loaned = sim.srv_loaned  # read only here
        self.n_loaned = sim.n_loaned
        self._train_mask = sim._train_mask
        self._train_ids = sim._train_ids
        self.srv_free = sim.srv_free.copy()
        self.srv_base_gpus = sim.srv_base_gpus.copy()
        self.srv_flex_gpus = sim.srv_flex_gpus.copy()
        self.state = sim.state.copy()
        self.workers = sim.workers.copy()
        self.inf_workers = sim.inf_workers.copy()
        self.hetero_list = sim.hetero_list
        self.pool = sim.pool.copy()
        self.base = _LazyDicts(sim.base)
        self.flex = _LazyDicts(sim.flex)
        self.srv_jobs = _LazyDicts(sim.srv_jobs)

    # state changes apply_decision asks for (the accounting parts are irrelevant here)
    def _preempt(self, j: int) -> None:
        self._release_all(j)
        self.state[j] = JobState.QUEUED
        self.pool[j] = -1

    def _mark_started(self, j: int, pool: int) -> None:
        self.state[j] = JobState.RUNNING
        self.pool[j] = pool

    def _charge_scale(self, j: int, out: bool) -> None:
        return None


def dry_run(sim: Simulator, decision: Decision, opts: PlacementOptions) -> PlacementReport:
    """Place ``decision`` on a scratch copy of ``sim``; ``sim`` is not changed."""
    return apply_decision(_Scratch(sim), decision, opts)  # type: ignore[arg-type]


def fully_placed(sim: Simulator, decision: Decision, opts: PlacementOptions) -> bool:
    """Whether the engine would place every target of ``decision`` exactly (none invalid)."""
    rep = dry_run(sim, decision, opts)
    return not rep.unplaced and not rep.invalid


def effective_targets(
    sim: Simulator, decision: Decision, opts: PlacementOptions
) -> tuple[dict[int, int], dict[int, int]]:
    """What ``decision`` really does: (job -> workers after placement, job -> pool) for the jobs
    whose worker count changes. Placing these targets gives the same placement as ``decision``
    (the engine places worker by worker, so a shortfall consumes nothing beyond what it got)."""
    scratch = _Scratch(sim)
    apply_decision(scratch, decision, opts)  # type: ignore[arg-type]
    changed = np.flatnonzero(scratch.workers != sim.workers)
    out = {int(j): int(scratch.workers[j]) for j in changed}
    pools = {int(j): int(scratch.pool[j]) for j in changed if scratch.workers[j] > 0}
    return out, pools
