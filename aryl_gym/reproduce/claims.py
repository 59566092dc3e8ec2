"""The paper's claims as rows, their paired statistics, the reasons a row misses and the
mechanism behind the Baseline rows (``aryl-gym reproduce``; the package docstring)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from aryl_gym.metrics import EpisodeResult
from aryl_gym.stats import RatioStat, paired_bootstrap_ratio, paired_ratio_ci  # noqa: F401 - the statistics, in aryl_gym.stats


def _clean(v: Any) -> Any:
    """``v`` for JSON: a non-finite float becomes None."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


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
    "tuned-runtime": "Aryl+TunedJobs = runtime batch tuning of every job, as Pollux tunes (aryl+tuned)",
    "tuned-submitted": "Aryl+TunedJobs = jobs submitted pre-tuned: one batch per job, fixed (aryl+pretuned)",
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
               "pollux-250 / aryl+tuned: no capacity loaning (paper 7.4, Basic)",
               reading=("pollux-all", "tuned-runtime"))
_PTP = RowSpec("pollux-tuned-p95", "Pollux vs Aryl+TunedJobs: p95 JCT, Pollux / Aryl+Tuned",
               1.37, "x", "basic", "pollux-250", "aryl+tuned", "p95_jct",
               "pollux-250 / aryl+tuned: no capacity loaning (paper 7.4, Basic)",
               reading=("pollux-all", "tuned-runtime"))
_PTS = RowSpec("pollux-tuned-scalings", "scaling events, Pollux / Aryl+TunedJobs (Ideal)", 1.76, "x",
               "ideal", "pollux-250", "aryl+tuned", "scaling_events",
               "pollux-250 / aryl+tuned: no capacity loaning (paper 7.4, Ideal)",
               reading=("pollux-all", "tuned-runtime"))

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
    _alt(_PTM, "tuned-submitted", den="aryl+pretuned", variant="pollux-250 / aryl+pretuned"),
    _PTP,
    _alt(_PTP, "pollux-elastic", num="pollux-250-elastic", variant="pollux-250-elastic / aryl+tuned"),
    _alt(_PTP, "tuned-submitted", den="aryl+pretuned", variant="pollux-250 / aryl+pretuned"),
    _PTS,
    _alt(_PTS, "pollux-elastic", num="pollux-250-elastic", variant="pollux-250-elastic / aryl+tuned (Ideal)"),
    _alt(_PTS, "tuned-submitted", den="aryl+pretuned", variant="pollux-250 / aryl+pretuned (Ideal)"),
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
    #: episodes behind the row (both policies, the seeds used) that left jobs unfinished; their
    #: JCT figures count those jobs censored at the episode's end (aryl_gym.metrics)
    failed: int = 0

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
            "failed_episodes": self.failed,
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
        failed = sum(int(results[(sp.role, p, s)].failed)
                     for s in used for p in {sp.num, sp.den})
        rr = RowResult(sp, paired_ratio_ci(ratios), used, failed=failed)
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


