"""``aryl-gym reclaim-study``: Aryl's reclaim heuristic against the exhaustive optimum.

On random small loaned-server states (:func:`aryl_gym.agents.reclaim.random_instance`), for a
random number of servers to return, compares Aryl's heuristic (and the simple default rule) with
the optimal reclaim: preempted jobs of each, how often they are equal, the average overlap of the
chosen server sets (|heuristic & optimal| / n), and the wall time of each. The paper (section
7.3) reports the same preemptions as optimal below 60 servers, 19% more above, 84% resemblance,
and the optimum about 420k times slower (at its much larger sizes).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from typing import Any

import numpy as np

from aryl_gym.commands._common import seed_arg

NAME = "reclaim-study"
HELP = "compare Aryl's reclaim heuristic with the exhaustive optimum on random small instances"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--instances", type=int, default=200, help="random instances (default 200)")
    p.add_argument("--seed", type=seed_arg, default=0)
    p.add_argument("--min-servers", type=int, default=4, help="fewest loaned servers (default 4)")
    p.add_argument("--max-servers", type=int, default=16, help="most loaned servers (default 16)")
    p.add_argument(
        "--elastic", type=float, default=0.5, help="fraction of elastic jobs (default 0.5)"
    )
    p.add_argument("--json", action="store_true", help="print exactly one JSON object on stdout")


def study(
    instances: int = 200,
    seed: int = 0,
    min_servers: int = 4,
    max_servers: int = 16,
    elastic_p: float = 0.5,
) -> dict[str, Any]:
    """Run the study; returns the summary and per-rule figures."""
    from aryl_gym.agents.reclaim import (
        aryl_reclaim,
        default_reclaim_instance,
        optimal_reclaim,
        overlap,
        random_instance,
        reclaim_preemptions,
    )

    if instances < 1:
        raise ValueError("--instances must be >= 1")
    if not 2 <= min_servers <= max_servers:
        raise ValueError("need 2 <= --min-servers <= --max-servers")
    if max_servers > 22:
        raise ValueError("--max-servers above 22 makes the exhaustive optimum too slow; use <= 22")
    rng = np.random.default_rng(seed)
    rules = {"aryl": aryl_reclaim, "default": default_reclaim_instance}
    pre: dict[str, list[int]] = {"optimal": [], "aryl": [], "default": []}
    secs: dict[str, float] = {"optimal": 0.0, "aryl": 0.0, "default": 0.0}
    ov: dict[str, list[float]] = {"aryl": [], "default": []}
    for _ in range(instances):
        L = int(rng.integers(min_servers, max_servers + 1))
        inst = random_instance(rng, L, elastic_p=elastic_p)
        n = int(rng.integers(1, L))
        tic = time.perf_counter()
        opt = optimal_reclaim(inst, n)
        secs["optimal"] += time.perf_counter() - tic
        pre["optimal"].append(reclaim_preemptions(inst, opt))
        for name, rule in rules.items():
            tic = time.perf_counter()
            got = rule(inst, n)
            secs[name] += time.perf_counter() - tic
            pre[name].append(reclaim_preemptions(inst, got))
            ov[name].append(overlap(got, opt))
    opt_total = sum(pre["optimal"])
    out: dict[str, Any] = {
        "instances": instances,
        "seed": seed,
        "servers": [min_servers, max_servers],
        "optimal": {
            "preemptions": opt_total,
            "ms_per_instance": 1000 * secs["optimal"] / instances,
        },
    }
    for name in rules:
        p = pre[name]
        out[name] = {
            "preemptions": sum(p),
            "extra_vs_optimal": (sum(p) - opt_total) / opt_total
            if opt_total
            else (0.0 if sum(p) == 0 else math.inf),
            "equal_fraction": float(np.mean([a == b for a, b in zip(p, pre["optimal"])])),
            "overlap": float(np.mean(ov[name])),
            "ms_per_instance": 1000 * secs[name] / instances,
            "optimal_slowdown": secs["optimal"] / secs[name] if secs[name] > 0 else math.inf,
        }
    return out


def run(args: argparse.Namespace) -> int:
    from aryl_gym.commands._common import table

    res = study(args.instances, args.seed, args.min_servers, args.max_servers, args.elastic)
    if args.json:
        print(json.dumps(res))
        return 0
    print(
        f"{res['instances']} random instances, {args.min_servers}-{args.max_servers} loaned servers, "
        f"seed {args.seed}; optimal: {res['optimal']['preemptions']} preemptions, "
        f"{res['optimal']['ms_per_instance']:.2f} ms per instance"
    )
    rows = [
        [
            name,
            res[name]["preemptions"],
            f"{100 * res[name]['extra_vs_optimal']:+.1f}%",
            f"{100 * res[name]['equal_fraction']:.1f}%",
            f"{100 * res[name]['overlap']:.1f}%",
            f"{res[name]['ms_per_instance']:.3f}",
            f"{res[name]['optimal_slowdown']:.0f}x",
        ]
        for name in ("aryl", "default")
    ]
    print(
        table(
            rows,
            [
                "rule",
                "preemptions",
                "vs optimal",
                "equal",
                "overlap",
                "ms/instance",
                "optimal slower",
            ],
        )
    )
    return 0
