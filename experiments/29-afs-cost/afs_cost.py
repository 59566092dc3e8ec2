"""Whom AFS's unbounded growth costs: ``afs`` against ``aryl-noloan`` on ``production``, with
the elastic and the inelastic jobs apart.

The reproduction's AFS row (paper 7.4: "unlimited elasticity and greedy allocation implicitly
favor jobs with better throughput at the cost of others. Its average JCT is 1.2x that of Aryl")
reads 0.98x. This script plays one episode per (load, seed, policy) and reports, besides the
average JCT, each class's mean JCT, queuing and running time, and the GPU-hours AFS gives elastic
jobs above their request (``w_max``), integrated round by round. One JSON line per episode.

    python experiments/29-afs-cost/afs_cost.py --loads 0.6,1.0 --seeds 3 \
        --policies afs,aryl-noloan,afs-bounded --out experiments/29-afs-cost/result.jsonl
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
from aryl_gym.agents import make_policy

from aryl_gym.config import load_scenario
from aryl_gym.reproduce.scales import apply_override
from aryl_gym.scenario import make_episode


def play(scenario: str, load: float, seed: int, policy: str) -> dict[str, Any]:
    """One episode's figures by class (elastic or not)."""
    cfg = apply_override(load_scenario(scenario), "workload.load", load)
    sim = make_episode(cfg, seed).simulator()
    el = np.asarray(sim.elastic_list, dtype=bool)
    wmax, g = np.asarray(sim.w_max_list), np.asarray(sim.g_list)
    acc = {"above": 0.0, "last": 0.0, "now": 0.0}

    def on_round(s: Any) -> None:  # the allocation a round leaves holds until the next round
        acc["above"] += acc["now"] * (s.now - acc["last"])
        acc["last"] = s.now
        above = np.maximum(np.asarray(s.workers) - wmax, 0) * g
        acc["now"] = float(above[el].sum())

    t = time.process_time()
    res = sim.run(make_policy(policy), on_round=on_round)
    jct, q, run = sim.finish - sim.submit, sim.first_start - sim.submit, sim.running_time
    return {
        "policy": policy, "scenario": scenario, "load": load, "seed": seed, "avg_jct": res.avg_jct,
        "jobs": int(sim.n_jobs), "elastic_jobs": int(el.sum()),
        "jct_el": float(np.nanmean(jct[el])), "jct_inel": float(np.nanmean(jct[~el])),
        "q_el": float(np.nanmean(q[el])), "q_inel": float(np.nanmean(q[~el])),
        "run_el": float(np.nanmean(run[el])), "run_inel": float(np.nanmean(run[~el])),
        "above_w_max_gpu_h": acc["above"] / 3600.0,
        "busy_gpu_h": (sim.acc.train_busy_gs + sim.acc.loan_used_gs) / 3600.0,
        "cpu_s": time.process_time() - t,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default="production")
    ap.add_argument("--loads", default="0.6,1.0")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--policies", default="afs,aryl-noloan,afs-bounded")
    ap.add_argument("--out", type=Path, required=True, help="JSON lines; episodes already there are kept")
    a = ap.parse_args(argv)
    try:
        loads = [float(x) for x in a.loads.split(",") if x.strip()]
    except ValueError:
        ap.error(f"--loads {a.loads!r}: comma-separated numbers")
    if not loads or not all(x > 0 and math.isfinite(x) for x in loads) or a.seeds < 1:
        ap.error("give --loads > 0 and --seeds >= 1")
    pols = [p.strip() for p in a.policies.split(",") if p.strip()]
    done = set()
    if a.out.exists():
        for line in a.out.read_text().splitlines():
            r = json.loads(line)
            done.add((r["scenario"], r["load"], r["seed"], r["policy"]))
    for load in loads:
        for seed in range(a.seeds):
            for p in pols:
                if (a.scenario, load, seed, p) in done:
                    continue
                rec = play(a.scenario, load, seed, p)
                with a.out.open("a") as fh:
                    fh.write(json.dumps(rec) + "\n")
                print(json.dumps(rec))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
