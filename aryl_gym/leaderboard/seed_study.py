"""How many seeds a suite needs to separate a given difference between two entrants.

Two entrants *a* and *b* play the same episodes (seed *s* is ``make_episode(scenario, s)``), so
their comparison is paired: per seed, ``d_s = log(metric_a(s) / metric_b(s))``. The spread that
matters is the seed-to-seed standard deviation ``sd`` of ``d_s`` (common episode difficulty cancels
in the ratio). The mean of *n* paired log-ratios has standard error ``sd / sqrt(n)``, so a 95%
confidence interval of half-width ``log(1 + delta)`` needs

    n = (z * sd / log(1 + delta)) ** 2,   z = 1.96,

and a true difference of ``delta`` is *detected* (the interval excludes 0) with 80% probability
when ``n = ((z + z_0.8) * sd / log(1 + delta)) ** 2`` with ``z_0.8 = 0.8416``.

The study runs a suite of its own (``scripts/seed_study.py``; rows in ``OUT/results.csv``,
resumable) and prints, per entrant pair, the geometric-mean ratio, ``sd`` and both *n*. Pairs whose
geometric-mean ratio is within ``close`` (10% by default) are the ones where a few-percent
question arises; their largest *n* is the recommendation.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aryl_gym.cli import main as cli_main
from aryl_gym.stats import Z95, Z_POWER80, mean_sd, seeds_needed


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
        n_power=seeds_needed(sd, delta, Z95 + Z_POWER80),
        close=abs(mean) < math.log1p(close),
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
    """The largest ``n_ci`` / ``n_power`` over the close pairs (over all pairs if none is close)."""
    pool = [p for p in spreads if p.close] or list(spreads)
    if not pool:
        return {"pairs": 0}
    worst = max(pool, key=lambda p: p.sd_log)
    sds = sorted(p.sd_log for p in pool)
    return {
        "pairs": len(pool),
        "close_only": any(p.close for p in spreads),
        "median_sd_log": sds[len(sds) // 2] if len(sds) % 2 else 0.5 * (sds[len(sds) // 2 - 1] + sds[len(sds) // 2]),
        "max_sd_log": worst.sd_log,
        "max_pair": f"{worst.a} / {worst.b}",
        "n_ci": max(p.n_ci for p in pool),
        "n_power": max(p.n_power for p in pool),
    }


def render(spreads: Sequence[PairSpread], rec: Mapping[str, Any], delta: float, metric: str) -> str:
    head = ["scenario", "pair a / b", "seeds", "gm ratio", "sd log", f"n (95% CI ±{delta:.0%})",
            "n (80% power)", "close"]
    body = [
        [p.scenario, f"{p.a} / {p.b}", str(p.seeds), f"{p.ratio:.3f}", f"{p.sd_log:.4f}",
         str(p.n_ci), str(p.n_power), "yes" if p.close else ""]
        for p in spreads
    ]
    widths = [max(len(h), *(len(r[i]) for r in body)) if body else len(h) for i, h in enumerate(head)]
    lines = [
        f"Paired seed-to-seed spread of log({metric} a / {metric} b); "
        f"n = (z * sd / log(1 + {delta:g}))^2, z = 1.96 (+0.84 for 80% power)",
        "  ".join(h.ljust(w) for h, w in zip(head, widths)),
        "  ".join("-" * w for w in widths),
    ]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in body]
    if rec.get("pairs"):
        which = "close pairs (geometric-mean ratio within 10%)" if rec["close_only"] else "all pairs"
        lines += [
            "",
            f"Over the {rec['pairs']} {which}: median sd {rec['median_sd_log']:.4f}, largest "
            f"{rec['max_sd_log']:.4f} ({rec['max_pair']}).",
            f"Seeds to separate a {delta:.0%} difference: {rec['n_ci']} (95% CI half-width), "
            f"{rec['n_power']} (detected with 80% power).",
        ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """``aryl-gym seed-study ARGS`` (the command line lives in :mod:`aryl_gym.commands.seed_study`)."""

    return cli_main(["seed-study", *(argv or [])])


__all__ = ["PairSpread", "main", "pair_spread", "paired_log_ratios", "recommendation", "study"]
