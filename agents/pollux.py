"""Pollux-style scheduler (Qiao et al., "Pollux: Co-adaptive Cluster Scheduling for
Goodput-Optimized Deep Learning", OSDI '21, section 4.2 "PolluxSched"), as published: facts from
its artifact (petuum/adaptdl ``osdi21-artifact``: ``simulator/pollux.py``, ``simulator.py``,
``goodput.py``); docs/baselines.md ("Pollux") has the side-by-side table.

Every 60 s at every scale (``decision_interval_s = 60``, ``event_driven = False``: upstream's
``--interval 60``; its decision depends on job age, attained service and fresh random draws, so
no round is skipped), Pollux:

1. **Observes and fits** (:mod:`aryl_gym.agents.pollux_fit`). Every running job reports its
   configuration, step/compute/all-reduce times and gradient noise scale
   (:meth:`~aryl_gym.sim.view.ClusterView.measure`); a new configuration refits the job's
   throughput model (upstream ``fit_perf_params``); the efficiency uses the PGNS the job reported
   last (it grows with progress). A job never seen running is linear in workers (upstream's
   speedup before any profile). The simulator runs the true curve; Pollux plans on its fit.
2. **Models goodput** ``G_j(w)`` at the best batch for ``w`` workers (tuning over the job's batch
   limits), for ``w`` up to its range (step 5).
3. **Speedup** ``SPEEDUP_j(w) = G_j(w) / G_j(fair)`` with ``fair`` the job's fair share
   ``ceil(GPUs / (g_j x jobs))`` (upstream: "change base goodput to fair-share goodput"),
   scaled by the job's dominant share x servers as upstream does.
4. **Re-allocation penalty** (paper 4.2; upstream ``delay``): a job whose allocation changes has
   its speedup multiplied by ``max(age - reallocs x delay, 0) / (age + delay)``. ``delay`` is the
   overhead our simulator really charges for that change [ours; upstream uses 30 s for all].
5. **Replica range** (upstream ``get_pollux_job_info``): every job 0 or 1 .. ``min(max(2 x most
   workers it has run with, 1), 64 // g, max_batch // (min_local x g))`` (the exploration cap,
   the parallelism ceiling, the batch-size limit; ``explore=False`` lifts the first). The
   engine's ``elasticity = "all"`` lets every job run anywhere in 1 .. ``w_ceil`` and resize
   while running. ``pollux-elastic`` (``elasticity = "elastic"``) is the reading in which only
   elastic families resize and an inelastic job runs at its request or not at all.
6. **Genetic algorithm** maximising the generalised (power) mean with ``p = -1`` of the
   penalised speedups over *all* active jobs (jobs at 0 count with speedup 0 + 1e-3, as
   upstream). Population ``pop_size`` (default 100) over ``generations`` (default 100; the Aryl
   paper used 250 at production scale: ``pollux-250``). Individuals are vectors of per-job worker
   counts (vectorised with numpy as a 2-D array, population x jobs). Operators follow upstream,
   adapted from per-node to per-job counts: binary tournaments, single-point crossover over the
   job order, mutation (reset a job to its current allocation with probability 0.1, zero it with
   probability 0.01, raise it to a random valid count with probability ``min(1, nodes with room
   / jobs)``: upstream raises each (job, node) cell with probability 1 / (jobs that fit on the
   node), about one raise per node with room, :func:`raise_probability`), and repair (clamp to
   the job's range, a count below its low end becomes 0, then capacity enforced by a
   cumulative sum over the job order, earlier jobs keep theirs). Survival is elitist (parents +
   offspring, best ``pop_size`` kept), so the result is never worse than the starting allocation
   on the GA's own objective. Jobs are ordered as upstream: least attained GPU-service first,
   then submission. The final population seeds the next round (upstream ``_prev_states``).
   Randomness comes only from ``view.rng``.
7. **Batch size** (co-adaptation): each job trains at the batch its model picks for the workers it
   will have (``Decision.batch``); the simulator runs the true goodput of that batch.
8. The chosen counts are made placeable with a trial placement (:func:`agents._alloc.fit_targets`).

Adaptations [ours]: our jobs have a worker size ``g``, so the GA works on worker counts per job
instead of replicas per node, and placement is left to the shared engine (best fit). Pollux
allows scale to zero and back; so do we (preemption with the simulator's relaunch cost). Pollux
does not loan inference servers (``uses_loaning`` False): the Aryl paper compares schedulers in
the Basic scenario without loaning (section 7.4).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from aryl_gym.agents._alloc import fit_targets
from aryl_gym.agents.base import BasePolicy, register
from aryl_gym.agents.pollux_fit import JobModel, Limits, observe_running, tuned_rows

from aryl_gym.sim.jobs import JobState
from aryl_gym.sim.view import TRAIN, ClusterView, Decision, PlacementOptions

#: a job's modelled goodput rows are rebuilt when its PGNS has moved by this much in log space
#: (5%; PGNS grows by 10x to 1000x over a job's life)
PGNS_BUCKET = 0.05


class PolluxPolicy(BasePolicy):
    """Goodput-driven genetic search over allocations (see the module docstring).

    Args:
        pop_size: individuals in the population (upstream 100).
        generations: GA generations per round (upstream 100; Aryl paper 250).
        p: exponent of the generalised mean (upstream -1).
        tune: batch-size tuning on (``Decision.batch`` from the fitted model).
        data_root: kept for compatibility (the model needs no trace files).
        explore: upstream's exploration cap (module docstring, step 5).
        elasticity: ``"all"`` (upstream, every job resizable in 1 .. ``w_ceil``) or
            ``"elastic"`` (``pollux-elastic``: inelastic jobs keep their request).
        upstream_mutation: raise probability ``min(1, nodes with room / jobs)`` (upstream's
            rate, :func:`raise_probability`); False: ``1 / jobs`` (World v1).
    """

    uses_loaning = False
    placement = PlacementOptions(elastic_prefer_inference=False, group_flexible=False)
    #: upstream re-optimises every 60 s (artifact ``simulator.py --interval 60``) at every scale,
    #: and its decision depends on job age, attained service and fresh random draws: no round is
    #: skipped (the engine's round is this interval, not the scenario's ``sim.interval``)
    decision_interval_s = 60.0
    event_driven = False

    def __init__(
        self,
        pop_size: int = 100,
        generations: int = 100,
        p: float = -1.0,
        tune: bool = True,
        name: str = "pollux",
        data_root: str | None = None,
        explore: bool = True,
        elasticity: str = "all",
        upstream_mutation: bool = True,
    ):
        if pop_size < 2 or pop_size % 2:
            raise ValueError(f"pop_size must be an even number >= 2, got {pop_size}")
        if generations < 0:
            raise ValueError(f"generations must be >= 0, got {generations}")
        if p == 0:
            raise ValueError("p = 0 (geometric mean) is not supported; use p < 0")
        self.pop_size = pop_size
        self.generations = generations
        self.p = p
        self.tune = tune
        self.name = name
        self.data_root = data_root
        self.explore = explore
        if elasticity not in ("limited", "elastic", "all"):
            raise ValueError(f"elasticity must be limited, elastic or all, got {elasticity!r}")
        #: the worker ranges the engine enforces (Simulator.set_elasticity): "all" = upstream,
        #: every job 1..w_ceil and resizable; "elastic" = only elastic families resize
        self.elasticity = elasticity
        self.upstream_mutation = upstream_mutation
        self.reset()

    def reset(self, seed: int | None = None) -> None:
        self._prev_pop: np.ndarray | None = None  # (P, n_prev) final population
        self._prev_jobs: list[int] = []
        self._reallocs: dict[int, int] = {}
        self._attained: dict[int, float] = {}  # GPU-seconds of service, by job
        self._max_seen: dict[int, int] = {}  # most workers each job has run with (exploration)
        self._last_now: float | None = None
        # per-job constants (g, lo, hi, submit, relaunch overhead, resizable)
        self._static: dict[int, tuple[int, int, int, float, float, int]] = {}
        # the fitted goodput models (agents/pollux_fit.py), the jobs' batch-size facts, and
        # cached rows: job -> (model version, PGNS bucket, top, goodput row, batch row)
        self._models: dict[int, JobModel] = {}
        self._limits: dict[int, Limits] = {}
        self._rows: dict[int, tuple[int, int, int, np.ndarray, np.ndarray]] = {}
        self._lam_sent: dict[int, float] = {}  # batch factor last sent, by job
        self.last_objective: tuple[float, float] | None = None  # (start, best) of last round

    # -- model ---------------------------------------------------------------------------------
    def limits(self, view: ClusterView, j: int) -> Limits:
        lim = self._limits.get(j)
        if lim is None:
            lim = self._limits[j] = Limits(view.jobs[j])
        return lim

    def observe(self, view: ClusterView) -> None:
        """Take every running job's report (:meth:`ClusterView.measure`) into its model."""
        observe_running(view, self._models)

    def goodput_rows(self, view: ClusterView, jobs: list[int], top: np.ndarray) -> np.ndarray:
        """``G[i, 0..top_i]``: the modelled goodput of ``jobs[i]`` at each worker count, at the
        batch the model says is best there (any per-job scale: the GA uses ratios). A job
        without a fitted model is linear (upstream's speedup before any profile). Rows are
        cached until the model refits, the PGNS moves by :data:`PGNS_BUCKET` (5%) or ``top``
        changes [ours, for speed: upstream re-evaluates at every step]."""
        n = len(jobs)
        W = int(top.max()) if n else 0
        G = np.zeros((n, W + 1))
        todo: list[int] = []
        keys: list[tuple[int, int]] = []
        for i, j in enumerate(jobs):
            t = int(top[i])
            mod = self._models.get(j)
            if mod is None or mod.params is None:
                G[i, : t + 1] = np.arange(t + 1, dtype=np.float64)
                continue
            bucket = int(round(math.log(max(mod.pgns, 1e-12)) / PGNS_BUCKET))
            hit = self._rows.get(j)
            if hit is not None and hit[0] == mod.version and hit[1] == bucket and hit[2] == t:
                G[i, : t + 1] = hit[3]
                continue
            todo.append(i)
            keys.append((mod.version, bucket))
        if todo:
            sel = [jobs[i] for i in todo]
            Wt = int(top[todo].max())
            params = np.array([self._models[j].params for j in sel])
            phi = np.array([self._models[j].pgns for j in sel])
            lim = [self.limits(view, j) for j in sel]
            gp, lam = tuned_rows(params, lim, phi, Wt, self.tune)
            for k, i in enumerate(todo):
                t = int(top[i])
                row, lrow = gp[k, : t + 1].copy(), lam[k, : t + 1].copy()
                self._rows[jobs[i]] = (keys[k][0], keys[k][1], t, row, lrow)
                G[i, : t + 1] = row
        return G

    def batch_for(self, j: int, w: int) -> float:
        """The batch factor the model picks for job ``j`` at ``w`` workers (1 without one)."""
        hit = self._rows.get(j)
        if not self.tune or hit is None or w <= 0 or w >= hit[4].size:
            return 1.0
        return float(hit[4][w])

    def _update_attained(self, view: ClusterView) -> None:
        now = view.now
        for j in view.running():
            w = int(view.workers[j])
            if w > self._max_seen.get(j, 0):
                self._max_seen[j] = w
        if self._last_now is not None:
            dt = now - self._last_now
            for j in view.running():
                self._attained[j] = self._attained.get(j, 0.0) + dt * float(
                    view.workers[j] * view.jobs[j].g
                )
        self._last_now = now

    def _job_static(self, view: ClusterView, j: int) -> tuple[int, int, int, float, float, int]:
        """``(g, lo, hi, submit, relaunch overhead, resizable)`` of job ``j``: ``[lo, hi]`` is
        upstream's replica range (artifact ``get_pollux_job_info``: ``max_replicas = min(64,
        max_batch_size // min_local_bsz)`` replicas) in workers: the engine's range for the
        policy's ``elasticity`` (``hi`` = the ceiling ``64 // g`` under ``"all"``), cut to the
        batch-size limit ``max_batch // (min_local x g)`` of the job's application. The
        exploration cap is applied per round in :meth:`problem`."""
        st = self._static.get(j)
        if st is None:
            spec = view.jobs[j]
            relaunch = view.config.sim.relaunch_for(spec.family)
            lo, hi, res = view.limits(j)
            hi = max(min(hi, self.limits(view, j).workers()), lo)
            st = (int(spec.g), lo, hi, float(spec.submit), relaunch, int(res))
            self._static[j] = st
        return st

    def problem(self, view: ClusterView) -> GAProblem:
        """Build this round's optimisation problem (jobs in Pollux's priority order)."""
        self._update_attained(view)
        jobs = view.active()
        stat = [self._job_static(view, j) for j in jobs]
        att = self._attained
        order = sorted(range(len(jobs)), key=lambda i: (att.get(jobs[i], 0.0), stat[i][3], jobs[i]))
        jobs = [jobs[i] for i in order]
        n = len(jobs)
        st = np.array([stat[i] for i in order], dtype=np.float64).reshape(n, 6)
        ja = np.array(jobs, dtype=np.int64)
        g = st[:, 0].astype(np.int64)
        lo = st[:, 1].astype(np.int64)
        hi = hi_full = st[:, 2].astype(np.int64)
        resizable = st[:, 5] > 0
        if self.explore:
            # Upstream JobInfo.max_replicas = max(2 x most replicas profiled so far, 1): a job
            # grows at most by doubling per re-allocation (never below its own range's low end).
            seen = np.array([self._max_seen.get(j, 0) for j in jobs], dtype=np.int64)
            hi = np.maximum(np.minimum(hi, np.maximum(2 * seen, 1)), lo)
        base = np.asarray(view.workers)[ja].astype(np.int64)
        running = np.asarray(view.state)[ja] == JobState.RUNNING
        cap = view.capacity(TRAIN)
        # Upstream: "change base goodput to fair-share goodput", at the fair count whatever the
        # exploration cap (the model is evaluated there, the GA never goes past hi).
        fair = np.clip(np.ceil(cap / np.maximum(g * max(n, 1), 1)), lo, hi_full).astype(np.int64)
        fair = np.where(lo == hi_full, hi_full, fair)
        top = np.maximum(hi, fair)
        # Modelled goodput G[j, w], w = 0..top_j (0 beyond), from the fitted models.
        self.observe(view)
        G = self.goodput_rows(view, jobs, top)
        base_gp = G[np.arange(n), fair]
        G = G[:, : int(hi.max()) + 1] if n else G
        share = g / max(cap, 1)
        n_srv = int(view.usable(TRAIN).sum())
        S = G / np.maximum(base_gp, 1e-12)[:, None] * (share * n_srv)[:, None]
        # Re-allocation penalty factor (applied where an individual differs from `base`).
        sim = view.config.sim
        age = view.now - st[:, 3]
        preempted = np.asarray(view.preemptions)[ja] > 0
        delay = np.where(
            running,
            float(sim.scale_overhead_s),
            np.where(preempted, st[:, 4], float(sim.first_start_overhead_s)),
        )
        restarts = np.array([self._reallocs.get(j, 0) for j in jobs], dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            factor = np.where(
                age + delay > 0, np.maximum(age - restarts * delay, 0.0) / (age + delay), 1.0
            )
        factor = np.where(delay <= 0, 1.0, factor)
        inel_run = running & ~resizable
        usable = view.usable(TRAIN)
        room = int(np.count_nonzero(np.asarray(view.srv_free)[usable] > 0))
        p_inc = raise_probability(n, room) if self.upstream_mutation else None
        return GAProblem(jobs, g, lo, hi, base, S, factor, cap, self.p, inel_run, p_inc)

    # -- decision ------------------------------------------------------------------------------
    def decide(self, view: ClusterView) -> Decision:
        prob = self.problem(view)
        jobs = prob.jobs
        if not jobs:
            self._prev_pop, self._prev_jobs = None, []
            return Decision()
        rng = view.rng
        init = self._initial_population(prob)
        pop, fit = prob.search(init, self.generations, rng)
        self._prev_pop, self._prev_jobs = pop, list(jobs)
        best = pop[0]
        self.last_objective = (float(prob.objective(prob.base[None, :])[0]), float(fit[0]))
        targets = {j: int(best[i]) for i, j in enumerate(jobs) if best[i] != prob.base[i]}
        order = list(jobs)
        targets = fit_targets(view, targets, order, None, self.placement)
        targets = {j: t for j, t in targets.items() if t != int(view.workers[j])}
        for j in targets:
            self._reallocs[j] = self._reallocs.get(j, 0) + 1
        # Batch-size tuning (co-adaptation): each job trains at the batch its model picks for
        # the workers it will have; the simulator runs the true goodput of that batch.
        batch: dict[int, float] = {}
        if self.tune:
            for j in jobs:
                w = targets.get(j, int(view.workers[j]))
                if w <= 0:
                    continue
                lam = self.batch_for(j, w)
                if lam != self._lam_sent.get(j, 1.0):
                    batch[j] = lam
                    self._lam_sent[j] = lam
        return Decision(targets=targets, order=order, batch=batch or None)

    def _initial_population(self, prob: GAProblem) -> np.ndarray:
        P = self.pop_size
        pop = np.tile(prob.base, (P, 1))
        if self._prev_pop is not None and self._prev_jobs:
            idx = {j: i for i, j in enumerate(self._prev_jobs)}
            k = np.array([idx.get(j, -1) for j in prob.jobs], dtype=np.int64)
            pop = np.where(k >= 0, self._prev_pop[:, np.maximum(k, 0)], 0)
        pop[0] = prob.base  # the current allocation is always a candidate
        pop[1:] = prob.repair(pop[1:])
        return pop


#: Mutation probabilities per cell (upstream ``_mutate``): reset to the current allocation,
#: zero (applied after the reset); a third one, raise to a random valid count, has
#: probability :func:`raise_probability` (``GAProblem.p_inc``).
P_RESET, P_ZERO = 0.1, 0.01


def raise_probability(n_jobs: int, nodes_with_room: int) -> float:
    """Per-job raise probability that puts upstream's mutation rate into our per-job genome.

    Upstream (artifact ``simulator/pollux.py``, ``Problem._mutation`` step 3) raises each
    (job, node) cell of a child with probability ``1 / (jobs that fit on that node)`` (plus
    as much again among the jobs already on it): about one raise per node with free room, per
    child and generation. A job fits on every node with room, so its expected raises are
    ``nodes_with_room / n_jobs``; our genome has one count per job, so a job is raised with
    probability ``min(1, nodes_with_room / n_jobs)`` (at least ``1 / n_jobs``: one raise per
    child, the rate before World v2, when no node has room). [ours] Upstream counts the room
    in each child; we count it once per round in the cluster (usable training servers with a
    free GPU), so the draws stay one sparse block per search."""
    n = max(int(n_jobs), 1)
    return min(1.0, max(int(nodes_with_room), 1) / n)


def bernoulli_cells(rng: np.random.Generator, N: int, p: float) -> np.ndarray:
    """Sorted indices of the cells, among ``N``, that an independent Bernoulli(``p``) trial
    per cell selects: the law of ``np.flatnonzero(rng.random(N) < p)``, drawn as geometric gaps
    between successes (about ``N p`` draws instead of ``N``). A gap is ``1 + floor(E / l)`` with
    ``E`` standard exponential and ``l = -log(1 - p)``, which is geometric with success
    probability ``p``. Blocks of gaps are drawn until they pass ``N``; the draw count depends
    only on the stream, so a seed repeats."""
    if N <= 0 or p <= 0.0:
        return np.empty(0, dtype=np.int64)
    if p >= 1.0:
        return np.arange(N, dtype=np.int64)
    inv = -1.0 / math.log1p(-p)
    mean = N * p
    m = int(mean + 6.0 * math.sqrt(mean) + 16)
    # numba loads at the first draw (pollux_kernel imports it; `import aryl_gym` stays light)
    from aryl_gym.agents.pollux_kernel import compiled_gaps

    gaps_of = compiled_gaps() or _gap_positions
    parts = []
    last = -1
    while True:
        pos, done = gaps_of(rng.standard_exponential(m), inv, last, N)
        parts.append(pos)
        if done:
            return parts[0] if len(parts) == 1 else np.concatenate(parts)
        last = int(pos[-1])


def _gap_positions(e: np.ndarray, inv: float, last: int, n_cells: int) -> tuple[np.ndarray, bool]:
    """numpy's :func:`aryl_gym.agents.pollux_kernel.gap_positions` (the same contract and
    cells): the positions ``last + cumsum(1 + trunc(e * inv))`` below ``n_cells``, and whether
    the chunk reached ``n_cells``."""
    gaps = (e * inv).astype(np.int64)
    gaps += 1
    pos = gaps.cumsum()
    pos += last
    if pos[-1] >= n_cells:
        return pos[: int(np.searchsorted(pos, n_cells))], True
    return pos, False


class GenerationDraws(NamedTuple):
    """The random choices of one GA generation (population ``P`` x ``n`` jobs), see
    :func:`draw_block`. Cells are flat indices ``child * n + job``, sorted."""

    tournament: np.ndarray  # (P, 2) contestants of each child's binary tournament
    points: np.ndarray  # (P // 2,) crossover point of each pair of children
    reset_cells: np.ndarray  # cells reset to the current allocation
    zero_cells: np.ndarray  # cells zeroed (after the resets)
    inc_cells: np.ndarray  # cells raised to a random valid count (after both)
    inc_u: np.ndarray  # (len(inc_cells),) uniform that picks the raised count


class DrawBlock(NamedTuple):
    """The random choices of ``G`` consecutive generations (:func:`draw_block`). Cells are flat
    indices ``(generation * P + child) * n + job``; ``*_at`` (length ``G + 1``) delimit each
    generation's share of the sorted cell lists."""

    tournament: np.ndarray  # (G, P, 2)
    points: np.ndarray  # (G, P // 2)
    reset_cells: np.ndarray
    zero_cells: np.ndarray
    inc_cells: np.ndarray
    inc_u: np.ndarray
    reset_at: np.ndarray
    zero_at: np.ndarray
    inc_at: np.ndarray

    def generation(self, t: int, P: int, n: int) -> GenerationDraws:
        """Generation ``t``'s draws with cells relative to that generation."""
        o = t * P * n
        r = slice(self.reset_at[t], self.reset_at[t + 1])
        z = slice(self.zero_at[t], self.zero_at[t + 1])
        i = slice(self.inc_at[t], self.inc_at[t + 1])
        return GenerationDraws(
            self.tournament[t], self.points[t], self.reset_cells[r] - o, self.zero_cells[z] - o,
            self.inc_cells[i] - o, self.inc_u[i],
        )


#: most cells (generations x population x jobs) whose random choices are drawn at once; part
#: of the stream's definition (a seed repeats for a given population, job count and
#: generation count)
BLOCK_CELLS = 1 << 20


def block_sizes(generations: int, P: int, n: int) -> list[int]:
    """Generations per :func:`draw_block` call for a search of ``generations``."""
    per = max(1, BLOCK_CELLS // max(P * n, 1))
    return [min(per, generations - k) for k in range(0, generations, per)]


def draw_block(
    rng: np.random.Generator,
    G: int,
    P: int,
    n: int,
    p_inc: float | None = None,
    dense: bool = False,
) -> DrawBlock:
    """Draw ``G`` generations' random choices, in this order: ``G (2P + P/2)`` uniforms (per
    generation: binary tournaments, then crossover points), then three independent Bernoulli
    processes over the block's cells (:func:`bernoulli_cells`): reset (``P_RESET``), zero
    (``P_ZERO``) and raise (``p_inc``, default ``1 / n``; :func:`raise_probability`), and one
    uniform per raised cell.

    ``dense=True`` with ``p_inc >= 1`` (every cell raised; the same draws) leaves the raised
    cells out (``inc_cells`` empty, ``inc_at`` zeros): ``inc_u`` has one uniform per cell of
    the block, in cell order, and the caller raises every cell."""
    half = P // 2
    R = rng.random(G * (2 * P + half)).reshape(G, 2 * P + half)
    tour = (R[:, : 2 * P] * P).astype(np.intp).reshape(G, P, 2)
    pts = (R[:, 2 * P :] * n).astype(np.intp)
    N = G * P * n
    reset = bernoulli_cells(rng, N, P_RESET)
    zero = bernoulli_cells(rng, N, P_ZERO)
    p = 1.0 / n if p_inc is None else p_inc
    if dense and p >= 1.0:  # bernoulli_cells would draw nothing and list every cell
        inc = np.empty(0, dtype=np.int64)
        u = rng.random(N)
    else:
        inc = bernoulli_cells(rng, N, p)
        u = rng.random(inc.size)
    ends = np.arange(G + 1, dtype=np.int64) * (P * n)
    return DrawBlock(
        tour, pts, reset, zero, inc, u,
        np.searchsorted(reset, ends), np.searchsorted(zero, ends), np.searchsorted(inc, ends),
    )


class GAProblem:
    """The per-round optimisation problem, vectorised over a population (P, n) of counts.

    Speed [ours, same law]: every per-job rule is a lookup table indexed by ``job x count``
    (counts are small integers), built once per round. A generation gathers the tournament
    winners' rows, splices them at the crossover points, and applies the mutations only to the
    cells they hit (about 11% of cells, plus the raised ones: ``p_inc`` of them), drawn sparsely
    for many generations at once (:func:`draw_block`; the same per-cell law as one uniform per cell and
    rule, a different stream). Repair then needs the valid-count rule only at the raised cells
    (every parent, 0 and the current allocation already satisfy it) and the capacity cut only
    in the children over capacity: the cumulative-sum rule keeps a row up to the first job that
    passes capacity, gives that job what is left and zeroes the rest. The fitness of all
    children is one gather and one row sum over precomputed ``1 / (penalised speedup + 1e-3)``.
    Survival is one gather of the best rows among parents and children. Results are
    bit-identical to the literal per-generation formulation on the same draws
    (``tests/test_pollux.py`` checks it).
    """

    def __init__(
        self,
        jobs: list[int],
        g: np.ndarray,
        lo: np.ndarray,
        hi: np.ndarray,
        base: np.ndarray,
        S: np.ndarray,
        factor: np.ndarray,
        cap: int,
        p: float,
        inel_run: np.ndarray,
        p_inc: float | None = None,
    ):
        self.jobs = jobs
        self.g, self.lo, self.hi, self.base = g, lo, hi, base
        self.S, self.factor, self.cap, self.p = S, factor, cap, p
        self.inel_run = inel_run
        #: probability that a child's job is raised, per generation (:func:`raise_probability`)
        self.p_inc = 1.0 / max(len(jobs), 1) if p_inc is None else float(p_inc)
        n = len(jobs)
        V = S.shape[1]  # counts 0..V-1 (V - 1 = the largest w_max)
        self._V = V
        self._offs = np.arange(n, dtype=np.int64) * V  # row offsets into flat (n, V) tables
        self._unit_g = bool(np.all(g == 1))
        v = np.arange(V, dtype=np.int64)[None, :]  # (1, V)
        lo_, hi_, b_ = lo[:, None], hi[:, None], base[:, None]
        ir = inel_run[:, None]
        # repair step 1: clamp to [.., hi], below lo -> 0, running inelastic: keep size or stop
        f1 = np.minimum(v, hi_)
        f1 = np.where(f1 < lo_, 0, f1)
        f1 = np.where(ir, np.where(f1 > 0, b_, 0), f1)
        # repair step 2 (after the capacity cut): below lo -> 0, running inelastic: == base or 0
        f2 = np.where(v < lo_, 0, np.broadcast_to(v, (n, V)))
        f2 = np.where(ir, np.where(f2 == b_, f2, 0), f2)
        self._fix1 = np.ascontiguousarray(f1, dtype=np.int64).reshape(-1)
        self._fix2 = np.ascontiguousarray(f2, dtype=np.int64).reshape(-1)
        # the search keeps counts as int32 (half the memory traffic of int64; counts, offsets
        # and GPU sums are far below 2**31, so every integer result is the same)
        self._g32 = g.astype(np.int32)
        self._g64 = np.ascontiguousarray(g, dtype=np.int64)
        self._offs32 = self._offs.astype(np.int32)
        # fitness terms: speedup, times the re-allocation factor where the count differs
        pen = np.where(v != b_, S * factor[:, None], S)
        if p == -1.0:
            self._term = (1.0 / (pen + 1e-3)).reshape(-1)
        else:
            self._term = ((pen + 1e-3) ** p).reshape(-1)

    def objective(self, pop: np.ndarray) -> np.ndarray:
        """Generalised mean (power ``p``) of penalised speedups, per individual: (P,)."""
        return self._mean(self._term.take(pop + self._offs).sum(axis=1), pop.shape[1])

    def _mean(self, total: np.ndarray, n: int) -> np.ndarray:
        """The power mean from each individual's sum of terms."""
        if self.p == -1.0:
            return n / total
        return (total / n) ** (1.0 / self.p)

    def repair(self, pop: np.ndarray) -> np.ndarray:
        """Valid counts in range, then GPU capacity by cumulative sum over the job order.

        Upstream ``_repair``: ``min(cumsum(allocation), capacity)`` then differences, so jobs
        earlier in the order keep their allocation; a job cut below ``w_min`` gets 0 and a
        running inelastic job either keeps its size or stops. Counts must be >= 0 on entry.
        """
        return self._repair(np.minimum(pop, self._V - 1))

    def _repair(self, pop: np.ndarray) -> np.ndarray:
        return self._cut(self._fix1.take(pop + self._offs))

    def _cut(self, x: np.ndarray, tot: np.ndarray | None = None) -> np.ndarray:
        """The capacity step of :meth:`repair` on rows whose counts are already valid (repair
        step 1 leaves them unchanged), in place: only rows over capacity change."""
        if tot is None:  # GPUs per row (the search passes the ones it has computed)
            tot = x.sum(axis=1) if self._unit_g else x @ self.g
        over = np.flatnonzero(tot > self.cap)
        if over.size:
            whole = over.size == x.shape[0]  # (usual at upstream's rate) no gather, no scatter
            sub = x if whole else x[over]
            cum = (sub if self._unit_g else sub * self._g32).cumsum(axis=1)
            past = cum > self.cap
            k = past.argmax(axis=1)  # first job past capacity
            rows = np.arange(over.size)
            gk = self.g[k]
            prev = cum[rows, k] - sub[rows, k] * gk  # GPUs of the jobs before k
            left = (self.cap - prev) // gk
            sub *= ~past  # k and the jobs after it lose theirs ...
            sub[rows, k] = self._fix2[self._offs[k] + left]  # ... and k gets what is left
            if not whole:
                x[over] = sub
        return x

    def _kernel(self):  # noqa: ANN202 (a numba dispatcher or None)
        """The compiled generation loop (:mod:`aryl_gym.agents.pollux_kernel`, bit-identical
        to the loop below), or None: numba not installed, ``ARYL_GYM_NO_NUMBA=1``, or a
        subclass that changes a rule the kernel has built in (the repair, the cut, the mean), or
        a power ``p`` other than upstream's -1 (numba's ``**`` and numpy's power can differ in
        the last bit)."""
        cls = type(self)
        if self.p != -1.0 or (cls._cut is not GAProblem._cut or cls._repair is not GAProblem._repair
                or cls.repair is not GAProblem.repair or cls._mean is not GAProblem._mean):
            return None
        from aryl_gym.agents.pollux_kernel import compiled  # numba loads at the first search

        return compiled()

    def search(
        self, pop: np.ndarray, generations: int, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        """Elitist GA; returns (population sorted best first, fitness).

        Each generation: binary tournaments pick ``P`` parents; pairs ``(i, i + P/2)`` cross
        over at one point (child ``i`` takes its own parent before the point, its partner's
        after; child ``i + P/2`` the reverse); each child's cells are reset to the current
        allocation (0.1), zeroed (0.01) and raised to a uniform count in ``[current, hi]``
        (``p_inc``); children are repaired; parents and children compete for ``P`` places
        (stable: a parent wins ties). Random choices: :func:`draw_block`, in blocks of
        :func:`block_sizes` generations.

        Speed [ours, same results]: a round of a few dozen jobs costs numpy's per-call overhead
        more than arithmetic, so a generation makes as few calls as it can: everything a block's
        draws fix (the raised cells' ranges and offsets, the crossover masks) is computed once
        per block; at ``p_inc >= 1`` (every cell raised, usual when the cluster has room) the
        raise is one dense pass over the children instead of a gather and a scatter; the
        population lives in the first ``P`` rows of a ``(2P, n)`` table whose last ``P`` rows
        are the children, and survival is one gather of the ``P`` best rows.
        """
        P, n = pop.shape
        fit = self.objective(pop)
        if n == 0 or generations == 0:
            idx = np.argsort(-fit, kind="stable")
            return pop[idx], fit[idx]
        half = P // 2
        cols = np.arange(n)
        offs, Pn = self._offs, P * n
        # Rows that pass repair step 1 unchanged stay so through crossover; then only mutated
        # cells need it. The starting allocation (row 0) may not (e.g. capacity shrank).
        valid = bool(np.array_equal(self._fix1.take(np.minimum(pop, self._V - 1) + offs), pop))
        dense = self.p_inc >= 1.0
        # per-cell tables of a (P, n) block, indexed by cell = child * n + job
        base_cell = np.tile(self.base, P)
        span_cell = np.tile((self.hi + 1).astype(np.float64), P)
        offs_cell = np.tile(offs, P)
        # rows 0..P-1: the population by position (best first after each survival); rows
        # P..2P-1: this generation's children
        Y = np.empty((2 * P, n), dtype=np.int32)
        Y[:P] = pop
        kids = Y[P:]
        flat = kids.reshape(-1)
        # work buffers, reused every generation (fresh large temporaries cost page faults)
        sec = np.empty((half, n), dtype=np.int32)
        ib = np.empty((P, n), dtype=np.int32)
        keep = np.empty((P, n), dtype=np.int32)
        offs32, g32 = self._offs32, self._g32
        tb = np.empty((P, n))
        allf = np.empty(2 * P)  # fitness of parents (positions), then children
        allf[:P] = fit
        neg = np.empty(2 * P)
        if dense:
            raise_f = np.empty(Pn)
            raise_i = np.empty(Pn, dtype=np.int32)
            cell_i = np.empty(Pn, dtype=np.int64)
        fix1_32 = self._fix1.astype(np.int32)
        term, fix1, unit_g, cap = self._term, self._fix1, self._unit_g, self.cap
        kernel = self._kernel()
        for G in block_sizes(generations, P, n):
            d = draw_block(rng, G, P, n, self.p_inc, dense=dense)
            a0 = d.tournament[:, :, 0].copy()
            a1 = d.tournament[:, :, 1].copy()
            if kernel is not None:  # the same generations, compiled (agents/pollux_kernel.py)
                kernel(Y, allf, a0, a1, d.points, d.reset_cells, d.reset_at, base_cell,
                       d.zero_cells, d.zero_at, dense, d.inc_cells, d.inc_u, d.inc_at,
                       span_cell, offs_cell, valid, fix1, self._fix2, offs, self._g64, unit_g,
                       int(cap), int(self._V), term, float(self.p))
                continue
            # cells relative to their generation, and what the mutations need there
            gen_offs = np.arange(G, dtype=np.int64) * Pn
            reset = d.reset_cells - np.repeat(gen_offs, np.diff(d.reset_at))
            reset_val = base_cell[reset]
            zero = d.zero_cells - np.repeat(gen_offs, np.diff(d.zero_at))
            inc = d.inc_cells - np.repeat(gen_offs, np.diff(d.inc_at))
            inc_span, inc_offs = span_cell[inc], offs_cell[inc]
            # crossover masks of the block's generations: True from each pair's point on
            lates = cols >= d.points[:, :, None]
            r_at, z_at, i_at = d.reset_at.tolist(), d.zero_at.tolist(), d.inc_at.tolist()
            for t in range(G):
                fit = allf[:P]
                x0, x1 = a0[t], a1[t]
                win = np.where(fit[x0] >= fit[x1], x0, x1)
                # crossover: pair (i, i + P/2) shares a point; each child takes its own
                # parent's genes before it and its partner's from it on
                Y.take(win[:half], axis=0, out=kids[:half], mode="clip")
                Y.take(win[half:], axis=0, out=kids[half:], mode="clip")
                np.copyto(sec, kids[half:])
                late = lates[t]
                np.copyto(kids[half:], kids[:half], where=late)
                np.copyto(kids[:half], sec, where=late)
                flat[reset[r_at[t] : r_at[t + 1]]] = reset_val[r_at[t] : r_at[t + 1]]
                flat[zero[z_at[t] : z_at[t + 1]]] = 0
                if dense:  # every cell: the sparse rule below on all cells, in place
                    np.subtract(span_cell, flat, out=raise_f)
                    raise_f *= d.inc_u[t * Pn : (t + 1) * Pn]
                    np.copyto(raise_i, raise_f, casting="unsafe")
                    flat += raise_i
                    if valid:
                        np.add(flat, offs_cell, out=cell_i)
                        fix1_32.take(cell_i, out=flat, mode="clip")
                else:
                    i, j = i_at[t], i_at[t + 1]
                    if j > i:
                        c = inc[i:j]
                        cur = flat[c]
                        cur += (d.inc_u[i:j] * (inc_span[i:j] - cur)).astype(np.int32)
                        # repair step 1 where it can change something: 0 and the current
                        # allocation pass it, so only the raised cells
                        flat[c] = fix1[cur + inc_offs[i:j]] if valid else cur
                if not valid:
                    kids[...] = self.repair(kids)
                else:
                    tot = kids.sum(axis=1) if unit_g else kids @ g32
                    if tot.max() > cap:
                        self._cut(kids, tot)
                np.add(kids, offs32, out=ib)
                term.take(ib, out=tb, mode="clip")
                allf[P:] = self._mean(tb.sum(axis=1), n)
                np.negative(allf, out=neg)
                idx = neg.argsort(kind="stable")[:P]
                Y.take(idx, axis=0, out=keep, mode="clip")
                Y[:P] = keep
                allf[:P] = allf[idx]
        return Y[:P].astype(np.int64), allf[:P].copy()


@register("pollux")
def _pollux() -> BasePolicy:
    return PolluxPolicy()


@register("pollux-250")
def _pollux250() -> BasePolicy:
    return PolluxPolicy(generations=250, name="pollux-250")


@register("pollux-elastic")
def _pollux_elastic() -> BasePolicy:
    return PolluxPolicy(name="pollux-elastic", elasticity="elastic")


@register("pollux-250-elastic")
def _pollux250_elastic() -> BasePolicy:
    """``pollux-250`` under the reading that only elastic families resize (the reproduction's
    ``@pollux-elastic`` rows: the same 250 generations, only the range differs)."""
    return PolluxPolicy(generations=250, name="pollux-250-elastic", elasticity="elastic")
