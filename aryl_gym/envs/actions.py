"""Action interfaces of the allocation env (SPEC 6), all feeding one simulator.

Every mode turns actions into a :class:`~aryl_gym.sim.view.Decision` for the jobs in the window;
the shared placement engine (:mod:`aryl_gym.sim.placement`) applies it. **Jobs outside the
window** keep what they have: running jobs keep their workers, queued jobs stay queued.

``targets`` -- ``MultiDiscrete([L] * K)``, ``L = max_workers + 1``
    Slot ``i``'s level is the worker target of the job in slot ``i`` (0 = not running). The level
    ``max_workers`` means ``w_max`` for a job whose ``w_max`` is larger. Allowed levels (mask,
    flattened ``K x L``): padding slots only 0; queued jobs 0 or ``w_min..w_max`` up to what fits
    in the free GPUs of their best allowed pool now; running elastic jobs ``w_min..w_max`` up to
    current + what fits in their pool; running inelastic jobs their current count; 0 for running
    jobs only with ``allow_preempt``. The per-slot masks ignore the other slots, so the targets
    of one step may conflict; **conflict rule**: the placement engine's fixed order (releases
    first; then growth best-fit decreasing by GPUs per worker, then slot order, then id), and a
    target that does not fit gets the largest feasible count ``>= w_min`` or stays queued (the
    shortfall is in ``info["unplaced"]``). The round is committed every step.

``sequential`` -- ``Discrete(2K + 1)`` (``Discrete(K + 1)`` with ``release=False``)
    Sub-steps inside one decision point. Action ``i < K`` *grants* the job in slot ``i`` its base
    demand ``w_min`` when it is queued, or one more worker when it is running (or granted this
    round), elastic and below ``w_max``. Action ``K + i`` *releases* one worker of the running
    job in slot ``i`` (elastic, down to ``w_min``; below that, a release preempts the job and
    needs ``allow_preempt``). A job only moves one way per round (no grant after a release and
    vice versa), so a round ends. The last action *commits* the round: the tentative targets go
    to the engine in grant order. Masks are **exact**: an action is allowed only when the whole
    tentative decision with it would be placed in full (checked by a dry run of the engine
    itself, :func:`aryl_gym.sim.placement.plan`), so committed grants are never cut.

``priority`` -- ``Box(-1, 1, (K,))``
    Scores into a greedy packer: queued window jobs with a score > 0 are started at ``w_req``,
    highest score first (the engine places what fits, ``>= w_min``, in that order); running
    jobs keep their workers. The mask (``K``) marks the slots that hold a job; it is advisory (a
    ``Box`` has no discrete actions to mask: every score in ``[-1, 1]`` of every slot is valid,
    a padding slot's is ignored), and it is all False exactly when the window is empty (e.g. at
    time 0, before the first arrival), when every action in the space is the same no-op.

Shapes: a ``targets`` or ``priority`` action holds its ``K`` entries along one axis: shape
``(K,)``, or ``(K,)`` with axes of length 1 added (``(1, K)``, ``(K, 1)``; a scalar when
``K == 1``). Any other shape is a wrong shape, even with ``K`` entries (``(2, 2)`` for
``K = 4`` used to be read row by row). True/False count as 1/0, as Gymnasium's spaces contain
them.

Invalid actions (a masked level or action, an out-of-range value, NaN, a wrong shape) are a
no-op for the part they concern, are counted in ``info["invalid"]`` and never raise.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from typing import Any, Protocol

import numpy as np
from gymnasium import spaces

from aryl_gym.sim.engine import Simulator
from aryl_gym.sim.index import fill_bits
from aryl_gym.sim.jobs import JobState
from aryl_gym.sim.placement import (
    Scratch,
    grow_job,
    grows_fully,
    growth_order,
    plan,
    pool_order,
    release_frees,
    release_job,
)
from aryl_gym.sim.state import PlacementState
from aryl_gym.sim.view import INFER, TRAIN, Decision, PlacementOptions, PlacementReport


class ArylEnv(Protocol):
    """What the codecs read from the env (:class:`aryl_gym.envs.allocation.ArylEnv`), typed
    structurally so that this module need not import the env module, which imports it."""

    sim: Simulator | None
    window: np.ndarray  # this round's window: job ids
    fits: tuple[list[int], list[int]]  # (training, loaned): workers of g GPUs that fit, by g
    _wsnap: tuple[list[int], list[int], list[int], list[int]]  # window ids, states, workers, pools
    placement: PlacementOptions
    damped: set[int] | frozenset[int]  # jobs whose releases flap damping refuses (usually empty)
    stall_guard: bool  # sequential: no commit without a grant in the stall condition
    preempt_guard: bool  # sequential: preemptions only while a queued window job cannot start


def _sim(env: ArylEnv) -> Simulator:
    sim = env.sim
    assert sim is not None, "call reset() first"
    return sim

MODES: tuple[str, ...] = ("targets", "sequential", "priority")


def numeric_action(action: object) -> np.ndarray | None:
    """``action`` as a numpy array of booleans, integers or floats; None for anything else
    (strings, which numpy would parse as numbers, complex numbers, whose imaginary part a float
    cast would drop, objects that are not numbers): an invalid action."""
    if isinstance(action, (str, bytes)):
        return None
    if isinstance(action, np.ma.MaskedArray):
        # was: np.asarray took the values under the mask (priority, sequential: a silently
        # different action; np.ma.masked was action 0) and targets raised a TypeError on None
        if np.ma.getmaskarray(action).any():
            return None  # a masked entry holds no value
        action = np.ma.getdata(action)
    try:
        a = np.asarray(action)  # also a plain ndarray of a subclass (np.matrix)
    except (TypeError, ValueError):
        return None
    if a.dtype.kind in "biuf":
        return a
    if a.dtype.kind == "O":  # e.g. Python ints beyond int64: keep only real numbers
        try:
            return np.asarray(a, dtype=np.float64) if all(
                isinstance(x, (int, float, np.integer, np.floating)) for x in a.reshape(-1).tolist()
            ) else None
        except (TypeError, ValueError, OverflowError):
            return None
    return None


def slot_action(a: np.ndarray, k: int) -> np.ndarray | None:
    """``a`` as the ``(k,)`` entries of a per-slot action, or None for a wrong shape: the entries
    must lie along one axis (``(k,)``, ``(1, k)``, ``(k, 1)``, ..., a scalar when ``k == 1``).
    Was: any shape of ``k`` entries, read row by row, so ``(2, 2)`` for ``k = 4`` (whose
    transpose is another action) was taken without a word."""
    shape = a.shape
    if shape == (k,):
        return a
    if a.size == k and sum(1 for d in shape if d != 1) <= 1:
        return a.reshape(k)
    return None


def discrete_action(action: object, n: int) -> int:
    """A ``Discrete(n)`` action as an int, or -1 when it is not one whole number in ``[0, n)``
    (a float such as 1.5 is never truncated, a string never parsed)."""
    t = type(action)
    if t is int or t is np.int64 or t is np.intp:  # the common case: one integer
        x = int(action)  # type: ignore[call-overload]
        return x if 0 <= x < n else -1
    a = numeric_action(action)
    if a is None or a.size != 1:
        return -1
    x = a.reshape(-1)[0].item()
    if isinstance(x, float) and not (math.isfinite(x) and x == int(x)):
        return -1
    x = int(x)
    return x if 0 <= x < n else -1


_QUEUED = int(JobState.QUEUED)
_RUNNING = int(JobState.RUNNING)


class ActionCodec:
    """Base of the action modes."""

    mode = ""
    space: spaces.Space
    mask_size: int

    def begin_round(self, env: ArylEnv) -> None:
        """Called at each new decision point (after the window is chosen)."""

    def mask(self, env: ArylEnv) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def decode(self, env: ArylEnv, action) -> tuple[Decision | None, int]:
        """Returns (decision to commit or None for a sub-step, invalid parts)."""
        raise NotImplementedError  # pragma: no cover

    def target_feature(self, env: ArylEnv) -> np.ndarray | None:
        return None

    def tentative_free(self, env: ArylEnv) -> float | None:
        return None


class TargetsCodec(ActionCodec):
    mode = "targets"

    def __init__(self, k: int, max_workers: int, allow_preempt: bool):
        self.k = k
        self.W = max_workers
        self.L = max_workers + 1
        self.allow_preempt = allow_preempt
        self.space = spaces.MultiDiscrete(np.full(k, self.L, dtype=np.int64))
        self.mask_size = k * self.L
        self._levels = np.arange(self.L)[None, :]
        self._rows = np.arange(k)
        self._mask: np.ndarray | None = None

    def begin_round(self, env: ArylEnv) -> None:
        self._mask = None

    def begin_episode(self, env: ArylEnv) -> None:
        sim = _sim(env)
        W = self.W
        # per-job lists (plain Python is faster than numpy on a window of tens of jobs)
        self._lo = np.minimum(sim.w_min, W).tolist()  # lowest level per job (>= 1)
        self._wmax = np.minimum(sim.w_max, W).tolist()  # highest level per job
        self._wmax_true = sim.w_max.tolist()
        self._elastic = sim.elastic.tolist()
        self._ta = sim.type_agnostic.tolist()
        self._g = sim.g.tolist()
        if not hasattr(self, "_pad_bytes"):
            L = self.L
            pad = bytearray(self.k * L)
            pad[::L] = b"\x01" * self.k  # padding slots: level 0 only
            self._pad_bytes = bytes(pad)
            self._ones = b"\x01" * L

    def mask2d(self, env: ArylEnv) -> np.ndarray:
        """(K, L) allowed levels, computed once per decision point (plain Python per slot)."""
        if self._mask is not None:
            return self._mask
        sim = _sim(env)
        w = env.window
        n = len(w)
        L, W = self.L, self.W
        buf = bytearray(self._pad_bytes)
        if n:
            ft, fi = env.fits
            wl, stl, wkl, pooll = env._wsnap  # the window's ids, states, workers, pools
            loaned = sim.n_loaned > 0
            lo_l, wmax_l, el_l, ta_l, g_l = self._lo, self._wmax, self._elastic, self._ta, self._g
            ones = self._ones
            col0_running = 1 if self.allow_preempt else 0
            damped = env.damped  # flap damping: no level below the current count
            for i in range(n):
                j = wl[i]
                gj = g_l[j]
                f = ft[gj]
                base = i * L
                if stl[i] == _RUNNING:
                    wk = wkl[i]
                    if loaned and pooll[i] == INFER:
                        f = fi[gj]
                    # most workers that could be asked for: current + what fits in its pool
                    top = wk + f if el_l[j] else wk + f - 10**9
                    hi = wmax_l[j] if wmax_l[j] < top else top
                    if hi < 0:
                        hi = 0
                    lo = lo_l[j]
                    sup = j in damped
                    if sup and lo < wk:
                        lo = wk if wk < W else W
                    if hi >= lo:
                        buf[base + lo : base + hi + 1] = ones[: hi - lo + 1]
                    buf[base + (wk if wk < W else W)] = 1  # keep the current count
                    buf[base] = 0 if sup else col0_running
                else:
                    if loaned and ta_l[j]:
                        f2 = fi[gj]
                        if f2 > f:
                            f = f2
                    hi = wmax_l[j] if wmax_l[j] < f else f
                    lo = lo_l[j]
                    if hi >= lo:
                        buf[base + lo : base + hi + 1] = ones[: hi - lo + 1]
                    # level 0 (stay queued) is already allowed
        self._mbuf = buf
        self._mask = np.frombuffer(buf, dtype=bool).reshape(self.k, L)
        return self._mask

    def mask(self, env: ArylEnv) -> np.ndarray:
        return self.mask2d(env).reshape(-1)

    def decode(self, env: ArylEnv, action) -> tuple[Decision | None, int]:
        if type(action) is np.ndarray and action.dtype.kind in "iuf":
            # (a plain ndarray only: a subclass goes through numeric_action; was: np.matrix kept
            # two axes through reshape, and decode raised a TypeError comparing rows)
            a0 = action  # tolist() gives the same values as a float64 cast would
        else:
            n_a = numeric_action(action)
            if n_a is None:
                return Decision(), self.k
            a0 = n_a.astype(np.float64)
        a = slot_action(a0, self.k)
        if a is None:  # a wrong shape (docstring, "Shapes")
            return Decision(), self.k
        self.mask2d(env)
        buf = self._mbuf
        L, W = self.L, self.W
        al = a.tolist()
        w = env.window
        n = len(w)
        targets: dict[int, int] = {}
        order: list[int] = []
        invalid = 0
        if n:
            wl, _, wkl, _ = env._wsnap
            wmax = self._wmax_true
        for i in range(n):
            x = al[i]
            # allowed: a finite whole number in [0, L) whose level the mask allows (NaN fails)
            if 0.0 <= x < L:
                lv = int(x)
                if lv == x and buf[i * L + lv]:
                    j = wl[i]
                    t = wmax[j] if lv == W and wmax[j] > W else lv
                    if t != wkl[i]:
                        targets[j] = t
                        order.append(j)
                    continue
            invalid += 1
        for i in range(n, self.k):  # padding slots allow level 0 only
            if al[i] != 0:
                invalid += 1
        return Decision(targets=targets, order=order), invalid


class _Incremental:
    """Exact answers to :meth:`SequentialCodec.mask`'s candidates without a dry run of the whole
    tentative decision ``D`` plus each candidate.

    The engine applies a decision as all releases (:func:`~aryl_gym.sim.placement.release_job`,
    each touching only its own job's workers, so their order does not matter), then each growing
    job in best-fit-decreasing order (:func:`~aryl_gym.sim.placement.growth_order`,
    :func:`~aryl_gym.sim.placement.grow_job`), each growth reading only the free space of the
    pools it tries. ``D`` is placed in full (every action that built it was checked), so:

    * a grant to a job ``D`` does not change, sorted after every job ``D`` grows: ``D``, then
      that one growth on the state ``D`` leaves (:func:`~aryl_gym.sim.placement.grows_fully`);
    * a release of a job with workers in no pool that ``D``'s growth reads: ``D``'s growth
      happens as before (when ``D`` grows nothing, always), so the decision is placed in full;
    * a release of another job ``D`` does not change: ``D``'s releases, this one, then ``D``'s
      growth (on a copy).

    Other candidates (``None``) take the full dry run. ``SequentialCodec.incremental = False``
    dry-runs every candidate; tests check both give the same masks.
    """

    def __init__(self, codec: SequentialCodec, env: ArylEnv):
        sim = self.sim = _sim(env)
        opts = self.opts = env.placement
        base = codec._decision(env)
        self.targets = base.targets
        self.prio = {j: p for p, j in enumerate(base.order or ())}
        self.grow = growth_order(sim, base.targets, self.prio)
        g = self.g = sim.g_list
        self.last = max((-g[j], self.prio[j], j) for j in self.grow) if self.grow else None
        # D's releases (one dry run), then D's growth replayed on a copy
        rel = {j: t for j, t in base.targets.items() if j not in self.grow}
        dry = plan(sim, Decision(targets=rel), opts) if rel else None
        self.ok = dry is None or dry.fully_placed
        self._released: PlacementState = dry.after if dry is not None else sim
        self.after: PlacementState = self._released
        if self.grow:
            self.after = Scratch(self._released, opts)
            self.ok = self.ok and self._replay_growth(self.after)
        self.read: set[int] = set()  # pools whose free space D's growth reads
        for j in self.grow:
            if sim.state.item(j) == _RUNNING:
                tried = [sim.pool.item(j)]
            else:  # a queued job tries pools in order until one places it (D is placed in full)
                tried = pool_order(sim, j, None, opts)
                got = self.after.pool.item(j)
                tried = tried[: tried.index(got) + 1] if got in tried else [TRAIN, INFER]
            self.read.update(tried)
            if opts.hetero and sim.hetero_list[j]:
                self.read.add(INFER)  # flexible workers may spill onto loaned servers

    def _pools(self, j: int) -> set[int]:
        if self.opts.hetero and self.sim.hetero_list[j]:
            return {TRAIN, INFER}
        return {self.sim.pool.item(j)}

    def release(self, j: int, c: int) -> bool | None:
        if not self.ok:
            return None
        if not self.read & self._pools(j):
            return True
        if j in self.targets:  # released further this round: the engine scales in once, from cur
            return None
        sc = Scratch(self._released, self.opts)
        release_job(sc, j, c, PlacementReport())
        return self._replay_growth(sc)

    def _replay_growth(self, st: PlacementState) -> bool:
        """``D``'s growth on ``st`` (changed) as the engine does it; whether all of it is placed."""
        t, rep = self.targets, PlacementReport()
        return all(grow_job(st, j, t[j], self.opts, None, False, False, rep) for j in self.grow)

    def grant(self, j: int, unchanged: bool, c: int) -> bool | None:
        if not unchanged:
            return None
        if self.last is not None and (-self.g[j], self.prio.get(j, len(self.prio)), j) < self.last:
            return None
        return self.ok and grows_fully(self.after, j, c, self.opts)


#: worker sizes (GPUs per worker) the counting masks handle: powers of two up to a server
_SIZES = (1, 2, 4, 8)


def _adjust(cp: list, old: int, new: int) -> None:
    """A server of a pool went from ``old`` to ``new`` free GPUs: its fit table ``cp`` (workers
    of g GPUs that fit, by g) follows."""
    for gg in _SIZES:
        cp[gg] += new // gg - old // gg


def _consume(cp: list, g: int, n: int) -> None:
    """``n`` workers of ``g`` GPUs were placed in a pool with fit table ``cp``, anywhere: the
    room left for workers of ``g' <= g`` GPUs drops by ``n * g / g'`` wherever they went (``g'``
    divides ``g``); for bigger workers it depends on where (never read again: the engine places
    bigger workers first)."""
    for gg in _SIZES:
        if gg <= g:
            cp[gg] -= n * (g // gg)
        else:
            cp[gg] = None


def _move(bins: list[int], s: int, old: int, new: int) -> None:
    """Server ``s`` of servers-by-free-GPUs ``bins`` went from ``old`` to ``new`` free GPUs."""
    if old != new:
        b = 1 << s
        bins[old] ^= b
        bins[new] |= b


def _room(bins: list[int], cand: int, g: int) -> int:
    """Workers of ``g`` GPUs that fit the servers of bitset ``cand`` (``bins``: servers by free
    GPUs)."""
    n = 0
    for f in range(g, len(bins)):
        m = bins[f] & cand
        if m:
            n += m.bit_count() * (f // g)
    return n


class _Counts:
    """Exact answers to :meth:`SequentialCodec.mask`'s candidates by counting, without dry runs.

    The engine places a decision's growth in best-fit-decreasing order, worker size ``g`` (GPUs
    per worker) largest first, and each job's new workers by best fit, as many per server as
    fit. So a job gets all ``n`` workers it asks for in a pool exactly when ``C_g``, the workers
    of ``g`` GPUs that fit the pool's free GPUs (``sum_s free_s // g``), is at least ``n``; a
    queued job goes to the first pool of its order where that holds. When every worker size is
    a power of two, placing ``n`` workers of ``g`` GPUs on any servers lowers ``C_g'`` for every
    ``g' <= g`` by exactly ``n * g / g'`` (``g'`` divides ``g``: ``(f - g) // g' = f // g' -
    g / g'``), wherever they land: what is left for every later job of the order is known
    without knowing where the earlier ones went. A whole decision is then placed in full
    exactly when this count says so for each growing job in turn, starting from the fit tables
    after the decision's releases (computed exactly, server by server: a release touches only
    its own job's servers, :func:`~aryl_gym.sim.placement.release_frees`).

    One case depends on where workers went: an elastic job growing on the inference pool with
    ``group_flexible`` puts its flexible workers only on servers without its own base workers
    (``OB``). For a running job the room it has is ``A - P / g`` to ``A``, where ``A`` counts
    the workers of ``g`` GPUs that fit the loaned servers outside ``OB`` after the releases and
    ``P`` is the GPUs placed on the inference pool earlier in the order (exact when ``P`` is 0);
    for a queued job starting there beyond its base, the room left after its base is at most
    ``C_g - w_min`` and at least that minus what the (at most ``w_min``) servers taking its base
    can still hold. When the answer lies between the bounds it is ``None`` (the caller
    dry-runs). Heterogeneous placement and worker sizes that are not powers of two up to 8 are
    not counted at all (``SequentialCodec`` then uses the dry runs of :class:`_Incremental`).
    Tests check the answers against dry runs.
    """

    def __init__(self, codec: SequentialCodec, env: ArylEnv):
        sim = self.sim = _sim(env)
        self.opts = env.placement
        self.grouping = bool(self.opts.group_flexible)
        self.porder = codec._porder  # per decision point: job -> the pools it tries, in order
        targets: dict[int, int] = {}
        order: list[int] = []
        if codec.touched:  # else the tentative decision is empty
            base = codec._decision(env)
            targets, order = base.targets, base.order or []
        self.n_order = len(order)
        prio = {j: p for p, j in enumerate(order)}
        grow = growth_order(sim, targets, prio)
        self.n_train = n_train = sim.n_train
        self.free = free = sim.srv_free
        self.frees = frees = codec._frees  # per decision point: (job, target) -> release_frees
        g_l = sim.g_list
        # D's releases, exactly, and the fit tables after them
        growing = set(grow)
        freed: dict[int, dict[int, int]] = {}
        self.freed = freed
        state, workers, pool = sim.state, sim.workers, sim.pool
        rel_free: dict[int, int] = {}
        for j, t in targets.items():
            if j in growing:
                continue
            fr = frees.get((j, t))
            if fr is None:
                fr = frees[(j, t)] = release_frees(sim, j, t)
            freed[j] = fr
            for srv, gp in fr.items():
                old = rel_free.get(srv)
                rel_free[srv] = (free.item(srv) if old is None else old) + gp
        ft, fi = env.fits
        ix = sim.free_index
        self.loaned, self.not_cap = ix.loaned, ix.not_cap
        ib = ix.bins.copy()  # the servers by free GPUs after the releases (exact)
        # the servers holding base workers (the grouping tiers) are known while no release of D
        # touches the inference pool (a release there may relabel workers); cap[3] holds the
        # ones this count adds (None: unknown), _has_base() the simulator's
        self._hb: int | None = None
        hb = 0 if self.grouping and not any(pool.item(j) == INFER for j in freed) else None
        c_rel: list[Any] = [list(ft), list(fi), ib, hb]
        for srv, new in rel_free.items():
            old = free.item(srv)
            _adjust(c_rel[TRAIN if srv < n_train else INFER], old, new)
            _move(ib, srv, old, new)
        self.rel_free = rel_free
        self.c_rel = c_rel
        # D's growth, counted, with the fit tables before each job (snapshots), the pool each
        # job lands in and its slack (GPUs more the earlier jobs could take from that pool with
        # the job still placed in full, the same way)
        self.entries: list[tuple[int, int, int, int, int]] = []
        entries = self.entries
        self.keys: list[tuple[int, int, int]] = []
        far = len(prio)
        for j in grow:
            running = state.item(j) == _RUNNING
            entries.append((j, g_l[j], targets[j], workers.item(j) if running else 0, pool.item(j) if running else -1))
            self.keys.append((-g_l[j], prio.get(j, far), j))
        self.pos: dict[int, int] = {j: i for i, j in enumerate(grow)}
        self._top = codec._top
        self.snaps: list[tuple[Any, ...]] = [
            (c_rel[0].copy(), c_rel[1].copy(), ib.copy(), hb, 0)
        ]
        self.landed: list[int] = []
        self.slack: list[float] = []
        self.fells: list[bool] = []
        self._grow_from(0)

    def _grow_from(self, q: int) -> None:
        """(Re)count D's growth from position ``q`` on (the snapshots up to ``q`` are kept)."""
        del self.snaps[q + 1 :], self.landed[q:], self.slack[q:], self.fells[q:]
        c0, c1, ib, hb, inf = self.snaps[q]
        cap: list[Any] = [c0.copy(), c1.copy(), ib and ib.copy(), hb]
        entries = self.entries
        self.first_bad = len(entries)
        self.bad: bool | None = True
        inf_rel = self.c_rel[INFER]
        rel_free = self.rel_free
        snaps, landed, slack, fells = self.snaps, self.landed, self.slack, self.fells
        for i in range(q, len(entries)):
            r = self._place(cap, entries[i], inf, inf_rel, rel_free)
            if r is not True:
                self.first_bad, self.bad = i, r
                break
            inf += self._inf
            landed.append(self._pool)
            slack.append(self._slack)
            fells.append(self._fell)
            snaps.append((cap[0].copy(), cap[1].copy(), cap[2] and cap[2].copy(), cap[3], inf))
        self.fell = any(fells)  # a queued job of D's growth fell back to its second pool
        # suffix minima of the slack per pool: msl[p][i] = least slack of the jobs from i on in p
        n = len(slack)
        msl = [[math.inf] * (n + 1), [math.inf] * (n + 1)]
        m0 = m1 = math.inf
        for i in range(n - 1, -1, -1):
            if landed[i] == 0:
                if slack[i] < m0:
                    m0 = slack[i]
            elif slack[i] < m1:
                m1 = slack[i]
            msl[0][i] = m0
            msl[1][i] = m1
        self.msl = msl

    def add_grant(self, j: int, c: int, cur: int, pool: int) -> None:
        """D became D with job ``j``'s target raised to ``c`` (a grant action): recount from
        where it sorts."""
        q = self.pos.get(j)
        if q is not None:
            e = self.entries[q]
            self.entries[q] = (j, e[1], c, e[3], e[4])
        else:
            g = self.sim.g_list[j]
            key = (-g, self.n_order, j)
            q = bisect_left(self.keys, key)
            self.keys.insert(q, key)
            self.entries.insert(q, (j, g, c, cur, pool))
            self.pos = {e[0]: i for i, e in enumerate(self.entries)}
            self.n_order += 1
        if q <= self.first_bad:  # else an unchanged earlier job fails already: so does D now
            self._grow_from(q)

    def _pools(self, j: int) -> list[int]:
        order = self.porder.get(j)
        if order is None:
            order = self.porder[j] = pool_order(self.sim, j, None, self.opts)
        return order

    def _place(self, cap: Any, e: tuple[int, int, int, int, int], inf: int, inf_rel: list[Any],
               rel_free: dict[int, int], probe: bool = False) -> bool | None:
        """Count one growing job ``e`` = (job, g, target, current workers, pool or -1) on the fit
        tables ``cap`` = [training, inference, inference servers by free GPUs or None] (changed).
        ``inf``: GPUs placed on the inference pool earlier in the order; ``inf_rel``: the
        inference pool's fit table after the releases. Sets ``_pool`` (where it lands), ``_inf``
        (GPUs it places on the inference pool), ``_slack`` (GPUs more that earlier jobs could
        take from ``_pool`` with this job still placed in full there) and ``_fell`` (a queued
        job that did not fit its first pool). ``probe``: only say whether and where it lands
        (``cap`` is not changed).

        While ``cap[2]`` is known (nothing placed on the inference pool yet, or only by the
        plain best fit, which is replayed on it), a grouped job's room is exact; after a
        grouped placement (whose servers depend on the tiers) it is dropped and the bounds of
        the class docstring apply."""
        j, g, t, cur, p = e
        sim = self.sim
        fell = False
        ib = cap[2]
        if p >= 0:  # running: grows in its own pool
            n = t - cur
            if p == INFER and self.grouping and sim.elastic_list[j]:
                if ib is not None:  # exact: the room on loaned servers without its base workers
                    own = 0
                    for srv in sim.base[j]:
                        own |= 1 << srv
                    allowed = self.loaned & ~own
                    room = _room(ib, allowed, g)
                    if room < n:
                        return False
                    slack = (room - n) * g
                    if not probe:
                        self._grouped(cap, allowed, g, n)
                else:  # room outside its own base servers: A - inf / g <= room <= A
                    room = inf_rel[g]
                    free, n_train = self.free, self.n_train
                    for srv in sim.base[j]:
                        if srv >= n_train:
                            f = rel_free.get(srv)
                            room -= (free.item(srv) if f is None else f) // g
                    if room < n:
                        return False
                    low = room - inf // g
                    if low < n:
                        return None
                    slack = (low - n) * g
            else:
                c = cap[p][g]
                if c < n:
                    return False
                slack = (c - n) * g
                if p == INFER and ib is not None and not probe:
                    fill_bits(ib, self.not_cap, self.loaned, g, n)
        else:  # queued: the first pool of its order where all t fit
            n = t
            wmin = sim.w_min_list[j]
            for q in self._pools(j):
                c = cap[q][g]
                if q == INFER and self.grouping and t > wmin and sim.elastic_list[j]:
                    # its flexible workers avoid the servers its base lands on
                    if c < t:
                        fell = True
                        continue  # not all of it fits: the next pool
                    # at most w_min servers take its base, each holding at most (cap - g) // g more
                    low = c - wmin - wmin * ((self._top - g) // g) - (t - wmin)
                    if ib is not None:  # exact: place the base, count the room left outside it
                        b2 = ib.copy()
                        own = 0
                        for srv, _ in fill_bits(b2, self.not_cap, self.loaned, g, wmin):
                            own |= 1 << srv
                        allowed = self.loaned & ~own
                        if _room(b2, allowed, g) < t - wmin:
                            fell = True
                            continue
                        if not probe:
                            cap[2] = b2
                            self._grouped(cap, allowed, g, t - wmin)
                            if cap[3] is not None:
                                cap[3] |= own
                    elif low < 0:
                        return None
                    p = q
                    slack = low * g
                    break
                if c >= t:
                    p = q
                    slack = (c - t) * g
                    if q == INFER and ib is not None and not probe:
                        for srv, _ in fill_bits(ib, self.not_cap, self.loaned, g, wmin):
                            if cap[3] is not None:
                                cap[3] |= 1 << srv
                        fill_bits(ib, self.not_cap, self.loaned, g, t - wmin)
                    break
                fell = True
            else:
                return False
        if not probe:
            _consume(cap[p], g, n)
        self._pool = p
        self._inf = n * g if p == INFER else 0
        self._slack = slack
        self._fell = fell
        return True

    def _grouped(self, cap: Any, allowed: int, g: int, n: int) -> None:
        """``n`` flexible workers of ``g`` GPUs placed on the ``allowed`` loaned servers the
        grouped way (servers without base workers first) on ``cap[2]``, when the servers
        holding base workers (``cap[3]``) are known; else ``cap[2]`` becomes unknown."""
        hb = cap[3]
        ib = cap[2]
        if hb is None or ib is None:
            cap[2] = None
            return
        if self._hb is None:
            self._hb = int.from_bytes(
                np.packbits(self.sim.srv_base_gpus > 0, bitorder="little").tobytes(), "little"
            )
        hb |= self._hb
        got = fill_bits(ib, self.not_cap, allowed & ~hb, g, n)
        left = n - sum(k for _, k in got)
        if left > 0:
            fill_bits(ib, self.not_cap, allowed & hb, g, left)

    def _run(self, start: int, first: tuple, skip: int, same_pool_extra: int | None) -> bool | None:
        """Count ``first`` on the snapshot before position ``start``, then D's growth from
        ``start + skip``. ``same_pool_extra``: for a job of D whose target grows, the GPUs it
        adds when it lands in the same pool as in D (None: a new job, all of its GPUs)."""
        if start > self.first_bad:
            return self.bad  # an unchanged earlier job already fails (or cannot be counted)
        snap = self.snaps[start]
        inf = snap[4]
        inf_rel = self.c_rel[INFER]
        rel_free = self.rel_free
        rest = start + skip
        if self.first_bad == len(self.entries):
            r = self._place(snap, first, inf, inf_rel, rel_free, True)  # probe: nothing changes
            if r is not True:
                return r
            # every later job of D had slack: it takes the same pool and still fits when this
            # one takes no more from that pool than the least slack there
            p = self._pool
            if same_pool_extra is None:
                extra = (first[2] - first[3]) * first[1]
            elif p == self.landed[start]:
                extra = same_pool_extra
            else:
                extra = -1
            if 0 <= extra <= self.msl[p][rest]:
                return True
        cap: list[Any] = [snap[0].copy(), snap[1].copy(), snap[2] and snap[2].copy(), snap[3]]
        r = self._place(cap, first, inf, inf_rel, rel_free)
        if r is not True:
            return r
        inf += self._inf
        entries = self.entries
        for i in range(rest, len(entries)):
            r = self._place(cap, entries[i], inf, inf_rel, rel_free)
            if r is not True:
                return r
            inf += self._inf
        return True

    def grant(self, j: int, c: int, cur: int, pool: int) -> bool | None:
        """Whether D with job ``j``'s target raised to ``c`` is placed in full (None: unknown)."""
        q = self.pos.get(j)
        if q is not None:
            _, g, t0, cur0, p0 = self.entries[q]
            return self._run(q, (j, g, c, cur0, p0), 1, (c - t0) * g)
        g = self.sim.g_list[j]
        q = bisect_left(self.keys, (-g, self.n_order, j))
        return self._run(q, (j, g, c, cur, pool), 0, None)

    def release(self, j: int, c: int) -> bool | None:
        """Whether D with running job ``j`` released to ``c`` workers is placed in full."""
        if not self.entries:
            return True
        if self.first_bad == len(self.entries) and not self.fell:
            # A release only adds free GPUs: every fit table entry grows or stays, so every
            # job of D's growth still fits the pool it took (none fell back to a second pool,
            # where it might now go first), takes the same, and leaves no less for the next.
            return True
        frees = self.frees
        new = frees.get((j, c))
        if new is None:
            new = frees[(j, c)] = release_frees(self.sim, j, c)
        old = self.freed.get(j, {})
        rel_free = self.rel_free
        cap_rel: list[Any] = self.c_rel
        free = self.free
        n_train = self.n_train
        ib = cap_rel[2].copy()
        hb = cap_rel[3] if self.sim.pool.item(j) != INFER else None
        tab: list[Any] = [cap_rel[0].copy(), cap_rel[1].copy(), ib, hb]
        rf = dict(rel_free)
        for srv in {*new, *old}:
            before = rel_free.get(srv)
            if before is None:
                before = free.item(srv)
            after = before - old.get(srv, 0) + new.get(srv, 0)
            _adjust(tab[TRAIN if srv < n_train else INFER], before, after)
            _move(ib, srv, before, after)
            rf[srv] = after
        # count the whole growth on these tables
        inf = 0
        inf_rel = tab[INFER].copy()
        for e in self.entries:
            r = self._place(tab, e, inf, inf_rel, rf)
            if r is not True:
                return r
            inf += self._inf
        return True


class SequentialCodec(ActionCodec):
    mode = "sequential"

    def __init__(self, k: int, release: bool, allow_preempt: bool):
        self.k = k
        self.release = release
        self.allow_preempt = allow_preempt
        self.n = 2 * k + 1 if release else k + 1
        self.commit = self.n - 1
        self.space = spaces.Discrete(self.n)
        self.mask_size = self.n
        self.tent = np.zeros(k, dtype=np.int64)
        self.touched: list[int] = []
        self._mask: np.ndarray | None = None
        self._cand = [-1] * self.n  # candidate target per action
        self._no_cand = [-1] * self.n
        self.quick_reject = True  # skip dry runs of grants that exceed the free GPUs
        self.incremental = True  # answer candidates from one dry run of the tentative decision
        self.counting = True  # answer candidates by counting (_Counts) before any dry run
        self._countable = False
        self._frees: dict[tuple[int, int], dict[int, int]] = {}  # per decision point
        self._porder: dict[int, list[int]] = {}  # per decision point
        self._counts: _Counts | None = None  # the counted tentative decision (kept across grants)
        self._top = 8
        self._grown = 0  # GPUs the tentative decision adds (grants minus releases)

    def begin_episode(self, env: ArylEnv) -> None:
        sim = _sim(env)
        # counting is exact for worker sizes that divide each other (powers of two up to 8)
        # and without heterogeneous placement
        self._countable = set(sim.g_list) <= set(_SIZES) and not (
            env.placement.hetero and sim.has_hetero
        )
        self._top = int(sim.srv_cap.max())

    def begin_round(self, env: ArylEnv) -> None:
        w = env.window
        self.tent[:] = 0
        self.tent[: len(w)] = env._wsnap[2]
        self.touched = []
        self._mask = None
        self._grown = 0
        self._frees = {}
        self._porder = {}
        self._counts = None

    def _decision(self, env: ArylEnv, i: int = -1, t: int = -1) -> Decision:
        wl, _, wkl, _ = env._wsnap
        tl = self.tent.tolist()
        targets: dict[int, int] = {}
        for s in range(len(wl)):
            v = t if s == i else tl[s]
            if v != wkl[s]:
                targets[wl[s]] = v
        order = list(self.touched)
        if i >= 0 and wl[i] not in order:
            order.append(wl[i])
        return Decision(targets=targets, order=order)

    def mask(self, env: ArylEnv) -> np.ndarray:
        if self._mask is not None:
            return self._mask
        sim = _sim(env)
        k = self.k
        m = bytearray(self.n)
        cand = self._cand
        cand[:] = self._no_cand
        wl, stl, wkl, pooll = env._wsnap
        n = len(wl)
        # GPUs free on usable servers after the tentative decision: a grant needing more cannot
        # be placed, so its dry run is skipped (same mask, fewer dry runs; quick_reject=False
        # checks every candidate by dry run)
        free_left = self._free_after(env) if self.quick_reject else float("inf")
        counts = None
        if self.counting and self._countable and n:
            counts = self._counts
            if counts is None:
                counts = self._counts = _Counts(self, env)
        inc: _Incremental | None = None
        use_inc = self.incremental and n > 0
        wmin, wmax, el, g_l = sim.w_min_list, sim.w_max_list, sim.elastic_list, sim.g_list
        damped = env.damped
        tl = self.tent.tolist()
        for i in range(n):
            j = wl[i]
            t = tl[i]
            cur = wkl[i]
            st = stl[i]
            # grant
            if t >= cur:
                c = -1
                if st == _QUEUED and t == 0:
                    c = wmin[j]
                elif t > 0 and el[j] and t < wmax[j]:
                    c = t + 1
                if c > 0 and (c - t) * g_l[j] <= free_left:
                    ok = counts.grant(j, c, cur, pooll[i] if st == _RUNNING else -1) if counts is not None else None
                    if ok is None and use_inc:
                        if inc is None:
                            inc = _Incremental(self, env)
                        ok = inc.grant(j, t == cur, c)
                    if ok is None:
                        ok = plan(sim, self._decision(env, i, c), env.placement).fully_placed
                    if ok:
                        m[i] = 1
                        cand[i] = c
            # release (never of a job that flap damping suppresses)
            if self.release and st == _RUNNING and 0 < t <= cur and j not in damped:
                c = -1
                if el[j] and t > wmin[j]:
                    c = t - 1
                elif self.allow_preempt:
                    c = 0
                if c >= 0:
                    ok = counts.release(j, c) if counts is not None else None
                    if ok is None and use_inc:
                        if inc is None:
                            inc = _Incremental(self, env)
                        ok = inc.release(j, c)
                    if ok is None:
                        ok = plan(sim, self._decision(env, i, c), env.placement).fully_placed
                    if ok:
                        m[k + i] = 1
                        cand[k + i] = c
        # the preemption guard (env option preempt_guard): a preemption frees GPUs for waiting
        # jobs; while every queued window job can start (or is granted), it only costs the
        # preempted job its relaunch overhead
        if env.preempt_guard and self.allow_preempt and not any(
            stl[i] == _QUEUED and tl[i] == 0 and not m[i] for i in range(n)
        ):
            for i in range(n):
                if cand[k + i] == 0:
                    m[k + i] = 0
                    cand[k + i] = -1
        # the stall guard (env option stall_guard): nothing runs, nothing is left to arrive and a
        # queued window job can start; idling would only add to every waiting job's JCT, so the
        # commit waits for a grant
        if not (env.stall_guard and self._grown <= 0 and sim.idle_with_queue and any(m[:k])):
            m[self.commit] = 1
        self._mask = mask = np.frombuffer(m, dtype=bool)
        return mask

    def decode(self, env: ArylEnv, action) -> tuple[Decision | None, int]:
        a = discrete_action(action, self.n)
        if a < 0:
            return None, 1
        m = self.mask(env)
        if not m[a]:
            return None, 1
        if a == self.commit:
            return self._decision(env), 0
        i = a if a < self.k else a - self.k
        c = self._cand[a]
        wl, stl, wkl, pooll = env._wsnap
        j = wl[i]
        self._grown += (c - int(self.tent[i])) * _sim(env).g_list[j]
        self.tent[i] = c
        if j not in self.touched:
            self.touched.append(j)
        self._mask = None
        counts = self._counts
        if counts is not None:
            if a < self.k:  # a grant: recount D's growth from where the job sorts
                counts.add_grant(j, c, wkl[i], pooll[i] if stl[i] == _RUNNING else -1)
            else:  # a release changes the tables everything starts from: count afresh
                self._counts = None
        return None, 0

    def target_feature(self, env: ArylEnv) -> np.ndarray:
        return self.tent

    def tentative_free(self, env: ArylEnv) -> float:
        return max(self._free_after(env), 0.0)

    def _free_after(self, env: ArylEnv) -> float:
        """Free GPUs on training and loaned servers minus the tentative decision's growth."""
        ft, fi = env.fits  # entry 1: workers of one GPU that fit = free GPUs
        return float(ft[1] + fi[1]) - float(self._grown)


class PriorityCodec(ActionCodec):
    mode = "priority"

    def __init__(self, k: int):
        self.k = k
        self.space = spaces.Box(-1.0, 1.0, shape=(k,), dtype=np.float32)
        self.mask_size = k

    def mask(self, env: ArylEnv) -> np.ndarray:
        """The slots that hold a job. Advisory (module docstring): a ``Box`` action has no
        discrete choices to mask, every score in ``[-1, 1]`` is valid in every slot, and an
        empty window (all False) makes every action the same no-op. Masked-categorical
        algorithms (sb3-contrib's MaskablePPO) refuse a ``Box`` space, so none of them reads it
        as "no action allowed"; a custom masked policy should treat all False as "nothing to
        score" (any action), not normalise over it. Kept as it is: it is part of the
        observation, which stays bit-identical."""
        m = np.zeros(self.k, dtype=bool)
        m[: len(env.window)] = True
        return m

    def decode(self, env: ArylEnv, action) -> tuple[Decision | None, int]:
        sim = _sim(env)
        n_a = numeric_action(action)
        if n_a is None:
            return Decision(), 1
        a = slot_action(n_a.astype(np.float64), self.k)
        if a is None:  # a wrong shape (docstring, "Shapes")
            return Decision(), 1
        # outside the documented range [-1, 1] (or NaN/inf): invalid, counted, ignored
        with np.errstate(invalid="ignore"):
            bad = ~(np.abs(a) <= 1.0)
        invalid = int(bad.sum())
        w = env.window
        cands = [
            (-float(a[i]), i, int(w[i]))
            for i in range(len(w))
            if not bad[i] and a[i] > 0 and sim.state[w[i]] == JobState.QUEUED
        ]
        cands.sort()
        targets = {j: int(sim.jobs[j].w_req) for _, _, j in cands}
        return Decision(targets=targets, order=[j for _, _, j in cands]), invalid


def make_codec(mode: str, k: int, max_workers: int, allow_preempt: bool, release: bool) -> ActionCodec:
    if mode == "targets":
        return TargetsCodec(k, max_workers, allow_preempt)
    if mode == "sequential":
        return SequentialCodec(k, release, allow_preempt)
    if mode == "priority":
        return PriorityCodec(k)
    raise ValueError(f"unknown action_mode {mode!r}; choose one of {', '.join(MODES)}")
