"""Benchmark rows for Pollux's decision time per round (issue 4 target: testbed under 60 s).

``bench_pollux()`` runs the ``testbed`` scenario's full trace under ``pollux`` (and
``pollux-250``) and returns one row per run: wall seconds, rounds, decision rounds, mean and max
decision time per round (ms), jobs, and simulated seconds per wall second. ``aryl-gym bench``
may add these rows to its table.
"""

from __future__ import annotations

import time
from typing import Any


def bench_pollux(
    scenario: str = "testbed",
    seed: int = 0,
    policies: tuple[str, ...] = ("pollux", "pollux-250"),
) -> list[dict[str, Any]]:
    from aryl_gym.agents.base import make_policy
    from aryl_gym.scenario import make_episode

    rows: list[dict[str, Any]] = []
    for name in policies:
        sim = make_episode(scenario, seed).simulator()
        tic = time.perf_counter()
        res = sim.run(make_policy(name))
        wall = time.perf_counter() - tic
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
                "sim_s_per_wall_s": res.sim_seconds / wall if wall > 0 else float("inf"),
            }
        )
    return rows
