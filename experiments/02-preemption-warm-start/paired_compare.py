"""Paired comparison of policies against a reference on the same seeds, with 95% CIs.

    python experiments/02-preemption-warm-start/paired_compare.py --scenario testbed --seeds 0-19 --policies sjf,random

prints, per policy, the geometric mean over seeds of avg JCT(policy) / avg JCT(reference)
(``aryl_gym.stats.paired_ratio_ci``: a t interval on the log ratios).
"""

from __future__ import annotations

import argparse
from concurrent.futures import ProcessPoolExecutor

from aryl_gym.commands._common import seeds_arg


def _avg_jct(task: tuple[str, str, int]) -> tuple[tuple[str, str, int], float]:
    from aryl_gym.agents import make_policy

    from aryl_gym.scenario import make_episode

    scenario, policy, seed = task
    return task, make_episode(scenario, seed).simulator().run(make_policy(policy)).avg_jct


def main() -> None:
    from aryl_gym.agents import make_policy

    from aryl_gym.stats import paired_ratio_ci

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scenario", default="testbed")
    p.add_argument("--seeds", type=seeds_arg, default=list(range(10)))
    p.add_argument("--reference", default="aryl")
    p.add_argument("--policies", default="sjf,random")
    p.add_argument("--workers", type=int, default=2)
    a = p.parse_args()
    pols = [x.strip() for x in a.policies.split(",") if x.strip()]
    for name in [a.reference, *pols]:
        make_policy(name)  # unknown names fail before any run
    tasks = [(a.scenario, q, s) for s in a.seeds for q in [a.reference, *pols]]
    with ProcessPoolExecutor(max(1, a.workers)) as ex:
        res = dict(ex.map(_avg_jct, tasks))
    for q in pols:
        st = paired_ratio_ci([res[(a.scenario, q, s)] / res[(a.scenario, a.reference, s)]
                              for s in a.seeds])
        print(f"{a.scenario}: {q} / {a.reference} avg JCT over {st.n} paired seeds: "
              f"{st.mean:.3f} [{st.lo:.3f}, {st.hi:.3f}]")


if __name__ == "__main__":
    main()
