"""The load rule: which ``workload.load`` a generated scenario ships with.

``workload.load`` is the one knob calibrated to Baseline; every other knob comes from data. The
rule looks only at the paper's Baseline, never at the policies being compared (World v2: the
Baseline is ``baseline``, YARN's FIFO rule; World v1 ran the rule on the strict ``fifo``):

1. run Baseline (``baseline``) on every seed at every load of a grid (and the strict ``fifo``
   beside it, for reading only: how much head-of-line blocking would add);
2. average Baseline's average and p95 queuing time over the seeds at each load;
3. among the loads whose mean average queue lies in the paper's band (3,000-10,000 s, SPEC 4),
   pick the one whose mean p95 queue is nearest the paper's "near 10,000 s";
4. if no load lands in the band, pick the load whose mean average queue is nearest the band
   (on a log scale) and say so.

``aryl-gym calibrate --scenario S --load-grid 0.3-0.9 --seeds 0-7 --workers 2`` prints the grid
and the pick. The figures besides the queues (utilisation, strict FIFO / Baseline queue, the
largest hourly queued share) are printed for reading, not used by the rule.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aryl_gym.config import load_scenario
from aryl_gym.episodes import policy_task, run_results
from aryl_gym.metrics import EpisodeResult

#: the paper's band for Baseline's average queuing time (SPEC 4: "above 3,000 s"; 10,000 s is its
#: p95 figure, so an average above it cannot match the paper's tail)
QUEUE_BAND: tuple[float, float] = (3000.0, 10000.0)
#: the paper's p95 queuing time for Baseline ("near 10,000 s")
P95_TARGET = 10000.0


#: the largest load the grid accepts: offered load relative to the training GPUs; far above 1
#: the queue only grows (and a generated trace grows with the load)
MAX_LOAD = 10.0
#: the most loads one grid may have
MAX_LOADS = 100


def parse_loads(text: str) -> list[float]:
    """``"0.3-0.9"`` (steps of 0.1, both ends included) or ``"0.4,0.5,0.8"``: distinct loads in
    ``(0, MAX_LOAD]``, at most ``MAX_LOADS`` of them; anything else is a ValueError."""
    text = text.strip()
    form = "give 'LO-HI' (steps of 0.1, e.g. 0.3-0.9) or 'L1,L2,...' (e.g. 0.4,0.8)"
    try:
        if "-" in text and "," not in text:
            a, b = (float(x) for x in text.split("-", 1))
            if not (math.isfinite(a) and math.isfinite(b)):
                raise ValueError
            steps = (b - a) / 0.1
            n = int(round(steps))
            if b < a:
                raise ValueError(f"--load-grid {text!r}: LO {a:g} is above HI {b:g}; {form}") from None
            if abs(steps - n) > 1e-6:
                raise ValueError(
                    f"--load-grid {text!r}: HI - LO must be a multiple of 0.1 (the range's step); "
                    f"list the loads instead, e.g. {a:g},{b:g}"
                ) from None
            if n + 1 > MAX_LOADS:
                raise ValueError(f"--load-grid {text!r}: {n + 1} loads; at most {MAX_LOADS}") from None
            loads = [round(a + 0.1 * i, 10) for i in range(n + 1)]
        else:
            parts = [x.strip() for x in text.split(",")]
            if any(parts) and not all(parts):  # was: skipped, so '0.3,,0.5' ran 0.3 and 0.5
                raise ValueError(f"--load-grid {text!r}: an empty item (two commas in a row, or a comma at "
                                 f"an end); {form}")
            loads = [float(x) for x in parts if x]
        if not text.isascii():  # float() takes any script's digits ('０.５' was 0.5)
            raise ValueError(f"--load-grid {text!r}: write the loads in ASCII digits; {form}")
    except ValueError as exc:
        if str(exc).startswith("--load-grid"):
            raise
        raise ValueError(f"--load-grid {text!r}: {form}") from None
    if not loads:
        raise ValueError(f"--load-grid {text!r}: no load given; {form}")
    bad = [x for x in loads if not (0 < x <= MAX_LOAD)]
    if bad:
        raise ValueError(
            f"--load-grid {text!r}: load {bad[0]:g} is not in (0, {MAX_LOAD:g}] (offered load "
            "relative to the training GPUs)"
        )
    # compared at 10 decimals, as the range form rounds (was: 0.3 and 0.30000000000000004 ran
    # twice and printed as two rows "0.3")
    keys = [round(x, 10) for x in loads]
    dup = sorted({x for x, k in zip(loads, keys) if keys.count(k) > 1})
    if dup:
        raise ValueError(f"--load-grid {text!r}: load {dup[0]:g} is listed twice")
    if len(loads) > MAX_LOADS:
        raise ValueError(f"--load-grid {text!r}: {len(loads)} loads; at most {MAX_LOADS}")
    return loads


def check_grid(scenario: str, loads: Sequence[float], seeds: Sequence[int], workers: int) -> None:
    """ValueError (ConfigError for the scenario) before any episode runs when the grid cannot
    mean anything: a scenario whose job count does not follow ``workload.load`` (a trace, or a
    fixed ``num_jobs``: every load would give the same episodes), a load the scenario rejects,
    repeated or negative seeds, ``workers`` not an integer >= 1."""

    cfg = load_scenario(scenario)
    w = cfg.workload
    if w.trace:
        raise ValueError(
            f"scenario {cfg.name!r} replays a trace ({w.trace}); workload.load does not change it, "
            "so a load grid would repeat one episode; use a generated scenario (basic, testbed, "
            "production)"
        )
    if w.num_jobs is not None:
        raise ValueError(
            f"scenario {cfg.name!r} fixes workload.num_jobs={w.num_jobs}, so workload.load does "
            "not change its episodes; remove num_jobs from a copy of the scenario to calibrate "
            "its load"
        )
    for x in loads:
        cfg.replace(workload={"load": float(x)})  # ConfigError naming the key if rejected
    ss = list(seeds)
    if not ss:
        raise ValueError("load grid: give at least one seed")
    for sd in ss:
        if isinstance(sd, bool) or not isinstance(sd, int) or not 0 <= sd < 2**63:
            raise ValueError(f"load grid: seed {sd!r} must be an integer in [0, 2**63)")
    if len(set(ss)) != len(ss):
        raise ValueError("load grid: a seed is listed twice (each would count twice in the means)")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"--workers must be an integer >= 1, got {workers!r}")


def _figures(load: float, seed: int, res: EpisodeResult, strict: EpisodeResult) -> dict[str, Any]:
    """The figures of one seed at one load: Baseline's queue and utilisation, and strict FIFO's
    average queue over Baseline's."""
    return {
        "load": load,
        "seed": seed,
        "avg_queue": float(res.avg_queue_time),
        "p95_queue": float(res.p95_queue_time),
        "train_util": float(res.train_util),
        "strict_ratio": float(strict.avg_queue_time) / max(float(res.avg_queue_time), 1e-9),
        "max_queued_share": float(res.max_hourly_queued_share),
        "jobs": int(res.jobs_total),
    }


def load_grid(
    scenario: str,
    loads: Sequence[float],
    seeds: Sequence[int],
    workers: int = 1,
    data_root: str | None = None,
    progress: bool = True,
    out: Path | None = None,
) -> list[dict[str, Any]]:
    """One row per load: the means over ``seeds`` of Baseline's (and strict FIFO's) episodes,
    run by the one episode runner (:func:`aryl_gym.episodes.run_results`; arguments checked
    first by :func:`check_grid`). ``out``: keep the episodes in the episode cache there (a
    rerun resumes)."""
    check_grid(scenario, loads, seeds, workers)
    base = load_scenario(scenario)
    pairs = {}
    for x in loads:
        cfg = base.replace(workload={"load": float(x)})
        for sd in seeds:
            pairs[(float(x), int(sd))] = tuple(
                policy_task(cfg, p, int(sd), data_root=data_root)
                for p in ("baseline", "fifo")
            )
    results = run_results([t for pair in pairs.values() for t in pair], workers=workers,
                          desc=f"load grid {scenario}", progress=progress, out=out)
    episodes = [_figures(x, sd, results[b], results[f]) for (x, sd), (b, f) in pairs.items()]
    episodes.sort(key=lambda e: (e["load"], e["seed"]))
    return summarize(episodes, loads)


def summarize(episodes: Sequence[dict[str, Any]], loads: Sequence[float]) -> list[dict[str, Any]]:
    """Per load, the mean of every figure over its episodes (and the seed count)."""
    rows = []
    keys = ("avg_queue", "p95_queue", "train_util", "strict_ratio", "max_queued_share", "jobs")
    for x in loads:
        eps = [e for e in episodes if e["load"] == float(x)]
        if not eps:
            continue
        row: dict[str, Any] = {"load": float(x), "seeds": len(eps)}
        for k in keys:
            row[k] = sum(float(e[k]) for e in eps) / len(eps)
        rows.append(row)
    return rows


def pick_load(rows: Sequence[dict[str, Any]]) -> tuple[float, str]:
    """The rule of the module docstring: (the load, why)."""
    if not rows:
        raise ValueError("pick_load: no grid rows")
    lo, hi = QUEUE_BAND
    inside = [r for r in rows if lo <= r["avg_queue"] <= hi]
    if inside:
        best = min(inside, key=lambda r: (abs(r["p95_queue"] - P95_TARGET), r["load"]))
        return best["load"], (
            f"mean average queue {best['avg_queue']:,.0f} s is in {lo:,.0f}-{hi:,.0f} s and its mean "
            f"p95 {best['p95_queue']:,.0f} s is the nearest to {P95_TARGET:,.0f} s of the "
            f"{len(inside)} load(s) in the band")

    def dist(r: dict[str, Any]) -> float:
        q = max(r["avg_queue"], 1e-9)
        return math.log(lo / q) if q < lo else math.log(q / hi)

    best = min(rows, key=lambda r: (dist(r), r["load"]))
    return best["load"], (
        f"no load has its mean average queue in {lo:,.0f}-{hi:,.0f} s; {best['load']:g} is the "
        f"nearest (mean average queue {best['avg_queue']:,.0f} s)")
