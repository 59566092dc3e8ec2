"""Where Pollux's lead over Aryl comes from: Pollux-250 with one of its advantages taken away.

The reproduction measures Pollux as published (``pollux-250``: every job resizable from zero to
upstream's cap, batch sizes tuned from a fitted goodput model) far ahead of Aryl without loaning,
the reverse of the paper's section 7.4, and names three causes: every job starts at once on one
worker, every job may grow past its request up to the 64-GPU ceiling, every job trains at a tuned
batch. This script isolates them on the Basic setting by playing ``PolluxPolicy`` (250
generations) with its worker range narrowed (``elasticity``) and/or its batch tuning off
(``tune``), against ``aryl-noloan`` and ``aryl+tuned``, paired by seed (geometric mean of
per-seed ratios, 95% Student-t interval: ``aryl_gym.stats.paired_ratio_ci``). Each episode's
result is saved as it ends (``--out``), so an interrupted run resumes.

    python experiments/28-pollux-ablation/ablation.py --scenario basic --seeds 3 \
        --out results/exp28 --json experiments/28-pollux-ablation/result-basic.json
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any

from aryl_gym.agents import make_policy
from aryl_gym.agents.pollux import PolluxPolicy

from aryl_gym.config import load_scenario
from aryl_gym.scenario import make_episode
from aryl_gym.stats import paired_ratio_ci

#: variant -> PolluxPolicy keyword arguments (generations 250, as the paper runs it at scale);
#: ``None``: a registered reference policy
VARIANTS: dict[str, dict[str, Any] | None] = {
    "pollux-250": {"elasticity": "all", "tune": True},  # upstream: the reproduction's row
    "pollux-250-notune": {"elasticity": "all", "tune": False},  # no batch tuning
    "pollux-250-elastic": {"elasticity": "elastic", "tune": True},  # only elastic families resize
    "pollux-250-limited": {"elasticity": "limited", "tune": True},  # Aryl's ranges
    "pollux-250-limited-notune": {"elasticity": "limited", "tune": False},  # Aryl's ranges, no tuning
    "aryl-noloan": None,
    "aryl+tuned": None,
}
FIGURES = ("avg_jct", "median_jct", "p95_jct", "avg_queue_time", "mean_slowdown", "scaling_events",
           "preemption_ratio", "train_util")


def policy(name: str) -> Any:
    kw = VARIANTS[name]
    if kw is None:
        return make_policy(name)
    return PolluxPolicy(generations=250, name=name, **kw)


def play(scenario: str, name: str, seed: int, out: Path) -> dict[str, Any]:
    """One episode's figures, from ``out`` when saved before."""
    path = out / scenario / name / f"seed{seed}.json"
    if path.exists():
        return json.loads(path.read_text())
    t = time.process_time()
    res = make_episode(load_scenario(scenario), seed).simulator().run(policy(name))
    d = res.to_dict()
    rec = {k: d[k] for k in FIGURES if k in d}
    rec["cpu_s"] = time.process_time() - t
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(rec))
    tmp.replace(path)
    return rec


def summarise(recs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Means per variant, and each Pollux variant over both Aryls, paired by seed."""
    out: dict[str, Any] = {"means": {}, "ratios": {}}
    for name, rs in recs.items():
        out["means"][name] = {k: sum(r[k] for r in rs) / len(rs) for k in rs[0] if k != "cpu_s"}
        out["means"][name]["cpu_s"] = sum(r["cpu_s"] for r in rs) / len(rs)
    for name in recs:
        if VARIANTS[name] is None:
            continue
        for den in ("aryl-noloan", "aryl+tuned"):
            for metric in ("median_jct", "p95_jct", "avg_jct"):
                ratios = [a[metric] / b[metric] for a, b in zip(recs[name], recs[den])]
                est = paired_ratio_ci(ratios)
                out["ratios"][f"{name} / {den}: {metric}"] = {"mean": est.mean, "lo": est.lo, "hi": est.hi,
                                                              "n": est.n}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default="basic")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated names")
    ap.add_argument("--out", type=Path, required=True, help="folder for the saved episodes")
    ap.add_argument("--json", type=Path, default=None, help="also write the summary here")
    a = ap.parse_args(argv)
    names = [v.strip() for v in a.variants.split(",") if v.strip()]
    bad = [v for v in names if v not in VARIANTS]
    if bad:
        ap.error(f"unknown variant {bad[0]!r}; known: {', '.join(VARIANTS)}")
    if a.seeds < 2:
        ap.error("give --seeds >= 2 (the intervals pair seeds)")
    for ref in ("aryl-noloan", "aryl+tuned"):
        if ref not in names:
            names.append(ref)
    load_scenario(a.scenario)  # a bad name fails before any episode
    recs = {n: [play(a.scenario, n, s, a.out) for s in range(a.seeds)] for n in names}
    summary = summarise(recs)
    text = json.dumps(summary, indent=1, default=lambda o: o if not isinstance(o, float) or math.isfinite(o) else None)
    print(text)
    if a.json is not None:
        a.json.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
