"""``ppo-v1`` with and without ``window_fit`` on testbed, paired by seed (experiment 14).

    python experiments/14-window-fit/wfit.py LOAD SEEDS WINDOW_FITS
    python experiments/14-window-fit/wfit.py 1.3 6909,9000,9001 0,4

Prints, per ``window_fit``, the mean average JCT (unfinished jobs censored at the end), failed
episodes and training utilisation, then each setting's ratio of mean average JCT to the first
one with a paired bootstrap 95% interval.
"""

from __future__ import annotations

import sys

import numpy as np
from aryl_gym.agents.learned import load_agent

from aryl_gym.config import load_scenario
from aryl_gym.rollout import run_agent_batch
from aryl_gym.stats import paired_bootstrap_ratio


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    load = float(argv[0])
    seeds = [int(s) for s in argv[1].split(",")]
    fits = [int(x) for x in argv[2].split(",")]
    cfg = load_scenario("testbed").replace(workload={"load": load})
    agent = load_agent("ppo-v1")
    res = {}
    for wf in fits:
        envs = [agent.make_env(cfg, window_fit=wf) for _ in seeds]
        res[wf] = [r for r, _, _ in run_agent_batch(agent, envs, seeds, deterministic=True)]
        for e in envs:
            e.close()
    for wf, rs in res.items():
        print(f"window_fit={wf}: mean avg_jct {np.mean([r.avg_jct for r in rs]):,.0f} "
              f"failed {sum(r.failed for r in rs)} train_util {np.mean([r.train_util for r in rs]):.3f} "
              f"first seeds' jct {[round(r.avg_jct) for r in rs][:6]}")
    base = np.array([r.avg_jct for r in res[fits[0]]])
    for wf in fits[1:]:
        x = np.array([r.avg_jct for r in res[wf]])
        point, lo, hi = paired_bootstrap_ratio(x, base)
        print(f"window_fit={wf} / {fits[0]}: {point:.4f} [{lo:.4f}, {hi:.4f}]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
