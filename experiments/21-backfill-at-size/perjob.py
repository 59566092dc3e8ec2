"""Per-job records of Aryl and ppo-v1 on one episode (the diagnosis in README.md).

    python experiments/21-backfill-at-size/perjob.py 9700 production perjob-production-9700.json
    python experiments/21-backfill-at-size/perjob_an.py perjob-production-9700.json
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import numpy as np
import torch
from aryl_gym.agents import make_policy
from aryl_gym.agents.learned import load_agent

from aryl_gym.rollout import play
from aryl_gym.scenario import make_episode


def arrays(sim: Any) -> dict[str, Any]:
    out = {k: np.asarray(getattr(sim, k), dtype=float).tolist()
           for k in ("submit", "first_start", "finish", "running_time")}
    out["preempt"] = np.asarray(sim.preempt_count).tolist()
    out["scale"] = (np.asarray(sim.scale_out_count) + np.asarray(sim.scale_in_count)).tolist()
    return out


def main() -> None:
    torch.set_num_threads(1)
    seed = int(sys.argv[1]) if len(sys.argv) > 1 else 9700
    scen = sys.argv[2] if len(sys.argv) > 2 else "production"
    dest = sys.argv[3] if len(sys.argv) > 3 else f"perjob-{scen}-{seed}.json"
    ep = make_episode(scen, seed)
    out: dict[str, Any] = {}
    t = time.process_time()
    sim = ep.simulator()
    res = sim.run(make_policy("aryl"))
    out["aryl"] = {**arrays(sim), "avg_jct": res.avg_jct, "cpu": time.process_time() - t}
    print("aryl", res.avg_jct, res.avg_queue_time, flush=True)
    ag = load_agent("ppo-v1")
    env = ag.make_env(scen)
    t = time.process_time()
    ro = play(ag, env, seed=seed, options={"episode_seed": seed})
    r2, steps = ro.info["episode_result"], ro.steps
    out["ppo-v1"] = {**arrays(env.unwrapped.sim), "avg_jct": r2.avg_jct, "cpu": time.process_time() - t,
                     "steps": steps}
    print("ppo-v1", r2.avg_jct, r2.avg_queue_time, steps, flush=True)
    out["jobs"] = [{"g": j.g, "w_min": j.w_min, "w_max": j.w_max, "w_req": j.w_req or j.w_min,
                    "elastic": j.elastic, "ta": j.type_agnostic, "work": j.work, "family": j.family}
                   for j in ep.jobs]
    with open(dest, "w") as fh:
        json.dump(out, fh)


if __name__ == "__main__":
    main()
