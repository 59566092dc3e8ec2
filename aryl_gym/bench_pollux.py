"""Benchmark rows for Pollux (issue 4 targets), shown by ``aryl-gym bench`` (``pollux`` table).

:func:`bench_pollux` runs, by default, the ``testbed`` scenario's full trace under ``pollux`` and
``pollux-250`` (target: under 60 s wall) and Pollux's own workload 6 on its evaluation cluster
(``pollux-w6`` under ``pollux``; target: under 30 s wall, average JCT within 15% of the 2,446 s
that Pollux's simulator reports in its artifact, petuum/adaptdl ``osdi21-artifact``
``simulator/results-jobload/pollux-1.0/summary.json``). One row per run: wall and CPU seconds
(CPU is what a busy machine does not inflate), rounds, decision rounds, mean and max decision time
per round (ms), jobs, simulated seconds per wall second, average JCT and the reference JCT where
there is one. ``pollux-w6`` is skipped (no row) when the Pollux traces are not found.
"""

from __future__ import annotations

import time
from typing import Any

#: Pollux's own simulator, workload 6, average JCT (s) (artifact summary.json, "avgs").
POLLUX_W6_REFERENCE_JCT = 2446.13125

DEFAULT_RUNS: tuple[tuple[str, str], ...] = (
    ("testbed", "pollux"),
    ("testbed", "pollux-250"),
    ("pollux-w6", "pollux"),
)


def bench_pollux(
    runs: tuple[tuple[str, str], ...] = DEFAULT_RUNS,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """Run each ``(scenario, policy)`` once; returns the rows (see the module docstring)."""
    from aryl_gym.agents.base import make_policy
    from aryl_gym.config import ConfigError
    from aryl_gym.scenario import make_episode

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
        ref = POLLUX_W6_REFERENCE_JCT if scenario == "pollux-w6" else float("nan")
        rows.append(
            {
                "scenario": scenario,
                "policy": name,
                "seed": seed,
                "jobs": res.jobs_total,
                "rounds": res.rounds,
                "decision_rounds": res.decision_rounds,
                "decision_ms_mean": res.decision_ms_mean,
                "decision_ms_max": res.decision_ms_max,
                "wall_s": wall,
                "cpu_s": cpu,
                "target_wall_s": 30.0 if scenario == "pollux-w6" else 60.0,
                "sim_s_per_wall_s": res.sim_seconds / wall if wall > 0 else float("inf"),
                "avg_jct": res.avg_jct,
                "ref_avg_jct": ref,
            }
        )
    return rows
