"""The paper's Basic at the load that matches its utilisation and job count, not its queue.

The load rule (docs/model.md) picks production's ``workload.load`` from Baseline's queuing facts
(average 3,000-10,000 s, p95 near 10,000 s): 0.6, where Baseline's training utilisation is 0.54
and a 15-day trace holds about 31,000 jobs. The paper's other two Baseline facts (utilisation
about 82%, about 50,000 jobs in 15 days) hold at load 1.0 instead. This script plays the rows of
the paper's table at paper scale (``production``) at a given load, with the reproduction's
policies, seeds and statistics (paired by seed, geometric mean, 95% t interval), through the
project's episode runner and cache (an interrupted run resumes).

    python experiments/27-load-reading/load_reading.py --load 1.0 --seeds 3 --workers 2 \
        --rows pollux-aryl-median,pollux-aryl-p95,pollux-tuned-median,pollux-tuned-p95 \
        --out results/exp27 --json experiments/27-load-reading/result-load-1.0.json
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from aryl_gym.config import load_scenario
from aryl_gym.episodes import policy_task, run_results
from aryl_gym.reproduce.claims import within_tolerance
from aryl_gym.reproduce.scales import apply_override
from aryl_gym.stats import paired_ratio_ci

#: row id -> (paper's value as a ratio, numerator policy, denominator policy, metric); the
#: reproduction's primary rows against Pollux and Aryl+TunedJobs on the Basic setting
ROWS: dict[str, tuple[float, str, str, str]] = {
    "pollux-aryl-median": (1.20, "pollux-250", "aryl-noloan", "median_jct"),
    "pollux-aryl-p95": (1.25, "pollux-250", "aryl-noloan", "p95_jct"),
    "pollux-tuned-median": (1.32, "pollux-250", "aryl+tuned", "median_jct"),
    "pollux-tuned-p95": (1.37, "pollux-250", "aryl+tuned", "p95_jct"),
    "afs-aryl-avg": (1.20, "afs", "aryl-noloan", "avg_jct"),
    "jct-aryl-baseline": (1.50, "baseline", "aryl", "avg_jct"),
}
#: figures reported per policy (means over seeds)
FIGURES = ("train_util", "jobs_total", "avg_queue_time", "p95_queue_time", "avg_jct", "median_jct",
           "p95_jct", "avg_run_time", "scaling_events", "preemption_ratio")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--load", type=float, required=True, help="production's workload.load")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--rows", default=",".join(ROWS), help="comma-separated row ids")
    ap.add_argument("--out", type=Path, required=True, help="episode cache folder")
    ap.add_argument("--json", type=Path, default=None, help="also write the result here")
    a = ap.parse_args(argv)
    rows = [r.strip() for r in a.rows.split(",") if r.strip()]
    unknown = [r for r in rows if r not in ROWS]
    if unknown:
        ap.error(f"unknown row {unknown[0]!r}; known: {', '.join(ROWS)}")
    if not (a.load > 0 and math.isfinite(a.load)) or a.seeds < 2 or a.workers < 1:
        ap.error("give --load > 0, --seeds >= 2 and --workers >= 1")
    cfg = apply_override(load_scenario("production"), "workload.load", a.load)
    policies = sorted({p for r in rows for p in ROWS[r][1:3]})
    tasks = [policy_task(cfg, p, s, "basic", f"load={a.load:g}") for p in policies for s in range(a.seeds)]
    res = run_results(tasks, workers=a.workers, out=a.out)
    by = {(t.policy, t.seed): r for t, r in res.items()}
    out: dict[str, Any] = {"load": a.load, "seeds": a.seeds, "scenario": "production", "rows": {}, "policies": {}}
    for p in policies:
        out["policies"][p] = {f: sum(float(getattr(by[(p, s)], f)) for s in range(a.seeds)) / a.seeds
                              for f in FIGURES}
    print(f"production at workload.load = {a.load:g}, seeds 0..{a.seeds - 1}")
    print(f"{'row':22s} {'paper':>6s} {'ours':>7s}  95% CI            within")
    for r in rows:
        paper, num, den, metric = ROWS[r]
        ratios = {s: float(getattr(by[(num, s)], metric)) / float(getattr(by[(den, s)], metric))
                  for s in range(a.seeds)}
        ci = paired_ratio_ci(ratios)
        ok = within_tolerance(ci.mean, paper)  # the reproduction's +-20% of the gain
        out["rows"][r] = {"paper": paper, "ours": ci.mean, "lo": ci.lo, "hi": ci.hi, "within": ok,
                          "per_seed": ratios, "numerator": num, "denominator": den, "metric": metric}
        print(f"{r:22s} {paper:6.2f}x {ci.mean:6.2f}x  [{ci.lo:.2f}x, {ci.hi:.2f}x]  {'yes' if ok else 'no'}")
    for p, f in out["policies"].items():
        print(f"  {p:12s} util {f['train_util']:.3f}  jobs {f['jobs_total']:,.0f}  avg queue {f['avg_queue_time']:,.0f} s  "
              f"median JCT {f['median_jct']:,.0f} s  p95 JCT {f['p95_jct']:,.0f} s  run {f['avg_run_time']:,.0f} s")
    if a.json is not None:
        a.json.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
