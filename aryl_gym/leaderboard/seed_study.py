"""How many seeds a suite needs to separate a given difference between two entrants.

Two entrants *a* and *b* play the same episodes (seed *s* is ``make_episode(scenario, s)``), so
their comparison is paired: per seed, ``d_s = log(metric_a(s) / metric_b(s))``. The spread that
matters is the seed-to-seed standard deviation ``sd`` of ``d_s`` (common episode difficulty cancels
in the ratio). The mean of *n* paired log-ratios has standard error ``sd / sqrt(n)``, and the
suites' intervals are Student-t intervals (:func:`aryl_gym.stats.paired_ratio_ci`), so a 95%
confidence interval of half-width ``log(1 + delta)`` needs the smallest *n* with

    t_{0.975, n-1} * sd / sqrt(n) <= log(1 + delta),

and a true difference of ``delta`` is *detected* (the interval excludes 0) with 80% probability
for the smallest *n* with ``(t_{0.975, n-1} + t_{0.8, n-1}) * sd / sqrt(n) <= log(1 + delta)``
(:func:`aryl_gym.stats.seeds_needed`; with few seeds the t quantile is well above the normal
one, so these are more seeds than the normal approximation gives).

The study runs a suite of its own (``scripts/seed_study.py``; rows in ``OUT/results.csv``,
resumable) and prints, per entrant pair, the geometric-mean ratio, ``sd`` and both *n*. Pairs whose
geometric-mean ratio is within ``close`` (10% by default) are the ones where a few-percent
question arises; their largest *n* is the recommendation. A pair whose results are identical on
every seed (every ratio exactly 1: the same policy under two names) says nothing about the spread
and is left out of the recommendation. Seeds on which either entrant's figure is 0 or missing
have no log-ratio and are left out of that pair.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aryl_gym.cli import main as cli_main
from aryl_gym.stats import mean_sd, seeds_needed

#: the power of the second seed count (a true difference delta detected this often)
POWER = 0.8


@dataclass(frozen=True)
class PairSpread:
    """Paired seed-to-seed spread of ``log(metric_a / metric_b)`` on one scenario."""

    scenario: str
    a: str
    b: str
    seeds: int
    ratio: float  # geometric mean of metric_a / metric_b over the seeds
    sd_log: float  # sample standard deviation (ddof=1) of the per-seed log-ratios
    n_ci: int  # seeds for a 95% CI of half-width log(1 + delta)
    n_power: int  # seeds to detect a true difference delta with 80% power
    close: bool  # |log ratio| < log(1 + close): a pair where small differences matter
    #: every per-seed ratio is exactly 1 (sd 0): the two entrants behave as one policy here;
    #: left out of the recommendation
    identical: bool = False


def paired_log_ratios(
    rows: Sequence[Mapping[str, Any]], scenario: str, a: str, b: str, metric: str = "avg_jct"
) -> dict[int, float]:
    """``{seed: log(metric_a / metric_b)}`` over the seeds both entrants finished with a
    positive, finite value."""
    va: dict[int, float] = {}
    vb: dict[int, float] = {}
    for r in rows:
        if r["scenario"] != scenario or r["policy"] not in (a, b):
            continue
        v = r.get(metric)
        if v is None or not math.isfinite(float(v)) or float(v) <= 0:
            continue
        (va if r["policy"] == a else vb)[int(r["seed"])] = float(v)
    return {s: math.log(va[s] / vb[s]) for s in sorted(set(va) & set(vb))}


def pair_spread(
    rows: Sequence[Mapping[str, Any]],
    scenario: str,
    a: str,
    b: str,
    metric: str = "avg_jct",
    delta: float = 0.03,
    close: float = 0.10,
) -> PairSpread | None:
    """The spread of one pair, or None with fewer than two common seeds."""
    d = list(paired_log_ratios(rows, scenario, a, b, metric).values())
    n = len(d)
    if n < 2:
        return None
    mean, sd = mean_sd(d)
    return PairSpread(
        scenario=scenario,
        a=a,
        b=b,
        seeds=n,
        ratio=math.exp(mean),
        sd_log=sd,
        n_ci=seeds_needed(sd, delta),
        n_power=seeds_needed(sd, delta, power=POWER),
        close=abs(mean) < math.log1p(close),
        identical=all(x == 0.0 for x in d),
    )


def study(
    rows: Sequence[Mapping[str, Any]],
    scenario: str,
    entrants: Sequence[str],
    metric: str = "avg_jct",
    delta: float = 0.03,
    close: float = 0.10,
    pairs: Sequence[tuple[str, str]] | None = None,
) -> list[PairSpread]:
    """Every pair of ``entrants`` (or the given ``pairs``) with at least two common seeds."""
    out = []
    for a, b in pairs or list(itertools.combinations(entrants, 2)):
        p = pair_spread(rows, scenario, a, b, metric, delta, close)
        if p is not None:
            out.append(p)
    return out


def recommendation(spreads: Sequence[PairSpread]) -> dict[str, Any]:
    """The largest ``n_ci`` / ``n_power`` over the close pairs (over all pairs if none is close).

    Pairs with identical results on every seed are left out (listed under ``identical``): their
    spread of 0 would advise 2 seeds for any difference."""
    identical = [f"{p.a} / {p.b}" for p in spreads if p.identical]
    usable = [p for p in spreads if not p.identical]
    pool = [p for p in usable if p.close] or usable
    if not pool:
        return {"pairs": 0, "identical": identical}
    worst = max(pool, key=lambda p: p.sd_log)
    sds = sorted(p.sd_log for p in pool)
    return {
        "pairs": len(pool),
        "close_only": any(p.close for p in usable),
        "median_sd_log": sds[len(sds) // 2] if len(sds) % 2 else 0.5 * (sds[len(sds) // 2 - 1] + sds[len(sds) // 2]),
        "max_sd_log": worst.sd_log,
        "max_pair": f"{worst.a} / {worst.b}",
        "n_ci": max(p.n_ci for p in pool),
        "n_power": max(p.n_power for p in pool),
        "identical": identical,
    }


def metric_problem(rows: Sequence[Mapping[str, Any]], scenario: str, entrants: Sequence[str],
                   metric: str) -> str | None:
    """Why no pair has a log-ratio on two seeds, when the rows say so: the metric is 0 in
    every episode (a ratio of zeros is undefined), or missing. None when some value is usable."""
    vals = [r.get(metric) for r in rows if r["scenario"] == scenario and r["policy"] in entrants]
    nums = [float(v) for v in vals if v is not None and math.isfinite(float(v))]
    if any(v > 0 for v in nums):
        return None
    if nums and all(v == 0 for v in nums):
        return (f"--metric {metric} is 0 in every one of the {len(nums)} episodes, so no entrant's "
                f"ratio to another is defined and the seed-to-seed spread cannot be measured; "
                f"compare a metric that is positive in these episodes (e.g. --metric avg_jct), or "
                f"a scenario or seeds where {metric} is not 0")
    if not nums:
        return (f"--metric {metric} has no value in any of the {len(vals)} episodes "
                "(failed or unfinished episodes?)")
    return None


def render(spreads: Sequence[PairSpread], rec: Mapping[str, Any], delta: float, metric: str) -> str:
    head = ["scenario", "pair a / b", "seeds", "gm ratio", "sd log", f"n (95% CI ±{delta:.0%})",
            f"n ({POWER:.0%} power)", "close"]
    body = [
        [p.scenario, f"{p.a} / {p.b}", str(p.seeds), f"{p.ratio:.3f}", f"{p.sd_log:.4f}",
         "-" if p.identical else str(p.n_ci), "-" if p.identical else str(p.n_power),
         "identical" if p.identical else "yes" if p.close else ""]
        for p in spreads
    ]
    widths = [max(len(h), *(len(r[i]) for r in body)) if body else len(h) for i, h in enumerate(head)]
    lines = [
        f"Paired seed-to-seed spread of log({metric} a / {metric} b); n = the fewest seeds with "
        f"t(0.975, n-1) * sd / sqrt(n) <= log(1 + {delta:g}) (Student t on the paired log ratios, as reproduce's intervals; more cautious with few seeds than the leaderboard's bootstrap; "
        f"{POWER:.0%} power: t(0.975, n-1) + t({POWER:g}, n-1))",
        "  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip(),
        "  ".join("-" * w for w in widths),
    ]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in body]
    if rec.get("identical"):
        names = ", ".join(rec["identical"])
        lines += [
            "",
            f"Left out of the advice: {len(rec['identical'])} pair(s) with identical results on every "
            f"seed (every ratio exactly 1, sd 0; the same policy under two names here): {names}.",
        ]
    if rec.get("pairs"):
        which = (f"the {rec['pairs']} close pairs (geometric-mean ratio within 10%)" if rec["close_only"]
                 else f"all {rec['pairs']} pairs")
        lines += [
            "",
            f"Over {which}: median sd {rec['median_sd_log']:.4f}, largest "
            f"{rec['max_sd_log']:.4f} ({rec['max_pair']}).",
            f"Seeds to separate a {delta:.0%} difference: {rec['n_ci']} (95% CI half-width), "
            f"{rec['n_power']} (detected with {POWER:.0%} power).",
        ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """``aryl-gym seed-study ARGS`` (the command line lives in :mod:`aryl_gym.commands.seed_study`)."""

    return cli_main(["seed-study", *(argv or [])])


__all__ = ["PairSpread", "main", "metric_problem", "pair_spread", "paired_log_ratios", "recommendation",
           "study"]
