"""Sweeps: one knob at a time, the table and the mechanism at each value, the plot."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from aryl_gym.config import (
    ScenarioConfig,
)
from aryl_gym.fileio import atomic_savefig
from aryl_gym.reproduce.claims import Mechanism, RowResult, RowSpec, fmt_value
from aryl_gym.reproduce.scales import apply_override

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
        import matplotlib  # the plots extra: only to draw, and optional

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # as above
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
    if axes[0][-1].get_legend_handles_labels()[0]:  # was: matplotlib's UserWarning when no row has a value
        axes[0][-1].legend(fontsize=7, loc="best")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_savefig(fig, path, dpi=110)  # a killed run leaves no cut PNG (was: written in place)
    plt.close(fig)
    return path


