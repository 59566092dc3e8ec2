"""The shared placement engine (SPEC 2; paper section 5.3).

Turns a policy's worker targets into server assignments, the same way for every policy:

* running workers stay where they are; a scale-in removes flexible workers, from loaned servers
  first; a target of 0 preempts the job;
* new workers are placed **best-fit decreasing**: jobs by per-worker GPU demand, largest first
  (then the decision's priority order, then id); each worker goes onto the non-empty server that
  fits it most tightly, else onto an empty server (lowest id);
* pool preference: elastic type-agnostic jobs prefer loaned inference servers (when the policy's
  ``PlacementOptions.elastic_prefer_inference`` is on), inelastic jobs prefer training servers;
  type-specific jobs only ever use training servers; all workers of a job share one pool (one GPU
  type), except with ``PlacementOptions.hetero``: a ``JobSpec.hetero`` job whose base is on
  training servers puts the flexible workers that do not fit there on loaned inference servers
  (heterogeneous training, paper 7.2; grouped like other flexible workers on loaned servers);
* ``group_flexible``: an elastic job's workers beyond ``w_min`` on the inference pool go on loaned
  servers that hold none of its base workers, preferring servers that hold no base worker of any
  job, so a reclaim can release them without preemption;
* a target that cannot be placed gets the largest feasible count ``>= w_min`` (or stays queued);
  the shortfall is reported in :class:`~aryl_gym.sim.view.PlacementReport.unplaced`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from aryl_gym.sim.jobs import JobState
from aryl_gym.sim.view import INFER, TRAIN, Decision, PlacementOptions, PlacementReport

_QUEUED = int(JobState.QUEUED)
_RUNNING = int(JobState.RUNNING)
_EXACT = 2**53  # ints below this convert to float exactly

if TYPE_CHECKING:  # pragma: no cover
    from aryl_gym.sim.engine import Simulator


def best_fit(free: np.ndarray, cap: np.ndarray, cand: np.ndarray, g: int) -> int:
    """Index of the best-fit server for one worker of ``g`` GPUs, or -1.

    Among candidate servers with room, the non-empty one with the least free space wins (ties to
    the lowest id); when every fitting server is empty, the lowest-id empty one.
    """
    fits = cand & (free >= g)
    idx = np.flatnonzero(fits)
    if len(idx) == 0:
        return -1
    f = free[idx]
    nonempty = f < cap[idx]
    if nonempty.any():
        sub = idx[nonempty]
        return int(sub[np.argmin(free[sub])])
    return int(idx[0])


def best_fit_list(free: list[int], cap: list[int], cands: list[int], g: int) -> int:
    """:func:`best_fit` on plain lists: ``cands`` are candidate server ids in ascending order.

    Same rule and tie-breaks (least free non-empty server, lowest id; else the lowest-id empty
    one); faster than numpy for the tens of servers of small clusters.
    """
    best = -1
    best_free = 1 << 62
    empty = -1
    for s in cands:
        f = free[s]
        if f >= g:
            if f < cap[s]:
                if f < best_free:
                    best, best_free = s, f
            elif empty < 0:
                empty = s
    return best if best >= 0 else empty


def fill(
    free: np.ndarray, cap: np.ndarray, cand: np.ndarray, g: int, need: int
) -> list[tuple[int, int]]:
    """Best-fit up to ``need`` workers of ``g`` GPUs onto the ``cand`` servers, one server at a
    time (as many as fit there, which is what worker-by-worker best fit gives).

    ``free`` is updated in place. Returns ``[(server, workers), ...]``; fewer than ``need``
    workers in all when the candidates run out of room.
    """
    plan: list[tuple[int, int]] = []
    while need > 0:
        s = best_fit(free, cap, cand, g)
        if s < 0:
            break
        k = min(need, int(free[s]) // g)
        free[s] -= k * g
        plan.append((s, k))
        need -= k
    return plan


def fill_list(
    free: list[int], cap: list[int], cands: list[int], g: int, need: int
) -> list[tuple[int, int]]:
    """:func:`fill` on plain lists (see :func:`best_fit_list`)."""
    plan: list[tuple[int, int]] = []
    while need > 0:
        s = best_fit_list(free, cap, cands, g)
        if s < 0:
            break
        k = min(need, free[s] // g)
        free[s] -= k * g
        plan.append((s, k))
        need -= k
    return plan


#: Clusters with at most this many servers are planned with plain-Python lists (faster than
#: numpy at this size); bigger ones with numpy masks. Both give the same plan (tested).
PY_SERVERS = 64


def _plan(
    sim: Simulator,
    j: int,
    pool: int,
    n_base: int,
    n_flex: int,
    opts: PlacementOptions,
) -> list[tuple[int, int, bool]]:
    """Plan ``n_base`` base and up to ``n_flex`` flexible workers of job ``j`` on ``pool``.

    Returns ``[(server, workers, is_flex), ...]``; an empty list when the base does not fit.
    Nothing is changed on the simulator.
    """
    if sim.n_servers <= PY_SERVERS:
        plan = _plan_list(sim, j, pool, n_base, n_flex, opts)
    else:
        plan = _plan_np(sim, j, pool, n_base, n_flex, opts)
    if opts.hetero and pool == TRAIN and sim.hetero_list[j] and (plan or n_base == 0):
        need = n_base + n_flex - sum(k for _, k, _ in plan)
        if need > 0:
            plan.extend(_spill(sim, j, need, opts))
    return plan


def _spill(sim: Simulator, j: int, need: int, opts: PlacementOptions) -> list[tuple[int, int, bool]]:
    """Up to ``need`` flexible workers of hetero job ``j`` (base on training servers) on loaned
    inference servers; with ``group_flexible``, servers holding no base worker of any job first."""
    g = sim.g_list[j]
    free = sim.srv_free.tolist()
    cap = sim.srv_cap.tolist()
    cands = [s for s, on in enumerate(sim.srv_loaned.tolist()) if on]
    if opts.group_flexible:
        base_gpus = sim.srv_base_gpus.tolist()
        tiers: tuple[list[int], ...] = (
            [s for s in cands if base_gpus[s] == 0],
            [s for s in cands if base_gpus[s] > 0],
        )
    else:
        tiers = (cands,)
    out: list[tuple[int, int, bool]] = []
    for cand in tiers:
        got = fill_list(free, cap, cand, g, need)
        out.extend((s, k, True) for s, k in got)
        need -= sum(k for _, k in got)
    return out


def _plan_list(
    sim: Simulator,
    j: int,
    pool: int,
    n_base: int,
    n_flex: int,
    opts: PlacementOptions,
) -> list[tuple[int, int, bool]]:
    """:func:`_plan` with plain lists (small clusters); the same plan as :func:`_plan_np`."""
    g = sim.g_list[j]
    free = sim.srv_free.tolist()
    cap = sim.srv_cap.tolist()
    if pool == TRAIN:
        cands = sim._train_ids  # ascending; never modified here
    else:
        cands = [s for s, on in enumerate(sim.srv_loaned.tolist()) if on]
    base = fill_list(free, cap, cands, g, n_base)
    if sum(k for _, k in base) < n_base:
        return []
    plan = [(s, k, False) for s, k in base]
    if n_flex <= 0:
        return plan
    if opts.group_flexible and pool == INFER and bool(sim.elastic[j]):
        own_base = set(sim.base[j])
        base_gpus = sim.srv_base_gpus.tolist()
        for s, k, _ in plan:
            own_base.add(s)
            base_gpus[s] += k * g
        allowed = [s for s in cands if s not in own_base]
        tiers: tuple[list[int], ...] = (
            [s for s in allowed if base_gpus[s] == 0],
            [s for s in allowed if base_gpus[s] > 0],
        )
    else:
        tiers = (cands,)
    need = n_flex
    for cand in tiers:
        got = fill_list(free, cap, cand, g, need)
        plan.extend((s, k, True) for s, k in got)
        need -= sum(k for _, k in got)
    return plan


def _plan_np(
    sim: Simulator,
    j: int,
    pool: int,
    n_base: int,
    n_flex: int,
    opts: PlacementOptions,
) -> list[tuple[int, int, bool]]:
    """:func:`_plan` with numpy masks (big clusters)."""
    g = int(sim.g[j])
    free = sim.srv_free.copy()
    cap = sim.srv_cap
    usable = sim.usable_mask(pool)
    base = fill(free, cap, usable, g, n_base)
    if sum(k for _, k in base) < n_base:
        return []
    plan = [(s, k, False) for s, k in base]
    if n_flex <= 0:
        return plan
    grouped = opts.group_flexible and pool == INFER and bool(sim.elastic[j])
    if grouped:
        own_base = np.zeros(sim.n_servers, dtype=bool)
        for s in sim.base[j]:
            own_base[s] = True
        for s, _, _ in plan:
            own_base[s] = True
        base_gpus = sim.srv_base_gpus.copy()
        for s, k, _ in plan:
            base_gpus[s] += k * g
        allowed = usable & ~own_base
        tiers_np: tuple[np.ndarray, ...] = (allowed & (base_gpus == 0), allowed & (base_gpus > 0))
    else:
        tiers_np = (usable,)
    need = n_flex
    for cand in tiers_np:
        got = fill(free, cap, cand, g, need)
        plan.extend((s, k, True) for s, k in got)
        need -= sum(k for _, k in got)
    return plan


def _pool_order(sim: Simulator, j: int, decision: Decision, opts: PlacementOptions) -> list[int]:
    allowed = sim.allowed_pools(j)
    if len(allowed) == 1:
        return list(allowed)
    pref = decision.pools.get(j)
    if pref in allowed:
        return [int(pref), 1 - int(pref)]
    if sim.elastic[j] and opts.elastic_prefer_inference:
        return [INFER, TRAIN]
    return [TRAIN, INFER]


def _commit(sim: Simulator, j: int, plan: list[tuple[int, int, bool]]) -> int:
    n = 0
    for s, k, is_flex in plan:
        sim._add_workers(j, s, k, is_flex)
        n += k
    return n


def _scale_in(sim: Simulator, j: int, k: int) -> None:
    """Remove ``k`` flexible workers of job ``j``: loaned servers first, then fewest workers."""
    loaned = sim.srv_loaned.item
    order = sorted(sim.flex[j].items(), key=lambda kv: (not loaned(kv[0]), kv[1], kv[0]))
    for s, have in order:
        if k == 0:
            break
        r = min(k, have)
        sim._remove_workers(j, s, r, True)
        k -= r
    if k:  # only reachable if base workers must go; targets are clamped to >= w_min
        for s, have in sorted(sim.base[j].items(), key=lambda kv: (not loaned(kv[0]), kv[0])):
            if k == 0:
                break
            r = min(k, have)
            sim._remove_workers(j, s, r, False)
            k -= r
    sim._rebalance(j)


def _validate_target(sim: Simulator, j: object, t: object) -> tuple[int, int, str]:
    """Return (job, target, reason); reason non-empty means ignore (or, with a target, clamped)."""
    try:
        jj = int(j)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return -1, 0, f"job id {j!r} is not an integer"
    if not 0 <= jj < sim.n_jobs:
        return -1, 0, f"job id {jj} is not in the trace"
    st = sim.state.item(jj)
    if st != _QUEUED and st != _RUNNING:
        return -1, 0, f"job {jj} is not active (state {JobState(st).name})"
    if type(t) is int and 0 <= t < _EXACT:  # the common case: float(t) is exact
        ti = t
    else:
        try:
            tf = float(t)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return -1, 0, f"target {t!r} for job {jj} is not a number"
        if not math.isfinite(tf) or tf < 0 or tf != int(tf):
            return -1, 0, f"target {t!r} for job {jj} must be a whole number >= 0"
        ti = int(tf)
    wmin, wmax = sim.w_min_list[jj], sim.w_max_list[jj]
    if ti > wmax:
        return jj, wmax, f"target {ti} above w_max={wmax}; clamped"
    if 0 < ti < wmin:
        return jj, wmin, f"target {ti} below w_min={wmin}; clamped"
    if st == _RUNNING and not sim.elastic_list[jj] and ti not in (0, int(sim.workers[jj])):
        return -1, 0, f"job {jj} is inelastic; target must be 0 or {int(sim.workers[jj])}"
    return jj, ti, ""


def apply_decision(sim: Simulator, decision: Decision, opts: PlacementOptions) -> PlacementReport:
    """Apply ``decision`` on ``sim`` and report what happened."""
    rep = PlacementReport()
    targets: dict[int, int] = {}
    for j, t in decision.targets.items():
        jj, ti, why = _validate_target(sim, j, t)
        if why:
            rep.invalid[jj if jj >= 0 else -1 - len(rep.invalid)] = why
        if jj >= 0:
            targets[jj] = ti
    state, workers = sim.state, sim.workers
    # 1. releases
    for j in sorted(targets):
        t = targets[j]
        if state.item(j) != _RUNNING:
            continue
        cur = workers.item(j)
        if t == 0:
            sim._preempt(j)
            rep.preempted.append(j)
        elif t < cur:
            _scale_in(sim, j, cur - t)
            sim._charge_scale(j, out=False)
            rep.scaled_in.append(j)
    # 2. growth, best-fit decreasing
    grow = []
    for j, t in targets.items():
        st = state.item(j)
        if (st == _RUNNING and t > workers.item(j)) or (st == _QUEUED and t > 0):
            grow.append(j)
    prio = {int(j): i for i, j in enumerate(decision.order or [])}
    far = len(prio)
    g_list = sim.g_list
    grow.sort(key=lambda j: (-g_list[j], prio.get(j, far), j))
    for j in grow:
        t = targets[j]
        wmin = sim.w_min_list[j]
        if state.item(j) == _RUNNING:
            cur = workers.item(j)
            plan = _plan(sim, j, sim.pool.item(j), 0, t - cur, opts)
            got = _commit(sim, j, plan)
            if got:
                sim._charge_scale(j, out=True)
                rep.scaled_out.append(j)
            if cur + got < t:
                rep.unplaced[j] = (t, cur + got)
            continue
        best: list[tuple[int, int, bool]] = []
        best_n = 0
        best_pool = -1
        for p in _pool_order(sim, j, decision, opts):
            plan = _plan(sim, j, p, wmin, t - wmin, opts)
            n = sum(k for _, k, _ in plan)
            if n > best_n:
                best, best_n, best_pool = plan, n, p
            if n == t:
                break
        if best_n >= wmin:
            _commit(sim, j, best)
            sim._mark_started(j, best_pool)
            rep.started.append(j)
        if best_n < t:
            rep.unplaced[j] = (t, best_n if best_n >= wmin else 0)
    return rep
