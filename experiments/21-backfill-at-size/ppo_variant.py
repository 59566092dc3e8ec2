"""ppo-v1 on one episode with env arguments on top of its deployed ones (README.md, diagnosis).

    python experiments/21-backfill-at-size/ppo_variant.py 9700 production '{"backfill": true}'
"""

from __future__ import annotations

import json
import sys
import time

import torch
from aryl_gym.agents.learned import load_agent

from aryl_gym.rollout import play


def main() -> None:
    torch.set_num_threads(1)
    seed, scen = int(sys.argv[1]), sys.argv[2]
    kw = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}
    ag = load_agent("ppo-v1")
    env = ag.make_env(scen, **kw)
    t = time.process_time()
    ro = play(ag, env, seed=seed, options={"episode_seed": seed})
    r, steps, info = ro.info["episode_result"], ro.steps, ro.info
    print(json.dumps({"kw": kw, "seed": seed, "avg_jct": r.avg_jct, "queue": r.avg_queue_time,
                      "util": r.train_util, "preemptions": r.preemptions, "steps": steps,
                      "cpu": time.process_time() - t, "backfilled": info.get("backfilled")}), flush=True)


if __name__ == "__main__":
    main()
