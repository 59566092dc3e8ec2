"""Shared allocation helpers for the elastic baselines (AFS, Pollux, Gandiva, random).

:func:`fit_targets` replays what the shared placement engine (:mod:`aryl_gym.sim.placement`) will
do with a set of worker targets on a *copy* of the free-GPU array, and lowers every target that
would not be placed (fragmentation: a worker of ``g`` GPUs needs ``g`` free GPUs on one server).
Policies call it last, so their decisions are placeable as they are and the engine's
``unplaced`` count stays a signal of real conflicts, not of policy sloppiness.

The replay follows the engine step by step: releases first (scale-in removes flexible workers
from loaned servers first, then from servers holding fewest of the job's workers; preemption
frees everything), then growth in best-fit-decreasing order (per-worker GPUs descending, then the
decision's ``order``, then id), each job's new workers placed by
:func:`aryl_gym.sim.placement.best_fit`, a queued job all-or-nothing at ``w_min``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from aryl_gym.sim.jobs import JobState
from aryl_gym.sim.placement import fill
from aryl_gym.sim.view import INFER, TRAIN, ClusterView, PlacementOptions


class Trial:
    """A scratch copy of the cluster's free GPUs for trial placements (no effect on the view)."""

    def __init__(self, view: ClusterView):
        self.view = view
        self.free = np.asarray(view.srv_free).copy()  # (S,) free GPUs
        self.cap = np.asarray(view.srv_cap)  # (S,) GPUs per server
        self.masks = {TRAIN: view.usable(TRAIN).copy(), INFER: view.usable(INFER).copy()}
        # fits() per (pool, g), valid until the free space changes (place / release)
        self._fits: dict[tuple[int, int], int] = {}

    def free_gpus(self, pool: int) -> int:
        return int(self.free[self.masks[pool]].sum())

    def fits(self, pool: int, g: int) -> int:
        """Workers of ``g`` GPUs that fit in ``pool``'s free space now."""
        key = (pool, g)
        n = self._fits.get(key)
        if n is None:
            n = self._fits[key] = int((self.free[self.masks[pool]] // g).sum())
        return n

    def place(self, pool: int, g: int, k: int, all_or_nothing: bool = False) -> int:
        """Place up to ``k`` workers of ``g`` GPUs by best fit; returns how many were placed."""
        if k <= 0:
            return 0
        self._fits.clear()
        cand = self.masks[pool]
        snap = self.free.copy() if all_or_nothing else None
        need = k - sum(n for _, n in fill(self.free, self.cap, cand, g, k))
        if all_or_nothing and need > 0:
            self.free[:] = snap  # type: ignore[index]
            return 0
        return k - need

    def release(self, j: int, k: int) -> None:
        """Free ``k`` workers of running job ``j`` the way the engine's scale-in does."""
        v = self.view
        self._fits.clear()
        g = int(v.jobs[j].g)
        base, flex = v.placement(j)
        loaned = v.srv_loaned
        for s, have in sorted(flex.items(), key=lambda kv: (not loaned[kv[0]], kv[1], kv[0])):
            if k == 0:
                return
            r = min(k, have)
            self.free[s] += r * g
            k -= r
        for s, have in sorted(base.items(), key=lambda kv: (not loaned[kv[0]], kv[0])):
            if k == 0:
                return
            r = min(k, have)
            self.free[s] += r * g
            k -= r


def pool_order(view: ClusterView, j: int, pref: int | None, opts: PlacementOptions) -> list[int]:
    """The pools the engine tries for a queued job, in order (mirrors ``placement._pool_order``)."""
    allowed = view.allowed_pools(j)
    if len(allowed) == 1:
        return list(allowed)
    if pref in allowed:
        return [int(pref), 1 - int(pref)]  # type: ignore[arg-type]
    if view.jobs[j].elastic and opts.elastic_prefer_inference:
        return [INFER, TRAIN]
    return [TRAIN, INFER]


def fit_targets(
    view: ClusterView,
    targets: dict[int, int],
    order: Sequence[int] | None,
    pools: dict[int, int] | None,
    opts: PlacementOptions,
) -> dict[int, int]:
    """Lower ``targets`` until the placement engine would place every one in full.

    Returns a new dict (same keys). A running job whose growth does not fit keeps what fits
    (at least its current count); a queued job that cannot get ``w_min`` workers gets 0; an
    elastic queued job gets the most that fit up to its target.
    """
    out = dict(targets)
    pools = pools or {}
    trial = Trial(view)
    state = view.state
    workers = view.workers
    for j in sorted(out):
        if state[j] == JobState.RUNNING:
            cur = int(workers[j])
            t = out[j]
            if t < cur:
                trial.release(j, cur - t)
    prio = {int(j): i for i, j in enumerate(order or [])}
    far = len(prio)
    grow = [
        j
        for j, t in out.items()
        if (state[j] == JobState.RUNNING and t > workers[j])
        or (state[j] == JobState.QUEUED and t > 0)
    ]
    grow.sort(key=lambda j: (-int(view.jobs[j].g), prio.get(j, far), j))
    for j in grow:
        spec = view.jobs[j]
        g = int(spec.g)
        t = out[j]
        if state[j] == JobState.RUNNING:
            cur = int(workers[j])
            got = trial.place(int(view.pool[j]), g, t - cur)
            out[j] = cur + got
            continue
        best_n, best_free = 0, None
        start = trial.free.copy()
        for p in pool_order(view, j, pools.get(j), opts):
            trial.free[:] = start
            n = trial.place(p, g, spec.w_min, all_or_nothing=True)
            if n:
                n += trial.place(p, g, t - spec.w_min)
            if n > best_n:
                best_n, best_free = n, trial.free.copy()
            if n == t:
                break
        if best_free is not None:
            trial.free[:] = best_free
            out[j] = best_n
        else:
            trial.free[:] = start
            out[j] = 0
    return out


def valid_levels(view: ClusterView, j: int) -> tuple[int, int]:
    """(lowest nonzero target, highest target) a job may be given this round."""
    spec = view.jobs[j]
    if state_running(view, j) and not spec.elastic:
        cur = int(view.workers[j])
        return cur, cur
    return int(spec.w_min), int(spec.w_max)


def state_running(view: ClusterView, j: int) -> bool:
    return bool(view.state[j] == JobState.RUNNING)
