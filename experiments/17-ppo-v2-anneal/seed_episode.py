"""Play one training-evaluation episode (testbed, load 1.1) of a saved model, with and without the
env's robustness options, and print how it ends.

    python experiments/17-ppo-v2-anneal/seed_episode.py MODEL.zip 1008

MODEL: a checkpoint of a run (its config.yaml is found beside the run folder). Each line: the
options added to the agent's env kwargs, steps, simulated hours, average JCT (unfinished jobs
censored), unfinished jobs, and the rule that ended the episode early (None: every job done).
"""

from __future__ import annotations

import argparse

import torch
from aryl_gym.agents.learned import load_agent

from aryl_gym.config import load_scenario

VARIANTS: tuple[dict[str, bool], ...] = (
    {},
    {"thrash_sustained": True},
    {"thrash_sustained": True, "stall_guard": True, "preempt_guard": True},
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("seeds", help="comma-separated episode seeds, e.g. 1008")
    ap.add_argument("--load", type=float, default=1.1)
    args = ap.parse_args()
    torch.set_num_threads(1)
    agent = load_agent(args.model)
    scenario = load_scenario("testbed").replace(workload={"load": args.load})
    for seed in (int(s) for s in args.seeds.split(",")):
        for extra in VARIANTS:
            env = agent.make_env(scenario, **extra)
            obs, _ = env.reset(seed=seed, options={"episode_seed": seed})
            steps = 0
            while True:
                act, _ = agent.predict(obs, deterministic=True)
                obs, _, term, trunc, info = env.step(act)
                steps += 1
                if term or trunc:
                    break
            res = info["episode_result"]
            rule = (info.get("end_charge") or {}).get("rule")
            print(f"seed {seed} {extra or 'as trained'}: {steps} steps, {env.unwrapped.sim.now / 3600:.1f} h, "
                  f"avg JCT {res.avg_jct:,.0f} s, {res.jobs_unfinished} unfinished, early end: {rule}", flush=True)


if __name__ == "__main__":
    main()
