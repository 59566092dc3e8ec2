"""Benchmark rows for Pollux, shown by ``aryl-gym bench`` (``pollux`` table).

:func:`bench_pollux` runs, by default:

* full episodes: the ``testbed`` scenario's trace under ``pollux`` and ``pollux-250`` (target:
  under 60 s wall), the ``basic`` scenario under ``pollux`` (no target; the mid-scale
  reproduction runs it many times) and Pollux's own workload 6 on its evaluation cluster
  (``pollux-w6`` under ``pollux``; target: under 30 s wall, average JCT within 15% of the
  2,446 s that Pollux's simulator reports in its artifact, petuum/adaptdl ``osdi21-artifact``
  ``simulator/results-jobload/pollux-1.0/summary.json``); ``pollux-w6`` is skipped (no row)
  when the Pollux traces are not found;
* a production-size sample: the first :data:`PRODUCTION_SAMPLE_ROUNDS` rounds of a
  ``production`` episode under ``pollux-250``. The row gives the decision time per round over
  the second half of the sample (when the cluster has filled up), the active jobs at its end,
  and the CPU time per round extrapolated to the whole episode (``duration_hours`` of arrivals
  at the scenario's round length; the drain after the last arrival, with few jobs left, is not
  counted). Target: one production episode under ``pollux-250`` within 15 minutes.

* the GA alone at production size (:func:`bench_pollux_kernel`): one ``pollux-250`` search
  (population 100, 250 generations) over a synthetic round of 450 active jobs on 2,048 GPUs,
  the busy count of a production episode; the fastest of three, CPU ms in
  ``cpu_ms_per_round``.

One row per run: wall and CPU seconds (CPU is what a busy machine does not inflate), rounds,
decision rounds, active jobs (at the end of a sample), mean and max decision time per round
(ms, wall clock as the simulator records it), CPU ms per round, the episode estimate, jobs,
average JCT and the reference JCT where there is one.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from aryl_gym.agents.base import make_policy
from aryl_gym.agents.pollux import GAProblem, raise_probability
from aryl_gym.config import ConfigError
from aryl_gym.scenario import make_episode

#: Pollux's own simulator, workload 6, average JCT (s) (artifact summary.json, "avgs").
POLLUX_W6_REFERENCE_JCT = 2446.13125

DEFAULT_RUNS: tuple[tuple[str, str], ...] = (
    ("testbed", "pollux"),
    ("testbed", "pollux-250"),
    ("pollux-w6", "pollux"),
    ("basic", "pollux"),
)

#: rounds of the production sample (5-minute rounds: 24 simulated hours)
PRODUCTION_SAMPLE_ROUNDS = 288

TARGET_WALL_S = {"testbed": 60.0, "pollux-w6": 30.0, "production": 900.0}


def _row(scenario: str, name: str, seed: int, **kw: Any) -> dict[str, Any]:
    nan = float("nan")
    row: dict[str, Any] = {
        "scenario": scenario,
        "policy": name,
        "seed": seed,
        "run": "episode",
        "jobs": 0,
        "rounds": 0,
        "decision_rounds": 0,
        "active_jobs": nan,
        "decision_ms_mean": nan,
        "decision_ms_max": nan,
        "cpu_ms_per_round": nan,
        "wall_s": nan,
        "cpu_s": nan,
        "episode_cpu_s_est": nan,
        "target_wall_s": TARGET_WALL_S.get(scenario, nan),
        "avg_jct": nan,
        "ref_avg_jct": POLLUX_W6_REFERENCE_JCT if scenario == "pollux-w6" else nan,
    }
    row.update(kw)
    return row


def bench_pollux_sample(
    scenario: str = "production",
    name: str = "pollux-250",
    rounds: int = PRODUCTION_SAMPLE_ROUNDS,
    seed: int = 0,
) -> dict[str, Any]:
    """Time the first ``rounds`` rounds of an episode (see the module docstring)."""

    ep = make_episode(scenario, seed)
    sim = ep.simulator()
    pol = make_policy(name)
    pol.reset(sim.seed)
    sim.begin(pol)
    cpu_round: list[float] = []
    dec_round: list[float] = []
    tic, cpu0 = time.perf_counter(), time.process_time()
    while not sim.done and len(cpu_round) < rounds:
        c = time.process_time()
        info = sim.step(pol)
        cpu_round.append(time.process_time() - c)
        dec_round.append(info.decision_s)
    wall, cpu = time.perf_counter() - tic, time.process_time() - cpu0
    late = slice(len(cpu_round) // 2, None)  # second half: the cluster has filled up
    cpu_ms = 1e3 * sum(cpu_round[late]) / max(len(cpu_round[late]), 1)
    decs = [d for d in dec_round[late] if d > 0]
    cfg = ep.config
    total_rounds = math.ceil(cfg.workload.duration_hours * 3600.0 / sim.interval)
    return _row(
        scenario,
        name,
        seed,
        run=f"first {len(cpu_round)} rounds",
        jobs=len(ep.jobs),
        rounds=len(cpu_round),
        decision_rounds=len(decs),
        active_jobs=len(sim.view.active()),
        decision_ms_mean=1e3 * sum(decs) / max(len(decs), 1),
        decision_ms_max=1e3 * max(decs, default=0.0),
        cpu_ms_per_round=cpu_ms,
        wall_s=wall,
        cpu_s=cpu,
        episode_cpu_s_est=cpu_ms * total_rounds / 1e3,
    )


class _Handover:
    """A policy that runs ``warm`` until ``at`` seconds, then ``main`` (timing its decisions).

    It carries ``main``'s round length, loaning and placement from the start; the engine's
    worker ranges stay ``warm``'s (``"limited"``) until the handover, when they become
    ``main``'s (:meth:`~aryl_gym.sim.engine.Simulator.set_elasticity`). So a given scenario and
    seed reach the same cluster state at the handover whatever ``main`` is, and the per-decision
    cost of two versions of a policy can be compared on it."""

    def __init__(self, sim: Any, warm: Any, main: Any, at: float):
        self.sim, self.warm, self.main, self.at = sim, warm, main, at
        self.name = getattr(main, "name", "main")
        self.uses_loaning = main.uses_loaning
        self.placement = main.placement
        self.event_driven = False
        self.decision_interval_s = getattr(main, "decision_interval_s", None) or 60.0
        self.cpu: list[float] = []
        self.active = 0

    def reset(self, seed: int | None = None) -> None:
        self.warm.reset(seed)
        self.main.reset(seed)

    def reclaim(self, view: Any, n: int) -> Any:
        return None

    def decide(self, view: Any) -> Any:
        if view.now < self.at:
            return self.warm.decide(view)
        if not self.cpu:
            self.sim.set_elasticity(str(getattr(self.main, "elasticity", "limited")))
            self.active = len(view.active())
        c = time.process_time()
        d = self.main.decide(view)
        self.cpu.append(time.process_time() - c)
        return d


def bench_pollux_decisions(
    scenario: str = "production",
    name: str = "pollux-250",
    warm: str = "fifo-backfill",
    warm_hours: float = 48.0,
    rounds: int = 10,
    seed: int = 0,
) -> dict[str, Any]:
    """CPU time per decision of ``name`` on a busy cluster: ``warm`` runs the first
    ``warm_hours`` (60 s rounds, ``"limited"`` ranges), then ``name`` decides ``rounds`` rounds
    in a row (:class:`_Handover`). ``decision_ms_mean`` is the mean CPU ms of those decisions,
    ``decision_ms_max`` the largest; the first (which fits a model for every running job) is
    included. The state at the handover does not depend on ``name``, so versions compare."""

    ep = make_episode(scenario, seed)
    sim = ep.simulator()
    pol = _Handover(sim, make_policy(warm), make_policy(name), warm_hours * 3600.0)
    pol.reset(sim.seed)
    sim.begin(pol)
    tic, cpu0 = time.perf_counter(), time.process_time()
    while not sim.done and len(pol.cpu) < rounds:
        sim.step(pol)
    wall, cpu = time.perf_counter() - tic, time.process_time() - cpu0
    dec = pol.cpu
    return _row(
        scenario,
        name,
        seed,
        run=f"{len(dec)} decisions after {warm_hours:g} h of {warm}",
        jobs=len(ep.jobs),
        rounds=len(dec),
        decision_rounds=len(dec),
        active_jobs=pol.active,
        decision_ms_mean=1e3 * sum(dec) / max(len(dec), 1),
        decision_ms_max=1e3 * max(dec, default=0.0),
        cpu_ms_per_round=1e3 * sum(dec) / max(len(dec), 1),
        wall_s=wall,
        cpu_s=cpu,
    )


def bench_pollux_kernel(
    n: int = 450, generations: int = 250, seed: int = 0, nodes_with_room: int | None = None
) -> dict[str, Any]:
    """Time the GA search alone on a synthetic production-size round (module docstring)."""

    rs = np.random.default_rng(seed)
    w = rs.choice([1, 1, 1, 2, 4, 8], n)
    hi = np.where(rs.random(n) < 0.1, 4 * w, w)  # 10% elastic, range x4
    g = rs.choice([1] * 9 + [2, 4], n)
    cap = 2048
    base = np.where(rs.random(n) < 0.9, w, 0)
    base = np.where(np.cumsum(base * g) <= 0.97 * cap, base, 0)
    S = np.concatenate([np.zeros((n, 1)), np.cumsum(rs.random((n, int(hi.max()))), 1)], 1)
    p_inc = None if nodes_with_room is None else raise_probability(n, nodes_with_room)
    prob = GAProblem(
        list(range(n)), g, w, hi, base, S, rs.random(n), cap, -1.0, (w == hi) & (base > 0), p_inc
    )
    pop = np.tile(base, (100, 1))
    pop[1:] = prob.repair(rs.integers(0, hi + 1, (99, n)))
    walls, cpus = [], []
    for k in range(3):
        tic, cpu = time.perf_counter(), time.process_time()
        prob.search(pop.copy(), generations, np.random.default_rng(k))
        walls.append(time.perf_counter() - tic)
        cpus.append(time.process_time() - cpu)
    return _row(
        "synthetic",
        f"GA {generations} generations"
        + ("" if nodes_with_room is None else f", {nodes_with_room} nodes with room"),
        seed,
        run=f"GA search, {n} jobs",
        active_jobs=n,
        decision_ms_mean=1e3 * min(walls),
        decision_ms_max=1e3 * max(walls),
        cpu_ms_per_round=1e3 * min(cpus),
        wall_s=sum(walls),
        cpu_s=sum(cpus),
    )


def bench_pollux(
    runs: tuple[tuple[str, str], ...] = DEFAULT_RUNS,
    seed: int = 0,
    sample: bool = True,
) -> list[dict[str, Any]]:
    """Run each ``(scenario, policy)`` once, then the production sample and the GA alone;
    returns the rows."""

    rows: list[dict[str, Any]] = []
    for scenario, name in runs:
        try:
            sim = make_episode(scenario, seed).simulator()
        except ConfigError:
            if scenario.startswith("pollux-"):
                continue  # real traces absent: no row
            raise
        tic, cpu = time.perf_counter(), time.process_time()
        res = sim.run(make_policy(name))
        wall, cpu = time.perf_counter() - tic, time.process_time() - cpu
        rows.append(
            _row(
                scenario,
                name,
                seed,
                jobs=res.jobs_total,
                rounds=res.rounds,
                decision_rounds=res.decision_rounds,
                decision_ms_mean=res.decision_ms_mean,
                decision_ms_max=res.decision_ms_max,
                cpu_ms_per_round=1e3 * cpu / max(res.rounds, 1),
                wall_s=wall,
                cpu_s=cpu,
                avg_jct=res.avg_jct,
            )
        )
    if sample:
        rows.append(bench_pollux_sample(seed=seed))
        rows.append(bench_pollux_decisions(seed=seed))
        rows.append(bench_pollux_kernel(seed=seed))
        rows.append(bench_pollux_kernel(seed=seed, nodes_with_room=64))
    return rows
