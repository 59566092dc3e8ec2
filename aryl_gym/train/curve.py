"""The learning curve of a run as a picture: ``learning_curve.png`` from its ``eval.csv``.

    python -m aryl_gym.train.curve runs/RUN [--out curve.png] [--log]

The agent's mean avg JCT on the evaluation seeds against environment steps, with one horizontal
line per reference policy evaluated natively on the same seeds (the ``*_avg_jct`` columns:
Aryl, SJF, Baseline, ...), and the step-0 point marked as the warm start when the run had one.
References more than twice the agent's worst value are named in the legend with their value
instead of drawn (else the curve would be a flat line at the bottom); ``--log`` draws them all.
The training runner draws it at the end of every run that evaluated (matplotlib, Agg backend;
skipped with a note when matplotlib is missing).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
from collections.abc import Sequence
from pathlib import Path

_LABELS = {"baseline": "Baseline (YARN FIFO)", "fifo": "strict FIFO (fifo)"}


def read_curve(path: str | Path) -> tuple[list[float], list[float], dict[str, float]]:
    """(steps, agent avg JCT, {reference: avg JCT}) from an ``eval.csv``."""
    path = Path(path)
    if path.is_dir():
        path = path / "eval.csv"
    if not path.exists():
        raise FileNotFoundError(f"{path}: no eval.csv (the run evaluated nothing: eval.freq 0?)")
    steps: list[float] = []
    jct: list[float] = []
    refs: dict[str, float] = {}
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            try:
                steps.append(float(row["timesteps"]))
                jct.append(float(row["avg_jct"]))
            except (KeyError, ValueError) as exc:
                raise ValueError(f"{path}: a row without numeric timesteps/avg_jct: {row}") from exc
            for k, v in row.items():
                if k and k.endswith("_avg_jct") and v not in ("", None):
                    refs[k[: -len("_avg_jct")]] = float(v)
    if not steps:
        raise ValueError(f"{path}: no evaluation rows yet")
    return steps, jct, refs


def read_unfinished(path: str | Path) -> list[bool]:
    """Per ``eval.csv`` row: did the evaluation leave jobs unfinished (an episode ended by the
    stall or thrash rule)? Its avg JCT then covers only the finished jobs and flatters the
    agent. Rows without a ``jobs_unfinished`` column count as finished."""
    path = Path(path)
    if path.is_dir():
        path = path / "eval.csv"
    out: list[bool] = []
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            v = row.get("jobs_unfinished")
            try:
                out.append(v not in ("", None) and float(v) > 0)
            except ValueError:
                out.append(False)
    return out


def read_dagger_steps(path: str | Path) -> set[float]:
    """The step counts of the DAgger rounds' evaluations (``summary.json`` beside the
    ``eval.csv``, key ``dagger``); empty when the run had no DAgger phase or no summary yet."""

    path = Path(path)
    folder = path if path.is_dir() else path.parent
    try:
        summary = json.loads((folder / "summary.json").read_text())
    except (OSError, ValueError):
        return set()
    rows = (summary.get("dagger") or []) if isinstance(summary, dict) else []
    return {float(r["timesteps"]) for r in rows if isinstance(r, dict) and "timesteps" in r}


def plot_learning_curve(
    run: str | Path, out: str | Path | None = None, log: bool = False, title: str | None = None
) -> Path:
    """Draw the curve of run folder (or ``eval.csv``) ``run``; returns the PNG's path
    (default: ``learning_curve.png`` beside the ``eval.csv``)."""
    # matplotlib: imported when plotting
    import matplotlib

    matplotlib.use("Agg", force=True)
    # matplotlib: imported when plotting
    import matplotlib.pyplot as plt

    run = Path(run)
    csv_path = run / "eval.csv" if run.is_dir() else run
    steps, jct, refs = read_curve(csv_path)
    warm = (csv_path.parent / "warm_start.zip").exists()
    fig, ax = plt.subplots(figsize=(7, 4.2))
    unfinished = read_unfinished(csv_path)
    dagger = read_dagger_steps(csv_path)
    rl = [i for i, x in enumerate(steps) if x not in dagger]
    ax.plot([steps[i] for i in rl], [jct[i] for i in rl], "o-", color="black", lw=1.8, ms=3.5,
            label="agent", zorder=3)
    dg = [i for i, x in enumerate(steps) if x in dagger]
    if dg:
        # the DAgger phase starts from the best RL evaluation that finished every job
        ok = [i for i in rl if not (i < len(unfinished) and unfinished[i])]
        start = min(ok, key=lambda i: jct[i]) if ok else None
        xs = ([steps[start]] if start is not None else []) + [steps[i] for i in dg]
        ys = ([jct[start]] if start is not None else []) + [jct[i] for i in dg]
        ax.plot(xs, ys, ":", color="tab:olive", lw=1.5, zorder=3)
        ax.plot([steps[i] for i in dg], [jct[i] for i in dg], "D", color="tab:olive", ms=6,
                label="DAgger round (from the best RL model)", zorder=4)
    if warm and steps[0] == 0:
        ax.plot([0], [jct[0]], "s", color="tab:orange", ms=8, label="warm start (step 0)", zorder=4)
    bad = [i for i, b in enumerate(unfinished) if b and i < len(steps)]
    if bad:
        ax.plot([steps[i] for i in bad], [jct[i] for i in bad], "x", color="red", ms=9, mew=2,
                label="jobs left unfinished (avg over finished jobs only)", zorder=5)
    colors = iter(["tab:blue", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:gray"])
    # a reference far above the agent (Baseline's 5x) would flatten the curve: unless log scale,
    # such lines are listed in the legend with their value and the axis zooms on the rest
    # an evaluation or reference with no finished job has no avg JCT (NaN): it sets no axis
    # limit (was: "Axis limits cannot be NaN or Inf", which ended the training command)
    finite = [v for v in jct if math.isfinite(v)]
    ceiling = float("inf") if log or not finite else 2.0 * max(finite)
    shown = list(finite)
    for name, v in sorted(refs.items(), key=lambda kv: kv[1]):
        label = _LABELS.get(name, name.replace("_", "-"))
        color = next(colors, "gray")
        if not math.isfinite(v):
            ax.plot([], [], ls="--", lw=1.2, color=color, label=f"{label}: no value (no finished job)")
            continue
        if v > ceiling:
            ax.plot([], [], ls="--", lw=1.2, color=color, label=f"{label}: {v:,.0f} s (off the chart)")
            continue
        shown.append(v)
        ax.axhline(v, ls="--", lw=1.2, color=color, label=label)
    if log:
        ax.set_yscale("log")
    elif shown:
        lo, hi = min(shown), max(shown)
        pad = 0.08 * (hi - lo) if hi > lo else 0.05 * hi
        ax.set_ylim(lo - pad, hi + pad)
    ax.set_xlabel("environment steps")
    ax.set_ylabel("mean avg JCT on the evaluation seeds (s)")
    ax.set_title(title or csv_path.parent.name, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    dest = Path(out) if out is not None else csv_path.parent / "learning_curve.png"
    fig.savefig(dest, dpi=120)
    plt.close(fig)
    return dest


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m aryl_gym.train.curve", description=__doc__.splitlines()[0])
    p.add_argument("run", help="a run folder or its eval.csv")
    p.add_argument("--out", default=None, help="PNG path (default: RUN/learning_curve.png)")
    p.add_argument("--log", action="store_true", help="log scale for JCT (far-apart reference lines)")
    p.add_argument("--title", default=None)
    a = p.parse_args(argv)
    try:
        print(plot_learning_curve(a.run, a.out, a.log, a.title))
    except (FileNotFoundError, ValueError) as exc:
        raise SystemExit(f"error: {exc}") from None
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
