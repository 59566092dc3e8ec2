"""Learned agents and the references on Pollux's own evaluation workloads (experiment 23).

Each of Pollux's eight workloads (``traces/pollux-philly/<folder>/workload-<i>.csv``) is played on
the ``pollux-w6`` scenario's cluster (16 x 4 T4, no inference pool, 60 s rounds, Pollux's 30 s
(re)allocation delay) with only the trace swapped, one episode per workload (the trace fixes the
episode; seed 0 draws Pollux's genetic search). Ratios of mean average JCT are paired by workload
with a bootstrap 95% interval over the workloads (``aryl_gym.stats``); every unfinished job counts
(censored JCT) and failed episodes are listed. The per-episode work is ``scripts/eval_v1.py``'s.

    python experiments/23-pollux-workloads/run.py --agent ppo-v1 --agent bf=ppo-v1 \\
        --env-kwargs 'bf={"backfill": true}' --json experiments/23-pollux-workloads/result.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from aryl_gym.config import load_scenario
from aryl_gym.stats import paired_bootstrap_ratio

ROOT = Path(__file__).resolve().parents[2]


def _eval_v1():
    """``scripts/eval_v1.py`` (the scripts folder is not a package: put it on the path)."""
    if str(ROOT / "scripts") not in sys.path:
        sys.path.insert(0, str(ROOT / "scripts"))
    import eval_v1

    return eval_v1


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--agent", action="append", required=True, help="LABEL=PATH or a shipped name; repeat")
    p.add_argument("--env-kwargs", action="append", default=[], metavar="LABEL=JSON")
    p.add_argument("--against", default="aryl,aryl-preempt,sjf,afs,baseline,pollux")
    p.add_argument("--folders", default="workloads,workloads-2.0",
                   help="workload folders under traces/pollux-philly (workloads-0.5, -1.5, -2.0 scale the load)")
    p.add_argument("--workloads", default="1-8", help="workload numbers, e.g. 1-8 or 1,3")
    p.add_argument("--json", help="write every episode's figures and the ratios here")
    a = p.parse_args()
    ev = _eval_v1()
    labels = [x.rpartition("=")[0] or x for x in a.agent]
    env_kwargs = ev.env_kwargs_arg(p, a.env_kwargs, labels)
    against = [x.strip() for x in a.against.split(",") if x.strip()]
    numbers = ev.seeds_arg(a.workloads)
    base = load_scenario("pollux-w6")
    out: dict = {"folders": {}, "agents": labels, "against": against, "env_kwargs": env_kwargs}
    for folder in [f.strip() for f in a.folders.split(",") if f.strip()]:
        per: dict[str, list[float]] = {}
        failed: dict[str, list[int]] = {}
        for i in numbers:
            cfg = base.replace(name=f"pollux-{folder}-{i}",
                               workload={"trace": f"traces/pollux-philly/{folder}/workload-{i}.csv"})
            r = ev.evaluate(list(a.agent), cfg, None, [0], against, env_kwargs=env_kwargs)
            for name, v in r["avg_jct"].items():
                per.setdefault(name, []).append(float(v[0]))
                if r["failed_seeds"].get(name):
                    failed.setdefault(name, []).append(i)
            print(f"{folder}/workload-{i}: " + ", ".join(f"{k} {v[0]:,.0f}" for k, v in r["avg_jct"].items()),
                  file=sys.stderr, flush=True)
        ratios = {}
        for label in labels:
            for name in [x for x in per if x != label]:
                point, lo, hi = paired_bootstrap_ratio(np.array(per[label]), np.array(per[name]))
                ratios[f"{label}/{name}"] = {"ratio_of_means": point, "lo": lo, "hi": hi}
        out["folders"][folder] = {"workloads": numbers, "avg_jct": per, "failed": failed, "ratios": ratios}
        print(f"\n{folder} ({len(numbers)} workloads): mean avg JCT "
              + ", ".join(f"{k} {np.mean(v):,.0f}" for k, v in per.items()))
        for k, v in ratios.items():
            print(f"  {k:28s} {v['ratio_of_means']:.3f} [{v['lo']:.3f}, {v['hi']:.3f}]")
        if failed:
            print(f"  failed episodes (workload numbers): {failed}")
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
