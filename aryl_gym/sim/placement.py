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

The rules are written once, against :class:`PlacementState`, and run on two kinds of state:
the :class:`~aryl_gym.sim.engine.Simulator` (:func:`apply_decision`, the real placement) and a
:class:`Scratch` copy (dry runs). Everything that needs to know what the engine would do uses
them: :func:`plan` dry-runs a whole decision (Aryl's placeability check, the allocators'
``fit_targets``, the env's exact action masks), and :meth:`Scratch.grow` /
:meth:`Scratch.release` / :meth:`Scratch.fits` place step by step (AFS, Gandiva).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from aryl_gym.sim.index import fill_bits
from aryl_gym.sim.jobs import JobState
from aryl_gym.sim.state import PlacementState, WorkerDicts
from aryl_gym.sim.view import INFER, TRAIN, ClusterView, Decision, PlacementOptions, PlacementReport

_QUEUED = int(JobState.QUEUED)
_RUNNING = int(JobState.RUNNING)
_EXACT = 2**53  # ints below this convert to float exactly


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


#: Clusters with at most this many servers are planned with plain-Python lists (faster at this
#: size); bigger ones with the state's free-capacity index (:class:`~aryl_gym.sim.index.FreeIndex`:
#: servers bucketed by free GPUs, a best fit in O(buckets)). The numpy scan (:func:`_plan_np`)
#: gives the same plan too (all three are tested against each other).
PY_SERVERS = 64


# ----------------------------------------------------------------------------------------------
# the state the rules work on (PlacementState: aryl_gym.sim.state)
# ----------------------------------------------------------------------------------------------
def rebalance(st: PlacementState, j: int) -> None:
    """Keep ``min(workers, w_min)`` workers of job ``j`` labelled base: relabel flexible ones
    (lowest server id first) when base workers went away."""
    base, flex = st.base[j], st.flex[j]
    need = min(int(st.workers[j]), st.lim_lo_list[j]) - sum(base.values())
    if need <= 0:
        return
    g = st.g_list[j]
    for s in sorted(flex):
        if need == 0:
            break
        k = min(need, flex[s])
        flex[s] -= k
        if flex[s] == 0:
            del flex[s]
        base[s] = base.get(s, 0) + k
        st.srv_flex_gpus[s] -= k * g
        st.srv_base_gpus[s] += k * g
        need -= k


def release_all(st: PlacementState, j: int) -> None:
    """Remove every worker of job ``j`` (flexible ones first)."""
    for s, k in list(st.flex[j].items()):
        st.remove_workers(j, s, k, True)
    for s, k in list(st.base[j].items()):
        st.remove_workers(j, s, k, False)


class _LazyDicts:
    """A list of dicts that copies an entry the first time it is read (copy on access)."""

    __slots__ = ("_own", "_src")

    def __init__(self, src: WorkerDicts):
        self._src = src
        self._own: dict[int, dict[int, int]] = {}

    def __getitem__(self, i: int) -> dict[int, int]:
        d = self._own.get(i)
        if d is None:
            d = dict(self._src[i])
            self._own[i] = d
        return d


class Scratch:
    """A copy-on-write copy of a cluster's placement state: the same rules run on it as on the
    simulator (:func:`apply_decision`, :meth:`grow`, :meth:`release`), and the simulator is never
    changed.

    Built from a :class:`~aryl_gym.sim.view.ClusterView` (policies) or anything implementing
    :class:`PlacementState` (the simulator, another scratch). Only what placement changes is
    copied: the server arrays and per-job state arrays at once, a job's worker dictionaries on
    first access. No accounting is kept (no rates, overheads or counters).

    Besides dry runs of whole decisions (:func:`plan`), policies build decisions on it step by
    step: :meth:`release` (the engine's scale-in), :meth:`grow` (the engine's placement of new
    workers, pools and flexible-grouping tiers included) and :meth:`fits` (how many workers of a
    size fit a pool now, cached until the state changes).
    """

    def __init__(self, src: PlacementState | ClusterView, opts: PlacementOptions | None = None):
        if opts is not None and not isinstance(opts, PlacementOptions):
            raise TypeError(
                f"opts must be an aryl_gym.sim.view.PlacementOptions or None, got {opts!r}"
            )
        if not isinstance(src, ClusterView) and not (
            hasattr(src, "srv_free") and hasattr(src, "allowed_pools")
        ):
            raise TypeError(
                "the placement state must be a ClusterView, a Simulator or a Scratch, got "
                f"{type(src).__name__}"
            )
        sim: PlacementState = src._sim if isinstance(src, ClusterView) else src
        #: placement options :meth:`grow` follows (``apply_decision`` takes its own)
        self.opts = opts if opts is not None else PlacementOptions()
        self.n_jobs = sim.n_jobs
        self.n_servers = sim.n_servers
        self.g_list = sim.g_list
        self.w_min_list = sim.w_min_list
        self.w_max_list = sim.w_max_list
        self.elastic_list = sim.elastic_list
        self.lim_lo_list = sim.lim_lo_list
        self.lim_hi_list = sim.lim_hi_list
        self.resizable_list = sim.resizable_list
        self.hetero_list = sim.hetero_list
        self.elastic = sim.elastic
        self.srv_cap = sim.srv_cap
        self.srv_loaned = sim.srv_loaned  # loans never change during placement
        self.train_ids = sim.train_ids
        self._train_mask = sim.usable_mask(TRAIN)
        self._allowed = sim.allowed_pools
        self.srv_free = sim.srv_free.copy()
        self.free_index = sim.free_index.copy()
        self.srv_base_gpus = sim.srv_base_gpus.copy()
        self.srv_flex_gpus = sim.srv_flex_gpus.copy()
        self.state = sim.state.copy()
        self.workers = sim.workers.copy()
        self.pool = sim.pool.copy()
        self._base = _LazyDicts(sim.base)
        self._flex = _LazyDicts(sim.flex)
        self._fits: dict[tuple[int, int], int] = {}

    @property
    def base(self) -> WorkerDicts:
        return self._base

    @property
    def flex(self) -> WorkerDicts:
        return self._flex

    # -- PlacementState ----------------------------------------------------------------------
    def usable_mask(self, pool: int) -> np.ndarray:
        return self._train_mask if pool == TRAIN else self.srv_loaned

    def allowed_pools(self, j: int) -> tuple[int, ...]:
        return self._allowed(j)

    def add_workers(self, j: int, s: int, k: int, flex: bool) -> None:
        gpus = k * self.g_list[j]
        free = self.srv_free.item(s)
        self.srv_free[s] = free - gpus
        self.free_index.move(s, free, free - gpus)
        d = self._flex[j] if flex else self._base[j]
        d[s] = d.get(s, 0) + k
        if flex:
            self.srv_flex_gpus[s] += gpus
        else:
            self.srv_base_gpus[s] += gpus
        self.workers[j] += k
        if self._fits:
            self._fits.clear()

    def remove_workers(self, j: int, s: int, k: int, flex: bool) -> None:
        gpus = k * self.g_list[j]
        d = self._flex[j] if flex else self._base[j]
        left = d[s] - k
        if left:
            d[s] = left
        else:
            del d[s]
        free = self.srv_free.item(s)
        self.srv_free[s] = free + gpus
        self.free_index.move(s, free, free + gpus)
        if flex:
            self.srv_flex_gpus[s] -= gpus
        else:
            self.srv_base_gpus[s] -= gpus
        self.workers[j] -= k
        if self._fits:
            self._fits.clear()

    def preempt(self, j: int) -> None:
        release_all(self, j)
        self.state[j] = _QUEUED
        self.pool[j] = -1

    def mark_started(self, j: int, pool: int) -> None:
        self.state[j] = _RUNNING
        self.pool[j] = pool

    def charge_scale(self, j: int, out: bool) -> None:
        return None

    # -- step-by-step use by policies --------------------------------------------------------
    def fits(self, pool: int, g: int) -> int:
        """Workers of ``g`` GPUs that fit in ``pool``'s free space now (fragmentation aware)."""
        key = (pool, g)
        n = self._fits.get(key)
        if n is None:
            _check_pool(pool)
            if not g >= 1:
                raise ValueError(f"fits(pool, g): GPUs per worker g must be >= 1, got {g!r}")
            n = self._fits[key] = int((self.srv_free[self.usable_mask(pool)] // g).sum())
        return n

    def release(self, j: int, k: int) -> None:
        """Remove ``k`` workers of running job ``j`` as the engine's scale-in does (flexible
        workers on loaned servers first, then on servers holding fewest of them; base workers
        last). The job stays running here even at 0 workers. ``k`` above the job's workers
        removes them all."""
        if k > 0:
            _check_job(self, j)
            _scale_in(self, j, k)

    def grow(self, j: int, pool: int, k: int, whole: bool = False) -> int:
        """Place up to ``k`` more workers of job ``j`` on ``pool`` with the engine's rules
        (:attr:`opts`); returns how many were placed.

        A job without workers starts: its first ``w_min`` workers are its base, all or nothing.
        ``whole``: place all ``k`` or none. As the engine: never beyond ``w_max`` (``k`` is cut
        to it; with ``whole``, nothing is placed), never on a pool the job may not use (0
        placed), and a running job grows only in its own pool (another pool is a ValueError).
        ``j`` must be a queued or running job and ``pool`` ``TRAIN`` or ``INFER``.
        """
        if k <= 0:
            return 0
        _check_pool(pool)
        st = _check_job(self, j)
        cur = int(self.workers[j])
        room = self.lim_hi_list[j] - cur
        if k > room:
            if whole or room <= 0:
                return 0
            k = room
        if st == _RUNNING and cur > 0:
            if pool != self.pool.item(j):
                raise ValueError(
                    f"grow: job {j} runs on pool {self.pool.item(j)}; its workers share one pool "
                    f"(the engine grows a running job only there), got pool {pool}"
                )
        elif pool not in self.allowed_pools(j):
            return 0
        n_base = max(min(self.lim_lo_list[j] - cur, k), 0) if cur == 0 else 0
        got = _plan(self, j, pool, n_base, k - n_base, self.opts)
        n = sum(x for _, x, _ in got)
        if n == 0 or (whole and n < k):
            return 0
        _commit(self, j, got)
        if self.state[j] != _RUNNING:
            self.mark_started(j, pool)
        return n


def _check_pool(pool: object) -> None:
    if pool != TRAIN and pool != INFER:
        raise ValueError(f"pool must be TRAIN ({TRAIN}) or INFER ({INFER}), got {pool!r}")


def _check_job(st: Scratch, j: int) -> int:
    """Job ``j``'s state; a ValueError unless ``j`` is a queued or running job of the trace."""
    if not 0 <= j < st.n_jobs:
        raise ValueError(f"job id {j!r} is not in the trace (0..{st.n_jobs - 1})")
    s = st.state.item(j)
    if s != _QUEUED and s != _RUNNING:
        raise ValueError(f"job {j} is {JobState(s).name}; only queued or running jobs can change")
    return s


# ----------------------------------------------------------------------------------------------
# the rules
# ----------------------------------------------------------------------------------------------
def _plan(
    st: PlacementState,
    j: int,
    pool: int,
    n_base: int,
    n_flex: int,
    opts: PlacementOptions,
) -> list[tuple[int, int, bool]]:
    """Plan ``n_base`` base and up to ``n_flex`` flexible workers of job ``j`` on ``pool``.

    Returns ``[(server, workers, is_flex), ...]``; an empty list when the base does not fit.
    Nothing is changed on ``st``.
    """
    if st.n_servers <= PY_SERVERS:
        plan = _plan_list(st, j, pool, n_base, n_flex, opts)
    else:
        plan = _plan_index(st, j, pool, n_base, n_flex, opts)
    if opts.hetero and pool == TRAIN and st.hetero_list[j] and (plan or n_base == 0):
        need = n_base + n_flex - sum(k for _, k, _ in plan)
        if need > 0:
            plan.extend(_spill(st, j, need, opts))
    return plan


def _spill(
    st: PlacementState, j: int, need: int, opts: PlacementOptions
) -> list[tuple[int, int, bool]]:
    """Up to ``need`` flexible workers of hetero job ``j`` (base on training servers) on loaned
    inference servers; with ``group_flexible``, servers holding no base worker of any job first."""
    g = st.g_list[j]
    free = st.srv_free.tolist()
    cap = st.srv_cap.tolist()
    cands = [s for s, on in enumerate(st.srv_loaned.tolist()) if on]
    if opts.group_flexible:
        base_gpus = st.srv_base_gpus.tolist()
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
    st: PlacementState,
    j: int,
    pool: int,
    n_base: int,
    n_flex: int,
    opts: PlacementOptions,
) -> list[tuple[int, int, bool]]:
    """:func:`_plan` with plain lists (small clusters); the same plan as :func:`_plan_np`."""
    g = st.g_list[j]
    free = st.srv_free.tolist()
    cap = st.srv_cap.tolist()
    if pool == TRAIN:
        cands = st.train_ids  # ascending; never modified here
    else:
        cands = [s for s, on in enumerate(st.srv_loaned.tolist()) if on]
    base = fill_list(free, cap, cands, g, n_base)
    if sum(k for _, k in base) < n_base:
        return []
    plan = [(s, k, False) for s, k in base]
    if n_flex <= 0:
        return plan
    if opts.group_flexible and pool == INFER and bool(st.elastic[j]):
        own_base = set(st.base[j])
        base_gpus = st.srv_base_gpus.tolist()
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
    st: PlacementState,
    j: int,
    pool: int,
    n_base: int,
    n_flex: int,
    opts: PlacementOptions,
) -> list[tuple[int, int, bool]]:
    """:func:`_plan` with numpy masks (big clusters)."""
    g = st.g_list[j]
    free = st.srv_free.copy()
    cap = st.srv_cap
    usable = st.usable_mask(pool)
    base = fill(free, cap, usable, g, n_base)
    if sum(k for _, k in base) < n_base:
        return []
    plan = [(s, k, False) for s, k in base]
    if n_flex <= 0:
        return plan
    grouped = opts.group_flexible and pool == INFER and bool(st.elastic[j])
    if grouped:
        own_base = np.zeros(st.n_servers, dtype=bool)
        for s in st.base[j]:
            own_base[s] = True
        for s, _, _ in plan:
            own_base[s] = True
        base_gpus = st.srv_base_gpus.copy()
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


def _plan_index(
    st: PlacementState,
    j: int,
    pool: int,
    n_base: int,
    n_flex: int,
    opts: PlacementOptions,
) -> list[tuple[int, int, bool]]:
    """:func:`_plan` on the state's free-capacity index (big clusters): each best fit is
    O(buckets) (:func:`~aryl_gym.sim.index.best_fit_bits`), not a scan of the servers; the
    same plan as :func:`_plan_np` and :func:`_plan_list`."""
    g = st.g_list[j]
    ix = st.free_index
    bins = ix.bins.copy()
    not_cap = ix.not_cap
    usable = ix.train if pool == TRAIN else ix.loaned
    base = fill_bits(bins, not_cap, usable, g, n_base)
    if sum(k for _, k in base) < n_base:
        return []
    plan = [(s, k, False) for s, k in base]
    if n_flex <= 0:
        return plan
    if opts.group_flexible and pool == INFER and bool(st.elastic[j]):
        own = 0
        for s in st.base[j]:
            own |= 1 << s
        for s, _, _ in plan:
            own |= 1 << s
        allowed = usable & ~own
        # servers holding a base worker of some job (the plan's own base servers are not allowed)
        has_base = int.from_bytes(np.packbits(st.srv_base_gpus > 0, bitorder="little").tobytes(), "little")
        tiers: tuple[int, ...] = (allowed & ~has_base, allowed & has_base)
    else:
        tiers = (usable,)
    need = n_flex
    for cand in tiers:
        got = fill_bits(bins, not_cap, cand, g, need)
        plan.extend((s, k, True) for s, k in got)
        need -= sum(k for _, k in got)
    return plan


def pool_order(
    st: PlacementState | ClusterView,
    j: int,
    pref: int | None,
    opts: PlacementOptions,
    fixed: bool = False,
) -> list[int]:
    """The pools the engine tries for queued job ``j``, in order: the preferred pool ``pref``
    first when the job may use it (only that one with ``fixed``), else inference first for an
    elastic job when ``opts.elastic_prefer_inference``, else training first."""
    allowed = st.allowed_pools(j)
    if len(allowed) == 1:
        return list(allowed)
    if pref in allowed:
        p = int(pref)  # type: ignore[arg-type]
        return [p] if fixed else [p, 1 - p]
    elastic = st.jobs[j].elastic if isinstance(st, ClusterView) else bool(st.elastic[j])
    if elastic and opts.elastic_prefer_inference:
        return [INFER, TRAIN]
    return [TRAIN, INFER]


def _commit(st: PlacementState, j: int, plan: list[tuple[int, int, bool]]) -> int:
    n = 0
    for s, k, is_flex in plan:
        st.add_workers(j, s, k, is_flex)
        n += k
    return n


def _scale_in_plan(st: PlacementState, j: int, k: int) -> list[tuple[int, int, bool]]:
    """The ``k`` workers of job ``j`` a scale-in removes, as ``[(server, workers, is_flex)]`` in
    the order :func:`_scale_in` removes them: flexible ones first (loaned servers first, then the
    servers holding fewest, then by id), then base ones (loaned servers first, then by id)."""
    loaned = st.srv_loaned.item
    out: list[tuple[int, int, bool]] = []
    order = sorted(st.flex[j].items(), key=lambda kv: (not loaned(kv[0]), kv[1], kv[0]))
    for s, have in order:
        if k == 0:
            break
        r = min(k, have)
        out.append((s, r, True))
        k -= r
    if k:  # only reachable if base workers must go
        for s, have in sorted(st.base[j].items(), key=lambda kv: (not loaned(kv[0]), kv[0])):
            if k == 0:
                break
            r = min(k, have)
            out.append((s, r, False))
            k -= r
    return out


def _scale_in(st: PlacementState, j: int, k: int) -> None:
    """Remove ``k`` workers of job ``j`` (:func:`_scale_in_plan`), then relabel base workers."""
    for s, r, is_flex in _scale_in_plan(st, j, k):
        st.remove_workers(j, s, r, is_flex)
    rebalance(st, j)


def release_frees(st: PlacementState, j: int, t: int) -> dict[int, int]:
    """The GPUs :func:`release_job` with target ``t`` would free, by server (``{server: GPUs}``),
    without changing ``st``: every worker of a running job preempted (``t`` 0), the workers a
    scale-in to ``t`` removes, nothing otherwise."""
    if st.state.item(j) != _RUNNING:
        return {}
    cur = st.workers.item(j)
    g = st.g_list[j]
    out: dict[int, int] = {}
    if t == 0:
        for d in (st.flex[j], st.base[j]):
            for s, k in d.items():
                out[s] = out.get(s, 0) + k * g
    elif t < cur:
        for s, k, _ in _scale_in_plan(st, j, cur - t):
            out[s] = out.get(s, 0) + k * g
    return out


def _validate_target(st: PlacementState, j: object, t: object) -> tuple[int, int, str]:
    """Return (job, target, reason); reason non-empty means ignore (or, with a target, clamped)."""
    if type(j) is int:
        jj = j
    elif isinstance(j, (int, np.integer)) and not isinstance(j, (bool, np.bool_)):
        jj = int(j)
    else:  # a float such as 1.5, a string, a bool: never rounded or parsed to some job
        return -1, 0, f"job id {j!r} is not an integer"
    if not 0 <= jj < st.n_jobs:
        return -1, 0, f"job id {jj} is not in the trace"
    s = st.state.item(jj)
    if s != _QUEUED and s != _RUNNING:
        return -1, 0, f"job {jj} is not active (state {JobState(s).name})"
    if type(t) is int and 0 <= t < _EXACT:  # the common case: float(t) is exact
        ti = t
    elif type(t) is int and t >= _EXACT:  # beyond float range too (float(10**400) overflows)
        ti = t
    else:
        try:
            if isinstance(t, (str, bytes, bool, np.bool_)):  # (True was read as a target of 1)
                raise TypeError
            tf = float(t)  # type: ignore[arg-type]
        except (TypeError, ValueError, OverflowError):  # (was: an OverflowError from the engine)
            return -1, 0, f"target {t!r} for job {jj} is not a number"
        if not math.isfinite(tf) or tf < 0 or tf != int(tf):
            return -1, 0, f"target {t!r} for job {jj} must be a whole number >= 0"
        ti = int(tf)
    wmin, wmax = st.lim_lo_list[jj], st.lim_hi_list[jj]
    if ti > wmax:
        return jj, wmax, f"target {ti} above w_max={wmax}; clamped"
    if 0 < ti < wmin:
        return jj, wmin, f"target {ti} below w_min={wmin}; clamped"
    if s == _RUNNING and not st.resizable_list[jj] and ti not in (0, int(st.workers[jj])):
        return -1, 0, f"job {jj} is inelastic; target must be 0 or {int(st.workers[jj])}"
    return jj, ti, ""


def _check_decision(decision: object) -> None:
    """A TypeError naming the problem when ``decision`` is not a well-formed Decision."""
    if (type(decision) is Decision and type(decision.targets) is dict and type(decision.pools) is dict
            and (decision.speedup is None or type(decision.speedup) is dict)
            and (decision.batch is None or type(decision.batch) is dict)
            and (decision.order is None or type(decision.order) is list)):
        return  # the common case (every shipped policy and the env send these)
    if not isinstance(decision, Decision):
        raise TypeError(
            f"a decision must be an aryl_gym.sim.view.Decision, got {type(decision).__name__}"
        )
    for name, what in (("targets", "workers"), ("pools", "pool"), ("speedup", "rate table"),
                       ("batch", "local batch factor")):
        v = getattr(decision, name, None)
        if v is None and name in ("speedup", "batch"):
            continue  # (batch was not checked here: a list crashed after the targets were placed)
        if type(v) is not dict and not isinstance(v, Mapping):
            raise TypeError(
                f"Decision.{name} must be a dict (job id -> {what}), got {type(v).__name__}"
            )
    order = decision.order
    if order is not None and (isinstance(order, (str, bytes, Mapping))
                              or not isinstance(order, (Sequence, np.ndarray))):
        # (a set was read in hash order, a generator was used up by a dry run, an array raised
        # "truth value of an array is ambiguous")
        raise TypeError(f"Decision.order must be a list of job ids or None, got {order!r}")


def _pool_ok(p: object) -> bool:
    """Whether ``p`` is a pool a decision may name: ``TRAIN`` or ``INFER`` as a number (not a
    bool, an array or a string)."""
    if type(p) is int:
        return p == TRAIN or p == INFER
    if isinstance(p, (bool, np.bool_)) or not isinstance(p, (numbers.Real, np.integer, np.floating)):
        return False  # (True was read as INFER; an array raised after the releases were made)
    return bool(p == TRAIN or p == INFER)


def apply_decision(
    st: PlacementState,
    decision: Decision,
    opts: PlacementOptions,
    fixed_pools: bool = False,
    whole: bool = False,
) -> PlacementReport:
    """Apply ``decision`` on ``st`` (the simulator, or a :class:`Scratch`) and report what
    happened. The rules are in the module docstring.

    Two options serve policies that check their own decisions (:func:`plan`); the simulator
    uses neither: ``fixed_pools`` -- a queued job with a preferred pool (``decision.pools``)
    tries only that pool; ``whole`` -- a job that grows gets its whole target or nothing.
    """
    _check_decision(decision)
    # everything that can raise is checked before the state changes
    prio: dict[int, int] = {}
    order = decision.order
    try:  # one pass: each entry checked as it is ranked (was: 1.7 and "2" read as jobs 1 and 2)
        for i, j in enumerate(order if order is not None else ()):
            if type(j) is not int and (isinstance(j, (bool, np.bool_)) or not isinstance(j, np.integer)):
                raise TypeError
            prio[int(j)] = i
    except TypeError:  # a non-integer entry, or an order that is not a sequence
        raise TypeError(
            f"Decision.order must be a list of job ids (integers) or None, got {decision.order!r}"
        ) from None
    rep = PlacementReport()
    targets: dict[int, int] = {}
    for j, t in decision.targets.items():
        jj, ti, why = _validate_target(st, j, t)
        if why:
            rep.invalid[jj if jj >= 0 else -1 - len(rep.invalid)] = why
        if jj >= 0:
            targets[jj] = ti
    # the preferred pools, checked before anything changes (was: after the releases, so a pool
    # that could not be compared, e.g. an array, raised with the releases made)
    pools = decision.pools
    if pools:
        n_jobs = len(st.workers)
        bad = []
        for j, p in pools.items():
            if not _pool_ok(p):
                rep.invalid[-1 - len(rep.invalid)] = (
                    f"pool {p!r} for job {j!r} is not TRAIN ({TRAIN}) or INFER ({INFER}); ignored"
                )
                bad.append(j)
            elif (isinstance(j, (bool, np.bool_)) or not isinstance(j, (int, np.integer))
                  or not 0 <= j < n_jobs):  # (was: ignored without a word; 2.0 was read as job 2)
                rep.invalid[-1 - len(rep.invalid)] = f"pool for {j!r}: not a job id of the trace; ignored"
                bad.append(j)
        if bad:
            pools = {j: p for j, p in pools.items() if not any(j is b for b in bad)}
    # 1. releases
    for j in sorted(targets):
        release_job(st, j, targets[j], rep)
    # 2. growth, best-fit decreasing
    for j in growth_order(st, targets, prio):
        grow_job(st, j, targets[j], opts, pools.get(j), fixed_pools, whole, rep)
    return rep


def release_job(st: PlacementState, j: int, t: int, rep: PlacementReport) -> None:
    """The release step of :func:`apply_decision` for one job with a valid target ``t``: a
    running job is preempted (``t`` 0) or scaled in (``t`` below its workers); else nothing.
    Releases touch only their own job's workers, so their order does not matter."""
    if st.state.item(j) != _RUNNING:
        return
    cur = st.workers.item(j)
    if t == 0:
        st.preempt(j)
        rep.preempted.append(j)
    elif t < cur:
        _scale_in(st, j, cur - t)
        st.charge_scale(j, out=False)
        rep.scaled_in.append(j)


def growth_order(st: PlacementState, targets: Mapping[int, int], prio: Mapping[int, int]) -> list[int]:
    """The jobs of (valid) ``targets`` that grow on ``st``, in the order :func:`apply_decision`
    places them: best-fit decreasing by GPUs per worker, then the decision's priority ``prio``
    (job -> rank; unranked jobs after the ranked ones), then id."""
    state, workers, g_list = st.state, st.workers, st.g_list
    grow = []
    for j, t in targets.items():
        s = state.item(j)
        if (s == _RUNNING and t > workers.item(j)) or (s == _QUEUED and t > 0):
            grow.append(j)
    far = len(prio)
    grow.sort(key=lambda j: (-g_list[j], prio.get(j, far), j))
    return grow


def grow_job(
    st: PlacementState,
    j: int,
    t: int,
    opts: PlacementOptions,
    pref: int | None,
    fixed_pools: bool,
    whole: bool,
    rep: PlacementReport,
) -> bool:
    """The growth step of :func:`apply_decision` for one job: place queued or running job ``j``
    up to its (valid) target ``t`` on ``st``; a shortfall goes into ``rep.unplaced``. Returns
    whether ``t`` was reached. :func:`apply_decision` calls it for each growing job in its order;
    the env's exact masks call it for a grant that the engine would place last."""
    wmin = st.lim_lo_list[j]
    state, workers = st.state, st.workers
    if state.item(j) == _RUNNING:
        cur = workers.item(j)
        plan = _plan(st, j, st.pool.item(j), 0, t - cur, opts)
        if whole and sum(k for _, k, _ in plan) < t - cur:
            plan = []
        got = _commit(st, j, plan)
        if got:
            st.charge_scale(j, out=True)
            rep.scaled_out.append(j)
        if cur + got < t:
            rep.unplaced[j] = (t, cur + got)
            return False
        return True
    best: list[tuple[int, int, bool]] = []
    best_n = 0
    best_pool = -1
    for p in pool_order(st, j, pref, opts, fixed_pools):
        plan = _plan(st, j, p, wmin, t - wmin, opts)
        n = sum(k for _, k, _ in plan)
        if n > best_n:
            best, best_n, best_pool = plan, n, p
        if n == t:
            break
    if best_n >= wmin and not (whole and best_n < t):
        _commit(st, j, best)
        st.mark_started(j, best_pool)
        rep.started.append(j)
    elif whole:
        best_n = 0
    if best_n < t:
        rep.unplaced[j] = (t, best_n if best_n >= wmin else 0)
        return False
    return True


def grows_fully(st: PlacementState, j: int, t: int, opts: PlacementOptions) -> bool:
    """What :func:`grow_job` (no preferred pool, not ``fixed_pools``, not ``whole``) returns for
    queued or running job ``j`` and valid target ``t``, without changing ``st``."""
    if st.state.item(j) == _RUNNING:
        need = t - st.workers.item(j)
        return sum(k for _, k, _ in _plan(st, j, st.pool.item(j), 0, need, opts)) == need
    wmin = st.lim_lo_list[j]
    return any(
        sum(k for _, k, _ in _plan(st, j, p, wmin, t - wmin, opts)) == t
        for p in pool_order(st, j, None, opts)
    )


# ----------------------------------------------------------------------------------------------
# dry runs
# ----------------------------------------------------------------------------------------------
@dataclass
class PlacementPlan:
    """What a decision would do (:func:`plan`), computed on a :class:`Scratch`.

    Attributes:
        report: the :class:`~aryl_gym.sim.view.PlacementReport` the real placement would give.
        after: the placement state once the decision is applied (keep building on it, e.g.
            with :meth:`Scratch.grow`).
        workers_before: the per-job worker counts before the decision.
    """

    report: PlacementReport
    after: Scratch
    workers_before: np.ndarray

    @property
    def fully_placed(self) -> bool:
        """Every target placed exactly as asked (none short, none invalid)."""
        return not self.report.unplaced and not self.report.invalid

    def workers(self, j: int) -> int:
        """Job ``j``'s workers once the decision is applied."""
        return int(self.after.workers[j])

    def changes(self) -> tuple[dict[int, int], dict[int, int]]:
        """(job -> workers after, job -> pool) for the jobs whose worker count changes.
        Placing these targets gives the same placement as the decision (the engine places
        worker by worker, so a shortfall consumes nothing beyond what it got)."""
        a = self.after
        changed = np.flatnonzero(a.workers != self.workers_before)
        out = {int(j): int(a.workers[j]) for j in changed}
        pools = {int(j): int(a.pool[j]) for j in changed if a.workers[j] > 0}
        return out, pools


def plan(
    src: PlacementState | ClusterView,
    decision: Decision,
    opts: PlacementOptions,
    fixed_pools: bool = False,
    whole: bool = False,
) -> PlacementPlan:
    """Dry run: what :func:`apply_decision` would do with ``decision`` on ``src`` (a view, the
    simulator, or a :class:`Scratch`, which is copied too); ``src`` is not changed.

    Because the same code places the real decision, "the plan placed every target" is exactly
    "the simulator will place every target" (for the same options). ``fixed_pools`` and
    ``whole``: see :func:`apply_decision`.
    """
    if not isinstance(opts, PlacementOptions):
        raise TypeError(f"opts must be an aryl_gym.sim.view.PlacementOptions, got {opts!r}")
    scratch = Scratch(src, opts)
    rep = apply_decision(scratch, decision, opts, fixed_pools, whole)
    before = src._sim.workers if isinstance(src, ClusterView) else src.workers
    return PlacementPlan(rep, scratch, before)
