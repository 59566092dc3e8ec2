"""Leaderboard tables: ``leaderboard.md`` and ``leaderboard.json`` from the results rows.

Per scenario and entrant, every metric of SPEC 5 is summarised as mean +- sample standard
deviation over the suite's seeds. The comparisons use rliable's estimators
(:mod:`aryl_gym.stats`), paired by seed except where said:

* **score**: the normalised score of an episode is ``jct_lower_bound / avg_jct`` (in (0, 1],
  higher is better: 1 would mean every job ran alone in its fastest configuration on its fastest
  GPU from the moment it arrived: :func:`aryl_gym.metrics.lower_bounds`); per entrant its interquartile mean (IQM) over seeds and scenarios, with
  a stratified bootstrap 95% interval;
* **x Baseline** / **x aryl**: the ratio of the entrant's mean ``rank_by`` to the Baseline's
  (``fifo``, the paper's "Baseline" of section 7) and to ``aryl``'s, over the seeds both have,
  with a paired stratified bootstrap 95% interval;
* **optimality gap**: ``1 - mean(min(score, 1))`` over seeds (and scenarios), rliable's
  ``aggregate_optimality_gap``: how far, on average, the average JCT falls short of the
  episode's JCT lower bound, as a fraction of the average JCT (lower is better, 0 at the bound),
  with a stratified bootstrap 95% interval;
* **P(better than aryl)**: rliable's probability of improvement of the entrant over the
  reference ``aryl`` on the normalised score, so *improvement* means a higher score, i.e. an
  average JCT closer to its lower bound (lower JCT): per scenario the share of (entrant seed,
  aryl seed) pairs where the entrant's score is higher, a tie counting 1/2, averaged over
  scenarios; 0.5 is a draw. Its 95% interval comes from ``library.get_interval_estimates``,
  which resamples the two entrants' seeds independently (the statistic is not paired);
* **rank**: every pair of entrants is compared the same way; an entrant is *separated* from
  another when the 95% interval of their ratio excludes 1. ``rank = 1 + the number of entrants
  separated from it on the better side``, so entrants whose intervals overlap 1 share a rank
  (marked ``=``) and their names are listed as ties. Without rliable (the ``stats`` extra) the
  ranks follow the means alone and the table says so.

The Markdown starts with a header that states this protocol, so a table is never read without it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np

from aryl_gym import __version__
from aryl_gym.fileio import atomic_write_text
from aryl_gym.leaderboard.results import METRIC_TYPES, WALL_METRICS
from aryl_gym.leaderboard.runner import RunSummary
from aryl_gym.leaderboard.suites import Suite
from aryl_gym.metrics import METRICS, higher_is_better, metric
from aryl_gym.metrics import view as metric_view
from aryl_gym.provenance import env_version
from aryl_gym.stats import (
    LEVEL,
    REPS,
    SEED,
    available,
    iqm,
    iqm_ci,
    optimality_gap,
    optimality_gap_ci,
    probability_of_improvement,
    probability_of_improvement_ci,
    ratio,
    ratio_ci,
    tie_ranks,
)

#: (metric, column title, format) of the Markdown table and of the short console table, in
#: order (aryl_gym.metrics.METRICS, views "report" and "console")
MD_COLUMNS: tuple[tuple[str, str, str], ...] = tuple((m.name, m.header, m.fmt) for m in metric_view("report"))
CONSOLE_COLUMNS: tuple[tuple[str, str, str], ...] = tuple(
    (m.name, m.header, m.fmt) for m in metric_view("console")
)


def _column(name: str) -> tuple[str, str, str]:
    """The column of a ``rank_by`` metric that is not among the table's columns."""
    m = metric(name)
    return (name, m.header if name in METRICS else name, m.fmt)


def _finite(values: Sequence[Any]) -> list[float]:
    return [float(v) for v in values if v is not None and math.isfinite(float(v))]


def stats(values: Sequence[Any]) -> dict[str, Any]:
    """mean, sample std (0 for one value), min, max, n over the finite values."""
    v = _finite(values)
    n = len(v)
    if n == 0:
        return {"mean": None, "std": None, "min": None, "max": None, "n": 0}
    mean = sum(v) / n
    std = math.sqrt(sum((x - mean) ** 2 for x in v) / (n - 1)) if n > 1 else 0.0
    return {"mean": mean, "std": std, "min": min(v), "max": max(v), "n": n}


#: the second reference of every comparison (when it is an entrant): the paper's scheduler
REFERENCE = "aryl"
#: the normalised score's definition (also written into leaderboard.json)
SCORE_DEFINITION = "jct_lower_bound / avg_jct per episode (higher is better, at most 1)"
#: the optimality gap's definition (rliable's aggregate_optimality_gap at gamma = 1)
OPTIMALITY_GAP_DEFINITION = (
    "1 - mean over seeds (and scenarios) of min(score, 1): the mean shortfall of the average JCT "
    "from the JCT lower bound, as a fraction of the average JCT (lower is better, 0 = at the bound)"
)
#: the probability of improvement's definition (rliable's probability_of_improvement)
IMPROVEMENT_DEFINITION = (
    "P(score of the entrant > score of {ref}): per scenario, the share of (entrant seed, {ref} seed) "
    "pairs where the entrant's normalised score is higher, i.e. its average JCT is closer to the "
    "episode's lower bound (a tie counts 1/2), averaged over scenarios; above 0.5 means the "
    "entrant usually beats {ref}"
)


def episode_score(row: Mapping[str, Any]) -> float | None:
    """``jct_lower_bound / avg_jct``: the mean over jobs of each job's shortest possible running
    time alone (:func:`aryl_gym.metrics.lower_bounds`, no queuing), over the average JCT (the
    unfinished jobs counted up to the episode's end)."""
    lb, jct = row.get("jct_lower_bound"), row.get("avg_jct")
    if lb is None or jct is None:
        return None
    lb, jct = float(lb), float(jct)
    if not (math.isfinite(lb) and math.isfinite(jct)) or jct <= 0:
        return None
    return lb / jct


def _matrix(
    per: Mapping[str, Mapping[int, Mapping[str, Any]]],
    scenarios: Sequence[str],
    seeds: Sequence[int],
    value: Any,
) -> np.ndarray | None:
    """``(len(seeds), len(scenarios))`` values, or None if one is missing or not finite."""
    out = np.empty((len(seeds), len(scenarios)))
    for j, scen in enumerate(scenarios):
        for i, s in enumerate(seeds):
            r = per.get(scen, {}).get(s)
            v = value(r) if r is not None else None
            if v is None or not math.isfinite(float(v)):
                return None
            out[i, j] = float(v)
    return out


def _common_seeds(per_a: Mapping[str, Mapping[int, Any]], per_b: Mapping[str, Mapping[int, Any]],
                  scenarios: Sequence[str]) -> list[int]:
    sets = [set(per_a.get(sc, {})) & set(per_b.get(sc, {})) for sc in scenarios]
    return sorted(set.intersection(*sets)) if sets else []


def _ci(point: float, lo: float | None, hi: float | None, n: int) -> dict[str, Any]:
    return {"value": point, "ci": [lo, hi], "seeds": n}


def _mean_key(rank_by: str) -> Callable[[Mapping[str, Any]], tuple[int, float, str]]:
    """Sort key of the ranking without intervals: by mean ``rank_by``; an entrant with unfinished
    jobs after every entrant that finished all of them, one without a value last."""
    higher = higher_is_better(rank_by)

    def key(en: Mapping[str, Any]) -> tuple[int, float, str]:
        m = en["metrics"][rank_by]["mean"]
        if m is None:
            return (2, 0.0, str(en["policy"]))
        # a mean over fewer seeds (no value on some) ranks after the complete ones too, as with
        # intervals (was: ranked by the mean of the seeds it had, e.g. 2nd on 2 of 3 seeds)
        late = en["jobs_unfinished"] or en.get("rank_by_missing")
        return (1 if late else 0, -m if higher else m, str(en["policy"]))

    return key


def _finished_all(per_entrant: Mapping[str, Mapping[int, Mapping[str, Any]]], scenarios: Sequence[str],
                  rank_by: str) -> bool:
    """Every episode of the entrant finished all its jobs and has a finite value to rank by (0
    counts: no preemptions is the best value of ``rank_by: preemptions``, not a missing one)."""
    for scen in scenarios:
        for r in (per_entrant.get(scen) or {}).values():
            v = r.get(rank_by)
            if int(r.get("jobs_unfinished") or 0) > 0 or v is None or not math.isfinite(float(v)):
                return False
    return True


def _improvement(
    per: Mapping[str, Mapping[str, Mapping[int, Mapping[str, Any]]]],
    name: str,
    reference: str,
    scenarios: Sequence[str],
) -> dict[str, Any] | None:
    """P(score of ``name`` > score of ``reference``) over the seeds both finished on every
    scenario, with rliable's 95% interval (:func:`aryl_gym.stats.probability_of_improvement_ci`);
    the reference against itself is 0.5."""
    seeds = _common_seeds(per[name], per[reference], scenarios)
    if not seeds:
        return None
    if name == reference:
        return _ci(0.5, 0.5, 0.5, len(seeds))
    x = _matrix(per[name], scenarios, seeds, episode_score)
    y = _matrix(per[reference], scenarios, seeds, episode_score)
    if x is None or y is None:
        return None
    if len(seeds) < 2:
        return _ci(probability_of_improvement(x, y), None, None, len(seeds))
    point, lo, hi = probability_of_improvement_ci(x, y)
    return _ci(point, lo, hi, len(seeds))


def compare_entrants(
    per: Mapping[str, Mapping[str, Mapping[int, Mapping[str, Any]]]],
    names: Sequence[str],
    scenarios: Sequence[str],
    rank_by: str,
    baseline: str,
    reference: str | None = REFERENCE,
) -> dict[str, Any]:
    """rliable statistics of ``names`` on ``scenarios`` (tasks); ``per[name][scenario][seed]`` is
    a row. Returns ``{"entrants": {name: {...}}, "pairwise": [...]}`` (see the module docstring).

    A comparison needs at least two seeds that both entrants finished on every scenario, and a
    positive, finite ``rank_by`` on each; otherwise it has no interval and separates nothing."""
    higher = higher_is_better(rank_by)
    stats_out: dict[str, dict[str, Any]] = {n: {} for n in names}
    for n in names:
        seeds = _common_seeds(per[n], per[n], scenarios)
        m = _matrix(per[n], scenarios, seeds, episode_score) if seeds else None
        if m is not None and len(seeds) >= 1:
            # one seed has no spread: no interval (a zero-width one would look certain)
            point, lo, hi = iqm_ci(m) if len(seeds) >= 2 else (iqm(m), None, None)
            stats_out[n]["score_iqm"] = _ci(point, lo, hi, len(seeds))
            point, lo, hi = optimality_gap_ci(m) if len(seeds) >= 2 else (optimality_gap(m), None, None)
            stats_out[n]["optimality_gap"] = _ci(point, lo, hi, len(seeds))
        else:
            stats_out[n]["score_iqm"] = None
            stats_out[n]["optimality_gap"] = None
        stats_out[n]["p_improvement"] = _improvement(per, n, reference, scenarios) if (
            reference is not None and reference in names) else None

    def metric(r: Mapping[str, Any]) -> float | None:
        # a ratio needs a positive, finite value on both sides (inf > 0 too: was an inf in a
        # hand-edited row, which left that entrant uncompared at rank 1)
        v = r.get(rank_by)
        return None if v is None or not 0 < float(v) < math.inf else float(v)

    pairwise = []
    better: dict[tuple[str, str], bool] = {}
    cache: dict[tuple[str, str], dict[str, Any] | None] = {}
    points: dict[tuple[str, str], dict[str, Any]] = {}  # one-seed ratios (no interval)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            seeds = _common_seeds(per[a], per[b], scenarios)
            xa = _matrix(per[a], scenarios, seeds, metric) if len(seeds) >= 2 else None
            xb = _matrix(per[b], scenarios, seeds, metric) if xa is not None else None
            res: dict[str, Any] | None = None
            if xa is not None and xb is not None:
                point, lo, hi = ratio_ci(xa, xb)
                if all(math.isfinite(v) for v in (point, lo, hi)):
                    res = _ci(point, lo, hi, len(seeds))
            if res is None and len(seeds) == 1:
                # one seed: the ratio without an interval (was: no ratio at all, '-'); it
                # separates nothing
                xa = _matrix(per[a], scenarios, seeds, metric)
                xb = _matrix(per[b], scenarios, seeds, metric) if xa is not None else None
                if xa is not None and xb is not None:
                    one = ratio(xa, xb)
                    if math.isfinite(one) and one > 0:
                        points[(a, b)] = _ci(one, None, None, 1)
                        points[(b, a)] = _ci(1.0 / one, None, None, 1)
            cache[(a, b)] = res
            if res is not None:
                inv = _ci(1.0 / res["value"], 1.0 / res["ci"][1], 1.0 / res["ci"][0], res["seeds"])
                cache[(b, a)] = inv
                lo, hi = res["ci"]
                a_better = lo > 1.0 if higher else hi < 1.0
                b_better = hi < 1.0 if higher else lo > 1.0
                better[(a, b)], better[(b, a)] = a_better, b_better
                pairwise.append({"a": a, "b": b, "ratio": res["value"], "ci": res["ci"],
                                 "seeds": res["seeds"], "separated": a_better or b_better})
            else:
                cache[(b, a)] = None
                pairwise.append({"a": a, "b": b, "ratio": None, "ci": None, "seeds": len(seeds),
                                 "separated": False})
    # An entrant that left jobs unfinished (or has no value to rank by) in some episode averages
    # fewer, easier jobs: it ranks after every entrant that finished all of them, never tied
    # with one (a policy that completes nothing used to share rank 1 with Aryl).
    ranked = better
    done = {n for n in names if _finished_all(per[n], scenarios, rank_by)}
    if done and len(done) < len(names):
        ranked = dict(better)
        for a in done:
            for b in names:
                if b not in done:
                    ranked[(a, b)], ranked[(b, a)] = True, False
    ranks = tie_ranks(names, ranked)
    for n in names:
        st = stats_out[n]
        st["vs_baseline"] = (
            _ci(1.0, 1.0, 1.0, len(_common_seeds(per[n], per[n], scenarios)))
            if n == baseline else cache.get((n, baseline)) or points.get((n, baseline))
        )
        if reference is not None and reference in names:
            st["vs_reference"] = (
                _ci(1.0, 1.0, 1.0, len(_common_seeds(per[n], per[n], scenarios)))
                if n == reference else cache.get((n, reference)) or points.get((n, reference))
            )
        else:
            st["vs_reference"] = None
        st["rank"] = ranks[n]
        st["tied_with"] = [
            o for o in names
            if o != n and cache.get((n, o)) is not None and not better[(n, o)] and not better[(o, n)]
        ]
        st["uncompared"] = [o for o in names if o != n and cache.get((n, o)) is None]
    return {"entrants": stats_out, "pairwise": pairwise}


def aggregate(
    rows: Sequence[Mapping[str, Any]],
    suite: Suite,
    summary: RunSummary | None = None,
) -> dict[str, Any]:
    """The ``leaderboard.json`` structure: protocol, then per scenario a ranked entrant list
    (and, with several scenarios, an ``overall`` comparison stratified over them)."""
    with_ci = available()
    rank_by = suite.rank_by
    higher = higher_is_better(rank_by)
    reference = REFERENCE if any(e.name == REFERENCE for e in suite.entrants) else None
    scenarios: dict[str, Any] = {}
    commits = sorted({str(r["commit"]) for r in rows})
    hashes: dict[str, list[str]] = {}
    # per[entrant][scenario][seed] = row
    per: dict[str, dict[str, dict[int, Mapping[str, Any]]]] = {}
    for r in rows:
        per.setdefault(str(r["policy"]), {}).setdefault(str(r["scenario"]), {})[int(r["seed"])] = r
    for scen in suite.scenarios:
        srows = [r for r in rows if r["scenario"] == scen]
        hashes[scen] = sorted({str(r["config_hash"]) for r in srows if r["kind"] == "policy"})
        by: dict[str, dict[int, Mapping[str, Any]]] = {
            name: d[scen] for name, d in per.items() if scen in d
        }
        base = by.get(suite.baseline, {})
        entries: list[dict[str, Any]] = []
        for e in suite.entrants:
            per_seed = by.get(e.name)
            if not per_seed:
                continue
            seeds = sorted(per_seed)
            metrics = {k: stats([per_seed[s][k] for s in seeds]) for k in METRIC_TYPES}
            common = [s for s in seeds if s in base]
            ratios: dict[str, float | None] = {}
            for k in METRIC_TYPES:
                a = _finite([per_seed[s][k] for s in common])
                b = _finite([base[s][k] for s in common])
                ma = sum(a) / len(a) if a and len(a) == len(common) else None
                mb = sum(b) / len(b) if b and len(b) == len(common) else None
                ratios[k] = ma / mb if (ma is not None and mb) else None
            unfinished = sum(int(per_seed[s]["jobs_unfinished"] or 0) for s in seeds)
            # the seeds without a finite value to rank by: marked in the table (‡)
            no_value = [s for s in seeds if not _finite([per_seed[s].get(rank_by)])]
            notes = sorted({str(per_seed[s]["note"]) for s in seeds if per_seed[s].get("note")})
            entries.append(
                {
                    "policy": e.name,
                    "kind": e.kind,
                    "source": e.source,
                    "baseline": e.name == suite.baseline,
                    "seeds": seeds,
                    "complete": len(seeds) == len(suite.seeds),
                    "jobs_unfinished": unfinished,
                    "rank_by_missing": no_value,
                    "metrics": metrics,
                    "ratio_to_baseline": ratios,
                    "notes": notes,
                }
            )
        pairwise: list[dict[str, Any]] = []
        if with_ci and entries:
            names = [en["policy"] for en in entries]
            cmp = compare_entrants(
                {n: {scen: by[n]} for n in names}, names, [scen], rank_by, suite.baseline, reference
            )
            pairwise = cmp["pairwise"]
            for en in entries:
                en.update(cmp["entrants"][en["policy"]])

        mean_key = _mean_key(rank_by)

        if with_ci:
            entries.sort(key=lambda en: (en["rank"], *mean_key(en)))
        else:
            entries.sort(key=mean_key)
            for i, en in enumerate(entries):
                en["rank"] = i + 1
        _mark_shared(entries)
        scenarios[scen] = {"config_hash": hashes[scen], "entrants": entries, "pairwise": pairwise}
    overall = _overall(per, suite, rank_by, reference) if with_ci and len(suite.scenarios) > 1 else None
    if overall is not None:
        for en in overall["entrants"]:
            en["rank_by_missing"] = {
                scen: o["rank_by_missing"] for scen, d in scenarios.items()
                for o in d["entrants"] if o["policy"] == en["policy"] and o["rank_by_missing"]
            }
    skipped = dict(summary.skipped) if summary else {}
    failed = [
        {"scenario": k[1], "seed": k[2], "policy": k[3], "error": msg.splitlines()[0] if msg else ""}
        for k, msg in (summary.failed if summary else [])
    ]

    # learned agents that acted with a shield (their env kwargs, as recorded per row)
    shielded: set[str] = set()
    for r in rows:
        if r.get("kind") == "agent" and r.get("env_kwargs"):
            try:
                kw = json.loads(str(r["env_kwargs"]))
            except ValueError:
                continue
            if isinstance(kw, dict) and kw.get("flap_damping"):
                shielded.add(str(r["policy"]))
    protocol = {
        "suite": suite.name,
        "description": suite.description,
        "suite_file": suite.source,
        "scenarios": list(suite.scenarios),
        "seeds": list(suite.seeds),
        "entrants": [{"name": e.name, "kind": e.kind, "source": e.source} for e in suite.entrants],
        "baseline": suite.baseline,
        "reference": reference,
        "rank_by": rank_by,
        "rank_order": "descending" if higher else "ascending",
        "env_id": suite.env_id,
        "env_version": env_version(suite.env_id),
        "env_kwargs": dict(suite.env_kwargs),
        "flap_damping": sorted(shielded),
        "statistics": "mean and sample standard deviation (ddof=1) over seeds",
        "ratio_to_baseline": "mean of the entrant / mean of the baseline, over the seeds both have",
        "intervals": (
            {
                "library": "rliable " + _version("rliable"),
                "score": SCORE_DEFINITION,
                "score_aggregate": "interquartile mean over seeds (and scenarios)",
                "optimality_gap": OPTIMALITY_GAP_DEFINITION,
                "probability_of_improvement": (
                    IMPROVEMENT_DEFINITION.format(ref=reference) if reference else None
                ),
                "ratio": "per scenario mean(entrant) / mean(other) over the seeds both have; "
                "geometric mean over scenarios",
                "bootstrap": f"stratified (seeds resampled within each scenario), paired by seed, "
                f"{REPS} replications, percentile {LEVEL:.0%} intervals, "
                f"numpy seed {SEED}",
                "ties": "two entrants are separated when the 95% interval of their ratio excludes "
                "1; rank = 1 + number of entrants separated from it on the better side",
            }
            if with_ci
            else None
        ),
        "commits": commits,
        "aryl_gym_version": __version__,
        "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "episodes": len(rows),
    }
    if summary is not None:
        protocol.update(new_episodes=summary.new, resumed_episodes=summary.resumed)
    out = {"protocol": protocol, "scenarios": scenarios, "skipped": skipped, "failed": failed}
    if overall is not None:
        out["overall"] = overall
    return out


def _mark_shared(entries: list[dict[str, Any]]) -> None:
    counts: dict[int, int] = {}
    for en in entries:
        counts[en["rank"]] = counts.get(en["rank"], 0) + 1
    for en in entries:
        en["rank_shared"] = counts[en["rank"]] > 1


def _overall(
    per: Mapping[str, Mapping[str, Mapping[int, Mapping[str, Any]]]],
    suite: Suite,
    rank_by: str,
    reference: str | None,
) -> dict[str, Any]:
    """All scenarios at once (rliable's tasks): entrants that have every scenario."""
    names = [e.name for e in suite.entrants if all(sc in per.get(e.name, {}) for sc in suite.scenarios)]
    # entrants without results on some scenario are left out of it: named under its table
    left_out = [e.name for e in suite.entrants if e.name not in names]
    if not names:
        return {"scenarios": list(suite.scenarios), "entrants": [], "pairwise": [], "left_out": left_out}
    cmp = compare_entrants(per, names, list(suite.scenarios), rank_by, suite.baseline, reference)
    entries = [{"policy": n, "baseline": n == suite.baseline, **cmp["entrants"][n]} for n in names]

    def key(en: dict[str, Any]) -> tuple[int, int, float, str]:
        # an entrant without a ratio to the Baseline after those with one, whichever way
        # rank_by points (was: math.inf, negated when higher is better, so it went first)
        vb = en["vs_baseline"]
        if not vb:
            return (en["rank"], 1, 0.0, en["policy"])
        v = vb["value"]
        return (en["rank"], 0, -v if higher_is_better(rank_by) else v, en["policy"])

    entries.sort(key=key)
    _mark_shared(entries)
    return {"scenarios": list(suite.scenarios), "entrants": entries, "pairwise": cmp["pairwise"],
            "left_out": left_out}


def _version(dist: str) -> str:
    try:
        return version(dist)
    except Exception:  # noqa: BLE001
        return "?"


# ----------------------------------------------------------------------------------------------
# Formatting
# ----------------------------------------------------------------------------------------------


def _num(v: float | None, fmt: str) -> str:
    if v is None:
        return "-"
    if fmt == "s":
        return f"{v:,.0f}"
    if fmt == "h":
        return f"{v / 3600.0:.1f}"
    if fmt == "%":
        return f"{100.0 * v:.1f}%"
    if fmt == "c":
        return f"{v:.0f}"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    return f"{v:.3g}"


def fmt_stat(st: Mapping[str, Any], fmt: str) -> str:
    if st["mean"] is None:
        return "-"
    if fmt == "c":  # a 0/1 flag per episode: how many of the episodes had it
        return f"{round(st['mean'] * st['n'])}/{st['n']}"
    if st["n"] <= 1:
        return _num(st["mean"], fmt)
    if fmt == "%":
        return f"{100.0 * st['mean']:.1f} ± {100.0 * st['std']:.1f}%"
    return f"{_num(st['mean'], fmt)} ± {_num(st['std'], fmt)}"


def _label(en: Mapping[str, Any]) -> str:
    s = str(en["policy"])
    if en["baseline"]:
        s += " (Baseline)"
    if en["kind"] == "agent":
        s += " [learned]"
    if en["jobs_unfinished"]:
        s += " †"
    if en.get("rank_by_missing"):
        s += " ‡"
    if not en["complete"]:
        s += f" ({len(en['seeds'])} seeds)"
    return s


def _cell(st: Mapping[str, Any], fmt: str, n_seeds: int) -> str:
    """:func:`fmt_stat`, with ``(n=k)`` when the mean is over fewer of the entrant's seeds than
    it has (a value that was not finite on some): was the same ``mean ± std`` as over all."""
    s = fmt_stat(st, fmt)
    if fmt != "c" and 0 < st["n"] < n_seeds:
        s += f" (n={st['n']})"
    return s


def _missing_notes(data: Mapping[str, Any], rank_by: str) -> list[str]:
    """One line per entrant marked ‡: the seeds it has no ``rank_by`` value on."""
    out = []
    for en in data["entrants"]:
        miss = en.get("rank_by_missing") or []
        if miss:
            have = len(en["seeds"])
            out.append(
                f"‡ {en['policy']}: no `{rank_by}` value on seed{'s' if len(miss) > 1 else ''} "
                f"{', '.join(str(s) for s in miss)} ({have - len(miss)} of its {have} seeds have one): "
                "its mean is over the others, and it ranks after every entrant that finished all its jobs "
                "with a value on every seed"
            )
    return out


def _ratio(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def fmt_ci(c: Mapping[str, Any] | None, digits: int = 3) -> str:
    """``0.934 [0.901, 0.962]`` (a comparison with itself is just ``1``)."""
    if not c:
        return "-"
    v, (lo, hi) = c["value"], c["ci"]
    if v == lo == hi == 1.0:
        return "1"
    if lo is None or hi is None:
        return f"{v:.{digits}f} [n/a: one seed]"
    return f"{v:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def _rank(en: Mapping[str, Any]) -> str:
    return f"{en['rank']}=" if en.get("rank_shared") else str(en["rank"])


def _has_ci(agg: Mapping[str, Any]) -> bool:
    return bool(agg["protocol"].get("intervals"))


def protocol_header(agg: Mapping[str, Any]) -> str:
    p = agg["protocol"]
    order = "lower is better" if p["rank_order"] == "ascending" else "higher is better"
    ent = ", ".join(
        f"{e['name']}" + (" (learned)" if e["kind"] == "agent" else "") for e in p["entrants"]
    )
    lines = [f"# Leaderboard: {p['suite']}", ""]
    if p["description"]:
        lines += [p["description"], ""]
    lines += [
        "## Protocol",
        "",
        (f"- **Episodes**: scenarios {', '.join(p['scenarios'])} x seeds "
        f"{_seed_text(p['seeds'])} x entrants {ent}. Seed *s* is the episode of "
        "`make_episode(scenario, s)` (trace and inference series); every entrant plays the same "
        "episodes."),
        ("- **Reference policies** run natively on the simulator; **learned agents** act through "
        f"`{p['env_id']}` from `reset(seed=s, options={{'episode_seed': s}})` (the same episode, "
        "checked), deterministically, with action masks"
        + (f"; {', '.join(p['flap_damping'])} with "
           "flap damping (its deploy_env_kwargs: a shield that, once an episode's overheads signal "
           "thrashing, refuses releases of the jobs the agent keeps flipping; docs/env.md)"
           if p.get("flap_damping") else "")
        + ". Both yield the same metrics (SPEC 5)."),
        (f"- **Numbers**: {p['statistics']}. JCT counts every submitted job, an unfinished one "
        "with its JCT censored at the episode's end (a lower bound; `avg_jct_finished` is the "
        "finished jobs' mean); queuing times are over the jobs that started; times in seconds, "
        "makespan in hours, utilisation and usage as fractions of GPU time."),
    ]
    iv = p.get("intervals")
    if iv:
        ref = p.get("reference")
        lines += [
            (f"- **x Baseline**{' / **x ' + ref + '**' if ref else ''}: mean `{p['rank_by']}` of "
            f"the entrant / mean of `{p['baseline']}` (the paper's Baseline: FIFO, no loaning, no "
            "elastic scaling)" + (f" / of `{ref}`" if ref else "") + ", over the seeds both "
            "have, with a 95% confidence interval "
            f"({iv['library']}: bootstrap {iv['bootstrap']}). Below 1 is better for times."),
            (f"- **score IQM**: the normalised score {iv['score']}; its interquartile mean over "
            "seeds, with a stratified bootstrap 95% interval (with fewer than 8 seeds the IQM "
            "trims nothing and equals the mean)."),
            (f"- **optimality gap**: {iv.get('optimality_gap') or OPTIMALITY_GAP_DEFINITION}; "
            "rliable's `aggregate_optimality_gap` (a score above 1 counts as 1: possible only "
            "when an episode ended early, since an unfinished job's JCT censored at the end can "
            "be shorter than its bound), with a stratified bootstrap 95% interval."),
        ]
        if ref and iv.get("probability_of_improvement"):
            lines.append(
                f"- **P(better than {ref})**: {iv['probability_of_improvement']}; rliable's "
                "`probability_of_improvement` (Mann-Whitney U over n_entrant x n_ref pairs, so "
                "seeds are not paired here) with the interval of "
                "`get_interval_estimates` (seeds of the two resampled independently within each "
                "scenario)."
            )
        lines += [
            (f"- **Rank**: every pair of entrants is compared by the ratio of their mean "
            f"`{p['rank_by']}` ({order}), paired by seed, with a 95% bootstrap interval; an "
            "entrant is *separated* from another when that interval excludes 1. Rank = 1 + the "
            "number of entrants separated from it on the better side: `=` marks a shared rank, "
            "*ties* lists the entrants it is not separated from. With few seeds the bootstrap "
            "intervals are optimistic (docs/leaderboard.md says how many seeds separate a 3% "
            "difference)."),
        ]
    else:
        lines += [
            (f"- **x Baseline**: {p['ratio_to_baseline']}; the Baseline is `{p['baseline']}`. "
            "Below 1 is better for times."),
            (f"- **Rank**: by mean `{p['rank_by']}` ({order}), without confidence intervals "
            "(install `aryl-gym[stats]` for rliable's intervals and tied ranks)."),
        ]
    lines += [
        ("- † marks an entrant with unfinished jobs in some episode (their JCTs are censored at "
        "the episode's end, so its averages are lower bounds): it ranks after every entrant that "
        "finished all its jobs, never tied with one. Decision time is wall-clock and machine dependent."),
    ]
    if any(en.get("rank_by_missing") for d in agg["scenarios"].values() for en in d["entrants"]):
        lines.append(
            f"- ‡ marks an entrant with no `{p['rank_by']}` value on some seed (not finite): its "
            "mean is over the seeds that have one, and it ranks after every entrant that finished all its "
            "jobs with a value on every seed; the note under its table names the seeds.")
    lines += [
        ("- **Replay**: each row of `results.csv` records scenario, seed, entrant, env id and "
        "kwargs, config hash and commit; `aryl-gym leaderboard --validate results.csv` replays a "
        "sample and checks the metrics."),
        "",
        f"Suite file `{p['suite_file']}`; env `{p['env_id']}` ({p['env_version'] or '-'}); "
        f"aryl-gym {p['aryl_gym_version']}; commit {', '.join(c[:12] for c in p['commits']) or '-'}; "
        f"{p['episodes']} episodes"
        + (
            f" ({p['new_episodes']} new, {p['resumed_episodes']} resumed)"
            if "new_episodes" in p
            else ""
        )
        + f"; generated {p['generated_at']}.",
    ]
    return "\n".join(lines)


def _seed_text(seeds: Sequence[int]) -> str:
    s = sorted(int(x) for x in seeds)
    if len(s) > 3 and s == list(range(s[0], s[-1] + 1)):
        return f"{s[0]}-{s[-1]} ({len(s)} seeds)"
    return ", ".join(str(x) for x in s)


def _ci_head(agg: Mapping[str, Any]) -> list[str]:
    ref = agg["protocol"].get("reference")
    return (["x Baseline [95% CI]"] + ([f"x {ref} [95% CI]"] if ref else [])
            + ["score IQM [95% CI]", "optimality gap [95% CI]"]
            + ([f"P(better than {ref}) [95% CI]"] if ref else []))


def _ci_cells(agg: Mapping[str, Any], en: Mapping[str, Any]) -> list[str]:
    ref = agg["protocol"].get("reference")
    cells = [fmt_ci(en.get("vs_baseline"))]
    if ref:
        cells.append(fmt_ci(en.get("vs_reference")))
    cells += [fmt_ci(en.get("score_iqm")), fmt_ci(en.get("optimality_gap"))]
    if ref:
        cells.append("0.5 (itself)" if en.get("policy") == ref and en.get("p_improvement")
                     else fmt_ci(en.get("p_improvement")))
    return cells


def _ties(en: Mapping[str, Any]) -> str:
    # an entrant without a ratio to another (one seed, a missing or zero value) is not separated
    # from it either: say so (was: "-", as if it were separated from every other entrant)
    tied = ", ".join(en.get("tied_with") or [])
    unc = en.get("uncompared") or []
    if unc:
        tied += ("; " if tied else "") + "not compared with " + ", ".join(unc)
    return tied or "-"


def render_markdown(agg: Mapping[str, Any]) -> str:
    out = [protocol_header(agg), ""]
    rank_by = agg["protocol"]["rank_by"]
    ci = _has_ci(agg)
    if agg.get("overall"):
        ov = agg["overall"]
        out += [f"## All scenarios ({', '.join(ov['scenarios'])})", "",
                "Stratified over scenarios: ratios are geometric means over scenarios of the "
                "per-scenario ratios of means; the IQM pools every seed of every scenario.", ""]
        head = ["rank", "entrant", *_ci_head(agg), "ties (not separated)"]
        out.append("| " + " | ".join(head) + " |")
        out.append("|" + "|".join(["---:", ":---"] + ["---:"] * (len(head) - 3) + [":---"]) + "|")
        for en in ov["entrants"]:
            label = en["policy"] + (" (Baseline)" if en["baseline"] else "") + (
                " ‡" if en.get("rank_by_missing") else "")
            out.append("| " + " | ".join([_rank(en), label, *_ci_cells(agg, en), _ties(en)]) + " |")
        if ov.get("left_out"):
            out += ["", "Not in this comparison (no results on every scenario): "
                    + ", ".join(ov["left_out"]) + "."]
        if any(en.get("rank_by_missing") for en in ov["entrants"]):
            out += ["", f"‡: no `{rank_by}` value on some seed of a scenario (see its table)."]
        out.append("")
    for scen, data in agg["scenarios"].items():
        out.append(f"## {scen}")
        out.append("")
        if data["config_hash"]:
            out.append(f"Config hash {', '.join(data['config_hash'])}.")
            out.append("")
        if not data["entrants"]:
            out.append("(no finished episodes)")
            out.append("")
            continue
        cols = list(MD_COLUMNS)
        if rank_by not in {c[0] for c in cols}:
            cols.insert(0, _column(rank_by))
        head = ["rank", "entrant"]
        for k, title, _ in cols:
            head.append(title)
            if k == rank_by:
                head += _ci_head(agg) if ci else ["x Baseline"]
        if ci:
            head.append("ties (not separated)")
        out.append("| " + " | ".join(head) + " |")
        aligns = ["---:", ":---"] + ["---:"] * (len(head) - 2 - int(ci)) + ([":---"] if ci else [])
        out.append("|" + "|".join(aligns) + "|")
        for en in data["entrants"]:
            cells = [_rank(en), _label(en)]
            for k, _, fmt in cols:
                cells.append(_cell(en["metrics"][k], fmt, len(en["seeds"])))
                if k == rank_by:
                    cells += _ci_cells(agg, en) if ci else [_ratio(en["ratio_to_baseline"][k])]
            if ci:
                cells.append(_ties(en))
            out.append("| " + " | ".join(cells) + " |")
        notes = [(en["policy"], n) for en in data["entrants"] for n in en["notes"]]
        missing = _missing_notes(data, rank_by)
        if notes or missing:
            out.append("")
            for name, n in notes:
                out.append(f"- {name}: {n}")
            for line in missing:
                out.append(f"- {line}")
        out.append("")
    if agg["skipped"]:
        out.append("## Skipped")
        out.append("")
        for name, why in agg["skipped"].items():
            out.append(f"- **{name}**: {why}")
        out.append("")
    if agg["failed"]:
        out.append("## Failed episodes")
        out.append("")
        for f in agg["failed"]:
            out.append(f"- {f['policy']} on {f['scenario']} seed {f['seed']}: {f['error']}")
        out.append("")
    return "\n".join(out)


def render_console(agg: Mapping[str, Any]) -> str:
    """A short fixed-width table per scenario for the terminal."""
    rank_by = agg["protocol"]["rank_by"]
    ci = _has_ci(agg)
    ref = agg["protocol"].get("reference")
    cols = list(CONSOLE_COLUMNS)
    if rank_by not in {c[0] for c in cols}:
        cols.insert(0, _column(rank_by))
    blocks = []
    for scen, data in agg["scenarios"].items():
        head = ["#", "entrant"]
        for k, title, _ in cols:
            head.append(title)
            if k == rank_by:
                head += (["xBase [95% CI]"] + ([f"x{ref} [95% CI]"] if ref else [])) if ci else ["xBase"]
        body = []
        for en in data["entrants"]:
            r = [_rank(en), _label(en)]
            for k, _, fmt in cols:
                r.append(_cell(en["metrics"][k], fmt, len(en["seeds"])))
                if k == rank_by:
                    if ci:
                        r.append(fmt_ci(en.get("vs_baseline"), 2))
                        if ref:
                            r.append(fmt_ci(en.get("vs_reference"), 2))
                    else:
                        r.append(_ratio(en["ratio_to_baseline"][k]))
            body.append(r)
        widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(head)]
        n_seeds = len(agg["protocol"]["seeds"])
        what = ("mean ± std, paired 95% CIs, = shared rank" if ci and n_seeds > 1 else
                "means; one seed gives no intervals (n/a) and separates no entrant" if ci else
                "mean ± std; no confidence intervals or tied ranks: pip install 'aryl-gym[stats]'")
        lines = [f"{scen} ({n_seeds} seed{'s' if n_seeds != 1 else ''}, {what}; rank by {rank_by})"]
        lines.append("  ".join(h.ljust(w) if i == 1 else h.rjust(w) for i, (h, w) in enumerate(zip(head, widths))))
        lines.append("  ".join("-" * w for w in widths))
        for b in body:
            lines.append("  ".join(c.ljust(w) if i == 1 else c.rjust(w) for i, (c, w) in enumerate(zip(b, widths))))
        lines += [f"  {m}" for m in _missing_notes(data, rank_by)]
        blocks.append("\n".join(lines))
    tail = []
    for name, why in agg["skipped"].items():
        tail.append(f"skipped {name}: {why}")
    for f in agg["failed"]:
        tail.append(f"FAILED {f['policy']} {f['scenario']} seed {f['seed']}: {f['error']}")
    return "\n\n".join(blocks + (["\n".join(tail)] if tail else []))


def write_report(
    out_dir: str | Path,
    suite: Suite,
    rows: Sequence[Mapping[str, Any]],
    summary: RunSummary | None = None,
) -> tuple[Path, Path, dict[str, Any]]:
    """Write ``leaderboard.md`` and ``leaderboard.json``; return their paths and the data."""
    out = Path(out_dir)
    agg = aggregate(rows, suite, summary)
    md = out / "leaderboard.md"
    js = out / "leaderboard.json"
    # each replaced whole (a unique temporary, fsync-ed, renamed): a run killed while writing
    # them leaves the earlier table or the new one, never a cut one (was: written in place)
    md_text = render_markdown(agg) + "\n"
    js_text = json.dumps(agg, indent=1, allow_nan=False, default=_json_default) + "\n"
    atomic_write_text(js, js_text)
    atomic_write_text(md, md_text)
    return md, js, agg


def _json_default(o: Any) -> Any:  # pragma: no cover - numpy scalars, if any slip in
    try:
        return o.item()
    except AttributeError:
        return str(o)


__all__ = [
    "REFERENCE",
    "WALL_METRICS",
    "aggregate",
    "compare_entrants",
    "episode_score",
    "render_console",
    "render_markdown",
    "stats",
    "write_report",
]
