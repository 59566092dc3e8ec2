#!/usr/bin/env python3
"""What Gymnasium's passive env checker costs per step of ``aryl_gym/Aryl-v2``.

Plays the same seeded trajectories (seeded random masked actions, ``sequential`` with window
32 and observation v1, as the paper-size cases of ``scripts/check_equality.py --size``) through
``gym.make(..., disable_env_checker=False)`` and ``=True``, alternating the two ``--repeats``
times after one untimed warm-up, and prints steps per second of ``env.step`` in CPU time (the best
of the repeats, and the median) and the
relative cost. The checker is on by default because this cost is far below 5% (docs/env.md, "Passive
env checker")::

    python scripts/env_checker_cost.py --scenarios testbed,production --steps 3000 --repeats 5
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any

import gymnasium as gym
import numpy as np

import aryl_gym  # noqa: F401  (registers the envs)


def play(scenario: str, checker: bool, steps: int, seed: int) -> tuple[int, float, float]:
    """(steps played, CPU seconds inside env.step, sum of rewards) of seeded episodes ``seed``,
    ``seed + 1``, ... on one env until ``steps`` steps (CPU time of this process: the other
    load of a shared machine slows the wall clock, not this)."""
    env = gym.make("aryl_gym/Aryl-v2", scenario=scenario, action_mode="sequential", window=32,
                   observation="v1", disable_env_checker=not checker)
    rng = np.random.default_rng(seed)
    base: Any = env.unwrapped
    spent, total, n, ep = 0.0, 0.0, 0, seed
    env.reset(seed=ep)
    while n < steps:
        ok = np.flatnonzero(base.action_masks())
        act = int(rng.choice(ok)) if ok.size else 0
        t = time.process_time()
        _, reward, term, trunc, _ = env.step(act)
        spent += time.process_time() - t
        total += float(reward)
        n += 1
        if term or trunc:
            ep += 1
            env.reset(seed=ep)
    env.close()
    return n, spent, total


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scenarios", default="testbed,production")
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    for scen in args.scenarios.split(","):
        rates: dict[bool, list[float]] = {True: [], False: []}
        returns: dict[bool, set[float]] = {True: set(), False: set()}
        play(scen, True, args.steps, args.seed)  # warm-up: imports, scenario cache, first-call paths
        for r in range(args.repeats):
            for checker in ((True, False) if r % 2 == 0 else (False, True)):
                n, spent, total = play(scen, checker, args.steps, args.seed)
                rates[checker].append(n / spent)
                returns[checker].add(total)
        if len(returns[True] | returns[False]) != 1:
            print(f"{scen}: the trajectories differ with and without the checker", file=sys.stderr)
            return 1
        on, off = max(rates[True]), max(rates[False])
        mon, moff = statistics.median(rates[True]), statistics.median(rates[False])
        print(f"{scen:10s} {n} steps, best of {args.repeats}: checker on {on:,.0f} steps/s, off {off:,.0f}"
              f" steps/s, cost {100.0 * (off / on - 1.0):+.2f}% of step time (medians {mon:,.0f} and"
              f" {moff:,.0f}: {100.0 * (moff / mon - 1.0):+.2f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
