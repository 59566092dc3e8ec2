"""Leaderboard plots (PNG, matplotlib with the Agg backend, imported lazily).

Per scenario:

* ``usage_SCENARIO.png``: hourly combined cluster usage per entrant on the suite's first seed,
  like the paper's Figure 9 (section 7.2: "hourly combined cluster usage for 48 hours");
* ``jct_cdf_SCENARIO.png``: the CDF of job completion times per entrant, all seeds pooled;
* ``queue_SCENARIO.png``: average and p95 queuing time per entrant (mean over seeds, bars with
  the sample standard deviation).

For the suite:

* ``performance_profile.png``: rliable's performance profile (score distribution): per entrant,
  the fraction of episodes (seeds x scenarios) whose normalised score ``jct_lower_bound /
  avg_jct`` exceeds tau, with a 95% stratified bootstrap band (the band needs rliable, the
  ``stats`` extra; without it the curves are drawn alone). A curve above another is better over
  the whole distribution of episodes, not only on average.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from aryl_gym.leaderboard.report import episode_score, stats
from aryl_gym.leaderboard.runner import Key, slug
from aryl_gym.leaderboard.suites import Suite
from aryl_gym.stats import available, performance_profile, score_distribution


def _pyplot() -> Any:
    try:
        # an optional dependency: its absence is handled here
        import matplotlib
    except ImportError:
        raise ImportError(
            "plots need matplotlib: pip install 'aryl-gym[plots]' (or pass --no-plots)"
        ) from None
    matplotlib.use("Agg", force=True)
    # matplotlib: imported when plotting
    import matplotlib.pyplot as plt

    return plt


def _entrants(suite: Suite, rows: Sequence[Mapping[str, Any]], scen: str) -> list[str]:
    present = {str(r["policy"]) for r in rows if r["scenario"] == scen}
    return [e.name for e in suite.entrants if e.name in present]


def _style(i: int, name: str, baseline: str) -> dict[str, Any]:
    ls = ["-", "--", "-.", ":"][(i // 10) % 4]
    return {"lw": 2.2 if name == baseline else 1.4, "ls": ls}


def make_plots(
    out_dir: str | Path,
    suite: Suite,
    rows: Sequence[Mapping[str, Any]],
    series: Mapping[Key, Mapping[str, Any]],
) -> list[Path]:
    """Write the plots of every scenario under ``OUT/plots``; return the files written."""
    plt = _pyplot()
    pdir = Path(out_dir) / "plots"
    pdir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for scen in suite.scenarios:
        names = _entrants(suite, rows, scen)
        if not names:
            continue
        tag = slug(scen)
        seed0 = suite.seeds[0]

        # -- usage over time (paper Figure 9) -------------------------------------------------
        fig, ax = plt.subplots(figsize=(9, 4.2))
        drawn = 0
        for i, name in enumerate(names):
            s = series.get((suite.name, scen, seed0, name))
            if not s or not s.get("combined_usage_hourly"):
                continue
            y = 100.0 * np.asarray(s["combined_usage_hourly"], dtype=float)
            ax.plot(np.arange(len(y)), y, label=name, **_style(i, name, suite.baseline))
            drawn += 1
        ax.set_xlabel("time (hours)")
        ax.set_ylabel("combined cluster usage (%)")
        ax.set_ylim(0, 100)
        ax.set_title(f"{scen}, seed {seed0}: hourly combined usage (training + loaned + inference GPUs)")
        ax.grid(alpha=0.3)
        if drawn:
            ax.legend(fontsize=8, ncol=2)
        written.append(_save(fig, plt, pdir / f"usage_{tag}.png"))

        # -- JCT CDF ---------------------------------------------------------------------------
        fig, ax = plt.subplots(figsize=(7, 4.2))
        drawn = 0
        for i, name in enumerate(names):
            jcts: list[float] = []
            for seed in suite.seeds:
                s = series.get((suite.name, scen, seed, name))
                if s:
                    jcts.extend(float(x) for x in s.get("jcts", []))
            if not jcts:
                continue
            x = np.sort(np.asarray(jcts)) / 3600.0
            y = np.arange(1, len(x) + 1) / len(x)
            ax.step(x, y, where="post", label=name, **_style(i, name, suite.baseline))
            drawn += 1
        ax.set_xscale("log")
        ax.set_xlabel("job completion time (hours, log scale)")
        ax.set_ylabel("fraction of jobs")
        ax.set_ylim(0, 1.0)
        ax.set_title(f"{scen}: JCT CDF ({len(suite.seeds)} seeds pooled)")
        ax.grid(alpha=0.3, which="both")
        if drawn:
            ax.legend(fontsize=8, loc="lower right")
        written.append(_save(fig, plt, pdir / f"jct_cdf_{tag}.png"))

        # -- queuing time bars -------------------------------------------------------------------
        fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(names) + 2), 4.2))
        xs = np.arange(len(names))
        width = 0.38
        for j, (key, label) in enumerate((("avg_queue_time", "average"), ("p95_queue_time", "p95"))):
            means, stds = [], []
            for name in names:
                st = stats([r[key] for r in rows if r["scenario"] == scen and r["policy"] == name])
                means.append((st["mean"] or 0.0) / 60.0)
                stds.append((st["std"] or 0.0) / 60.0)
            low = [min(sd, m) for sd, m in zip(stds, means)]  # bars never dip below zero
            ax.bar(xs + (j - 0.5) * width, means, width, yerr=[low, stds], capsize=3, label=label)
        ax.set_xticks(xs)
        ax.set_xticklabels(names, rotation=30, ha="right")
        ax.set_ylabel("queuing time (minutes)")
        ax.set_title(f"{scen}: queuing time (mean ± std over seeds)")
        ax.grid(alpha=0.3, axis="y")
        ax.legend(fontsize=8)
        written.append(_save(fig, plt, pdir / f"queue_{tag}.png"))
    prof = performance_profile_plot(pdir, suite, rows, plt)
    if prof is not None:
        written.append(prof)
    return written


def profile_scores(suite: Suite, rows: Sequence[Mapping[str, Any]]) -> dict[str, np.ndarray]:
    """Per entrant, its normalised scores as a ``(seeds, scenarios)`` matrix over the seeds it
    finished on every scenario (entrants missing a scenario are left out)."""
    per: dict[str, dict[tuple[str, int], float]] = {}
    for r in rows:
        sc = episode_score(r)
        if sc is not None:
            per.setdefault(str(r["policy"]), {})[(str(r["scenario"]), int(r["seed"]))] = sc
    out: dict[str, np.ndarray] = {}
    for e in suite.entrants:
        got = per.get(e.name, {})
        seeds = [s for s in suite.seeds if all((sc, s) in got for sc in suite.scenarios)]
        if seeds:
            out[e.name] = np.array([[got[(sc, s)] for sc in suite.scenarios] for s in seeds])
    return out


def performance_profile_plot(
    pdir: Path, suite: Suite, rows: Sequence[Mapping[str, Any]], plt: Any
) -> Path | None:
    """``performance_profile.png`` (see the module docstring), or None without scores."""
    scores = profile_scores(suite, rows)
    if not scores:
        return None
    allv = np.concatenate([m.ravel() for m in scores.values()])
    lo, hi = float(allv.min()), float(allv.max())
    pad = max(0.02 * (hi - lo), 1e-3)
    taus = np.linspace(lo - pad, hi + pad, 121)
    if available():
        prof, bands = performance_profile(scores, taus)
    else:
        prof = {k: score_distribution(m, taus) for k, m in scores.items()}
        bands = {}
    fig, ax = plt.subplots(figsize=(8, 4.6))
    for i, name in enumerate(scores):
        (line,) = ax.plot(taus, prof[name], label=name, **_style(i, name, suite.baseline))
        if name in bands:
            ax.fill_between(taus, bands[name][0], bands[name][1], color=line.get_color(), alpha=0.15, lw=0)
    n = {m.shape[0] * m.shape[1] for m in scores.values()}
    ax.set_xlabel("normalised score τ  (JCT lower bound / average JCT; higher is better)")
    ax.set_ylabel("fraction of episodes with score > τ")
    ax.set_ylim(0, 1.02)
    ax.set_title(
        f"{suite.name}: performance profile over {', '.join(suite.scenarios)} "
        f"({'/'.join(str(x) for x in sorted(n))} episodes per entrant"
        + ("; 95% stratified bootstrap bands)" if bands else ")"),
        fontsize=10,
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, plt, pdir / "performance_profile.png")


def _save(fig: Any, plt: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
