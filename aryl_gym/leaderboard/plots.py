"""Leaderboard plots (PNG, matplotlib with the Agg backend, imported lazily).

Per scenario:

* ``usage_SCENARIO.png``: hourly combined cluster usage per entrant on the suite's first seed
  (an entrant without it: on the first seed it has, said in the legend), like the paper's
  Figure 9 (section 7.2: "hourly combined cluster usage for 48 hours");
* ``jct_cdf_SCENARIO.png``: the CDF of job completion times per entrant, its seeds pooled (the
  legend says how many when fewer than the suite's);
* ``queue_SCENARIO.png``: average and p95 queuing time per entrant (mean over seeds, bars with
  the sample standard deviation; "no data" instead of a bar without values).

Every plot names the entrants it does not draw, and why (:func:`_missing_line`).

For the suite:

* ``performance_profile.png``: rliable's performance profile (score distribution): per entrant,
  the fraction of episodes (seeds x scenarios) whose normalised score ``jct_lower_bound /
  avg_jct`` exceeds tau, with a 95% stratified bootstrap band (the band needs rliable, the
  ``stats`` extra; without it the curves are drawn alone). A curve above another is better over
  the whole distribution of episodes, not only on average. Drawn by rliable's
  ``plot_utils.plot_performance_profiles``.
* ``interval_estimates.png`` (beside it): rliable's ``plot_utils.plot_interval_estimates`` of
  the leaderboard's score IQM, optimality gap and P(better than aryl), each entrant's point
  estimate with its 95% stratified bootstrap interval, over all scenarios (or the one scenario);
  the numbers are those of ``leaderboard.json`` (needs rliable).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from aryl_gym.fileio import atomic_savefig
from aryl_gym.leaderboard.report import episode_score, stats
from aryl_gym.leaderboard.results import Key
from aryl_gym.leaderboard.suites import Suite
from aryl_gym.provenance import slug
from aryl_gym.stats import available, performance_profile, score_distribution

#: the names of the files :func:`make_plots` writes in ``OUT/plots`` (and only those): the
#: per-scenario plots (a scenario's tag is :func:`aryl_gym.provenance.slug`'s alphabet) and the
#: suite's two
PLOT_NAME_RE = re.compile(
    r"^(?:(?:usage|jct_cdf|queue)_[A-Za-z0-9_.+-]+|performance_profile|interval_estimates)\.png$")


def remove_stale_plots(out_dir: str | Path, keep: Iterable[Path] = ()) -> list[Path]:
    """Remove the leaderboard's own plot files in ``OUT/plots`` (names of :data:`PLOT_NAME_RE`)
    that this run did not write (``keep``): plots of an earlier run beside a new table would not
    match it. Nothing else in the folder is touched; return the files removed."""
    pdir = Path(out_dir) / "plots"
    if not pdir.is_dir():
        return []
    kept = {p.name for p in keep}
    removed: list[Path] = []
    for p in sorted(pdir.iterdir()):
        if p.name in kept or not PLOT_NAME_RE.match(p.name) or p.is_dir():
            continue
        try:
            p.unlink()
        except FileNotFoundError:
            continue
        removed.append(p)
    return removed


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
    agg: Mapping[str, Any] | None = None,
) -> list[Path]:
    """Write the plots of every scenario under ``OUT/plots``; return the files written. With
    ``agg`` (the ``leaderboard.json`` structure) the interval estimates are drawn too."""
    plt = _pyplot()
    pdir = Path(out_dir) / "plots"
    pdir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for scen in suite.scenarios:
        names = _entrants(suite, rows, scen)
        if not names:
            continue
        tag = slug(scen)
        # entrants of the suite without a row on this scenario: named in every plot of it
        absent = [e.name for e in suite.entrants if e.name not in names]
        written.append(_save(usage_figure(plt, suite, scen, names, series, absent), plt,
                             pdir / f"usage_{tag}.png"))
        written.append(_save(jct_cdf_figure(plt, suite, scen, names, series, absent, rows), plt,
                             pdir / f"jct_cdf_{tag}.png"))
        written.append(_save(queue_figure(plt, suite, scen, names, rows, absent), plt,
                             pdir / f"queue_{tag}.png"))
    prof = performance_profile_plot(pdir, suite, rows, plt)
    if prof is not None:
        written.append(prof)
    if agg is not None:
        est = interval_estimates_plot(pdir, suite, agg, plt)
        if est is not None:
            written.append(est)
    return written


def _missing_line(parts: Sequence[tuple[str, Sequence[str]]]) -> str:
    """``"\\nnot drawn: no usage series: a, b; no results: c"`` (empty when nothing is missing):
    the second line of a plot's title, so an entrant never drops out of a plot without a word."""
    said = [f"{why}: {', '.join(names)}" for why, names in parts if names]
    return ("\nnot drawn: " + "; ".join(said)) if said else ""


def usage_figure(
    plt: Any,
    suite: Suite,
    scen: str,
    names: Sequence[str],
    series: Mapping[Key, Mapping[str, Any]],
    absent: Sequence[str] = (),
) -> Any:
    """``usage_SCENARIO.png`` (paper Figure 9): each entrant on the suite's first seed, or, when
    it has no usage series there, on the first seed it has one for (said in its legend label);
    the entrants without any are named in the title (was: left out without a word)."""
    seed0 = suite.seeds[0]
    fig, ax = plt.subplots(figsize=(9, 4.2))
    drawn, elsewhere, none = 0, False, []
    for i, name in enumerate(names):
        seed = next((s for s in suite.seeds
                     if (series.get((suite.name, scen, s, name)) or {}).get("combined_usage_hourly")), None)
        if seed is None:
            none.append(name)
            continue
        y = 100.0 * np.asarray(series[(suite.name, scen, seed, name)]["combined_usage_hourly"], dtype=float)
        label = name if seed == seed0 else f"{name} (seed {seed})"
        elsewhere |= seed != seed0
        ax.plot(np.arange(len(y)), y, label=label, **_style(i, name, suite.baseline))
        drawn += 1
    ax.set_xlabel("time (hours)")
    ax.set_ylabel("combined cluster usage (%)")
    ax.set_ylim(0, 100)
    where = f"seed {seed0}" + (" (another seed where the legend says)" if elsewhere else "")
    ax.set_title(f"{scen}, {where}: hourly combined usage (training + loaned + inference GPUs)"
                 + _missing_line([("no usage series", none), ("no results", absent)]), fontsize=10)
    ax.grid(alpha=0.3)
    if drawn:
        ax.legend(fontsize=8, ncol=2)
    return fig


def jct_cdf_figure(
    plt: Any,
    suite: Suite,
    scen: str,
    names: Sequence[str],
    series: Mapping[Key, Mapping[str, Any]],
    absent: Sequence[str] = (),
    rows: Sequence[Mapping[str, Any]] = (),
) -> Any:
    """``jct_cdf_SCENARIO.png``: per entrant the CDF of its JCTs pooled over the seeds it has
    JCTs for; when an entrant has fewer than the suite's seeds its legend label says how many
    (was: a title claiming every seed was pooled), and entrants without JCTs are named. The
    episodes' ``jcts`` hold finished jobs only: an entrant's jobs left unfinished on those seeds
    (``jobs_unfinished`` of ``rows``) count in the denominator, so its curve stops below 1, and
    its legend says how many (was: the CDF of the finished jobs alone, reaching 1, as if every
    job had finished)."""
    n_all = len(suite.seeds)
    unfinished: dict[tuple[str, Any], int] = {}
    for r in rows:
        if r.get("scenario") == scen and r.get("jobs_unfinished"):
            unfinished[(str(r.get("policy")), r.get("seed"))] = int(r["jobs_unfinished"])
    fig, ax = plt.subplots(figsize=(7, 4.2))
    drawn, partial, none = 0, False, []
    for i, name in enumerate(names):
        jcts: list[float] = []
        used, left = 0, 0
        for seed in suite.seeds:
            got = [float(x) for x in (series.get((suite.name, scen, seed, name)) or {}).get("jcts") or []]
            used += bool(got)
            jcts.extend(got)
            if got:
                left += unfinished.get((name, seed), 0)
        if not jcts:
            none.append(name)
            continue
        x = np.sort(np.asarray(jcts)) / 3600.0
        y = np.arange(1, len(x) + 1) / (len(x) + left)
        label = name if used == n_all else f"{name} ({used} of {n_all} seeds)"
        if left:
            label += f" ({left} unfinished: stops at {len(x) / (len(x) + left):.0%})"
        partial |= used != n_all
        ax.step(x, y, where="post", label=label, **_style(i, name, suite.baseline))
        drawn += 1
    ax.set_xscale("log")
    ax.set_xlabel("job completion time (hours, log scale)")
    ax.set_ylabel("fraction of jobs")
    ax.set_ylim(0, 1.0)
    pooled = (f"the seeds each entrant has pooled, of {n_all}: counts in the legend" if partial
              else f"all {n_all} seed{'s' if n_all != 1 else ''} pooled")
    ax.set_title(f"{scen}: JCT CDF ({pooled})"
                 + _missing_line([("no JCTs", none), ("no results", absent)]), fontsize=10)
    ax.grid(alpha=0.3, which="both")
    if drawn:
        ax.legend(fontsize=8, loc="lower right")
    return fig


#: the bars of ``queue_SCENARIO.png``: (row key, legend label)
QUEUE_BARS: tuple[tuple[str, str], ...] = (("avg_queue_time", "average"), ("p95_queue_time", "p95"))


def queue_figure(
    plt: Any,
    suite: Suite,
    scen: str,
    names: Sequence[str],
    rows: Sequence[Mapping[str, Any]],
    absent: Sequence[str] = (),
) -> Any:
    """``queue_SCENARIO.png``: per entrant the mean (bar) and sample std (error bar) over seeds of
    its average and p95 queuing time. A value no seed has gets no bar but a "no data" mark (was:
    a 0-minute bar, a perfect score); a bar over fewer seeds than the entrant has rows says
    ``n=k``, and an entrant with fewer rows than the suite's seeds says so under its name."""
    n_all = len(suite.seeds)
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(names) + 2), 4.2))
    xs = np.arange(len(names))
    width = 0.38
    n_rows = {name: sum(1 for r in rows if r["scenario"] == scen and r["policy"] == name) for name in names}
    for j, (key, label) in enumerate(QUEUE_BARS):
        at, means, stds, counts = [], [], [], []
        for x, name in zip(xs, names):
            st = stats([r[key] for r in rows if r["scenario"] == scen and r["policy"] == name])
            pos = float(x) + (j - 0.5) * width
            if st["mean"] is None:
                ax.text(pos, 0.0, "no data", rotation=90, ha="center", va="bottom", fontsize=7, color="0.35")
                continue
            at.append(pos)
            means.append(st["mean"] / 60.0)
            stds.append(st["std"] / 60.0)
            counts.append((st["n"], n_rows[name]))
        low = [min(sd, m) for sd, m in zip(stds, means)]  # bars never dip below zero
        ax.bar(at, means, width, yerr=[low, stds], capsize=3, label=label, color=f"C{j}")
        for pos, m, sd, (n, have) in zip(at, means, stds, counts):
            if n < have:
                ax.annotate(f"n={n}", (pos, m + sd), ha="center", va="bottom", fontsize=7)
    # the limits every bar drawn would give (matplotlib's 5% margins), so that a "no data" mark
    # at either end stays inside the axes
    pad = 0.05 * (len(names) - 1 + 2 * width)
    ax.set_xlim(-width - pad, len(names) - 1 + width + pad)
    ax.set_xticks(xs)
    ax.set_xticklabels([name if n_rows[name] == n_all else f"{name} ({n_rows[name]} of {n_all} seeds)"
                        for name in names], rotation=30, ha="right")
    ax.set_ylabel("queuing time (minutes)")
    ax.set_title(f"{scen}: queuing time (mean ± std over seeds)"
                 + _missing_line([("no results", absent)]), fontsize=10)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8)
    return fig


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
    """``performance_profile.png`` (see the module docstring), or None without scores: drawn by
    rliable's ``plot_utils.plot_performance_profiles``; without rliable, the curves alone."""
    scores = profile_scores(suite, rows)
    if not scores:
        return None
    allv = np.concatenate([m.ravel() for m in scores.values()])
    lo, hi = float(allv.min()), float(allv.max())
    pad = max(0.02 * (hi - lo), 1e-3)
    taus = np.linspace(lo - pad, hi + pad, 121)
    fig, ax = plt.subplots(figsize=(8, 4.6))
    xlabel = "normalised score τ  (JCT lower bound / average JCT; higher is better)"
    ylabel = "fraction of episodes with score > τ"
    styles = {name: _style(i, name, suite.baseline) for i, name in enumerate(scores)}
    if available():
        # rliable.plot_utils imports seaborn (a dependency of rliable): only when plotting
        from rliable import plot_utils

        prof, bands = performance_profile(scores, taus)
        plot_utils.plot_performance_profiles(
            prof, taus, performance_profile_cis=bands, ax=ax, xlabel=xlabel, ylabel=ylabel,
            colors=_colors(suite),
            linestyles={k: st["ls"] for k, st in styles.items()}, labelsize="medium",
            ticklabelsize="medium", wrect=5, hrect=5,
        )
        # rliable draws every curve with one width: the Baseline's is drawn thicker here
        for line in ax.get_lines():
            if line.get_label() in styles:
                line.set_linewidth(styles[str(line.get_label())]["lw"])
    else:
        bands = {}
        for name, m in scores.items():
            ax.plot(taus, score_distribution(m, taus), label=name, **styles[name])
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    # episodes per entrant: said per entrant in the legend when they differ (was: "8/10
    # episodes per entrant", without saying whose), and the entrants left out named
    n = {name: m.shape[0] * m.shape[1] for name, m in scores.items()}
    if len(set(n.values())) > 1:
        for line in ax.get_lines():
            if line.get_label() in n:
                line.set_label(f"{line.get_label()} ({n[str(line.get_label())]} episodes)")
        count = "episodes per entrant in the legend"
    else:
        count = f"{next(iter(n.values()))} episodes per entrant"
    have = {str(r["policy"]) for r in rows}
    ax.set_ylim(0, 1.02)
    ax.set_title(
        f"{suite.name}: performance profile over {', '.join(suite.scenarios)} ({count}"
        + ("; 95% stratified bootstrap bands)" if bands else ")")
        + _missing_line([
            ("no seed with a score on every scenario",
             [e.name for e in suite.entrants if e.name in have and e.name not in scores]),
            ("no results", [e.name for e in suite.entrants if e.name not in have]),
        ]),
        fontsize=10,
    )
    ax.legend(fontsize=8)
    return _save(fig, plt, pdir / "performance_profile.png")


def _colors(suite: Suite) -> dict[str, Any]:
    """One colour per entrant, in the suite's order (rliable's default palette), so an entrant
    has the same colour in every rliable plot."""
    import seaborn as sns  # a dependency of rliable: only with the stats extra

    names = [e.name for e in suite.entrants]
    return dict(zip(names, sns.color_palette("colorblind", n_colors=len(names))))


#: the panels of ``interval_estimates.png``: (leaderboard.json key, title)
INTERVAL_PANELS: tuple[tuple[str, str], ...] = (
    ("score_iqm", "score IQM (higher is better)"),
    ("optimality_gap", "optimality gap (lower is better)"),
    ("p_improvement", "P(better than {ref})"),
)


def interval_entrants(agg: Mapping[str, Any]) -> tuple[str, list[Mapping[str, Any]]]:
    """(what they cover, entries) of the interval plot: the *All scenarios* comparison when the
    suite has several scenarios, else the one scenario's entrants."""
    if agg.get("overall"):
        return "all scenarios", list(agg["overall"]["entrants"])
    scen = next(iter(agg["scenarios"]), None)
    if scen is None:
        return "", []
    return str(scen), list(agg["scenarios"][scen]["entrants"])


def interval_estimates_plot(pdir: Path, suite: Suite, agg: Mapping[str, Any], plt: Any) -> Path | None:
    """``interval_estimates.png``: rliable's ``plot_utils.plot_interval_estimates`` of the
    leaderboard's score IQM, optimality gap and P(better than aryl), each with its 95% interval
    (the numbers of ``leaderboard.json``). None without intervals (no rliable, or one seed)."""
    if not available() or not agg["protocol"].get("intervals"):
        return None
    ref = agg["protocol"].get("reference")
    panels = [(k, t.format(ref=ref)) for k, t in INTERVAL_PANELS if k != "p_improvement" or ref]
    what, entries = interval_entrants(agg)
    points: dict[str, np.ndarray] = {}
    cis: dict[str, np.ndarray] = {}
    # the entrants left out, named under the plot (was: left out without a word)
    one_seed: list[str] = []
    no_value: list[str] = []
    for en in entries:
        got = [en.get(k) for k, _ in panels]
        vals: list[Mapping[str, Any]] = [v for v in got if v is not None and None not in v["ci"]]
        if len(vals) < len(panels):
            # no interval: one seed, or no score on some seed (or scenario)
            have = [v for v in got if v is not None]
            if len(have) == len(got) and min(int(v.get("seeds") or 0) for v in have) < 2:
                one_seed.append(str(en["policy"]))
            else:
                no_value.append(str(en["policy"]))
            continue
        points[str(en["policy"])] = np.array([float(v["value"]) for v in vals])
        cis[str(en["policy"])] = np.array([[float(c) for c in v["ci"]] for v in vals]).T  # (2, metrics)
    if not points:
        return None
    listed = {str(en["policy"]) for en in entries}
    missing = _missing_line([
        ("no interval (one seed)", one_seed),
        ("no interval (a value missing)", no_value),
        ("missing a scenario" if agg.get("overall") else "no results",
         [e.name for e in suite.entrants if e.name not in listed]),
    ])
    from rliable import plot_utils  # imports seaborn (a dependency of rliable)

    # rliable draws the first algorithm at the bottom: best rank on top
    algorithms = list(points)[::-1]
    fig, _ = plot_utils.plot_interval_estimates(
        points, cis, metric_names=[t for _, t in panels], algorithms=algorithms, colors=_colors(suite),
        xlabel=f"{suite.name}, {what}: point estimate and 95% stratified bootstrap interval" + missing,
        subfigure_width=3.6, row_height=0.45, xlabel_y_coordinate=-0.02 - 0.3 / max(len(points), 1),
    )
    for ax in fig.axes:
        ax.title.set_fontsize("medium")
        ax.tick_params(labelsize="small")
    for text in fig.texts:  # the x label, written by rliable as figure text
        text.set_fontsize("medium")
        text.set_x(0.5)
    path = pdir / "interval_estimates.png"
    atomic_savefig(fig, path, dpi=110, bbox_inches="tight")  # a killed run leaves no cut PNG
    plt.close(fig)
    return path


def _save(fig: Any, plt: Any, path: Path) -> Path:
    fig.tight_layout()
    atomic_savefig(fig, path, dpi=110)  # a killed run leaves no cut PNG (was: written in place)
    plt.close(fig)
    return path
