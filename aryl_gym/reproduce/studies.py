"""The prediction-error study (paper 7.5) and the heterogeneous-training study (paper 7.2)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from aryl_gym.agents import policy_names
from aryl_gym.config import (
    ScenarioConfig,
)
from aryl_gym.episodes import AGENT_PREFIX, EpisodeTask, policy_task
from aryl_gym.metrics import EpisodeResult
from aryl_gym.reproduce.claims import _s
from aryl_gym.reproduce.scales import apply_override
from aryl_gym.stats import RatioStat, paired_bootstrap_ratio, paired_ratio_ci  # noqa: F401 - the statistics, in aryl_gym.stats

# ----------------------------------------------------------------------------------------------
# Prediction-error study (paper 7.5)
# ----------------------------------------------------------------------------------------------

PREDICTION_SIGMAS: tuple[float, ...] = (0.0, 0.25, 0.5, 1.0)
PREDICTION_POLICIES: tuple[str, ...] = ("aryl", "sjf", "afs", f"{AGENT_PREFIX}ppo-testbed")
PREDICTION_METRICS: tuple[str, ...] = ("avg_jct", "p95_jct", "avg_queue_time")


def check_policies(names: Sequence[str]) -> None:
    """Every name is a registered policy or ``agent:SOURCE``; ValueError naming the first that is not."""
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
) -> list[EpisodeTask]:
    """Every policy x seed at each value of one config knob; role ``f"{label}={value}"``."""
    tasks = []
    for v in values:
        c = apply_override(cfg, key, float(v))
        role = f"{label}={v}"
        tasks += [policy_task(c, p, s, role, role) for p in policies for s in seeds]
    return tasks


def prediction_tasks(
    cfg: ScenarioConfig, policies: Sequence[str], sigmas: Sequence[float], seeds: Sequence[int]
) -> list[EpisodeTask]:
    return knob_tasks(cfg, "workload.prediction_sigma", "sigma", sigmas, policies, seeds)


def prediction_table(
    results: Mapping[EpisodeTask, EpisodeResult], policies: Sequence[str], sigmas: Sequence[float],
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
) -> list[EpisodeTask]:
    """``policies`` (off: ``aryl``; on: ``aryl-hetero``) at each ``workload.hetero_fraction``, on
    the same episodes per seed (the fraction only marks jobs; the trace is otherwise the same)."""
    return knob_tasks(cfg, "workload.hetero_fraction", "hetero", fractions, policies, seeds)


def hetero_table(
    results: Mapping[EpisodeTask, EpisodeResult], fractions: Sequence[float], seeds: Sequence[int],
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
