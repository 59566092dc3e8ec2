"""Leaderboard tables: ``leaderboard.md`` and ``leaderboard.json`` from the results rows.

Per scenario and entrant, every metric of SPEC 5 is summarised as mean +- sample standard
deviation over the suite's seeds; the ratio to the Baseline (the suite's ``baseline``, ``fifo``
by default, the paper's "Baseline" of section 7) is the ratio of means over the seeds both have;
entrants are ranked by the mean of ``rank_by`` (average JCT by default, lower is better).
The Markdown starts with a header that states this protocol, so a table is never read without it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from aryl_gym.leaderboard.runner import METRIC_TYPES, WALL_METRICS, RunSummary, env_version
from aryl_gym.leaderboard.suites import Suite

#: metrics for which a larger value is better (everything else: smaller is better)
HIGHER_IS_BETTER = frozenset(
    {"train_util", "train_util_makespan", "combined_usage", "loaned_gpu_hours_used", "jobs_completed"}
)

#: (metric, column title, format) of the Markdown table, in order
MD_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("avg_jct", "avg JCT (s)", "s"),
    ("p95_jct", "p95 JCT (s)", "s"),
    ("avg_queue_time", "avg queue (s)", "s"),
    ("makespan", "makespan (h)", "h"),
    ("train_util", "train util", "%"),
    ("combined_usage", "combined usage", "%"),
    ("loaned_gpu_hours_used", "loaned GPU-h used", "n"),
    ("preemption_ratio", "preempt. ratio", "%"),
    ("scaling_events", "scaling events", "n"),
    ("mean_slowdown", "slowdown", "n"),
    ("decision_ms_mean", "decision ms", "n"),
)

#: columns of the short console table
CONSOLE_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("avg_jct", "avg JCT s", "s"),
    ("p95_jct", "p95 JCT s", "s"),
    ("avg_queue_time", "queue s", "s"),
    ("combined_usage", "usage", "%"),
    ("preemption_ratio", "preempt", "%"),
)


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


def aggregate(
    rows: Sequence[Mapping[str, Any]],
    suite: Suite,
    summary: RunSummary | None = None,
) -> dict[str, Any]:
    """The ``leaderboard.json`` structure: protocol, then per scenario a ranked entrant list."""
    rank_by = suite.rank_by
    higher = rank_by in HIGHER_IS_BETTER
    scenarios: dict[str, Any] = {}
    commits = sorted({str(r["commit"]) for r in rows})
    hashes: dict[str, list[str]] = {}
    for scen in suite.scenarios:
        srows = [r for r in rows if r["scenario"] == scen]
        hashes[scen] = sorted({str(r["config_hash"]) for r in srows if r["kind"] == "policy"})
        by: dict[str, dict[int, Mapping[str, Any]]] = {}
        for r in srows:
            by.setdefault(str(r["policy"]), {})[int(r["seed"])] = r
        base = by.get(suite.baseline, {})
        entries = []
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
                    "metrics": metrics,
                    "ratio_to_baseline": ratios,
                    "notes": notes,
                }
            )

        def sort_key(en: dict[str, Any]) -> tuple[int, float, str]:
            m = en["metrics"][rank_by]["mean"]
            if m is None:
                return (1, 0.0, en["policy"])
            return (0, -m if higher else m, en["policy"])

        entries.sort(key=sort_key)
        for i, en in enumerate(entries):
            en["rank"] = i + 1
        scenarios[scen] = {"config_hash": hashes[scen], "entrants": entries}
    skipped = dict(summary.skipped) if summary else {}
    failed = [
        {"scenario": k[1], "seed": k[2], "policy": k[3], "error": msg.splitlines()[0] if msg else ""}
        for k, msg in (summary.failed if summary else [])
    ]
    from aryl_gym import __version__

    protocol = {
        "suite": suite.name,
        "description": suite.description,
        "suite_file": suite.source,
        "scenarios": list(suite.scenarios),
        "seeds": list(suite.seeds),
        "entrants": [{"name": e.name, "kind": e.kind, "source": e.source} for e in suite.entrants],
        "baseline": suite.baseline,
        "rank_by": rank_by,
        "rank_order": "descending" if higher else "ascending",
        "env_id": suite.env_id,
        "env_version": env_version(suite.env_id),
        "env_kwargs": dict(suite.env_kwargs),
        "statistics": "mean and sample standard deviation (ddof=1) over seeds",
        "ratio_to_baseline": "mean of the entrant / mean of the baseline, over the seeds both have",
        "commits": commits,
        "aryl_gym_version": __version__,
        "generated_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "episodes": len(rows),
    }
    if summary is not None:
        protocol.update(new_episodes=summary.new, resumed_episodes=summary.resumed)
    return {"protocol": protocol, "scenarios": scenarios, "skipped": skipped, "failed": failed}


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
    if abs(v) >= 100:
        return f"{v:,.0f}"
    return f"{v:.3g}"


def fmt_stat(st: Mapping[str, Any], fmt: str) -> str:
    if st["mean"] is None:
        return "-"
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
    if not en["complete"]:
        s += f" ({len(en['seeds'])} seeds)"
    return s


def _ratio(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


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
        f"{', '.join(str(s) for s in p['seeds'])} x entrants {ent}. Seed *s* is the episode of "
        "`make_episode(scenario, s)` (trace and inference series); every entrant plays the same "
        "episodes."),
        ("- **Reference policies** run natively on the simulator; **learned agents** act through "
        f"`{p['env_id']}` from `reset(seed=s, options={{'episode_seed': s}})` (the same episode, "
        "checked), deterministically, with action masks. Both yield the same metrics (SPEC 5)."),
        (f"- **Numbers**: {p['statistics']}. JCT and queuing times over completed jobs, in "
        "seconds; makespan in hours; utilisation and usage as fractions of GPU time."),
        (f"- **x Baseline**: {p['ratio_to_baseline']}; the Baseline is `{p['baseline']}` (the "
        "paper's Baseline: FIFO, no loaning, no elastic scaling). Below 1 is better for times."),
        (f"- **Rank**: by mean `{p['rank_by']}` ({order}). † marks an entrant with unfinished jobs "
        "in some episode (its averages cover fewer jobs and are not comparable). Decision time is "
        "wall-clock and machine dependent."),
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


def render_markdown(agg: Mapping[str, Any]) -> str:
    out = [protocol_header(agg), ""]
    rank_by = agg["protocol"]["rank_by"]
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
            cols.insert(0, (rank_by, rank_by, "n"))
        head = ["rank", "entrant"]
        for k, title, _ in cols:
            head.append(title)
            if k == rank_by:
                head.append("x Baseline")
        out.append("| " + " | ".join(head) + " |")
        out.append("|" + "|".join(["---:"] + [":---"] + ["---:"] * (len(head) - 2)) + "|")
        for en in data["entrants"]:
            cells = [str(en["rank"]), _label(en)]
            for k, _, fmt in cols:
                cells.append(fmt_stat(en["metrics"][k], fmt))
                if k == rank_by:
                    cells.append(_ratio(en["ratio_to_baseline"][k]))
            out.append("| " + " | ".join(cells) + " |")
        notes = [(en["policy"], n) for en in data["entrants"] for n in en["notes"]]
        if notes:
            out.append("")
            for name, n in notes:
                out.append(f"- {name}: {n}")
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
    cols = list(CONSOLE_COLUMNS)
    if rank_by not in {c[0] for c in cols}:
        cols.insert(0, (rank_by, rank_by, "n"))
    blocks = []
    for scen, data in agg["scenarios"].items():
        head = ["#", "entrant"]
        for k, title, _ in cols:
            head.append(title)
            if k == rank_by:
                head.append("xBase")
        body = []
        for en in data["entrants"]:
            r = [str(en["rank"]), _label(en)]
            for k, _, fmt in cols:
                r.append(fmt_stat(en["metrics"][k], fmt))
                if k == rank_by:
                    r.append(_ratio(en["ratio_to_baseline"][k]))
            body.append(r)
        widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(head)]
        lines = [f"{scen} ({len(agg['protocol']['seeds'])} seeds, mean ± std; rank by {rank_by})"]
        lines.append("  ".join(h.ljust(w) if i == 1 else h.rjust(w) for i, (h, w) in enumerate(zip(head, widths))))
        lines.append("  ".join("-" * w for w in widths))
        for b in body:
            lines.append("  ".join(c.ljust(w) if i == 1 else c.rjust(w) for i, (c, w) in enumerate(zip(b, widths))))
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
    md.write_text(render_markdown(agg) + "\n", encoding="utf-8")
    js.write_text(json.dumps(agg, indent=1, allow_nan=False, default=_json_default) + "\n", encoding="utf-8")
    return md, js, agg


def _json_default(o: Any) -> Any:  # pragma: no cover - numpy scalars, if any slip in
    try:
        return o.item()
    except AttributeError:
        return str(o)


__all__ = ["WALL_METRICS", "aggregate", "render_console", "render_markdown", "stats", "write_report"]
