"""The simulator's state as the rest of the kernel reads it: two structural types (protocols).

* :class:`PlacementState` -- what the placement rules (:mod:`aryl_gym.sim.placement`) read and
  change; implemented by :class:`~aryl_gym.sim.engine.Simulator` and by
  :class:`~aryl_gym.sim.placement.Scratch` (a copy for dry runs).
* :class:`SimState` -- what :class:`~aryl_gym.sim.view.ClusterView` reads; implemented by the
  simulator.

They exist so that the view and the placement engine need not import the simulator (which
imports them): the modules of :mod:`aryl_gym.sim` form no import circle.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from aryl_gym.config import ScenarioConfig
from aryl_gym.sim.index import FreeIndex
from aryl_gym.sim.jobs import JobSpec
from aryl_gym.sim.loaning import LoanController


class WorkerDicts(Protocol):
    """Per job: ``{server id: workers}`` (a list of dicts, or a copy-on-access view of one)."""

    def __getitem__(self, j: int, /) -> dict[int, int]: ...


class PlacementState(Protocol):
    """What the placement rules read and change.

    Server ids index the ``srv_*`` arrays (training servers first); job ids index the per-job
    arrays and lists. The mutating primitives keep every derived figure consistent.
    """

    n_jobs: int
    n_servers: int
    g_list: list[int]
    w_min_list: list[int]
    w_max_list: list[int]
    elastic_list: list[bool]
    lim_lo_list: list[int]  # the range the engine enforces (Simulator.set_elasticity)
    lim_hi_list: list[int]
    resizable_list: list[bool]
    hetero_list: list[bool]
    elastic: np.ndarray
    srv_cap: np.ndarray
    srv_free: np.ndarray
    srv_loaned: np.ndarray
    srv_base_gpus: np.ndarray
    srv_flex_gpus: np.ndarray
    free_index: FreeIndex  # servers bucketed by free GPUs, kept in step with srv_free and srv_loaned
    train_ids: list[int]
    state: np.ndarray
    workers: np.ndarray
    pool: np.ndarray

    @property
    def base(self) -> WorkerDicts: ...  # job -> {server: base workers}

    @property
    def flex(self) -> WorkerDicts: ...  # job -> {server: flexible workers}

    def usable_mask(self, pool: int) -> np.ndarray: ...

    def allowed_pools(self, j: int) -> tuple[int, ...]: ...

    def add_workers(self, j: int, s: int, k: int, flex: bool) -> None: ...

    def remove_workers(self, j: int, s: int, k: int, flex: bool) -> None: ...

    def preempt(self, j: int) -> None: ...

    def mark_started(self, j: int, pool: int) -> None: ...

    def charge_scale(self, j: int, out: bool) -> None: ...


class SimState(PlacementState, Protocol):
    """What :class:`~aryl_gym.sim.view.ClusterView` reads (on top of :class:`PlacementState`)."""

    srv_pool: np.ndarray
    remaining: np.ndarray
    pred_remaining: np.ndarray
    overhead_left: np.ndarray
    preempt_count: np.ndarray
    first_start: np.ndarray
    running_time: np.ndarray
    now: float
    interval: float
    jobs: list[JobSpec]
    config: ScenarioConfig
    policy_rng: np.random.Generator
    loanable_now: int
    loan: LoanController
    srv_jobs: list[dict[int, int]]

    def queued_ids(self) -> list[int]: ...

    def running_ids(self) -> list[int]: ...

    def speed(self, j: int, pool: int) -> float: ...

    def rate_for(self, j: int, w: int, pool: int) -> float: ...

    def rate_mixed(self, j: int, w: int, w_inf: int) -> float: ...

    def is_mixed(self, j: int) -> bool: ...

    # World v2: what a running job reports (a aryl_gym.sim.view.Measurement, or None)
    def measure(self, j: int) -> Any: ...


__all__ = ["PlacementState", "SimState", "WorkerDicts"]
