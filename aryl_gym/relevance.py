"""Decision relevance of a scenario (SPEC "World v1", item 5).

A benchmark is only useful if decisions matter in it. For each scenario and seed we run the
reference policies and ``random`` natively and report, as means over seeds:

* ``bound``: the paper regime's JCT lower bound (each job alone at ``w_max`` on its fastest
  allowed GPU at its reference batch: :func:`aryl_gym.metrics.lower_bounds` with ``limited``), s.
  Not the metrics' ``jct_lower_bound``, which also lets a job use every worker up to the ceiling
  and a tuned batch: against that one every headroom is large, so it would not say whether
  decisions matter among the policies of limited elasticity;
* ``headroom``: best reference policy's average JCT / the bound (how far even the best policy is
  from an unreachable ideal: the room a better scheduler could still take);
* ``spread``: random's average JCT / the best reference policy's (how much a bad decision costs);
* ``baseline_over_bound``: Baseline's (``baseline``'s, World v2) average JCT / the bound, when it ran. It
  caps the headroom a world can have while Baseline / best stays at the paper's 1.5x: headroom
  = (Baseline / bound) / (Baseline / best);
* ``sd_log_aryl_sjf``: the seed-to-seed standard deviation of ``log(avg JCT aryl / sjf)`` (how
  many seeds a paired comparison of the two needs);
* ``best``: which policy was best most often.

Targets (SPEC): headroom >= 1.25 and spread >= 1.25 on testbed and basic.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from aryl_gym.agents import make_policy
from aryl_gym.commands._common import table
from aryl_gym.config import load_scenario
from aryl_gym.episodes import policy_task, run_results
from aryl_gym.metrics import lower_bounds
from aryl_gym.scenario import make_episode

#: Generated (trace-free) scenarios shipped in configs/scenarios.
GENERATED_SCENARIOS: tuple[str, ...] = ("tiny", "testbed", "basic", "ideal", "production")
#: Reference policies whose best sets the headroom (Pollux is left out by default for time; add
#: it with ``--policies``).
DEFAULT_POLICIES: tuple[str, ...] = ("baseline", "fifo", "sjf", "aryl", "afs", "gandiva")
#: Targets on testbed and basic.
TARGET_HEADROOM = 1.25
TARGET_SPREAD = 1.25


def _bound(scenario: str, seed: int, data_root: str | None) -> float:
    """The mean paper-regime JCT lower bound of a drawn episode (each job alone at ``w_max``): it
    depends on the jobs and the cluster only, so no policy needs to run for it."""
    sim = make_episode(scenario, seed, data_root=data_root).simulator()
    return float(lower_bounds(sim, limited=True).mean())


def relevance(
    scenarios: Sequence[str],
    policies: Sequence[str],
    seeds: Sequence[int],
    workers: int = 1,
    data_root: str | None = None,
    progress: bool = True,
    out: Path | None = None,
) -> list[dict[str, Any]]:
    """One row per scenario with the figures of the module docstring; the episodes run through
    the one episode runner (:func:`aryl_gym.episodes.run_results`). ``out``: keep them in the
    episode cache there (a rerun resumes)."""

    if "random" in policies:  # was: random counted as a reference policy: spread random / random = 1
        raise ValueError("--policies: 'random' runs beside the reference policies anyway (the spread is "
                         "random's JCT over the best reference policy's); list reference policies only")
    pols = list(dict.fromkeys([*policies, "random"]))
    for p in pols:
        make_policy(p)  # unknown names fail before any run
    tasks = {}
    for s in scenarios:
        cfg = load_scenario(s)
        for seed in seeds:
            for p in pols:
                tasks[(s, p, int(seed))] = policy_task(cfg, p, int(seed), data_root=data_root)
    res = run_results(list(tasks.values()), workers=workers, desc="relevance", progress=progress, out=out)
    bounds = {(s, int(seed)): _bound(s, int(seed), data_root) for s in scenarios for seed in seeds}
    results = [(s, p, seed, float(res[t].avg_jct), bounds[(s, seed)]) for (s, p, seed), t in tasks.items()]
    return summarize(results, scenarios, policies)


def summarize(
    results: Sequence[tuple[str, str, int, float, float]],
    scenarios: Sequence[str],
    policies: Sequence[str],
) -> list[dict[str, Any]]:
    """Rows from ``(scenario, policy, seed, avg JCT, bound)`` tuples (see the module docstring)."""
    by: dict[tuple[str, int], dict[str, float]] = {}
    bound: dict[tuple[str, int], float] = {}
    for s, p, seed, jct, lb in results:
        by.setdefault((s, seed), {})[p] = jct
        bound[(s, seed)] = lb
    rows = []
    for s in scenarios:
        keys = sorted(k for k in by if k[0] == s)
        heads, spreads, logs, lbs, fifos = [], [], [], [], []
        best_names: Counter[str] = Counter()
        for k in keys:
            jcts = by[k]
            ref = {p: jcts[p] for p in policies if p in jcts and math.isfinite(jcts[p])}
            if not ref:
                continue
            best_name = min(ref, key=lambda p: (ref[p], p))
            best = ref[best_name]
            best_names[best_name] += 1
            lbs.append(bound[k])
            heads.append(best / bound[k])
            if "random" in jcts:
                spreads.append(jcts["random"] / best)
            if "baseline" in jcts:  # the paper's Baseline (World v2)
                fifos.append(jcts["baseline"] / bound[k])
            if "aryl" in jcts and "sjf" in jcts:
                logs.append(math.log(jcts["aryl"] / jcts["sjf"]))
        rows.append(
            {
                "scenario": s,
                "seeds": len(keys),
                "bound": float(np.mean(lbs)) if lbs else math.nan,
                "headroom": float(np.mean(heads)) if heads else math.nan,
                "spread": float(np.mean(spreads)) if spreads else math.nan,
                "baseline_over_bound": float(np.mean(fifos)) if fifos else math.nan,
                "sd_log_aryl_sjf": float(np.std(logs, ddof=1)) if len(logs) > 1 else math.nan,
                "mean_aryl_over_sjf": float(np.exp(np.mean(logs))) if logs else math.nan,
                "best": best_names.most_common(1)[0][0] if best_names else "-",
            }
        )
    return rows


def relevance_table(rows: Sequence[dict[str, Any]]) -> str:
    body = [
        [r["scenario"], r["seeds"], r["bound"], r["headroom"], r["spread"],
         r.get("baseline_over_bound", math.nan), r["sd_log_aryl_sjf"], r["mean_aryl_over_sjf"],
         r["best"]]
        for r in rows
    ]
    return table(
        body,
        ["scenario", "seeds", "bound s", "headroom", "spread", "Baseline/bound", "sd log(aryl/sjf)",
         "aryl/sjf", "best most often"],
    )
