"""Pollux-style scheduler (Qiao et al., "Pollux: Co-adaptive Cluster Scheduling for
Goodput-Optimized Deep Learning", OSDI '21, section 4.2 "PolluxSched").

Each round (paper 4.2; upstream ``simulator/pollux.py`` at the artifact commit):

1. **Goodput model** per job (:mod:`aryl_gym.agents.pollux_model`): ``G_j(w)`` = the
   simulator's rate ``w x speed`` times the batch-size-tuning multiplier ``m_j[w]`` (goodput at
   the tuned batch over goodput at the job's reference batch). The tables are handed to the
   simulator in ``Decision.speedup``, so tuning shows up in progress exactly as the policy
   models it (the job's "co-adaptation", paper section 3).
2. **Speedup** ``SPEEDUP_j(w) = G_j(w) / G_j(fair)`` with ``fair`` the job's fair share
   ``ceil(GPUs / (g_j x jobs))`` (upstream: "change base goodput to fair-share goodput"),
   scaled by the job's dominant share x servers as upstream does.
3. **Re-allocation penalty** (paper 4.2, "re-allocation penalty"; upstream ``delay``): a job
   whose allocation changes has its speedup multiplied by
   ``max(age - reallocs x delay, 0) / (age + delay)``. ``delay`` is the overhead our simulator
   really charges for that change [ours; upstream uses 30 s for all]: ``scale_overhead_s`` for
   a running job that changes size, the relaunch overhead for a restart, the first-start
   overhead for a new job.
4. **Genetic algorithm** maximising the generalised (power) mean with ``p = -1`` of the
   penalised speedups over *all* active jobs (jobs at 0 count with speedup 0 + 1e-3, as
   upstream). Population ``pop_size`` (default 100) over ``generations`` (default 100; the Aryl
   paper used 250 at production scale: ``pollux-250``). Individuals are vectors of per-job worker
   counts (vectorised with numpy as a 2-D array, population x jobs). Operators follow upstream,
   adapted from per-node to per-job counts: binary tournaments, single-point crossover over the
   job order, mutation (reset a job to its current allocation with probability 0.1, zero it with
   probability 0.01, raise it to a random valid count with probability 1/jobs), and repair
   (clamp to the job's range, a count below ``w_min`` becomes 0, then capacity enforced by a
   cumulative sum over the job order, earlier jobs keep theirs). Survival is elitist (parents +
   offspring, best ``pop_size`` kept), so the result is never worse than the starting allocation
   on the GA's own objective. Jobs are ordered as upstream: least attained GPU-service first,
   then submission. The final population seeds the next round (upstream ``_prev_states``).
   Randomness comes only from ``view.rng``.
5. The chosen counts are made placeable with a trial placement (:func:`agents._alloc.fit_targets`).

Adaptations [ours]: our jobs have a worker size ``g`` and a range ``[w_min, w_max]`` (an
inelastic job is 0 or ``w_max``), so the GA works on worker counts per job instead of replicas
per node, and placement is left to the shared engine (best fit). Pollux allows scale to zero
and back; so do we (preemption with the simulator's relaunch cost). Pollux does not loan
inference servers (``uses_loaning`` False): the Aryl paper compares schedulers in the Basic
scenario without loaning (section 7.4).
"""

from __future__ import annotations

import numpy as np
from aryl_gym.agents._alloc import fit_targets
from aryl_gym.agents.base import BasePolicy, register
from aryl_gym.agents.pollux_model import tuning_table

from aryl_gym.sim.jobs import JobState
from aryl_gym.sim.view import TRAIN, ClusterView, Decision, PlacementOptions


class PolluxPolicy(BasePolicy):
    """Goodput-driven genetic search over allocations (see the module docstring).

    Args:
        pop_size: individuals in the population (upstream 100).
        generations: GA generations per round (upstream 100; Aryl paper 250).
        p: exponent of the generalised mean (upstream -1).
        tune: batch-size tuning on (multiplier tables sent to the simulator).
        data_root: folder that holds ``traces/`` for Pollux-workload jobs.
    """

    uses_loaning = False
    placement = PlacementOptions(elastic_prefer_inference=False, group_flexible=False)
    event_driven = True

    def __init__(
        self,
        pop_size: int = 100,
        generations: int = 100,
        p: float = -1.0,
        tune: bool = True,
        name: str = "pollux",
        data_root: str | None = None,
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
        self.reset()

    def reset(self, seed: int | None = None) -> None:
        self._prev_pop: np.ndarray | None = None  # (P, n_prev) final population
        self._prev_jobs: list[int] = []
        self._tables: dict[int, np.ndarray] = {}
        self._reallocs: dict[int, int] = {}
        self._attained: dict[int, float] = {}  # GPU-seconds of service, by job
        self._last_now: float | None = None
        self._sent: set[int] = set()  # jobs whose tuning table the simulator has
        self.last_objective: tuple[float, float] | None = None  # (start, best) of last round

    # -- model ---------------------------------------------------------------------------------
    def table(self, view: ClusterView, j: int) -> np.ndarray:
        t = self._tables.get(j)
        if t is None:
            spec = view.jobs[j]
            t = tuning_table(spec, self.data_root) if self.tune else np.ones(spec.w_max + 1)
            self._tables[j] = t
        return t

    def _update_attained(self, view: ClusterView) -> None:
        now = view.now
        if self._last_now is not None:
            dt = now - self._last_now
            for j in view.running():
                self._attained[j] = self._attained.get(j, 0.0) + dt * float(
                    view.workers[j] * view.jobs[j].g
                )
        self._last_now = now

    def problem(self, view: ClusterView) -> GAProblem:
        """Build this round's optimisation problem (jobs in Pollux's priority order)."""
        self._update_attained(view)
        jobs = view.active()
        jobs.sort(key=lambda j: (self._attained.get(j, 0.0), view.jobs[j].submit, j))
        n = len(jobs)
        specs = [view.jobs[j] for j in jobs]
        g = np.array([s.g for s in specs], dtype=np.int64)
        lo = np.array([s.w_min for s in specs], dtype=np.int64)
        hi = np.array([s.w_max for s in specs], dtype=np.int64)
        base = np.array([int(view.workers[j]) for j in jobs], dtype=np.int64)
        running = np.array([view.state[j] == JobState.RUNNING for j in jobs], dtype=bool)
        # A running inelastic job may only keep its size or stop.
        cap = view.capacity(TRAIN)
        wmax = int(hi.max()) if n else 0
        # Goodput table G[j, w] in work units per second (sim rate x tuning multiplier).
        G = np.zeros((n, wmax + 1))
        for i, j in enumerate(jobs):
            t = self.table(view, j)
            w = np.arange(1, hi[i] + 1)
            pool = int(view.pool[j]) if running[i] else TRAIN
            G[i, 1 : hi[i] + 1] = w * view.speed(j, pool) * t[np.minimum(w, len(t) - 1)]
        fair = np.clip(np.ceil(cap / np.maximum(g * max(n, 1), 1)), lo, hi).astype(np.int64)
        fair = np.where(lo == hi, hi, fair)
        base_gp = G[np.arange(n), fair]
        share = g / max(cap, 1)
        n_srv = int(view.usable(TRAIN).sum())
        S = G / np.maximum(base_gp, 1e-12)[:, None] * (share * n_srv)[:, None]
        # Re-allocation penalty factor (applied where an individual differs from `base`).
        sim = view.config.sim
        age = np.array([view.now - s.submit for s in specs])
        delay = np.array(
            [
                sim.scale_overhead_s
                if running[i]
                else (
                    sim.relaunch_for(specs[i].family)
                    if view.preemptions[j] > 0
                    else sim.first_start_overhead_s
                )
                for i, j in enumerate(jobs)
            ]
        )
        restarts = np.array([self._reallocs.get(j, 0) for j in jobs], dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            factor = np.where(
                age + delay > 0, np.maximum(age - restarts * delay, 0.0) / (age + delay), 1.0
            )
        factor = np.where(delay <= 0, 1.0, factor)
        inel_run = running & (lo == hi)
        return GAProblem(jobs, g, lo, hi, base, S, factor, cap, self.p, inel_run)

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
        speedup = {}
        if self.tune:
            for j in jobs:
                if j not in self._sent:
                    speedup[j] = self.table(view, j)
                    self._sent.add(j)
        return Decision(targets=targets, order=order, speedup=speedup)

    def _initial_population(self, prob: GAProblem) -> np.ndarray:
        P = self.pop_size
        pop = np.tile(prob.base, (P, 1))
        if self._prev_pop is not None and self._prev_jobs:
            idx = {j: i for i, j in enumerate(self._prev_jobs)}
            for c, j in enumerate(prob.jobs):
                k = idx.get(j)
                if k is not None:
                    pop[:, c] = self._prev_pop[:, k]
                else:
                    pop[:, c] = 0
        pop[0] = prob.base  # the current allocation is always a candidate
        pop[1:] = prob.repair(pop[1:])
        return pop


class GAProblem:
    """The per-round optimisation problem, vectorised over a population (P, n) of counts."""

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
    ):
        self.jobs = jobs
        self.g, self.lo, self.hi, self.base = g, lo, hi, base
        self.S, self.factor, self.cap, self.p = S, factor, cap, p
        self.inel_run = inel_run
        self._any_ir = bool(inel_run.any())
        self._S_flat = S.reshape(-1)
        self._offs = np.arange(len(jobs)) * S.shape[1]  # row offsets into the flat table

    def objective(self, pop: np.ndarray) -> np.ndarray:
        """Generalised mean (power ``p``) of penalised speedups, per individual: (P,)."""
        s = np.take(self._S_flat, pop + self._offs)
        s = np.where(pop != self.base, s * self.factor, s)
        n = pop.shape[1]
        if self.p == -1.0:
            return n / np.add.reduce(1.0 / (s + 1e-3), axis=1)
        return (np.add.reduce((s + 1e-3) ** self.p, axis=1) / n) ** (1.0 / self.p)

    def repair(self, pop: np.ndarray) -> np.ndarray:
        """Valid counts in range, then GPU capacity by cumulative sum over the job order.

        Upstream ``_repair``: ``min(cumsum(allocation), capacity)`` then differences, so jobs
        earlier in the order keep their allocation; a job cut below ``w_min`` gets 0 and a
        running inelastic job either keeps its size or stops. Counts must be >= 0 on entry.
        """
        x = np.minimum(pop, self.hi)
        x[x < self.lo] = 0
        ir = self.inel_run
        if self._any_ir:
            x[:, ir] = np.where(x[:, ir] > 0, self.base[ir], 0)
        cum = np.cumsum(x * self.g, axis=1)
        if cum[:, -1].max() > self.cap:
            np.minimum(cum, self.cap, out=cum)
            cum[:, 1:] -= cum[:, :-1].copy()
            x = cum // self.g
            x[x < self.lo] = 0
            if self._any_ir:
                x[:, ir] = np.where(x[:, ir] == self.base[ir], x[:, ir], 0)
        return x

    def search(
        self, pop: np.ndarray, generations: int, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        """Elitist GA; returns (population sorted best first, fitness).

        One ``rng.random`` draw per generation feeds the tournaments, the crossover points and
        the mutations (fewer numpy calls; the draw order is fixed, so a seed repeats exactly).
        """
        P, n = pop.shape
        fit = self.objective(pop)
        if n == 0 or generations == 0:
            idx = np.argsort(-fit, kind="stable")
            return pop[idx], fit[idx]
        p_inc = 1.0 / n
        span = (self.hi + 1).astype(np.float64)
        cols = np.arange(n)
        half = P // 2
        k1, k2 = 2 * P, 2 * P + half
        for _ in range(generations):
            R = rng.random(k2 + 4 * P * n)
            a = (R[:k1] * P).astype(np.intp).reshape(P, 2)
            win = np.where(fit[a[:, 0]] >= fit[a[:, 1]], a[:, 0], a[:, 1])
            p1, p2 = pop[win[:half]], pop[win[half:]]
            # single-point crossover over the job order
            mask = cols < (R[k1:k2] * n).astype(np.intp)[:, None]
            kids = np.concatenate([np.where(mask, p1, p2), np.where(mask, p2, p1)])
            # mutation: reset to current (0.1), zero (0.01), raise at random (1/n)
            r = R[k2:].reshape(4, P, n)
            kids = np.where(r[0] < 0.1, self.base, kids)
            kids[r[1] < 0.01] = 0
            inc = r[2] < p_inc
            kids[inc] = (kids + (r[3] * (span - kids)).astype(np.int64))[inc]
            kids = self.repair(kids)
            kf = self.objective(kids)
            allp = np.concatenate([pop, kids])
            allf = np.concatenate([fit, kf])
            idx = np.argsort(-allf, kind="stable")[:P]
            pop, fit = allp[idx], allf[idx]
        return pop, fit


@register("pollux")
def _pollux() -> BasePolicy:
    return PolluxPolicy()


@register("pollux-250")
def _pollux250() -> BasePolicy:
    return PolluxPolicy(generations=250, name="pollux-250")
