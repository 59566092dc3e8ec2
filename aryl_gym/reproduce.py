"""The paper's headline table, its sensitivity to the knobs the paper does not fix, the
prediction-error study and the heterogeneous-training study (``aryl-gym reproduce``;
``docs/reproduction.md``).

**Rows.** Each row of :data:`ROWS` is one claim of the paper as a ratio of one figure between two
policies on one scenario *role* (``basic``: the paper's Basic; ``ideal``: its Ideal), e.g. the
Aryl/Baseline average-JCT gain is ``avg_jct(fifo) / avg_jct(aryl)`` on ``basic``. A gain "+26.9%"
is stored as the ratio 1.269.

**Statistics.** Comparisons are paired by seed: both policies run on the same drawn episode.
For each seed we compute the ratio ``r_s``; the row's value is the *geometric mean* of the
``r_s`` and its 95% confidence interval is ``exp(mean(log r) +- t_{0.975, n-1} sd(log r) /
sqrt(n))`` (a Student-t interval on the log ratios, :func:`paired_ratio_ci`). With one seed the
interval is undefined (reported as ``-``). Seeds where a ratio is undefined (a zero or missing
figure, e.g. no preemption at all) are left out and counted.

**Tolerance.** +-20% of the paper's *gain*: a ratio ``R`` (gain ``R - 1``) is within tolerance
when ``1 + 0.8 (R - 1) <= ours <= 1 + 1.2 (R - 1)`` (1.50x -> 1.40x-1.60x; +26.9% -> +21.5% to
+32.3%), judged on the point estimate; ``ci_overlaps`` says whether the interval reaches the band.

**Scales.** ``paper``: the paper's Basic is production size (``production``), its Ideal is
``production`` with the workload fields in which ``ideal.yaml`` differs from ``basic.yaml``
(:func:`ideal_overrides`; today ``all_elastic: true`` and ``type_agnostic_fraction: 1.0``), 3
seeds, 1 for ``pollux-250``. ``mid``: ``basic`` and ``ideal``, 5 seeds. ``tiny``: ``tiny`` and
``tiny`` with the same ideal overrides, 3 seeds (tests).

**Episodes** run once each and are shared between rows: every :class:`EpisodeResult` is cached as
``OUT/episodes/SCENARIO/POLICY/seedN-HASH.json`` (``HASH``: the resolved scenario config, see
:func:`config_hash`), written as soon as the episode ends, so an interrupted run resumes and
nothing computed is lost.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from aryl_gym.config import (
    ConfigError,
    ScenarioConfig,
    load_scenario,
    validate_scenario,
)
from aryl_gym.fileio import load_yaml_value
from aryl_gym.metrics import EpisodeResult
from aryl_gym.stats import RatioStat, paired_bootstrap_ratio, paired_ratio_ci  # noqa: F401 - the statistics, in aryl_gym.stats

# ----------------------------------------------------------------------------------------------
# Statistics
# ----------------------------------------------------------------------------------------------

def tolerance_band(paper: float, rel: float = 0.2) -> tuple[float, float]:
    """The band ``1 + (1 -+ rel)(paper - 1)`` around a ratio ``paper`` (its gain +- rel)."""
    g = paper - 1.0
    a, b = 1.0 + (1.0 - rel) * g, 1.0 + (1.0 + rel) * g
    return (min(a, b), max(a, b))


def within_tolerance(value: float, paper: float, rel: float = 0.2) -> bool:
    lo, hi = tolerance_band(paper, rel)
    return bool(math.isfinite(value) and lo - 1e-12 <= value <= hi + 1e-12)


# ----------------------------------------------------------------------------------------------
# Rows
# ----------------------------------------------------------------------------------------------

Results = Mapping[tuple[str, str, int], EpisodeResult]  # (role, policy, seed) -> result


@dataclass(frozen=True)
class RowSpec:
    """One claim of the paper: ``figure(num_policy) / figure(den_policy)`` on ``role``.

    ``stat="ratio"`` divides the EpisodeResult field ``metric``; ``stat="peak_hourly_usage"`` is
    ``max over hours of usage_num(h) / usage_den(h)`` of the hourly combined-usage series over the
    arrival window (both runs see the same inference series, so hours pair).
    """

    id: str
    name: str
    paper: float
    fmt: str  # "x" (ratio) or "%" (gain)
    role: str  # "basic" | "ideal"
    num: str
    den: str
    metric: str
    variant: str  # what the row runs, in the paper's words
    stat: str = "ratio"
    #: policies run only to explain the row when it misses (e.g. how much of Baseline's queue
    #: would be head-of-line blocking: the strict ``fifo``)
    extra: tuple[str, ...] = ()
    #: the readings (keys of :data:`READINGS`) this row takes where the paper is not explicit
    reading: tuple[str, ...] = ()
    #: the id of the row this one restates under another reading ("" for the paper's rows)
    alt_of: str = ""

    @property
    def policies(self) -> tuple[str, ...]:
        return (self.num, self.den, *self.extra)


#: The readings a row can take where the paper is not explicit (SPEC "World v2" 7). Each row of
#: the table takes the reading we defend (docs/reproduction.md says why); a row with
#: ``alt_of`` set is the same claim under another reading, shown under it.
READINGS: dict[str, str] = {
    "baseline": "Baseline = YARN FIFO (a job that does not fit is passed over)",
    "strict-fifo": "Baseline = strict FIFO (the head of the queue blocks)",
    "queue-total": "queuing time includes re-queuing after preemptions",
    "queue-first": "queuing time = first start - submit",
    "item-literal": "knapsack item value = JCT reduction, no resize pause",
    "item-pause": "knapsack item value charges the resize pause (aryl-pause)",
    "afs-elastic": "AFS unbounded for elastic jobs (afs)",
    "afs-all": "AFS unbounded for every job (afs-all)",
    "pollux-all": "Pollux resizes every job (upstream's range; pollux-250)",
    "pollux-elastic": "Pollux resizes only elastic families (pollux-250-elastic)",
}


def _alt(row: RowSpec, reading: str, **changes: Any) -> RowSpec:
    """``row`` under another reading (``reading`` names it, :data:`READINGS`)."""
    return dataclasses.replace(
        row, id=f"{row.id}@{reading}", alt_of=row.id, reading=(reading,), **changes
    )


_Q = RowSpec("queue-aryl-baseline", "Aryl vs Baseline: average queuing, Baseline / Aryl", 1.53, "x",
             "basic", "baseline", "aryl", "avg_queue_time_total",
             "baseline / aryl, with loaning (paper 7.1, Basic)", extra=("fifo",),
             reading=("baseline", "queue-total"))
_J = RowSpec("jct-aryl-baseline", "Aryl vs Baseline: average JCT, Baseline / Aryl", 1.50, "x",
             "basic", "baseline", "aryl", "avg_jct",
             "baseline / aryl, with loaning (paper 7.1, Basic)", reading=("baseline", "item-literal"))
_U = RowSpec("usage-peak-gain", "largest hourly combined-usage gain, Aryl over Baseline", 1.269, "%",
             "basic", "aryl", "baseline", "combined_usage_hourly",
             "max over hours of aryl / baseline hourly combined usage (paper: up to +26.9%; "
             "Figure 9: +14% Basic vs Baseline over 48 h)", stat="peak_hourly_usage",
             reading=("baseline",))
_AFS = RowSpec("afs-aryl-avg", "AFS vs Aryl: average JCT, AFS / Aryl", 1.20, "x",
               "basic", "afs", "aryl-noloan", "avg_jct",
               "afs / aryl-noloan: no capacity loaning (paper 7.4, Basic)", reading=("afs-elastic",))
_NGQ = RowSpec("nogroup-queue", "average queuing without flexible grouping (Basic)", 1.10, "%",
               "basic", "aryl-nogroup", "aryl", "avg_queue_time_total",
               "aryl-nogroup / aryl, with loaning (paper Table 6: up to +10%, Basic)",
               reading=("queue-total",))
_PAM = RowSpec("pollux-aryl-median", "Pollux-250 vs Aryl: median JCT, Pollux / Aryl", 1.20, "x",
               "basic", "pollux-250", "aryl-noloan", "median_jct",
               "pollux-250 / aryl-noloan: no capacity loaning (paper 7.4, Basic)", reading=("pollux-all",))
_PAP = RowSpec("pollux-aryl-p95", "Pollux-250 vs Aryl: p95 JCT, Pollux / Aryl", 1.25, "x",
               "basic", "pollux-250", "aryl-noloan", "p95_jct",
               "pollux-250 / aryl-noloan: no capacity loaning (paper 7.4, Basic)", reading=("pollux-all",))
_PTM = RowSpec("pollux-tuned-median", "Pollux vs Aryl+TunedJobs: median JCT, Pollux / Aryl+Tuned",
               1.32, "x", "basic", "pollux-250", "aryl+tuned", "median_jct",
               "pollux-250 / aryl+tuned: no capacity loaning (paper 7.4, Basic)", reading=("pollux-all",))
_PTP = RowSpec("pollux-tuned-p95", "Pollux vs Aryl+TunedJobs: p95 JCT, Pollux / Aryl+Tuned",
               1.37, "x", "basic", "pollux-250", "aryl+tuned", "p95_jct",
               "pollux-250 / aryl+tuned: no capacity loaning (paper 7.4, Basic)", reading=("pollux-all",))
_PTS = RowSpec("pollux-tuned-scalings", "scaling events, Pollux / Aryl+TunedJobs (Ideal)", 1.76, "x",
               "ideal", "pollux-250", "aryl+tuned", "scaling_events",
               "pollux-250 / aryl+tuned: no capacity loaning (paper 7.4, Ideal)", reading=("pollux-all",))

ROWS: tuple[RowSpec, ...] = (
    _Q,
    _alt(_Q, "strict-fifo", num="fifo", extra=(), variant="fifo / aryl, with loaning"),
    _alt(_Q, "queue-first", metric="avg_queue_time"),
    _J,
    _alt(_J, "strict-fifo", num="fifo", variant="fifo / aryl, with loaning"),
    _alt(_J, "item-pause", den="aryl-pause", variant="baseline / aryl-pause, with loaning"),
    _U,
    _alt(_U, "strict-fifo", den="fifo", variant="max over hours of aryl / fifo hourly usage"),
    _PAM,
    _alt(_PAM, "pollux-elastic", num="pollux-250-elastic", variant="pollux-250-elastic / aryl-noloan"),
    _PAP,
    _alt(_PAP, "pollux-elastic", num="pollux-250-elastic", variant="pollux-250-elastic / aryl-noloan"),
    _AFS,
    _alt(_AFS, "afs-all", num="afs-all", variant="afs-all / aryl-noloan: no capacity loaning"),
    _PTM,
    _alt(_PTM, "pollux-elastic", num="pollux-250-elastic", variant="pollux-250-elastic / aryl+tuned"),
    _PTP,
    _alt(_PTP, "pollux-elastic", num="pollux-250-elastic", variant="pollux-250-elastic / aryl+tuned"),
    _PTS,
    _alt(_PTS, "pollux-elastic", num="pollux-250-elastic", variant="pollux-250-elastic / aryl+tuned (Ideal)"),
    RowSpec("nogroup-preemption", "preemption ratio without flexible grouping (Ideal)", 2.13, "%",
            "ideal", "aryl-nogroup", "aryl", "preemption_ratio",
            "aryl-nogroup / aryl, with loaning (paper Table 6: up to +113%, Ideal)"),
    _NGQ,
    _alt(_NGQ, "queue-first", metric="avg_queue_time"),
    RowSpec("nogroup-jct", "average JCT without flexible grouping (Basic)", 1.20, "%",
            "basic", "aryl-nogroup", "aryl", "avg_jct",
            "aryl-nogroup / aryl, with loaning (paper Table 6: up to +20%, Basic)"),
)
#: the paper's claims, one row each, under the readings we defend (the score counts these)
PRIMARY_ROWS: tuple[RowSpec, ...] = tuple(r for r in ROWS if not r.alt_of)
ROW_IDS = tuple(r.id for r in ROWS)


def select_rows(ids: Sequence[str] | None) -> list[RowSpec]:
    """Rows by id (all when ``ids`` is empty); an unknown id is a ValueError listing the known."""
    if not ids:
        return list(ROWS)
    by_id = {r.id: r for r in ROWS}
    bad = [i for i in ids if i not in by_id]
    if bad:
        raise ValueError(f"--rows: unknown row {bad[0]!r}. Known rows: {', '.join(ROW_IDS)}")
    return [by_id[i] for i in ids]


def seed_ratio(spec: RowSpec, num: EpisodeResult, den: EpisodeResult) -> float:
    """The row's figure on one seed (NaN when undefined)."""
    if spec.stat == "peak_hourly_usage":
        if not num.combined_usage_hourly or not den.combined_usage_hourly:
            return math.nan
        a = np.asarray(num.combined_usage_hourly, dtype=float)
        b = np.asarray(den.combined_usage_hourly, dtype=float)
        # Hours of the arrival window both runs cover; the drain after the last arrival differs
        # between policies by design and is not the steady state Figure 9 shows.
        h = min(len(a), len(b), max(1, math.ceil(_last_submit_hours(num))))
        a, b = a[:h], b[:h]
        ok = b > 0
        return float((a[ok] / b[ok]).max()) if ok.any() else math.nan
    x = getattr(num, spec.metric)
    y = getattr(den, spec.metric)
    if x is None or y is None:
        return math.nan
    x, y = float(x), float(y)
    if not (math.isfinite(x) and math.isfinite(y)) or y <= 0:
        return math.nan  # 0 / 0 or x / 0: undefined on this seed
    return x / y


def _last_submit_hours(res: EpisodeResult) -> float:
    """Hours of arrivals: stored by the harness beside each result (``arrival_hours``)."""
    return float(getattr(res, "arrival_hours", None) or len(res.combined_usage_hourly))


@dataclass
class RowResult:
    spec: RowSpec
    stat: RatioStat
    seeds: list[int]
    why: str = ""

    @property
    def band(self) -> tuple[float, float]:
        return tolerance_band(self.spec.paper)

    @property
    def within(self) -> bool:
        return within_tolerance(self.stat.mean, self.spec.paper)

    @property
    def ci_overlaps(self) -> bool:
        lo, hi = self.band
        s = self.stat
        if not (math.isfinite(s.lo) and math.isfinite(s.hi)):
            return self.within
        return s.lo <= hi and s.hi >= lo

    def to_dict(self) -> dict[str, Any]:
        sp = self.spec
        return {
            "id": sp.id,
            "name": sp.name,
            "scenario_role": sp.role,
            "variant": sp.variant,
            "numerator": sp.num,
            "denominator": sp.den,
            "metric": sp.metric,
            "paper": sp.paper,
            "tolerance": list(self.band),
            "ours": self.stat.to_dict(),
            "within_tolerance": self.within,
            "ci_overlaps_tolerance": self.ci_overlaps,
            "why": self.why,
        }


def compute_rows(specs: Sequence[RowSpec], results: Results, seeds: Sequence[int]) -> list[RowResult]:
    """Each row's paired statistic over ``seeds`` (seeds missing either policy are skipped)."""
    out = []
    for sp in specs:
        ratios: dict[int, float] = {}
        used = []
        for s in seeds:
            a = results.get((sp.role, sp.num, s))
            b = results.get((sp.role, sp.den, s))
            if a is None or b is None:
                continue
            used.append(s)
            ratios[s] = seed_ratio(sp, a, b)
        rr = RowResult(sp, paired_ratio_ci(ratios), used)
        if not used:
            have = {p: [s for s in seeds if (sp.role, p, s) in results] for p in (sp.num, sp.den)}
            missing = [p for p, ss in have.items() if not ss]
            rr.why = (
                f"no seed has both episodes (not run or not cached: {', '.join(missing)})"
                if missing else
                f"no seed has both episodes ({sp.num} on seeds {have[sp.num]}, {sp.den} on {have[sp.den]})"
            )
        elif not rr.within:
            rr.why = explain(sp, results, used, rr.stat)
        out.append(rr)
    return out


def fmt_value(v: float, fmt: str) -> str:
    if not math.isfinite(v):
        return "-"
    if fmt == "%":
        return f"{(v - 1.0) * 100:+.1f}%"
    return f"{v:.2f}x"


# ----------------------------------------------------------------------------------------------
# Why a row is out of tolerance: figures from the measured data
# ----------------------------------------------------------------------------------------------


def _mean_of(results: Results, role: str, policy: str, seeds: Sequence[int], attr: str) -> float:
    xs = []
    for s in seeds:
        r = results.get((role, policy, s))
        if r is None:
            continue
        v = getattr(r, attr, None)
        if v is not None and math.isfinite(float(v)):
            xs.append(float(v))
    return float(np.mean(xs)) if xs else math.nan


def _s(v: float) -> str:
    """A duration in seconds, compact."""
    if not math.isfinite(v):
        return "-"
    return f"{v:,.0f} s"


def explain(spec: RowSpec, results: Results, seeds: Sequence[int], stat: RatioStat) -> str:
    """One line saying why the row is off the paper, with the figures that show it."""
    lo, hi = tolerance_band(spec.paper)
    side = "below" if stat.mean < lo else "above"
    if stat.n == 0:
        a = _mean_of(results, spec.role, spec.num, seeds, spec.metric)
        b = _mean_of(results, spec.role, spec.den, seeds, spec.metric)
        return (
            f"undefined on every seed ({stat.dropped}): {spec.den}'s {spec.metric} is 0 "
            f"(mean {spec.num} {a:.3g}, {spec.den} {b:.3g}), so there is nothing to divide by"
        )
    role, A, B = spec.role, spec.num, spec.den

    def m(p: str, attr: str) -> float:
        return _mean_of(results, role, p, seeds, attr)

    head = f"ours {fmt_value(stat.mean, spec.fmt)} is {side} the band {fmt_value(lo, spec.fmt)}-{fmt_value(hi, spec.fmt)}"
    if spec.id.startswith("jct-aryl-baseline"):
        q, j = m(A, "avg_queue_time_total"), m(A, "avg_jct")
        share = q / j if j > 0 else math.nan
        bound = 1.0 / (1.0 - share) if share < 1 else math.inf
        run_a, run_b = m(B, "avg_jct") - m(B, "avg_queue_time_total"), j - q
        return (
            f"{head}: Baseline's queuing is {share:.0%} of its JCT ({_s(q)} of {_s(j)}), so removing "
            f"all queuing alone gives at most {bound:.2f}x; the rest must come from running faster, "
            f"and Aryl's JCT minus queuing is {_s(run_a)} vs Baseline's {_s(run_b)} "
            f"({run_b / run_a if run_a > 0 else math.nan:.2f}x)"
        )
    if spec.id.startswith("queue-aryl-baseline"):
        qa, qb = m(B, spec.metric), m(A, spec.metric)
        text = (
            f"{head}: Baseline queues {_s(qb)} on average, Aryl {_s(qa)} "
            f"({qa / m(B, 'avg_jct') if m(B, 'avg_jct') > 0 else math.nan:.1%} of Aryl's JCT); "
            f"Baseline's p95 queue {_s(m(A, 'p95_queue_time'))}, training utilisation "
            f"{m(A, 'train_util'):.0%}"
        )
        qst = m("fifo", spec.metric)
        if math.isfinite(qst) and qb > 0 and A != "fifo":
            text += (
                f"; a strict FIFO (head-of-line blocking) would queue {_s(qst)} "
                f"({qst / qb:.2f}x Baseline's)"
            )
        return text
    if spec.stat == "peak_hourly_usage":
        ub, ua = m(B, "combined_usage"), m(A, "combined_usage")
        lu, lo_ = m(A, "loaned_gpu_hours_used"), m(A, "loaned_gpu_hours_offered")
        return (
            f"{head}: mean combined usage Baseline {ub:.1%}, Aryl {ua:.1%}; Aryl used "
            f"{lu:,.0f} of {lo_:,.0f} loaned GPU-hours offered"
            + (f" ({lu / lo_:.0%})" if lo_ > 0 else " (no server was ever loaned)")
            + f"; Baseline's training utilisation {m(B, 'train_util'):.0%}"
        )
    if spec.metric == "scaling_events":
        na, nb = m(A, "scaling_events"), m(B, "scaling_events")
        jobs = m(B, "jobs_total")
        return (
            f"{head}: {A} scales {na:,.0f} times, {B} {nb:,.0f} times ({na / jobs:.2f} vs "
            f"{nb / jobs:.2f} per job over {jobs:,.0f} jobs)"
        )
    if spec.metric == "preemption_ratio":
        pa, pb = m(A, "preemption_ratio"), m(B, "preemption_ratio")
        return (
            f"{head}: preemption ratio {A} {pa:.2%}, {B} {pb:.2%}; {B} reclaimed "
            f"{m(B, 'reclaimed_servers'):,.0f} servers, {A} {m(A, 'reclaimed_servers'):,.0f}; "
            f"training workers used {m(B, 'loaned_gpu_hours_used'):,.0f} loaned GPU-hours under "
            f"{B}, {m(A, 'loaned_gpu_hours_used'):,.0f} under {A}"
            + (f"; {stat.dropped} seed(s) without any preemption under {B} left out" if stat.dropped else "")
        )
    # JCT / queuing ratios between two schedulers: how close each is to the lower bound.
    return (
        f"{head}: {A} {spec.metric} {_s(m(A, spec.metric))}, {B} {_s(m(B, spec.metric))}; mean "
        f"slowdown over the lower bound {A} {m(A, 'mean_slowdown'):.2f}, {B} "
        f"{m(B, 'mean_slowdown'):.2f}; avg queue {A} {_s(m(A, 'avg_queue_time'))}, {B} "
        f"{_s(m(B, 'avg_queue_time'))}; preemption ratio {A} {m(A, 'preemption_ratio'):.1%}, "
        f"{B} {m(B, 'preemption_ratio'):.1%}; loaned GPU-hours used {A} "
        f"{m(A, 'loaned_gpu_hours_used'):,.0f}, {B} {m(B, 'loaned_gpu_hours_used'):,.0f}"
    )


# ----------------------------------------------------------------------------------------------
# The mechanism behind the Baseline rows (SPEC "World v2" 2)
# ----------------------------------------------------------------------------------------------

#: the paper's pair for Aryl vs Baseline: average queuing and average JCT, Baseline / Aryl
PAPER_QUEUE_GAIN, PAPER_JCT_GAIN = 1.53, 1.50


def paper_run_factor(queue_share: float) -> float:
    """How much faster Aryl must *run* the average job for the paper's pair (queue 1.53x, JCT
    1.50x) to hold when queuing is ``queue_share`` of Baseline's JCT:
    ``(1 - s) / (1 / 1.50 - s / 1.53)`` (1.50 at s = 0, 1.47 at 0.5, 1.28 at 0.9)."""
    s = queue_share
    return (1.0 - s) / (1.0 / PAPER_JCT_GAIN - s / PAPER_QUEUE_GAIN)


@dataclass
class Mechanism:
    """Where Aryl's JCT gain over a Baseline comes from, means over the paired seeds.

    ``queue_share``: Baseline's average queuing (re-queuing included) over its average JCT.
    ``run_factor``: Baseline's average running time over Aryl's (per-seed geometric mean with a
    95% t interval): how much faster Aryl runs the average job once started.
    ``from_queue`` / ``from_run``: the shares of the JCT gain (Baseline's JCT minus Aryl's) that
    the queuing and the running-time differences make up (they sum to 1 when every job of both
    episodes finished: JCT = queuing + running).
    ``elastic_run_share``: the elastic jobs' share of Baseline's summed running time;
    ``run_bound`` = ``1 / (1 - elastic_run_share)``: the largest running-time factor a scheduler
    that can speed up only elastic jobs (limited elasticity) could reach, even by running them
    infinitely fast (NaN for episodes cached before the share was recorded).
    """

    baseline: str
    aryl: str
    seeds: list[int]
    jct_ratio: float
    queue_share: float
    run_factor: RatioStat
    paper_run_factor: float
    from_queue: float
    from_run: float
    elastic_run_share: float = math.nan
    run_bound: float = math.nan

    def to_dict(self) -> dict[str, Any]:
        return {
            "baseline": self.baseline, "aryl": self.aryl, "seeds": self.seeds,
            "jct_ratio": _clean(self.jct_ratio), "queue_share": _clean(self.queue_share),
            "run_factor": self.run_factor.to_dict(),
            "paper_run_factor_at_this_share": _clean(self.paper_run_factor),
            "gain_from_queue": _clean(self.from_queue), "gain_from_running": _clean(self.from_run),
            "elastic_run_share": _clean(self.elastic_run_share), "run_factor_bound": _clean(self.run_bound),
        }


def mechanism(
    results: Results, seeds: Sequence[int], baseline: str = "baseline", aryl: str = "aryl",
    role: str = "basic",
) -> Mechanism | None:
    """The decomposition of :class:`Mechanism` for ``baseline`` vs ``aryl`` on ``role`` (None
    when no seed has both episodes)."""
    used = [s for s in seeds if (role, baseline, s) in results and (role, aryl, s) in results]
    if not used:
        return None

    def m(p: str, attr: str) -> float:
        return _mean_of(results, role, p, used, attr)

    jb, ja = m(baseline, "avg_jct"), m(aryl, "avg_jct")
    qb, qa = m(baseline, "avg_queue_time_total"), m(aryl, "avg_queue_time_total")
    rb, ra = m(baseline, "avg_run_time"), m(aryl, "avg_run_time")
    share = qb / jb if jb > 0 else math.nan
    per_seed = {}
    for s_ in used:
        a, b = results[(role, aryl, s_)].avg_run_time, results[(role, baseline, s_)].avg_run_time
        per_seed[s_] = (float(b) / float(a)) if a and b and float(a) > 0 else math.nan
    gain = jb - ja
    es = m(baseline, "elastic_run_share")
    return Mechanism(
        baseline, aryl, used, jb / ja if ja > 0 else math.nan, share, paired_ratio_ci(per_seed),
        paper_run_factor(share) if math.isfinite(share) else math.nan,
        (qb - qa) / gain if gain else math.nan, (rb - ra) / gain if gain else math.nan,
        es, 1.0 / (1.0 - es) if math.isfinite(es) and es < 1 else math.nan,
    )


def render_mechanism_md(mechs: Sequence[Mechanism], name: str) -> str:
    """The mechanism table (one line per Baseline reading)."""
    lines = [
        f"Where Aryl's JCT gain over Baseline comes from, on `{name}` (means over the paired seeds):",
        "",
        "| Baseline | JCT, Baseline / Aryl | Baseline's queue share of JCT | Aryl's running-time "
        "factor [95% CI] | factor the paper's pair implies at this share | gain from queuing | "
        "gain from running time | elastic jobs' share of Baseline's running time | largest factor "
        "speeding up only elastic jobs can give |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for mc in mechs:
        rf = mc.run_factor
        ci = f" [{rf.lo:.2f}, {rf.hi:.2f}]" if math.isfinite(rf.lo) else ""
        es = f"{mc.elastic_run_share:.0%}" if math.isfinite(mc.elastic_run_share) else "-"
        bd = f"{mc.run_bound:.2f}x" if math.isfinite(mc.run_bound) else "-"
        lines.append(
            f"| `{mc.baseline}` | {mc.jct_ratio:.2f}x | {mc.queue_share:.0%} | {rf.mean:.2f}x{ci} | "
            f"{mc.paper_run_factor:.2f}x | {mc.from_queue:.0%} | {mc.from_run:.0%} | {es} | {bd} |"
        )
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------
# Scales and scenarios
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scale:
    name: str
    basic: str  # scenario name of the "basic" role
    ideal_base: str  # scenario the "ideal" role derives from (None-like "" = use ``ideal`` as is)
    ideal_direct: str | None  # a scenario used as is for the ideal role
    seeds: int
    slow_seeds: Mapping[str, int] = field(default_factory=dict)


SCALES: dict[str, Scale] = {
    # The paper's Basic is production size (>3,500 GPUs, 15 days); its Ideal at the same size.
    "paper": Scale("paper", "production", "production", None, 3),
    "mid": Scale("mid", "basic", "basic", "ideal", 5),
    "tiny": Scale("tiny", "tiny", "tiny", None, 3),
}


def ideal_overrides() -> dict[str, Any]:
    """The workload fields in which ``ideal.yaml`` differs from ``basic.yaml`` (our Ideal)."""
    b, i = load_scenario("basic").workload, load_scenario("ideal").workload
    return {
        f.name: getattr(i, f.name)
        for f in dataclasses.fields(i)
        if getattr(i, f.name) != getattr(b, f.name)
    }


def role_configs(scale: Scale) -> dict[str, ScenarioConfig]:
    """The scenario config of each role at ``scale``."""
    basic = load_scenario(scale.basic)
    if scale.ideal_direct:
        ideal = load_scenario(scale.ideal_direct)
    else:
        base = load_scenario(scale.ideal_base)
        ideal = dataclasses.replace(
            base.replace(workload=ideal_overrides()),
            name=f"{base.name}-ideal",
            description=f"{base.name} with ideal.yaml's workload settings: {ideal_overrides()}",
        )
    return {"basic": basic, "ideal": ideal}


def config_hash(cfg: ScenarioConfig) -> str:
    """16 hex digits of SHA-256 over everything of the resolved config that changes an episode."""
    from aryl_gym.leaderboard.runner import scenario_fingerprint

    text = json.dumps(scenario_fingerprint(cfg), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# ----------------------------------------------------------------------------------------------
# Config overrides (sweeps)
# ----------------------------------------------------------------------------------------------

#: The knobs the paper does not fix (SPEC "World v1" 6) and the values the default sweep tries.
#: Each list holds the scenario's data-derived default and values around it, fixed before any
#: policy's result was looked at; a knob not defined by this checkout's config is skipped.
DEFAULT_SWEEPS: dict[str, tuple[Any, ...]] = {
    "workload.elastic_range": (1.0, 2.0, 4.0),
    "workload.burstiness": (0.0, 0.5, 1.0),
    "inference.headroom": (0.0, 0.1, 0.2),
    "cluster.inf_speed_scale": (0.5, 1.0, 2.0),
    # World v2's shipped loads: production 0.6, basic/ideal 1.3 (the load rule against `baseline`)
    "workload.load": (0.6, 1.0, 1.3, 1.6),
    # World v2: the elastic families' count share at a fixed 36% GPU-time share (philly.csv gives
    # 0.030 over multi-GPU jobs and 0.015 over those of 1 h or more; aryl-gym fit-world)
    "workload.elastic_fraction": (0.015, 0.03, 0.06, 0.12),
    # World v2: the inference series' independent 5-minute noise (v1: 0.02; v2: 0)
    "inference.sample_noise": (0.0, 0.02),
}

_SECTION_NAMES = ("cluster", "inference", "workload", "sim")


def _section_fields(section: str) -> list[str]:
    cfg = ScenarioConfig(name="probe")
    return [f.name for f in dataclasses.fields(getattr(cfg, section))]


def check_key(key: str) -> tuple[str, str]:
    """``section.field`` -> (section, field); ValueError naming the key and the allowed ones."""
    parts = key.split(".")
    if len(parts) != 2 or not all(parts):
        raise ValueError(
            f"--sweep: {key!r} is not a dotted key; use SECTION.FIELD, e.g. workload.load "
            f"(sections: {', '.join(_SECTION_NAMES)})"
        )
    sec, fld = parts
    if sec not in _SECTION_NAMES:
        raise ValueError(
            f"--sweep: unknown section {sec!r} in {key!r}; sections: {', '.join(_SECTION_NAMES)}"
        )
    allowed = _section_fields(sec)
    if fld not in allowed:
        raise ValueError(
            f"--sweep: unknown key {key!r}: section '{sec}' has no field '{fld}'. "
            f"Allowed: {', '.join(sorted(allowed))}"
        )
    return sec, fld


def apply_override(cfg: ScenarioConfig, key: str, value: Any) -> ScenarioConfig:
    """``cfg`` with ``section.field = value``, type- and cross-checked (ValueError on a bad one)."""
    sec, fld = check_key(key)
    try:
        new = cfg.replace(**{sec: {fld: value}})
        validate_scenario(dataclasses.replace(new, source=f"--sweep {key}={value!r}"))
    except ConfigError as exc:
        raise ValueError(str(exc).replace("<override>", f"--sweep {key}={value!r}")) from None
    except TypeError as exc:
        raise ValueError(f"--sweep {key}={value!r}: {exc}") from None
    return new


def parse_sweep(text: str) -> tuple[str, list[Any]]:
    """``KEY=V1,V2,...`` -> (key, values), values read as YAML scalars (``0.5``, ``true``)."""
    if "=" not in text:
        raise ValueError(f"--sweep {text!r}: use KEY=V1,V2,... e.g. workload.load=0.7,0.85,1.0")
    key, vals = text.split("=", 1)
    key = key.strip()
    check_key(key)
    out: list[Any] = []
    for v in vals.split(","):
        v = v.strip()
        if not v:
            continue
        try:
            out.append(load_yaml_value(v))  # as in the YAML files: 1e-4 is a number
        except yaml.YAMLError:
            raise ValueError(f"--sweep {key}: cannot read value {v!r}") from None
    if not out:
        raise ValueError(f"--sweep {key}: give at least one value after '='")
    return key, out


def resolve_sweeps(texts: Sequence[str], log: Callable[[str], None]) -> list[tuple[str, list[Any]]]:
    """The sweeps of ``--sweep`` flags (``default`` expands to :data:`DEFAULT_SWEEPS`)."""
    out: list[tuple[str, list[Any]]] = []
    for t in texts:
        if t.strip() == "default":
            for key, vals in DEFAULT_SWEEPS.items():
                try:
                    check_key(key)
                except ValueError:
                    log(f"note: default sweep knob {key} is not defined by this checkout's config; skipped")
                    continue
                out.append((key, list(vals)))
        else:
            out.append(parse_sweep(t))
    return out


# ----------------------------------------------------------------------------------------------
# Episodes: tasks, cache, executors
# ----------------------------------------------------------------------------------------------

AGENT_PREFIX = "agent:"


@dataclass(frozen=True, eq=False)  # hashed by identity (the config holds dicts)
class Task:
    """One episode: a scenario config, a policy (registry name or ``agent:SOURCE``), a seed."""

    role: str
    config: ScenarioConfig
    policy: str
    seed: int
    hash: str
    tag: str = ""  # which variant (sweep point, sigma) this config is, for progress lines

    @property
    def key(self) -> tuple[str, str, int, str]:
        return (self.config.name, self.policy, self.seed, self.hash)


@dataclass
class TaskOutput:
    task: Task
    status: str  # "ok" | "failed" | "skipped"
    result: dict[str, Any] | None = None
    message: str = ""


def cache_hash(task: Task) -> str:
    """The cache key's hash: the config hash, and for a learned agent (``agent:SOURCE``) also the
    SHA-256 of the files it is loaded from (model, config, normalisation), so replacing a model
    file under the same path is another episode, never the old cached numbers."""
    if not task.policy.startswith(AGENT_PREFIX):
        return task.hash
    from aryl_gym.leaderboard.provenance import agent_files_digest

    files = agent_files_digest(task.policy[len(AGENT_PREFIX):])
    text = json.dumps({"config": task.hash, "files": files}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def cache_path(out: Path, task: Task) -> Path:
    from aryl_gym.leaderboard.runner import slug

    return (
        out / "episodes" / slug(task.config.name) / slug(task.policy)
        / f"seed{task.seed}-{cache_hash(task)}.json"
    )


def run_task(task: Task) -> TaskOutput:
    """Run one episode; never raises. Module level and plain data, so it runs in any worker."""
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        from aryl_gym.scenario import make_episode

        ep = make_episode(task.config, task.seed)
        last_submit = max((j.submit for j in ep.jobs), default=0.0)
        if task.policy.startswith(AGENT_PREFIX):
            res = _run_learned(task)
        else:
            from aryl_gym.agents import make_policy

            res = ep.simulator().run(make_policy(task.policy))
    except _Unavailable as exc:
        return TaskOutput(task, "skipped", message=str(exc))
    except Exception as exc:  # noqa: BLE001 - reported, the run goes on
        return TaskOutput(task, "failed", message=f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=5)}")
    d = res.to_dict(series=False)
    d["combined_usage_hourly"] = [float(x) for x in res.combined_usage_hourly]
    d["arrival_hours"] = last_submit / 3600.0
    d["episode_wall_s"] = time.perf_counter() - t0
    # CPU seconds of this process: the cost of the episode on a machine shared with other work
    d["episode_cpu_s"] = time.process_time() - c0
    return TaskOutput(task, "ok", result=d)


class _Unavailable(Exception):
    """A learned agent that cannot run here (no torch/SB3, or its env rejects the scenario)."""


def _run_learned(task: Task) -> EpisodeResult:
    source = task.policy[len(AGENT_PREFIX):]
    try:
        from aryl_gym.agents.learned import load_agent
    except ImportError as exc:
        raise _Unavailable(f"learned agents need the train extra, pip install 'aryl-gym[train]': {exc}") from None
    try:
        agent = load_agent(source)
    except (ImportError, ConfigError) as exc:
        raise _Unavailable(f"cannot load agent {source!r}: {exc}") from None
    from aryl_gym.train.evaluation import run_agent

    env = agent.make_env(scenario=task.config)
    try:
        res, _ret, _steps = run_agent(agent, env, task.seed)
    finally:
        env.close()
    return res


def result_from_cache(d: Mapping[str, Any]) -> EpisodeResult:
    d = dict(d)
    for k, f in EpisodeResult.__dataclass_fields__.items():
        if d.get(k, 0) is None and f.type in ("float", float):
            d[k] = math.nan  # written as null (JSON has no NaN)
    res = EpisodeResult.from_dict(d)
    res.arrival_hours = float(d.get("arrival_hours") or 0.0)  # type: ignore[attr-defined]
    return res


class CacheError(ConfigError):
    """A cached episode file that cannot be trusted (damaged, edited, or another episode's)."""


def result_digest(result: Mapping[str, Any]) -> str:
    """16 hex digits of SHA-256 over a cached result (written beside it: edits are detected)."""
    text = json.dumps(result, sort_keys=True, default=_json_default)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


#: the metrics every cached result must carry (the fields of EpisodeResult without a default)
_REQUIRED = tuple(
    k for k, f in EpisodeResult.__dataclass_fields__.items()
    if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING  # type: ignore[misc]
)
#: figures that are NaN (null in JSON) only when no job finished
_JCT_FIELDS = ("avg_jct", "median_jct", "p95_jct", "makespan")


def check_cached_result(r: Any) -> str | None:
    """Why a cached result cannot be used, or ``None``."""
    if not isinstance(r, dict):
        return f'"result" is {type(r).__name__}, not an object'
    missing = [k for k in _REQUIRED if k not in r]
    if missing:
        more = f" (and {len(missing) - 5} more)" if len(missing) > 5 else ""
        return f"missing metric(s) {', '.join(missing[:5])}{more}"
    fields = EpisodeResult.__dataclass_fields__
    for k, v in r.items():
        f = fields.get(k)
        if f is None or f.type not in ("int", "float", "int | None", "bool", int, float, bool):
            continue
        if f.type in ("bool", bool):
            if not isinstance(v, bool):
                return f"{k} is {v!r}, not true/false"
            continue
        if v is None:
            if f.type in ("int", int):
                return f"{k} is null"
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            return f"{k} is {v!r}, not a number"
        if not math.isfinite(v) or v < 0:
            return f"{k} is {v!r} (a metric is never negative)"
    done = r.get("jobs_completed")
    for k in _JCT_FIELDS:
        if r.get(k) is None and isinstance(done, int) and done > 0:
            return f"{k} is null although {done} job(s) completed"
    return None


def read_cached(path: Path, expect: Task | None = None) -> dict[str, Any] | None:
    """The cached episode at ``path``; ``None`` when there is none. A file that exists but is
    damaged, edited after writing or holds another episode is a :class:`CacheError` naming it."""
    hint = (f"delete it (rm {path}) to run that episode again, or rerun with --fresh to recompute "
            "every episode")
    try:
        with open(path, encoding="utf-8") as fh:
            d = json.load(fh)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CacheError(f"{path}: cannot read the cached episode: {exc.strerror or exc}; {hint}") from None
    except ValueError as exc:
        raise CacheError(f"{path}: damaged cached episode (not valid JSON: {exc}); {hint}") from None
    if not isinstance(d, dict) or "result" not in d:
        raise CacheError(f'{path}: damaged cached episode (no "result" object); {hint}')
    why = check_cached_result(d["result"])
    if why is None and "digest" in d and d["digest"] != result_digest(d["result"]):
        why = "its numbers were changed after it was written (digest mismatch)"
    if why is None and expect is not None:
        for k, want in (("policy", expect.policy), ("seed", expect.seed), ("config_hash", cache_hash(expect))):
            if k in d and d[k] != want:
                why = f"it holds another episode ({k} {d[k]!r}, expected {want!r})"
                break
    if why is not None:
        raise CacheError(f"{path}: damaged cached episode: {why}; {hint}")
    return d


def write_cached(path: Path, task: Task, result: Mapping[str, Any], commit: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    res = json.loads(json.dumps(dict(result), default=_json_default))
    payload = {
        "scenario": task.config.name,
        "policy": task.policy,
        "seed": task.seed,
        "config_hash": cache_hash(task),
        "commit": commit,
        "digest": result_digest(res),
        "result": res,
    }
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(payload, fh, default=_json_default)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _json_default(o: Any) -> Any:  # pragma: no cover - numpy scalars
    if isinstance(o, np.generic):
        return o.item()
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def _clean(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


Executor = Callable[[Sequence[Task], int], Iterator[TaskOutput]]


def local_executor(tasks: Sequence[Task], workers: int) -> Iterator[TaskOutput]:
    """Run here (``workers <= 1``) or in ``spawn``-ed worker processes, yielding as they finish."""
    from aryl_gym.parallel import local_map

    return local_map(run_task, tasks, workers)


def _failed(task: Task, exc: Exception) -> TaskOutput:
    return TaskOutput(task, "failed", message=f"ray task failed: {exc}")


def ray_executor(tasks: Sequence[Task], workers: int, address: str | None = None) -> Iterator[TaskOutput]:
    """Run ``tasks`` as Ray tasks (the leaderboard's Ray set-up: ``RAY_ADDRESS`` or a local Ray)."""
    from aryl_gym.parallel import ray_map

    return ray_map(run_task, tasks, workers, _failed, address)


#: rough relative cost of one episode by policy, to start the long ones first (measured on
#: production: afs ~4x aryl-noloan, afs-all ~13x)
_COST = {"pollux-250": 100.0, "pollux-250-elastic": 60.0, "pollux": 50.0, "afs": 4.0, "afs-all": 13.0, "aryl+tuned": 2.0}


def _cost(t: Task) -> float:
    scale = t.config.cluster.train_gpus + t.config.cluster.inf_gpus
    if t.policy.startswith(AGENT_PREFIX):
        return 50.0 * scale  # acts through the env, one sub-step per grant
    return _COST.get(t.policy, 1.0) * scale


@dataclass
class RunStats:
    new: int = 0
    cached: int = 0
    failed: list[tuple[Task, str]] = field(default_factory=list)
    skipped: list[tuple[Task, str]] = field(default_factory=list)
    other_commit: int = 0
    wall_by_policy: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    cpu_by_policy: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    missing: list[Task] = field(default_factory=list)  # not cached, not run (``cached_only``)
    wall_s: float = 0.0


def run_tasks(
    tasks: Sequence[Task],
    out: Path,
    *,
    workers: int = 1,
    backend: str = "local",
    fresh: bool = False,
    cached_only: bool = False,
    progress: str = "bar",
    executor: Executor | None = None,
    log: Callable[[str], None] | None = None,
) -> tuple[dict[Task, EpisodeResult], RunStats]:
    """Run the tasks not yet cached under ``out``; return every task's result.

    ``progress``: ``"bar"`` (a tqdm bar on stderr), ``"lines"`` (one stderr line per episode) or
    ``"none"``.
    """
    from aryl_gym.leaderboard.runner import git_commit

    say = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    t0 = time.perf_counter()
    commit = git_commit()
    stats = RunStats()
    results: dict[Task, EpisodeResult] = {}
    todo: list[Task] = []
    seen: set[tuple[str, str, int, str]] = set()
    uniq: list[Task] = []
    for t in tasks:
        if t.key not in seen:
            seen.add(t.key)
            uniq.append(t)
    for t in uniq:
        c = None if fresh else read_cached(cache_path(out, t), t)
        if c is not None:
            results[t] = result_from_cache(c["result"])
            stats.cached += 1
            if c.get("commit") != commit:
                stats.other_commit += 1
            _note_wall(stats, t, c["result"])
        else:
            todo.append(t)
    if stats.other_commit:
        say(
            f"note: {stats.other_commit} cached episode(s) were made at another commit; pass "
            "--fresh (or another --out) to recompute them with this code"
        )
    if cached_only:
        stats.missing = todo
        if todo:
            say(f"--cached-only: {len(todo)} episode(s) not cached are left out")
        todo = []
    todo.sort(key=_cost, reverse=True)
    if todo:
        say(f"{len(todo)} episode(s) to run, {stats.cached} cached, {workers} worker(s), backend {backend}")
    run = executor
    if run is None:
        if backend == "ray":
            run = ray_executor
        elif backend == "local":
            run = local_executor
        else:
            raise ValueError(f"--backend: unknown backend {backend!r}; use local or ray")
    bar = None
    if progress == "bar" and todo:
        from tqdm import tqdm

        bar = tqdm(total=len(todo), unit="ep", desc="reproduce", dynamic_ncols=True, file=sys.stderr)
    try:
        for o in run(todo, workers):
            t = o.task
            if o.status == "ok" and o.result is not None:
                write_cached(cache_path(out, t), t, o.result, commit)
                results[t] = result_from_cache(o.result)
                stats.new += 1
                _note_wall(stats, t, o.result)
                line = f"{t.config.name} {t.policy} seed {t.seed}{' ' + t.tag if t.tag else ''}: {o.result['episode_wall_s']:.1f} s"
            elif o.status == "skipped":
                stats.skipped.append((t, o.message))
                line = f"{t.config.name} {t.policy} seed {t.seed}: skipped ({o.message})"
            else:
                stats.failed.append((t, o.message))
                line = f"{t.config.name} {t.policy} seed {t.seed}: FAILED {o.message.splitlines()[0]}"
            if bar is not None:
                bar.update(1)
                bar.set_postfix_str(line, refresh=True)
            elif progress == "lines":
                say(f"[{stats.new + len(stats.failed) + len(stats.skipped)}/{len(todo)}] {line}")
    except KeyboardInterrupt:
        say(f"\ninterrupted: {stats.new} new episode(s) are cached in {out}/episodes; rerun to resume")
        raise
    finally:
        if bar is not None:
            bar.close()
        stats.wall_s = time.perf_counter() - t0
    return results, stats


def _note_wall(stats: RunStats, t: Task, d: Mapping[str, Any]) -> None:
    w, c = d.get("episode_wall_s"), d.get("episode_cpu_s")
    if isinstance(w, (int, float)):
        stats.wall_by_policy.setdefault((t.config.name, t.policy), []).append(float(w))
    if isinstance(c, (int, float)):
        stats.cpu_by_policy.setdefault((t.config.name, t.policy), []).append(float(c))


# ----------------------------------------------------------------------------------------------
# The headline table
# ----------------------------------------------------------------------------------------------


def seeds_for(scale: Scale, n: int | None, first_seed: int, policy: str) -> list[int]:
    k = n if n is not None else scale.seeds
    if n is None and policy in scale.slow_seeds:
        k = scale.slow_seeds[policy]
    elif n is not None and policy in scale.slow_seeds:
        k = min(n, scale.slow_seeds[policy])
    return list(range(first_seed, first_seed + k))


def table_tasks(
    specs: Sequence[RowSpec],
    configs: Mapping[str, ScenarioConfig],
    scale: Scale,
    n_seeds: int | None,
    first_seed: int,
    tag: str = "",
) -> list[Task]:
    """The episodes the rows need: each (role, policy, seed) once."""
    need: dict[tuple[str, str], None] = {}
    for sp in specs:
        for p in sp.policies:
            need[(sp.role, p)] = None
    hashes = {r: config_hash(c) for r, c in configs.items()}
    tasks = []
    for role, pol in need:
        for s in seeds_for(scale, n_seeds, first_seed, pol):
            tasks.append(Task(role, configs[role], pol, s, hashes[role], tag))
    return tasks


def results_by_role(results: Mapping[Task, EpisodeResult]) -> dict[tuple[str, str, int], EpisodeResult]:
    return {(t.role, t.policy, t.seed): r for t, r in results.items()}


def all_seeds(tasks: Sequence[Task]) -> list[int]:
    return sorted({t.seed for t in tasks})


def render_table_md(rows: Sequence[RowResult], names: Mapping[str, str] | None = None) -> str:
    """The table in Markdown; ``names`` maps a role to its scenario's name."""
    names = names or {}
    lines = [
        "| row | paper | ours (geo. mean of per-seed ratios) | 95% CI | seeds | tolerance | within | runs |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        sp, st = r.spec, r.stat
        ci = f"{fmt_value(st.lo, sp.fmt)} .. {fmt_value(st.hi, sp.fmt)}" if math.isfinite(st.lo) else "-"
        lo, hi = r.band
        ok = "yes" if r.within else ("no (CI overlaps)" if r.ci_overlaps else "no")
        label = sp.name
        if sp.alt_of:  # the same claim under another reading
            label = "&nbsp;&nbsp;&nbsp;&nbsp;↳ " + "; ".join(READINGS[x] for x in sp.reading)
        elif sp.reading:
            label += " (" + "; ".join(READINGS[x] for x in sp.reading) + ")"
        lines.append(
            f"| {label} | {fmt_value(sp.paper, sp.fmt)} | {fmt_value(st.mean, sp.fmt)}"
            f"{' (arith. mean: a seed has 0)' if st.method == 'arithmetic' else ''} | {ci} | "
            f"{st.n}{f' ({st.dropped} undefined)' if st.dropped else ''} | "
            f"{fmt_value(lo, sp.fmt)} .. {fmt_value(hi, sp.fmt)} | {ok} | {sp.variant} on `{names.get(sp.role, sp.role)}` |"
        )
    return "\n".join(lines)


def render_table_text(rows: Sequence[RowResult]) -> str:
    from aryl_gym.commands._common import table

    body = []
    for r in rows:
        sp, st = r.spec, r.stat
        ci = f"{fmt_value(st.lo, sp.fmt)}..{fmt_value(st.hi, sp.fmt)}" if math.isfinite(st.lo) else "-"
        lo, hi = r.band
        body.append([sp.id, fmt_value(sp.paper, sp.fmt), fmt_value(st.mean, sp.fmt), ci, str(st.n),
                     f"{fmt_value(lo, sp.fmt)}..{fmt_value(hi, sp.fmt)}", "yes" if r.within else "no"])
    return table(body, ["row", "paper", "ours", "95% CI", "n", "tolerance", "within"])


def why_lines(rows: Sequence[RowResult]) -> list[str]:
    out = []
    for r in rows:
        if r.within:
            continue
        name = r.spec.name
        if r.spec.alt_of:
            name += " [" + "; ".join(READINGS[x] for x in r.spec.reading) + "]"
        out.append(f"- **{name}**: {r.why}")
    return out


def score(rows: Sequence[RowResult]) -> tuple[int, int]:
    """(rows within tolerance, rows) over the paper's claims under the defended readings."""
    prim = [r for r in rows if not r.spec.alt_of]
    return sum(r.within for r in prim), len(prim)


# ----------------------------------------------------------------------------------------------
# Sweeps
# ----------------------------------------------------------------------------------------------


@dataclass
class SweepPoint:
    key: str
    value: Any
    rows: list[RowResult]
    #: Baseline-vs-Aryl decomposition at this value (None when the point lacks the episodes)
    mechanism: Mechanism | None = None


def sweep_configs(base: Mapping[str, ScenarioConfig], key: str, value: Any) -> dict[str, ScenarioConfig]:
    return {role: apply_override(c, key, value) for role, c in base.items()}


def render_sweep_md(points: Sequence[SweepPoint], specs: Sequence[RowSpec]) -> str:
    out = []
    keys = list(dict.fromkeys(p.key for p in points))
    for key in keys:
        pts = [p for p in points if p.key == key]
        head = "| row | paper | " + " | ".join(f"{key}={p.value}" for p in pts) + " |"
        out += [head, "|---|---|" + "---|" * len(pts)]
        for i, sp in enumerate(specs):
            cells = []
            for p in pts:
                st = p.rows[i].stat
                mark = " *" if p.rows[i].within else ""
                ci = (f" ({fmt_value(st.lo, sp.fmt)}..{fmt_value(st.hi, sp.fmt)})"
                      if math.isfinite(st.lo) else "")
                cells.append(f"{fmt_value(st.mean, sp.fmt)}{ci}{mark}")
            out.append(f"| {sp.name} | {fmt_value(sp.paper, sp.fmt)} | " + " | ".join(cells) + " |")
        out.append("")
    out.append("`*`: within the paper's tolerance.")
    return "\n".join(out)


def render_sweep_mechanism_md(points: Sequence[SweepPoint]) -> str:
    """Where Aryl's JCT gain over Baseline comes from at each swept value (one line per point
    that has both policies' episodes): does a knob move Aryl's running-time factor?"""
    pts = [p for p in points if p.mechanism is not None]
    if not pts:
        return ""
    lines = [
        "Where Aryl's JCT gain over Baseline comes from at each value (means over the paired seeds):",
        "",
        "| knob = value | JCT, Baseline / Aryl | Baseline's queue share | Aryl's running-time factor "
        "[95% CI] | factor the paper's pair implies | gain from queuing | largest factor speeding up "
        "only elastic jobs can give |",
        "|---|---|---|---|---|---|---|",
    ]
    for p in pts:
        mc = p.mechanism
        assert mc is not None
        rf = mc.run_factor
        ci = f" [{rf.lo:.2f}, {rf.hi:.2f}]" if math.isfinite(rf.lo) else ""
        lines.append(f"| `{p.key}` = {p.value} | {mc.jct_ratio:.2f}x | {mc.queue_share:.0%} | "
                     f"{rf.mean:.2f}x{ci} | {mc.paper_run_factor:.2f}x | {mc.from_queue:.0%} | "
                     + (f"{mc.run_bound:.2f}x |" if math.isfinite(mc.run_bound) else "- |"))
    return "\n".join(lines)


def sweep_findings(points: Sequence[SweepPoint], specs: Sequence[RowSpec]) -> list[str]:
    """Plain sentences read off the sweep table: where each row meets the paper, and its trend."""
    lines = []
    keys = list(dict.fromkeys(p.key for p in points))
    for i, sp in enumerate(specs):
        for key in keys:
            pts = [p for p in points if p.key == key]
            vals = [p.rows[i].stat.mean for p in pts]
            if not any(math.isfinite(v) for v in vals):
                continue
            ok = [str(p.value) for p in pts if p.rows[i].within]
            fin = [(p.value, v) for p, v in zip(pts, vals) if math.isfinite(v)]
            trend = ""
            if len(fin) >= 2:
                d = fin[-1][1] - fin[0][1]
                trend = (f"moves from {fmt_value(fin[0][1], sp.fmt)} at {fin[0][0]} to "
                         f"{fmt_value(fin[-1][1], sp.fmt)} at {fin[-1][0]}"
                         if abs(d) > 1e-9 else "does not move")
            where = f"within tolerance at {key} = {', '.join(ok)}" if ok else "within tolerance at no tried value"
            lines.append(f"- {sp.name} (paper {fmt_value(sp.paper, sp.fmt)}) over `{key}`: {trend}; {where}.")
    return lines


def plot_sweep(points: Sequence[SweepPoint], specs: Sequence[RowSpec], path: Path) -> Path | None:
    """One panel per knob: each row's ratio over the tried values, with its 95% CI."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    keys = list(dict.fromkeys(p.key for p in points))
    fig, axes = plt.subplots(1, len(keys), figsize=(4.5 * len(keys), 4), squeeze=False)
    for ax, key in zip(axes[0], keys):
        pts = [p for p in points if p.key == key]
        xs = list(range(len(pts)))
        for i, sp in enumerate(specs):
            m = np.array([p.rows[i].stat.mean for p in pts], dtype=float)
            lo = np.array([p.rows[i].stat.lo for p in pts], dtype=float)
            hi = np.array([p.rows[i].stat.hi for p in pts], dtype=float)
            if not np.isfinite(m).any():
                continue
            err = np.vstack([np.where(np.isfinite(lo), m - lo, 0), np.where(np.isfinite(hi), hi - m, 0)])
            line = ax.errorbar(xs, m, yerr=err, marker="o", capsize=3, label=sp.id)
            # the paper's figure, dotted, in the row's colour
            ax.axhline(sp.paper, color=line.lines[0].get_color(), ls=":", lw=0.9)
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_xticks(xs, [str(p.value) for p in pts])
        ax.set_xlabel(key)
        ax.set_ylabel("ratio (paired geo. mean, 95% CI; dotted: paper)")
        ax.set_yscale("log")
    axes[0][-1].legend(fontsize=7, loc="best")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# ----------------------------------------------------------------------------------------------
# Prediction-error study (paper 7.5)
# ----------------------------------------------------------------------------------------------

PREDICTION_SIGMAS: tuple[float, ...] = (0.0, 0.25, 0.5, 1.0)
PREDICTION_POLICIES: tuple[str, ...] = ("aryl", "sjf", "afs", f"{AGENT_PREFIX}ppo-testbed")
PREDICTION_METRICS: tuple[str, ...] = ("avg_jct", "p95_jct", "avg_queue_time")


def check_policies(names: Sequence[str]) -> None:
    """Every name is a registered policy or ``agent:SOURCE``; ValueError naming the first that is not."""
    from aryl_gym.agents import policy_names

    known = policy_names()
    if not names:
        raise ValueError("--policies: give at least one policy")
    for n in names:
        if n.startswith(AGENT_PREFIX):
            if not n[len(AGENT_PREFIX):]:
                raise ValueError("--policies: 'agent:' needs a source, e.g. agent:ppo-testbed")
            continue
        if n not in known:
            raise ValueError(
                f"--policies: unknown policy {n!r}. Known: {', '.join(known)}; or agent:SOURCE"
            )


def knob_tasks(
    cfg: ScenarioConfig, key: str, label: str, values: Sequence[float],
    policies: Sequence[str], seeds: Sequence[int],
) -> list[Task]:
    """Every policy x seed at each value of one config knob; role ``f"{label}={value}"``."""
    tasks = []
    for v in values:
        c = apply_override(cfg, key, float(v))
        h = config_hash(c)
        role = f"{label}={v}"
        for p in policies:
            for s in seeds:
                tasks.append(Task(role, c, p, s, h, role))
    return tasks


def prediction_tasks(
    cfg: ScenarioConfig, policies: Sequence[str], sigmas: Sequence[float], seeds: Sequence[int]
) -> list[Task]:
    return knob_tasks(cfg, "workload.prediction_sigma", "sigma", sigmas, policies, seeds)


def prediction_table(
    results: Mapping[Task, EpisodeResult], policies: Sequence[str], sigmas: Sequence[float],
    seeds: Sequence[int], metric: str = "avg_jct",
) -> dict[str, dict[float, RatioStat]]:
    """policy -> sigma -> paired ratio ``metric(sigma) / metric(0)`` over seeds."""
    by = {(t.role, t.policy, t.seed): r for t, r in results.items()}
    out: dict[str, dict[float, RatioStat]] = {}
    for p in policies:
        out[p] = {}
        for sg in sigmas:
            ratios = {}
            for s in seeds:
                a, b = by.get((f"sigma={sg}", p, s)), by.get((f"sigma={sigmas[0]}", p, s))
                if a is None or b is None:
                    continue
                x, y = getattr(a, metric), getattr(b, metric)
                ratios[s] = float(x) / float(y) if y else math.nan
            out[p][sg] = paired_ratio_ci(ratios)
    return out


def render_prediction_md(
    tab: Mapping[str, Mapping[float, RatioStat]], sigmas: Sequence[float],
    absolute: Mapping[str, float], metric: str,
) -> str:
    lines = [
        f"| policy | {metric} at sigma={sigmas[0]} | "
        + " | ".join(f"sigma={s}" for s in sigmas[1:]) + " |",
        "|---|---|" + "---|" * (len(sigmas) - 1),
    ]
    for p, row in tab.items():
        cells = []
        for sg in sigmas[1:]:
            st = row[sg]
            ci = f" ({st.lo:.3f}..{st.hi:.3f})" if math.isfinite(st.lo) else ""
            cells.append(f"{st.mean:.3f}{ci}" if math.isfinite(st.mean) else "-")
        lines.append(f"| {p} | {_s(absolute.get(p, math.nan))} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------
# The document
# ----------------------------------------------------------------------------------------------


def replace_block(text: str, name: str, body: str) -> str:
    """``text`` with the block between ``<!-- reproduce:NAME -->`` markers set to ``body``
    (appended at the end when absent), so hand-written prose around it is kept."""
    start, end = f"<!-- reproduce:{name} -->", f"<!-- /reproduce:{name} -->"
    block = f"{start}\n{body.rstrip()}\n{end}"
    i, j = text.find(start), text.find(end)
    if i >= 0 and j > i:
        return text[:i] + block + text[j + len(end):]
    return text.rstrip() + ("\n\n" if text.strip() else "") + block + "\n"


def update_doc(path: Path, blocks: Mapping[str, str], title: str = "# Reproducing the paper's headline table") -> None:
    text = path.read_text(encoding="utf-8") if path.exists() else f"{title}\n"
    for name, body in blocks.items():
        text = replace_block(text, name, body)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def wall_table_md(stats: RunStats) -> str:
    lines = [
        "| scenario | policy | episodes | wall s per episode (mean) | CPU s per episode (mean) |",
        "|---|---|---|---|---|",
    ]
    for (scen, pol), ws in sorted(stats.wall_by_policy.items()):
        cs = stats.cpu_by_policy.get((scen, pol), [])
        cpu = f"{np.mean(cs):.2g}" if cs and np.mean(cs) < 10 else (f"{np.mean(cs):.0f}" if cs else "-")
        lines.append(f"| {scen} | {pol} | {len(ws)} | {np.mean(ws):.1f} | {cpu} |")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------
# Heterogeneous-training study (paper 7.2)
# ----------------------------------------------------------------------------------------------

HETERO_FRACTIONS: tuple[float, ...] = (0.05, 0.1, 0.2)
HETERO_POLICIES: tuple[str, str] = ("aryl", "aryl-hetero")
#: (EpisodeResult field, column title, kind): kind "s" = seconds, "r" = ratio/share, "n" = count
HETERO_METRICS: tuple[tuple[str, str, str], ...] = (
    ("avg_jct", "avg JCT", "s"),
    ("p95_jct", "p95 JCT", "s"),
    ("avg_queue_time", "avg queuing", "s"),
    ("combined_usage", "usage", "r"),
    ("preemption_ratio", "preemption ratio", "r"),
    ("hetero_jobs", "mixed jobs", "n"),
    ("hetero_gpu_hours", "mixed GPU-h", "n"),
)


def hetero_tasks(
    cfg: ScenarioConfig, fractions: Sequence[float], seeds: Sequence[int],
    policies: Sequence[str] = HETERO_POLICIES,
) -> list[Task]:
    """``policies`` (off: ``aryl``; on: ``aryl-hetero``) at each ``workload.hetero_fraction``, on
    the same episodes per seed (the fraction only marks jobs; the trace is otherwise the same)."""
    return knob_tasks(cfg, "workload.hetero_fraction", "hetero", fractions, policies, seeds)


def hetero_table(
    results: Mapping[Task, EpisodeResult], fractions: Sequence[float], seeds: Sequence[int],
    off: str = HETERO_POLICIES[0], on: str = HETERO_POLICIES[1],
) -> list[dict[str, Any]]:
    """One row per fraction: each policy's mean of every :data:`HETERO_METRICS` figure and the
    paired ratio ``on / off`` of the time and usage figures (geometric mean over seeds, 95% CI)."""
    by = {(t.role, t.policy, t.seed): r for t, r in results.items()}
    rows = []
    for f in fractions:
        role = f"hetero={f}"
        row: dict[str, Any] = {"fraction": f, "mean": {}, "ratio": {}, "seeds": []}
        pairs = [(by[(role, off, s)], by[(role, on, s)]) for s in seeds
                 if (role, off, s) in by and (role, on, s) in by]
        row["seeds"] = [s for s in seeds if (role, off, s) in by and (role, on, s) in by]
        for m, _, kind in HETERO_METRICS:
            for i, p in enumerate((off, on)):
                xs = [float(getattr(pr[i], m)) for pr in pairs]
                row["mean"][(p, m)] = float(np.mean(xs)) if xs else math.nan
            if kind != "n":
                ratios = {s: (float(getattr(b, m)) / float(getattr(a, m))
                              if float(getattr(a, m)) else math.nan)
                          for s, (a, b) in zip(row["seeds"], pairs)}
                row["ratio"][m] = paired_ratio_ci(ratios)
        rows.append(row)
    return rows


def render_hetero_md(
    rows: Sequence[Mapping[str, Any]], off: str = HETERO_POLICIES[0], on: str = HETERO_POLICIES[1]
) -> str:
    """Markdown: per fraction, ``off`` and ``on`` means, then the paired ratio ``on / off``."""
    head = [t for _, t, _ in HETERO_METRICS]
    lines = [
        "| hetero_fraction | policy | " + " | ".join(head) + " |",
        "|---|---|" + "---|" * len(head),
    ]

    def cell(v: float, kind: str) -> str:
        if not math.isfinite(v):
            return "-"
        if kind == "s":
            return _s(v)
        if kind == "r":
            return f"{v:.4f}" if v < 0.01 else f"{v:.3f}"
        return f"{v:.1f}" if v != int(v) else f"{int(v)}"

    for row in rows:
        f = row["fraction"]
        for p in (off, on):
            cells = [cell(row["mean"][(p, m)], k) for m, _, k in HETERO_METRICS]
            lines.append(f"| {f} | {p} | " + " | ".join(cells) + " |")
        rc = []
        for m, _, kind in HETERO_METRICS:
            st = row["ratio"].get(m)
            if st is None or not math.isfinite(st.mean):
                rc.append("-" if kind != "n" else "")
                continue
            ci = f" ({st.lo:.3f}..{st.hi:.3f})" if math.isfinite(st.lo) else ""
            rc.append(f"{st.mean:.3f}{ci}")
        lines.append(f"| {f} | {on} / {off} | " + " | ".join(rc) + " |")
    return "\n".join(lines)
