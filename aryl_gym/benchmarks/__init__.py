"""Benchmarks behind ``aryl-gym bench`` (SPEC 8).

A benchmark is a function ``fn(quick: bool) -> list[dict]`` registered in :data:`BENCHMARKS`
under a name; each returns rows (dicts with the same keys) that ``aryl-gym bench`` prints as one
table per benchmark. To add one, append ``Benchmark(name, title, fn)`` to :data:`BENCHMARKS`
(or call :func:`register`) in this module.

Built in:

* ``sim`` -- whole episodes: scenario, policy, rounds, jobs, wall seconds (and CPU seconds of
  this process, which a busy machine does not inflate), simulated seconds per wall second, mean
  decision time per decision round (ms); fifo and aryl on tiny, testbed, basic
  and (unless quick) production. Target: production under aryl in under 60 s on one core.
* ``knapsack`` -- Aryl's phase-two knapsack time per round at production size (ms): the mean,
  p99 and max over the decision rounds of a production episode (or testbed when quick), and a
  synthetic tight instance (every GPU of the production cluster, 300 elastic jobs).
* ``reclaim`` -- the exact reclaim optimum (:func:`aryl_gym.agents.reclaim.milp_reclaim`):
  solve time by number of loaned servers, 10 to 200, beside Aryl's heuristic. Target: 200
  loaned servers in at most 10 s.
* ``tensorboard`` -- the leaderboard's TensorBoard writer: 100,000 scalars as timeline rows and
  one per event (target <= 2 s), and TensorBoard's own pure-Python writer for comparison
  (skipped with ``--quick``).
* ``env`` and ``pollux`` -- :mod:`aryl_gym.benchmarks.env` and :mod:`aryl_gym.benchmarks.pollux` when
  those modules are present (skipped with ``--quick``).
* ``scale`` -- :mod:`aryl_gym.benchmarks.scale`: env steps per CPU-second on testbed, basic and
  production (``sequential``, window 32, observation v1), ``gym.make_vec`` against
  ``SyncVectorEnv``, one ``ppo-v1`` episode on basic and (unless quick) production, each with
  its target; ``aryl-gym bench --only scale --baseline DIR`` also plays the step trajectories
  with an earlier checkout's code in the same run (ABBA order).
* ``train`` -- :mod:`aryl_gym.benchmarks.train`: MaskablePPO env steps per second end to end with its
  periodic evaluation, SB3's default setup against the fast path (skipped with ``--quick`` or
  without the train extra).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from aryl_gym.agents import make_policy
from aryl_gym.agents.knapsack import solve_mckp_arrays
from aryl_gym.agents.reclaim import aryl_reclaim, milp_reclaim, random_instance
from aryl_gym.benchmarks.traces import bench_traces
from aryl_gym.scenario import make_episode

Rows = list[dict[str, Any]]


@dataclass(frozen=True)
class Benchmark:
    name: str
    title: str
    fn: Callable[[bool], Rows]


BENCHMARKS: list[Benchmark] = []


def register(name: str, title: str) -> Callable[[Callable[[bool], Rows]], Callable[[bool], Rows]]:
    def deco(fn: Callable[[bool], Rows]) -> Callable[[bool], Rows]:
        BENCHMARKS.append(Benchmark(name, title, fn))
        return fn

    return deco


def run_episode(scenario: str, policy: str, seed: int = 0) -> tuple[dict[str, Any], Any]:
    """One episode; returns (row, policy object)."""

    ep = make_episode(scenario, seed)
    sim = ep.simulator()
    pol = make_policy(policy)
    tic, cpu0 = time.perf_counter(), time.process_time()
    res = sim.run(pol)
    wall = time.perf_counter() - tic
    cpu = time.process_time() - cpu0
    row = {
        "scenario": scenario,
        "policy": policy,
        "rounds": res.rounds,
        "decision rounds": res.decision_rounds,
        "jobs": res.jobs_total,
        "wall s": wall,
        "cpu s": cpu,
        "sim s / wall s": res.sim_seconds / wall if wall > 0 else float("inf"),
        "decision ms": res.decision_ms_mean,
    }
    return row, pol


@register("sim", "whole episodes (target: production under aryl < 60 s on one core)")
def bench_sim(quick: bool) -> Rows:
    scenarios = ["tiny", "testbed", "basic"] + ([] if quick else ["production"])
    rows: Rows = []
    for sc in scenarios:
        for pol in ("fifo", "aryl"):
            rows.append(run_episode(sc, pol)[0])
    return rows


def _knapsack_stats(label: str, secs: list[float], groups: list[int]) -> dict[str, Any]:
    ms = np.asarray(secs) * 1000.0
    return {
        "case": label,
        "solves": len(ms),
        "groups (mean)": float(np.mean(groups)) if groups else 0.0,
        "ms mean": float(ms.mean()) if len(ms) else 0.0,
        "ms p99": float(np.percentile(ms, 99)) if len(ms) else 0.0,
        "ms max": float(ms.max()) if len(ms) else 0.0,
    }


@register("knapsack", "Aryl's phase-two knapsack per round (ms)")
def bench_knapsack(quick: bool) -> Rows:
    rows: Rows = []
    sc = "testbed" if quick else "production"
    _, pol = run_episode(sc, "aryl")
    rows.append(
        _knapsack_stats(
            f"{sc} episode, per decision round", pol.stats.knapsack_s, pol.stats.knapsack_groups
        )
    )
    # Synthetic tight instance at production size: 300 elastic jobs of 1-4 GPUs per worker with
    # 4-32 GPUs each, capacity = 2,048 training GPUs (less than their flexible demand).
    rng = np.random.default_rng(0)
    ws, vs = [], []
    for _ in range(300):
        g = int(rng.choice([1, 2, 4]))
        wmax = max(int(rng.choice([4, 8, 16, 32])) // g, 2)
        wmin = max(1, wmax // 2)
        R = float(rng.uniform(1e3, 1e6))
        k = np.arange(1, wmax - wmin + 1)
        ws.append(k * g)
        vs.append(R / wmin - R / (wmin + k))
    secs = []
    for _ in range(3 if quick else 10):
        tic = time.perf_counter()
        solve_mckp_arrays(ws, vs, 2048)
        secs.append(time.perf_counter() - tic)
    rows.append(_knapsack_stats("synthetic: 300 jobs, 2,048 GPUs", secs, [300] * len(secs)))
    return rows


@register("reclaim", "exact reclaim optimum (MILP, HiGHS) by loaned servers (target: 200 in <= 10 s)")
def bench_reclaim(quick: bool) -> Rows:
    """Solve times of :func:`~aryl_gym.agents.reclaim.milp_reclaim` on random loaned-server
    states (:func:`~aryl_gym.agents.reclaim.random_instance` filled to 90%, ``n`` uniform in
    1..L-1), with no, half and all jobs elastic, beside Aryl's heuristic on the same instances.
    Wall and CPU time of this process (a busy machine inflates the first, not the second)."""

    sizes = (20, 60, 200) if quick else (10, 20, 50, 100, 150, 200)
    reps = 3 if quick else 10
    rows: Rows = []
    milp_reclaim(random_instance(np.random.default_rng(1), 6), 3)  # import scipy once
    for elastic_p in (0.0, 0.5, 1.0):
        rng = np.random.default_rng(0)
        for L in sizes:
            opt, cpu, heur = [], [], []
            for _ in range(reps):
                inst = random_instance(rng, L, elastic_p=elastic_p, fill=0.9)
                n = int(rng.integers(1, L))
                tic, cpu0 = time.perf_counter(), time.process_time()
                milp_reclaim(inst, n)
                opt.append(time.perf_counter() - tic)
                cpu.append(time.process_time() - cpu0)
                tic = time.perf_counter()
                aryl_reclaim(inst, n)
                heur.append(time.perf_counter() - tic)
            rows.append(
                {
                    "loaned servers": L,
                    "elastic": elastic_p,
                    "instances": reps,
                    "milp ms mean": 1000 * float(np.mean(opt)),
                    "milp ms max": 1000 * float(np.max(opt)),
                    "milp cpu ms max": 1000 * float(np.max(cpu)),
                    "aryl ms mean": 1000 * float(np.mean(heur)),
                    "milp / aryl": float(np.sum(opt) / np.sum(heur)),
                }
            )
    return rows
@register("tensorboard", "TensorBoard event writing, 100,000 scalars (target <= 2 s)")
def bench_tensorboard(quick: bool) -> Rows:
    # tb imports pydantic: only when a config is validated
    from aryl_gym.leaderboard.tb import bench_writer, tensorboard_available

    if not tensorboard_available():
        return []
    return bench_writer(reference=not quick)


#: the benchmarks ``--quick`` skips (they return no rows)
QUICK_SKIPS = ("env", "pollux", "train")


@register("env", "environment steps per second (aryl_gym.benchmarks.env)")
def bench_env_rows(quick: bool) -> Rows:
    if quick:
        return []
    try:
        # an optional dependency: its absence is handled here
        from aryl_gym.benchmarks.env import bench_env
    except ModuleNotFoundError:
        return []
    return bench_env()


@register("scale", "the env at the paper's size (aryl_gym.benchmarks.scale; targets: production >= 5,000 "
                  "and testbed >= 10,000 steps/CPU-s, make_vec(8) >= 1.5x SyncVectorEnv, ppo-v1 basic "
                  "episode <= 10 s, production <= 120 s)")
def bench_scale_rows(quick: bool) -> Rows:
    # the scale module imports this one (register): imported here, when the benchmark runs
    from aryl_gym.benchmarks.scale import BASELINE, bench_scale

    return bench_scale(quick, BASELINE)


@register("pollux", "Pollux decision time (aryl_gym.benchmarks.pollux)")
def bench_pollux_rows(quick: bool) -> Rows:
    if quick:
        return []
    try:
        # an optional dependency: its absence is handled here
        from aryl_gym.benchmarks.pollux import bench_pollux
    except ModuleNotFoundError:
        return []
    return bench_pollux()


@register("train", "MaskablePPO training steps/s with evaluation (aryl_gym.benchmarks.train; target >= 800 on 2 cores)")
def bench_train_rows(quick: bool) -> Rows:
    if quick:
        return []
    try:
        # an optional dependency: its absence is handled here
        from aryl_gym.benchmarks.train import bench_train
    except ModuleNotFoundError:  # the train extra is not installed
        return []
    return bench_train()


@register("traces", "trace loading: wall s and peak RSS per load (aryl_gym.benchmarks.traces; target 1M rows <= 5 s, <= 1 GB)")
def bench_traces_rows(quick: bool) -> Rows:
    return bench_traces(quick)
