"""How much of its GPU time a learned agent spends in relaunch and scaling overheads, per episode.

    python experiments/07-flap-damping/overhead_share.py --agent ppo-v1-kickstart --load 1.2 --seeds 7000-7029 [--deployed]

For each seed the agent plays one episode through its env (without its ``deploy_env_kwargs``
unless ``--deployed``: the raw policy) and the table gives the episode's share of allocated GPU
time spent in overheads, the highest share over any window of ``--window-hours`` (default 1, the
flap damping shield's window for an env with ``stall_hours: 2``; docs/env.md), and whether the
episode was ended by the thrash rule. This is the signal the shield engages on (more than 0.5 over
its window) and the simulator's thrash rule ends episodes on (more than 0.5 over ``stall_hours``).
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from aryl_gym.commands._common import seeds_arg
from aryl_gym.sim.overhead import OverheadWindow


def window_max_share(marks: np.ndarray, window_s: float) -> float:
    """Highest overhead share over windows of at least ``window_s`` (at most one decision point
    more) between the marks ``(time, overhead_gs, alloc_gs)`` taken at decision points: the
    trailing window of the thrash rule and the shield (:class:`aryl_gym.sim.overhead.
    OverheadWindow`), read at every mark."""
    win = OverheadWindow(window_s)
    best = 0.0
    for t, w, a in marks:
        d = win.push(float(t), float(w), float(a))
        if d is not None and d[1] > 0:
            best = max(best, d[0] / d[1])
    return best


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--agent", default="ppo-v1-kickstart", help="a shipped name or a model path")
    p.add_argument("--scenario", default="testbed")
    p.add_argument("--load", type=float, default=None, help="workload.load (default: the scenario's)")
    p.add_argument("--seeds", type=seeds_arg, default=list(range(7000, 7010)))
    p.add_argument("--window-hours", type=float, default=1.0)
    p.add_argument("--deployed", action="store_true", help="act with the agent's deploy_env_kwargs")
    a = p.parse_args()
    if not a.window_hours > 0:
        p.error(f"--window-hours must be > 0, got {a.window_hours}")
    if a.load is not None and not a.load > 0:
        p.error(f"--load must be > 0, got {a.load}")

    from aryl_gym.agents.learned import load_agent

    from aryl_gym.config import load_scenario

    agent = load_agent(a.agent)
    cfg = load_scenario(a.scenario)
    if a.load is not None:
        cfg = cfg.replace(workload={"load": a.load})
    print("| seed | episode overhead share | max share over any "
          f"{a.window_hours:g} h | ended by the thrash rule |")
    print("|---|---|---|---|")
    for seed in a.seeds:
        env = agent.make_env(scenario=cfg, deployed=a.deployed)
        u = env.unwrapped
        obs, _ = env.reset(seed=int(seed), options={"episode_seed": int(seed)})
        marks = [(u.sim.now, u.sim.overhead_gs, u.sim.alloc_gs)]
        while True:
            action, _ = agent.predict(obs)
            obs, _, term, trunc, info = env.step(action)
            if u.substep == 0 or term or trunc:
                marks.append((u.sim.now, u.sim.overhead_gs, u.sim.alloc_gs))
            if term or trunc:
                break
        m = np.array(marks)
        total = m[-1, 1] / m[-1, 2] if m[-1, 2] > 0 else 0.0
        res = info["episode_result"]
        print(f"| {seed} | {total:.3f} | {window_max_share(m, a.window_hours * 3600.0):.3f} | "
              f"{'yes' if res.thrashing else 'no'} |", flush=True)
        env.close()


if __name__ == "__main__":
    sys.exit(main())
